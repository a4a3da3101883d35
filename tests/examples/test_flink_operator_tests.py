"""The behaviours Flink's own operator tests pin down (CoBroadcastWithNonKeyedOperatorTest and
CoBroadcastWithKeyedOperatorTest), re-expressed with sparkcast's harnesses: the same input
sequences and the same expected records (value, timestamp). Flink's harness also lists the
watermarks it forwards; ours does not emit watermarks, so they are left out of the expectations.
"""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    OutputTag,
    Types,
    ValueStateDescriptor,
)
from sparkcast.errors import KeyedStateError
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

STATE = MapStateDescriptor("broadcast-state", Types.STRING(), Types.INT())
STATE_A = MapStateDescriptor("broadcast-state-A", Types.INT(), Types.STRING())
BROADCAST_TAG = OutputTag("br-out")
NON_BROADCAST_TAG = OutputTag("non-br-out")
KEYS = ("test1", "test2", "test3")


def drive(harness):
    """The input sequence most of Flink's tests share."""
    harness.process_watermark(10)
    harness.process_broadcast_element(5, timestamp=12)
    harness.process_watermark(40)
    harness.process_element("6", timestamp=13)
    harness.process_element("6", timestamp=15)
    harness.process_watermark(50)
    return harness


def non_keyed(function, *descriptors):
    harness = BroadcastHarness(function, list(descriptors or [STATE]), on_error="fail",
                               check_outputs=False)  # Flink's tests: errors raise
    harness.open()
    return harness


def keyed(function, key_selector=lambda v: v):
    harness = KeyedBroadcastHarness(function, key_selector, [STATE], on_error="fail",
                                    check_outputs=False)
    harness.open()
    return harness


# --------------------------------------------------------------------------------- non-keyed


class NonKeyedTestFunction(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        for key in KEYS:
            ctx.get_broadcast_state(STATE).put(key, value)
        yield f"{value}WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

    def process_element(self, value, ctx):
        assert set(ctx.get_broadcast_state(STATE).keys()) == set(KEYS)
        yield f"{value}WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"


def test_non_keyed_broadcast_state():
    h = drive(non_keyed(NonKeyedTestFunction()))
    assert h.output_records() == [("5WM:10 TS:12", 12), ("6WM:40 TS:13", 13),
                                  ("6WM:40 TS:15", 15)]


class NonKeyedSideOutput(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.output(BROADCAST_TAG, f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}")

    def process_element(self, value, ctx):
        ctx.output(NON_BROADCAST_TAG,
                   f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}")


def test_non_keyed_side_output():
    h = drive(non_keyed(NonKeyedSideOutput()))
    assert h.side_output(BROADCAST_TAG) == ["BR:5 WM:10 TS:12"]
    assert h.side_output(NON_BROADCAST_TAG) == ["NON-BR:6 WM:40 TS:13", "NON-BR:6 WM:40 TS:15"]
    assert h.output() == []


class MultipleStates(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(STATE).put(f"key.{value}", value)
        ctx.get_broadcast_state(STATE_A).put(value, f"value.{value}")

    def process_element(self, value, ctx):
        for key, entry in ctx.get_broadcast_state(STATE).items():
            yield f"{value}:{key}->{entry}"
        for key, entry in ctx.get_broadcast_state(STATE_A).items():
            yield f"{value}:{key}->{entry}"


def test_non_keyed_multiple_broadcast_states():
    h = non_keyed(MultipleStates(), STATE, STATE_A)
    h.process_broadcast_element(5, timestamp=10)
    h.process_broadcast_element(6, timestamp=12)
    h.process_element("9", timestamp=15)
    assert h.output_records() == [("9:key.5->5", 15), ("9:key.6->6", 15),
                                  ("9:5->value.5", 15), ("9:6->value.6", 15)]


class KeyedStateOn(BroadcastProcessFunction):
    def __init__(self, side):
        self.side = side

    def open(self, runtime_context):
        self.runtime_context = runtime_context

    def _touch(self, side):
        if side == self.side:
            self.runtime_context.get_state(ValueStateDescriptor("any", str)).value()

    def process_broadcast_element(self, value, ctx):
        self._touch("broadcast")

    def process_element(self, value, ctx):
        self._touch("main")


@pytest.mark.parametrize("side", ["broadcast", "main"])
def test_non_keyed_functions_have_no_keyed_state(side):
    h = non_keyed(KeyedStateOn(side))
    h.process_watermark(10)
    with pytest.raises(KeyedStateError, match="Keyed state can only be used on a keyed stream"):
        h.process_broadcast_element(5, timestamp=12)
        h.process_element("5", timestamp=12)


class OutputsEntries(BroadcastProcessFunction):
    """Flink's scale-up/down tests: after any rescaling every instance holds every entry."""

    def process_broadcast_element(self, value, ctx):
        for key in KEYS:
            ctx.get_broadcast_state(STATE).put(key, value)

    def process_element(self, value, ctx):
        for key, entry in ctx.get_broadcast_state(STATE).items():
            yield f"{key}={entry}"


@pytest.mark.parametrize("parallelism", [2, 3])
def test_every_parallel_instance_holds_the_whole_broadcast_state(parallelism):
    for index in range(parallelism):
        h = BroadcastHarness(OutputsEntries(), [STATE], parallelism=parallelism,
                             subtask_index=index)
        h.open()
        h.process_broadcast_element(3)
        h.process_element("trigger")
        assert sorted(h.output()) == ["test1=3", "test2=3", "test3=3"]


# ------------------------------------------------------------------------------------- keyed


class KeyQuerying(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        assert ctx.get_current_key() == value[0]
        yield value[1]


def test_keyed_key_querying():
    h = keyed(KeyQuerying(), key_selector=lambda v: v[0])
    h.process_element((5, "5"), timestamp=12)
    h.process_element((42, "42"), timestamp=13)
    assert h.output_records() == [("5", 12), ("42", 13)]


class KeyedStateAccessedOnBroadcast(KeyedBroadcastProcessFunction):
    LIST = ListStateDescriptor("listStateTest", Types.STRING())

    def __init__(self):
        self.checked = {}

    def open(self, runtime_context):
        self.list = runtime_context.get_list_state(self.LIST)

    def process_broadcast_element(self, value, ctx):
        ctx.apply_to_keyed_state(
            self.LIST, lambda key, state: self.checked.update({key: list(state.get())}))

    def process_element(self, value, ctx):
        self.list.add(value)


def test_keyed_access_to_keyed_state_from_the_broadcast_side():
    function = KeyedStateAccessedOnBroadcast()
    h = keyed(function)
    for value, ts in [("test1", 12)] * 2 + [("test2", 13)] * 3 + [("test3", 14)] * 3 + \
            [("test2", 13)]:
        h.process_element(value, timestamp=ts)
    h.process_broadcast_element(1, timestamp=13)
    assert function.checked == {"test1": ["test1"] * 2, "test2": ["test2"] * 4,
                                "test3": ["test3"] * 3}


class FunctionWithTimerOnKeyed(KeyedBroadcastProcessFunction):
    def __init__(self, timer_ts, expected_key):
        self.timer_ts, self.expected_key = timer_ts, expected_key

    def process_broadcast_element(self, value, ctx):
        yield f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(self.timer_ts)
        yield f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}"

    def on_timer(self, timestamp, ctx):
        assert ctx.get_current_key() == self.expected_key
        yield f"TIMER:{timestamp}"


def test_keyed_function_with_timer():
    h = drive(keyed(FunctionWithTimerOnKeyed(41, "6")))
    assert h.output_records() == [
        ("BR:5 WM:10 TS:12", 12),
        ("NON-BR:6 WM:40 TS:13", 13),
        ("NON-BR:6 WM:40 TS:15", 15),
        ("TIMER:41", 41),
    ]


class KeyedSideOutput(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.output(BROADCAST_TAG, f"BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}")

    def process_element(self, value, ctx):
        ctx.output(NON_BROADCAST_TAG,
                   f"NON-BR:{value} WM:{ctx.current_watermark()} TS:{ctx.timestamp()}")


def test_keyed_side_output():
    h = drive(keyed(KeyedSideOutput()))
    assert h.side_output(BROADCAST_TAG) == ["BR:5 WM:10 TS:12"]
    assert h.side_output(NON_BROADCAST_TAG) == ["NON-BR:6 WM:40 TS:13", "NON-BR:6 WM:40 TS:15"]


def map_to_string(entries):
    return "".join(f" {key}={value}" for key, value in sorted(entries))


class FunctionWithBroadcastState(KeyedBroadcastProcessFunction):
    def __init__(self, expected_state, timer_ts, expected_key):
        self.expected_state = expected_state
        self.timer_ts, self.expected_key = timer_ts, expected_key

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(STATE).put(f"{value}.key", value)

    def process_element(self, value, ctx):
        assert dict(ctx.get_broadcast_state(STATE).items()) == self.expected_state
        ctx.timer_service().register_event_time_timer(self.timer_ts)

    def on_timer(self, timestamp, ctx):
        assert ctx.get_current_key() == self.expected_key
        yield f"TS:{timestamp} {map_to_string(ctx.get_broadcast_state(STATE).items())}"


def test_keyed_function_with_broadcast_state():
    values = [(5, 10), (34, 12), (53, 15), (12, 16), (98, 19)]
    expected = {f"{v}.key": v for v, _ in values}
    h = keyed(FunctionWithBroadcastState(expected, 41, "trigger"))
    h.process_watermark(10)
    for value, ts in values:
        h.process_broadcast_element(value, timestamp=ts)
    h.process_element("trigger", timestamp=13)
    h.process_broadcast_element(51, timestamp=21)
    h.process_watermark(50)
    (only,) = h.output_records()
    assert only == ("TS:41  12.key=12 34.key=34 5.key=5 51.key=51 53.key=53 98.key=98", 41)


class NoKeyedStateOnBroadcastSide(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.any = runtime_context.get_state(ValueStateDescriptor("any", Types.STRING()))

    def process_broadcast_element(self, value, ctx):
        self.any.value()

    def process_element(self, value, ctx):
        pass


def test_keyed_no_keyed_state_on_the_broadcast_side():
    h = keyed(NoKeyedStateOnBroadcastSide())
    h.process_watermark(10)
    with pytest.raises(KeyedStateError, match="no current key"):
        h.process_broadcast_element(5, timestamp=12)
