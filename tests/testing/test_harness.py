"""The user-facing harnesses: construction checks, lifecycle, inputs and every inspector."""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)
from sparkcast.errors import PipelineError
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

RULES = MapStateDescriptor("rules", str, dict)
COUNT = ValueStateDescriptor("count", int)
ODD = OutputTag("odd")


class Plain(BroadcastProcessFunction):
    def __init__(self):
        self.calls = []

    def open(self, runtime_context):
        self.calls.append("open")

    def close(self):
        self.calls.append("close")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)

    def process_element(self, value, ctx):
        if value % 2:
            yield ODD, value
        else:
            yield value * 10


class Counting(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(100)
        ctx.timer_service().register_processing_time_timer(50)
        yield ctx.get_current_key(), self.count.value()


def test_inputs_need_open_first():
    h = BroadcastHarness(Plain(), [RULES])
    for call in (lambda: h.process_element(1), lambda: h.process_broadcast_element({}),
                 lambda: h.process_watermark(1), lambda: h.set_processing_time(1),
                 lambda: h.process_micro_batch(main=[1])):
        with pytest.raises(RuntimeError, match="call open"):
            call()


def test_context_manager_opens_and_closes():
    function = Plain()
    with BroadcastHarness(function, [RULES]) as h:
        h.process_element(2)
        assert h.output() == [20]
    assert function.calls == ["open", "close"]
    with pytest.raises(RuntimeError, match="call open"):
        h.process_element(2)


def test_harness_kinds_are_checked():
    with pytest.raises(PipelineError, match="needs a KeyedBroadcastHarness"):
        BroadcastHarness(Counting(), [RULES])
    with pytest.raises(PipelineError, match="use BroadcastHarness"):
        KeyedBroadcastHarness(Plain(), lambda v: v, [RULES])


class ByColor:
    """PyFlink's KeySelector shape."""

    def get_key(self, value):
        return value["color"]


@pytest.mark.parametrize("selector", [ByColor(), lambda v: v["color"]])
def test_key_selector_forms(selector):
    h = KeyedBroadcastHarness(Counting(), selector, [RULES])
    h.open()
    h.process_element({"color": "red"})
    h.process_element({"color": "red"})
    h.process_element({"color": "blue"})
    assert h.output() == [("red", 1), ("red", 2), ("blue", 1)]


def test_key_selector_must_be_callable():
    with pytest.raises(PipelineError, match="key_selector"):
        KeyedBroadcastHarness(Counting(), "color", [RULES])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_error": "skip"}, "on_error"),
        ({"time_alignment": "wall"}, "time_alignment"),
        ({"hold_capacity": -5}, "hold_capacity"),
        ({"hold_until_ready": [MapStateDescriptor("models")]}, "not broadcast"),
    ],
)
def test_options_are_checked_at_construction(options, message):
    with pytest.raises(PipelineError, match=message):
        BroadcastHarness(Plain(), [RULES], **options)


def test_broadcast_descriptors_are_checked():
    with pytest.raises(PipelineError, match="at least one"):
        BroadcastHarness(Plain(), [])


def test_outputs_and_side_outputs():
    with BroadcastHarness(Plain(), [RULES], side_outputs=[ODD]) as h:  # as process() takes them
        for value in range(4):
            h.process_element(value, timestamp=value)
        assert h.output() == [0, 20]
        assert h.output_records() == [(0, 0), (20, 2)]
        assert h.side_output(ODD) == [1, 3]
        assert h.dead_letters() == []
        h.clear_output()
        assert h.output() == [] and h.side_output(ODD) == []


def test_broadcast_state_is_a_mutable_copy():
    with BroadcastHarness(Plain(), [RULES]) as h:
        h.process_broadcast_element({"name": "r1", "tags": ["a"]})
        copy = h.broadcast_state(RULES)
        assert copy == {"r1": {"name": "r1", "tags": ["a"]}}
        copy["r1"]["tags"].append("b")
        copy["r2"] = {}
        assert h.broadcast_state(RULES) == {"r1": {"name": "r1", "tags": ["a"]}}


def test_keyed_state_and_timers_inspectors():
    h = KeyedBroadcastHarness(Counting(), lambda v: v, [RULES])
    h.open()
    h.process_element("a")
    h.process_element("b")
    h.process_element("a")
    assert (h.keyed_state(COUNT, "a"), h.keyed_state(COUNT, "b")) == (2, 1)
    assert h.keyed_state(COUNT, "nobody") is None
    assert h.timers() == {"EVENT_TIME": [(100, "a"), (100, "b")],
                          "PROCESSING_TIME": [(50, "a"), (50, "b")]}
    h.set_processing_time(50)
    assert h.timers()["PROCESSING_TIME"] == []


def test_keyed_state_inspection_does_not_disturb_the_current_key():
    h = KeyedBroadcastHarness(Counting(), lambda v: v, [RULES])
    h.open()
    h.process_element("a")
    h.keyed_state(COUNT, "zzz")
    assert h.engine.scope.key == "a"


def test_micro_batch_timestamp_lists_must_match():
    with BroadcastHarness(Plain(), [RULES]) as h:
        with pytest.raises(ValueError):
            h.process_micro_batch(broadcast=[{"name": "r"}], broadcast_timestamps=[1, 2])


def test_micro_batch_uses_the_key_selector():
    h = KeyedBroadcastHarness(Counting(), lambda v: v["user"], [RULES])
    h.open()
    h.process_micro_batch(main=[{"user": "u"}, {"user": "v"}, {"user": "u"}])
    assert h.output() == [("u", 1), ("v", 1), ("u", 2)]


def test_harness_runs_strict_contexts_and_its_own_backend():
    first = BroadcastHarness(Plain(), [RULES])
    second = BroadcastHarness(Plain(), [RULES])
    assert first.engine.strict_contexts
    assert first.backend is not second.backend
