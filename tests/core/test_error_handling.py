"""Errors from user code: wrapped (function, callback, key, cause) with on_error="fail", routed
to dead letters with on_error="dead_letter"; a failing element's partial outputs never escape."""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    Row,
)
from sparkcast.core import DeadLetter
from sparkcast.errors import (
    KeyedStateError,
    OutputTypeError,
    ReadOnlyStateError,
    UserFunctionError,
)

RULES = MapStateDescriptor("rules", str, dict)
SIDE = OutputTag("side")


class Fragile(KeyedBroadcastProcessFunction):
    """Emits (main and side, yield and ctx.output), then raises on values starting with "bad"."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("seen", {"v": value})
        yield f"BR:{value}"
        if value.startswith("bad"):
            raise ValueError(f"broken rule {value}")

    def process_element(self, value, ctx):
        yield f"partial:{value}"
        yield SIDE, f"side:{value}"
        ctx.output(SIDE, f"ctx-side:{value}")
        if value.startswith("bad"):
            raise ValueError(f"cannot handle {value}")
        ctx.timer_service().register_event_time_timer(100 if value == "timer-bad" else 50)

    def on_timer(self, timestamp, ctx):
        yield f"T:{timestamp}"
        if timestamp == 100:
            raise LookupError("timer failed")


def _by_color(value):
    return value.split("-")[-1] if "-" in value else value


def test_user_exception_is_wrapped_naming_function_callback_and_key(keyed):
    h = keyed(Fragile())
    with pytest.raises(UserFunctionError) as info:
        h.process_element("bad-red", timestamp=3)
    error = info.value
    assert str(error) == ("Fragile.process_element for key 'bad-red' raised ValueError: "
                          "cannot handle bad-red")
    assert (error.function, error.callback, error.key) == ("Fragile", "process_element", "bad-red")
    assert isinstance(error.__cause__, ValueError)
    assert h.output() == [] and h.side_output(SIDE) == []  # partial outputs were discarded


def test_broadcast_side_errors_name_no_key(keyed):
    h = keyed(Fragile())
    with pytest.raises(UserFunctionError, match=r"^Fragile.process_broadcast_element raised "):
        h.process_broadcast_element("bad-rule")
    assert h.output() == []


def test_on_timer_errors_name_the_key(keyed):
    h = keyed(Fragile())
    h.process_element("timer-bad")
    with pytest.raises(UserFunctionError, match="on_timer for key 'timer-bad' raised LookupError"):
        h.process_watermark(100)
    assert "T:100" not in h.output()


def test_non_keyed_errors_name_no_key(non_keyed):
    class Boom(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            raise KeyError(value)

    h = non_keyed(Boom())
    with pytest.raises(UserFunctionError, match=r"^Boom.process_element raised KeyError: 'x'$"):
        h.process_element("x")


@pytest.mark.parametrize("hook", ["open", "close"])
def test_open_and_close_errors_are_wrapped(keyed, hook):
    class FailsIn(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            if hook == "open":
                raise OSError("no model file")

        def close(self):
            raise OSError("flush failed")

        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            pass

    with pytest.raises(UserFunctionError, match=f"FailsIn.{hook} raised OSError") as info:
        keyed(FailsIn()).close()
    assert isinstance(info.value.__cause__, OSError)


def test_sparkcast_errors_are_not_wrapped(keyed):
    class Writes(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).put("x", {})

    with pytest.raises(ReadOnlyStateError):
        keyed(Writes()).process_element("a")


# ---------------------------------------------------------------------------------- dead letters


def test_dead_letters_collect_failing_elements_and_discard_their_outputs(keyed):
    h = keyed(Fragile(), on_error="dead_letter")
    h.process_element("ok-1", timestamp=1)
    h.process_element("bad-2", timestamp=2)
    h.process_element("ok-3", timestamp=3)
    assert h.output() == ["partial:ok-1", "partial:ok-3"]
    assert h.side_output(SIDE) == ["side:ok-1", "ctx-side:ok-1", "side:ok-3", "ctx-side:ok-3"]
    (letter,) = h.dead_letters()
    assert letter == DeadLetter(callback="process_element", error="ValueError: cannot handle bad-2",
                                value="bad-2", key="bad-2", timestamp=2)


def test_dead_letters_from_the_broadcast_side_and_timers(keyed):
    h = keyed(Fragile(), on_error="dead_letter")
    h.process_broadcast_element("bad-rule", timestamp=7)
    h.process_element("timer-bad")
    h.process_watermark(100)
    letters = h.dead_letters()
    assert [(d.callback, d.value, d.key, d.timestamp) for d in letters] == [
        ("process_broadcast_element", "bad-rule", None, 7),
        ("on_timer", 100, "timer-bad", 100),
    ]
    assert letters[1].error == "LookupError: timer failed"
    assert "BR:bad-rule" not in h.output() and "T:100" not in h.output()
    # A failing broadcast element's state writes before the raise are not rolled back.
    assert h.broadcast_state(RULES) == {"seen": {"v": "bad-rule"}}


def test_dead_letters_take_sparkcast_errors_too(keyed):
    class Writes(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).clear()

    h = keyed(Writes(), on_error="dead_letter")
    h.process_element("a")
    assert h.dead_letters()[0].error.startswith("ReadOnlyStateError: broadcast state 'rules'")


def test_elements_without_a_key(keyed):
    h = keyed(Fragile(), key_selector=lambda v: None)
    with pytest.raises(KeyedStateError, match="no key"):
        h.process_element("ok")
    h = keyed(Fragile(), key_selector=lambda v: None, on_error="dead_letter")
    h.process_element("ok", timestamp=4)
    assert h.dead_letters() == [DeadLetter("process_element", "KeyedStateError: the element has "
                                           "no key", "ok", None, 4)]


# ------------------------------------------------------------------------- outputs must be yielded


class Returns(KeyedBroadcastProcessFunction):
    def __init__(self, result):
        self.result = result

    def process_broadcast_element(self, value, ctx):
        return self.result

    def process_element(self, value, ctx):
        return self.result


@pytest.mark.parametrize("result", [{"a": 1}, "text", b"bytes", 42, Row(a=1), 1.5])
@pytest.mark.parametrize("side", ["main", "broadcast"])
def test_returning_a_value_instead_of_yielding_raises_type_error(keyed, result, side):
    h = keyed(Returns(result))
    with pytest.raises(TypeError, match="must yield its outputs") as info:
        if side == "main":
            h.process_element("a")
        else:
            h.process_broadcast_element("a")
    assert isinstance(info.value, OutputTypeError)
    assert f"not return a {type(result).__name__}" in str(info.value)


@pytest.mark.parametrize(
    ("result", "expected"),
    [(None, []), ([], []), (("x", "y"), ["x", "y"]), ("iterator", ["z"]), ({"k"}, ["k"])],
)
def test_returning_none_or_an_iterable_is_fine(keyed, result, expected):
    h = keyed(Returns(iter(["z"]) if result == "iterator" else result))  # one iterator per run
    h.process_element("a")
    assert h.output() == expected


def test_returning_a_list_routes_side_outputs(keyed):
    h = keyed(Returns(["x", (SIDE, "y")]))
    h.process_element("a")
    assert h.output() == ["x"] and h.side_output(SIDE) == ["y"]


def test_ctx_output_needs_an_output_tag(keyed):
    class BadTag(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            ctx.output("side", value)

    with pytest.raises(OutputTypeError, match="takes an OutputTag, not str"):
        keyed(BadTag()).process_element("a")


def test_output_type_errors_go_to_dead_letters_when_asked(keyed):
    h = keyed(Returns({"a": 1}), on_error="dead_letter")
    h.process_element("a")
    assert h.dead_letters()[0].error.startswith("OutputTypeError: process_element must yield")
