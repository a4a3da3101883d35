"""No poison values: a state write the codec cannot store (or of the wrong declared type) fails
inside the callback that made it, so it becomes that element's dead letter and the stream goes
on; on every backend. And NaN keys share keyed state."""

from __future__ import annotations

import re

import pytest

from sparkcast import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.core import codec
from sparkcast.errors import StateSerializationError
from tests.core.conftest import DEFAULT_RULES


class Opaque:
    """A user class holding code: the codec stores data, never pickles."""

    def __init__(self) -> None:
        self.code = print


BAD = re.compile("x")


class ListAcc(AggregateFunction):
    def create_accumulator(self):
        return []

    def add(self, value, accumulator):
        return [*accumulator, value]

    def get_result(self, accumulator):
        return len(accumulator)


WRITES = {
    "value.update": lambda s, v: s.value.update(v),
    "value.update nested": lambda s, v: s.value.update({"a": [1, v]}),
    "list.add": lambda s, v: s.list.add(v),
    "list.add_all": lambda s, v: s.list.add_all(["ok", v]),
    "list.update": lambda s, v: s.list.update([v]),
    "map.put": lambda s, v: s.map.put("k", v),
    "map.put_all": lambda s, v: s.map.put_all({"k": 1, "j": v}),
    "map[]=": lambda s, v: s.map.__setitem__("k", v),
    "map key": lambda s, v: s.map.put(v, 1),
    "reducing.add": lambda s, v: s.reducing.add(v),
    "aggregating.add": lambda s, v: s.aggregating.add(v),
}


class Writes(KeyedBroadcastProcessFunction):
    """Writes the element's value with the write named by the element; yields the state after."""

    def open(self, runtime_context):
        self.value = runtime_context.get_state(ValueStateDescriptor("value"))
        self.list = runtime_context.get_list_state(ListStateDescriptor("list"))
        self.map = runtime_context.get_map_state(MapStateDescriptor("map"))
        self.reducing = runtime_context.get_reducing_state(
            ReducingStateDescriptor("reducing", lambda a, b: [a, b]))
        self.aggregating = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("aggregating", ListAcc()))

    def process_element(self, value, ctx):
        write, payload = value
        WRITES[write](self, payload)
        yield write, "written"

    def process_broadcast_element(self, value, ctx):
        pass


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("bad", [BAD, Opaque()], ids=["regex", "user class"])
def test_an_unstorable_keyed_write_is_a_dead_letter_and_the_stream_goes_on(keyed, write, bad):
    h = keyed(Writes(), key_selector=lambda v: "k", on_error="dead_letter")
    if write == "reducing.add":  # the first add stores the value, the second the reduced one
        h.process_element(("reducing.add", 1))
    h.process_micro_batch(main=[(write, bad), (write, 2)])
    [letter] = h.dead_letters()
    assert (letter.callback, letter.key, letter.value) == ("process_element", "k", (write, bad))
    assert letter.error.startswith("StateSerializationError: ")
    assert "cannot store a" in letter.error and type(bad).__name__ in letter.error
    assert h.output()[-1] == (write, "written")  # the next element was processed
    h.process_element(("value.update", 3))  # and state is still storable afterwards
    assert h.keyed_state(ValueStateDescriptor("value"), "k") == 3


class PutsBroadcast(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield dict(ctx.get_broadcast_state(DEFAULT_RULES).items())

    def process_broadcast_element(self, value, ctx):
        name, payload, how = value
        payload = {"pattern": BAD} if payload == "regex" else payload  # made in the callback
        state = ctx.get_broadcast_state(DEFAULT_RULES)
        if how == "put":
            state.put(name, payload)
        elif how == "put_all":
            state.put_all({"first": {"ok": 1}, name: payload})
        else:
            state[name] = payload


@pytest.mark.parametrize("how", ["put", "put_all", "[]="])
def test_an_unstorable_broadcast_write_is_a_dead_letter_and_the_stream_goes_on(keyed, how):
    h = keyed(PutsBroadcast(), on_error="dead_letter")
    h.process_micro_batch(broadcast=[("bad", "regex", how)], main=["a"])
    [letter] = h.dead_letters()
    assert letter.callback == "process_broadcast_element"
    assert "StateSerializationError: broadcast state 'rules'" in letter.error
    assert "cannot store a Pattern" in letter.error
    h.process_micro_batch(broadcast=[("good", {"n": 1}, "put")], main=["b"])
    assert h.output()[-1] == {"good": {"n": 1}}  # nothing of the failed put_all was kept


def test_a_wrong_declared_type_is_refused_where_it_is_written(keyed):
    class Typed(Writes):
        def open(self, runtime_context):
            super().open(runtime_context)
            self.value = runtime_context.get_state(ValueStateDescriptor("typed", int))

    h = keyed(Typed(), key_selector=lambda v: "k", on_error="dead_letter")
    h.process_element(("value.update", "three"))
    [letter] = h.dead_letters()
    assert letter.error == "StateTypeError: state 'typed': str is not a int"


@pytest.mark.parametrize("value", [
    1, 1.5, float("nan"), "s", None, True, b"b", [1, {"a": (2, {3})}], {1: "x", "$k": [None]},
    frozenset({1}), __import__("decimal").Decimal("1.5"), __import__("datetime").date(2024, 1, 1),
    __import__("numpy").arange(3), __import__("numpy").int64(4),
])
def test_the_storable_check_agrees_with_the_codec_on_storable_values(value):
    codec.check_storable(value)
    codec.encode(value)


@pytest.mark.parametrize("value", [BAD, Opaque(), [1, Opaque()], {"a": {"b": BAD}}, (1, object())])
def test_the_storable_check_agrees_with_the_codec_on_unstorable_values(value):
    with pytest.raises(StateSerializationError):
        codec.encode(value)
    with pytest.raises(StateSerializationError):
        codec.check_storable(value)


class CountByKey(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        yield self.count.value()

    def process_broadcast_element(self, value, ctx):
        pass


@pytest.mark.parametrize("make_key", [lambda: float("nan"), lambda: ("user", float("nan"))],
                         ids=["nan", "tuple with nan"])
def test_nan_keys_share_keyed_state(keyed, make_key):
    h = keyed(CountByKey(), key_selector=lambda v: make_key())  # a new NaN object every time
    h.process_element("a")
    h.process_micro_batch(main=["b", "c"])
    h.process_element("d")
    assert h.output() == [1, 2, 3, 4]
