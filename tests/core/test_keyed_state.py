"""Keyed state of the current key: value, list, map, reducing, aggregating; and
``apply_to_keyed_state`` from the broadcast side."""

from types import SimpleNamespace

import pytest

from sparkcast import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ReduceFunction,
    ReducingStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from sparkcast.errors import (
    KeyedStateError,
    StateSerializationError,
    StateTypeError,
)

VALUE = ValueStateDescriptor("value", Types.INT())
ANY_VALUE = ValueStateDescriptor("any_value")
LIST = ListStateDescriptor("list", Types.STRING())
MAP = MapStateDescriptor("map", Types.STRING(), Types.LONG())
LIST_MAP = MapStateDescriptor("pending", str, list)


class Sum(ReduceFunction):
    def reduce(self, value1, value2):
        return value1 + value2


class Average(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, accumulator):
        return [accumulator[0] + value, accumulator[1] + 1]

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]


SUM = ReducingStateDescriptor("sum", Sum(), int)
LONGEST = ReducingStateDescriptor("longest", lambda a, b: a if len(a) >= len(b) else b, str)
AVERAGE = AggregatingStateDescriptor("average", Average(), list)


class Ops(KeyedBroadcastProcessFunction):
    """Main elements are ``(key, op)``: runs ``op(states)`` for that key and yields the result.
    A broadcast element names an entry of ``appliers``, ``(descriptor, fn)``, and runs
    ``ctx.apply_to_keyed_state(descriptor, fn)`` (broadcast values must be storable, so the
    callable itself cannot be the element)."""

    def __init__(self):
        self.appliers = {}

    def open(self, runtime_context):
        rc = runtime_context
        self.s = SimpleNamespace(
            value=rc.get_state(VALUE), any=rc.get_state(ANY_VALUE), list=rc.get_list_state(LIST),
            map=rc.get_map_state(MAP), pending=rc.get_map_state(LIST_MAP),
            sum=rc.get_reducing_state(SUM), longest=rc.get_reducing_state(LONGEST),
            average=rc.get_aggregating_state(AVERAGE),
        )

    def process_element(self, value, ctx):
        _, op = value
        yield op(self.s)

    def process_broadcast_element(self, value, ctx):
        descriptor, fn = self.appliers[value]
        ctx.apply_to_keyed_state(descriptor, fn)
        yield "after", self._try_state()

    def _try_state(self):
        try:
            self.s.value.value()
        except KeyedStateError:
            return "no current key"
        return "key leaked"


@pytest.fixture
def h(keyed):
    return keyed(Ops(), key_selector=lambda v: v[0])


def apply(harness, descriptor, fn):
    harness.engine.function.appliers["apply"] = (descriptor, fn)
    harness.process_broadcast_element("apply")


def run(harness, key, op):
    harness.clear_output()
    harness.process_element((key, op))
    (result,) = harness.output()
    return result


# ---------------------------------------------------------------------------------- ValueState


def test_value_state(h):
    assert run(h, "a", lambda s: s.value.value()) is None
    run(h, "a", lambda s: s.value.update(5))
    run(h, "b", lambda s: s.value.update(7))
    assert run(h, "a", lambda s: s.value.value()) == 5
    assert (h.keyed_state(VALUE, "a"), h.keyed_state(VALUE, "b")) == (5, 7)
    run(h, "a", lambda s: s.value.clear())
    assert h.keyed_state(VALUE, "a") is None and h.keyed_state(VALUE, "b") == 7


def test_value_update_none_clears_as_in_flink(h):
    run(h, "a", lambda s: s.value.update(1))
    run(h, "a", lambda s: s.value.update(None))
    assert h.keyed_state(VALUE, "a") is None
    assert "a" not in h.engine.keyed_states.table("value")


def test_value_state_is_type_checked(h):
    with pytest.raises(StateTypeError, match="state 'value': str is not a int"):
        run(h, "a", lambda s: s.value.update("five"))
    assert h.keyed_state(VALUE, "a") is None


def test_untyped_value_state_takes_any_storable_value(h):
    run(h, "a", lambda s: s.any.update({"nested": [1, (2, b"3")]}))
    assert h.keyed_state(ANY_VALUE, "a") == {"nested": [1, (2, b"3")]}


def test_unstorable_values_fail_in_the_harness(h):
    with pytest.raises(StateSerializationError):
        run(h, "a", lambda s: s.any.update(object()))


def test_in_place_mutation_of_a_read_value_is_kept(h):
    run(h, "a", lambda s: s.any.update({"n": 1}))
    run(h, "a", lambda s: s.any.value().update(n=2))
    assert h.keyed_state(ANY_VALUE, "a") == {"n": 2}


# ----------------------------------------------------------------------------------- ListState


def test_list_state(h):
    assert run(h, "a", lambda s: list(s.list.get())) == []
    run(h, "a", lambda s: s.list.add("x"))
    run(h, "a", lambda s: s.list.add_all(["y", "z"]))
    assert run(h, "a", lambda s: list(s.list)) == ["x", "y", "z"]
    run(h, "a", lambda s: s.list.update(["q"]))
    assert h.keyed_state(LIST, "a") == ["q"]
    run(h, "a", lambda s: s.list.update([]))
    assert h.keyed_state(LIST, "a") is None
    run(h, "a", lambda s: s.list.add("r"))
    run(h, "a", lambda s: s.list.clear())
    assert run(h, "a", lambda s: list(s.list.get())) == []


def test_list_get_returns_a_copy(h):
    run(h, "a", lambda s: s.list.add("x"))
    run(h, "a", lambda s: s.list.get().append("not stored"))
    assert h.keyed_state(LIST, "a") == ["x"]


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (lambda s: s.list.add(None), "cannot add None"),
        (lambda s: s.list.add(3), "int is not a str"),
        (lambda s: s.list.add_all(["ok", None]), "cannot add None"),
        (lambda s: s.list.update(["ok", 4]), "int is not a str"),
    ],
)
def test_list_state_rejects_bad_elements(h, op, message):
    run(h, "a", lambda s: s.list.add("kept"))
    with pytest.raises(StateTypeError, match=message):
        run(h, "a", op)
    assert h.keyed_state(LIST, "a") in (["kept"], None)


def test_list_add_all_checks_before_writing(h):
    with pytest.raises(StateTypeError):
        run(h, "a", lambda s: s.list.add_all(["ok", 1]))
    assert h.keyed_state(LIST, "a") is None


# ------------------------------------------------------------------------------------ MapState


def test_map_state_methods(h):
    assert run(h, "a", lambda s: (s.map.is_empty(), s.map.get("x"), len(s.map))) == (True, None, 0)
    run(h, "a", lambda s: s.map.put("x", 1))
    run(h, "a", lambda s: s.map.put_all({"y": 2, "z": 3}))
    assert run(h, "a", lambda s: (
        s.map.is_empty(), s.map.get("y"), s.map.contains("z"), s.map.contains("w"),
        sorted(s.map.keys()), sorted(s.map.values()), sorted(s.map.items()), len(s.map),
    )) == (False, 2, True, False, ["x", "y", "z"], [1, 2, 3],
           [("x", 1), ("y", 2), ("z", 3)], 3)
    run(h, "a", lambda s: s.map.remove("y"))
    run(h, "a", lambda s: s.map.remove("never there"))
    assert h.keyed_state(MAP, "a") == {"x": 1, "z": 3}
    assert h.keyed_state(MAP, "b") is None


def _python_syntax(s):
    s.map["k"] = 10
    s.map["j"] = 20
    del s.map["j"]
    return (s.map["k"], "k" in s.map, "j" in s.map, [key for key in s.map])


def test_map_state_python_syntax(h):
    assert run(h, "a", _python_syntax) == (10, True, False, ["k"])


def test_map_state_getitem_of_a_missing_key_is_none_as_in_pyflink(h):
    # PyFlink's MapState.__getitem__ returns get(key): None for a missing key, no KeyError
    assert run(h, "a", lambda s: s.map["missing"]) is None


def test_map_clear_is_per_key(h):
    run(h, "a", lambda s: s.map.put("x", 1))
    run(h, "b", lambda s: s.map.put("x", 2))
    run(h, "a", lambda s: s.map.clear())
    assert (h.keyed_state(MAP, "a"), h.keyed_state(MAP, "b")) == (None, {"x": 2})


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (lambda s: s.map.put("x", "one"), "str is not a int"),
        (lambda s: s.map.put(1, 1), "key 1 is not a str"),
        (lambda s: s.map.put(None, 1), "key None"),
        (lambda s: s.map.put_all({"ok": 1, "bad": 1.5}), "float is not a int"),
    ],
)
def test_map_state_is_type_checked(h, op, message):
    with pytest.raises(StateTypeError, match=message):
        run(h, "a", op)
    assert h.keyed_state(MAP, "a") is None


def test_map_of_lists_read_modify_put(h):
    def add(item):
        def op(s):
            stored = s.pending.get("rule") or []
            stored.append(item)
            s.pending.put("rule", stored)
        return op

    run(h, "a", add("square"))
    run(h, "a", add("circle"))
    assert h.keyed_state(LIST_MAP, "a") == {"rule": ["square", "circle"]}


# ---------------------------------------------------------------------- Reducing and Aggregating


def test_reducing_state_with_a_reduce_function(h):
    assert run(h, "a", lambda s: s.sum.get()) is None
    for n in (1, 2, 3):
        run(h, "a", lambda s, n=n: s.sum.add(n))
    assert run(h, "a", lambda s: s.sum.get()) == 6
    assert h.keyed_state(SUM, "a") == 6
    run(h, "a", lambda s: s.sum.clear())
    assert h.keyed_state(SUM, "a") is None


def test_reducing_state_with_a_lambda(h):
    for word in ("to", "three", "four"):
        run(h, "a", lambda s, w=word: s.longest.add(w))
    assert h.keyed_state(LONGEST, "a") == "three"


def test_reducing_state_is_type_checked(h):
    with pytest.raises(StateTypeError):
        run(h, "a", lambda s: s.sum.add("1"))


def test_aggregating_state(h):
    assert run(h, "a", lambda s: s.average.get()) is None
    for n in (1, 2, 6):
        run(h, "a", lambda s, n=n: s.average.add(n))
    run(h, "b", lambda s: s.average.add(10))
    assert run(h, "a", lambda s: s.average.get()) == 3
    assert (h.keyed_state(AVERAGE, "a"), h.keyed_state(AVERAGE, "b")) == (3, 10)
    assert h.engine.keyed_states.table("average")["a"] == [9, 3]  # the accumulator is stored
    run(h, "a", lambda s: s.average.clear())
    assert h.keyed_state(AVERAGE, "a") is None


# ------------------------------------------------------------------------- apply_to_keyed_state


def test_apply_to_keyed_state_visits_every_key_with_that_state(h):
    for key, items in {"test1": ["t1"] * 2, "test2": ["t2"] * 4, "test3": ["t3"] * 3}.items():
        for item in items:
            run(h, key, lambda s, item=item: s.list.add(item))
    run(h, "only-value", lambda s: s.value.update(1))
    seen = {}
    apply(h, LIST, lambda key, state: seen.update({key: list(state.get())}))
    assert seen == {"test1": ["t1"] * 2, "test2": ["t2"] * 4, "test3": ["t3"] * 3}


def test_apply_to_keyed_state_can_modify_and_clear(h):
    for key, n in (("a", 1), ("b", 2), ("c", 3)):
        run(h, key, lambda s, n=n: s.value.update(n))

    def double_or_drop(key, state):
        if key == "b":
            state.clear()
        else:
            state.update(state.value() * 2)

    apply(h, VALUE, double_or_drop)
    assert [h.keyed_state(VALUE, k) for k in "abc"] == [2, None, 6]


def test_apply_to_keyed_state_resets_the_current_key(h):
    run(h, "a", lambda s: s.value.update(1))
    apply(h, VALUE, lambda key, state: None)
    assert h.output()[-1] == ("after", "no current key")


def test_apply_to_keyed_state_with_no_keys_calls_nothing(h):
    calls = []
    apply(h, MAP, lambda key, state: calls.append(key))
    assert calls == []


def test_keyed_state_reads_through_the_harness_for_any_key(h):
    run(h, "a", lambda s: s.map.put("x", 1))
    run(h, "a", lambda s: s.list.add("y"))
    assert h.keyed_state(MAP, "a") == {"x": 1}
    assert h.keyed_state(LIST, "a") == ["y"]
    assert h.keyed_state(LIST, "nobody") is None
