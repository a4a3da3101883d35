"""Broadcast state: read-only (and frozen) on the main side and in on_timer, read-write with
mutable copies on the broadcast side, type-checked, and only for declared descriptors."""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    BroadcastState,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    ReadOnlyBroadcastState,
    Types,
)
from sparkcast.errors import (
    ReadOnlyStateError,
    StateSerializationError,
    StateTypeError,
    UnknownStateError,
    UnknownTypeError,
)

RULES = MapStateDescriptor("rules", Types.STRING(), Types.MAP(Types.STRING(), Types.STRING()))
OTHER = MapStateDescriptor("other", str, dict)
RULE = {"name": "r1", "first": "square", "second": "circle", "tags": ["a"]}


def _put(state):
    state.put("k", {})


def _put_all(state):
    state.put_all({"k": {}})


def _remove(state):
    state.remove("r1")


def _clear(state):
    state.clear()


def _setitem(state):
    state["k"] = {}


def _delitem(state):
    del state["r1"]


WRITES = {f.__name__[1:]: f for f in (_put, _put_all, _remove, _clear, _setitem, _delitem)}


class StoreRules(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)

    def process_element(self, value, ctx):
        WRITES[value](ctx.get_broadcast_state(RULES))


class KeyedStoreRules(KeyedBroadcastProcessFunction):
    """Elements "main:<write>" write in process_element; "timer:<write>" write in on_timer."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)

    def process_element(self, value, ctx):
        where, write = value.split(":")
        if where == "timer":
            ctx.timer_service().register_processing_time_timer(10)
        else:
            WRITES[write](ctx.get_broadcast_state(RULES))

    def on_timer(self, timestamp, ctx):
        WRITES[ctx.get_current_key().split(":")[1]](ctx.get_broadcast_state(RULES))


@pytest.mark.parametrize("write", sorted(WRITES))
def test_writes_on_the_main_side_raise(non_keyed, write):
    h = non_keyed(StoreRules(), descriptors=[RULES])
    h.process_broadcast_element(RULE)
    with pytest.raises(ReadOnlyStateError, match="'rules' is read-only in process_element"):
        h.process_element(write)
    assert h.broadcast_state(RULES) == {"r1": RULE}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("where", ["main", "timer"])
def test_writes_in_keyed_process_element_and_on_timer_raise(keyed, write, where):
    h = keyed(KeyedStoreRules(), descriptors=[RULES])
    h.process_broadcast_element(RULE)
    with pytest.raises(ReadOnlyStateError, match="update it in process_broadcast_element"):
        h.process_element(f"{where}:{write}")  # "main:..." raises here
        assert h.timers()["PROCESSING_TIME"] == [(10, f"timer:{write}")]
        h.set_processing_time(10)  # "timer:..." raises here, in on_timer
    assert h.broadcast_state(RULES) == {"r1": RULE}


def test_read_only_errors_are_type_errors(non_keyed):
    h = non_keyed(StoreRules(), descriptors=[RULES])
    with pytest.raises(TypeError):
        h.process_element("clear")


MUTATIONS = {
    "value": lambda s: s.get("r1").__setitem__("first", "x"),
    "nested": lambda s: s.get("r1")["tags"].append("b"),
    "indexed": lambda s: s["r1"].update(first="x"),
    "items": lambda s: next(iter(s.items()))[1].pop("first"),
    "values": lambda s: next(iter(s.values())).clear(),
}


class MutateOnMain(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)

    def process_element(self, value, ctx):
        MUTATIONS[value](ctx.get_broadcast_state(RULES))


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_values_read_on_the_main_side_are_frozen(non_keyed, mutation):
    h = non_keyed(MutateOnMain(), descriptors=[RULES])
    h.process_broadcast_element(RULE)
    with pytest.raises(ReadOnlyStateError, match="copy the value"):
        h.process_element(mutation)
    assert h.broadcast_state(RULES) == {"r1": RULE}


class EditOnBroadcastSide(BroadcastProcessFunction):
    """Mutates what it reads; only an explicit put changes the state."""

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(RULES)
        if value["op"] == "put":
            state.put(value["name"], value["rule"])
            return
        rule = state.get(value["name"])
        rule["tags"].append("mutated")
        for _, each in state.items():
            each["first"] = "mutated"
        for each in state.values():
            each.clear()
        yield dict(state.get(value["name"]))
        if value["op"] == "edit-and-put":
            state.put(value["name"], rule)

    def process_element(self, value, ctx):
        yield None


def test_broadcast_side_reads_mutable_copies(non_keyed):
    h = non_keyed(EditOnBroadcastSide(), descriptors=[RULES])
    rule = {"first": "square", "tags": ["a"]}
    h.process_broadcast_element({"op": "put", "name": "r1", "rule": rule})
    h.process_broadcast_element({"op": "edit", "name": "r1"})
    assert h.output() == [rule]  # copies: the earlier mutations did not reach the state
    assert h.broadcast_state(RULES) == {"r1": rule}
    h.process_broadcast_element({"op": "edit-and-put", "name": "r1"})
    assert h.broadcast_state(RULES) == {"r1": {"first": "square", "tags": ["a", "mutated"]}}


def test_put_copies_the_value(non_keyed):
    rule = {"first": "square", "tags": ["a"]}
    h = non_keyed(EditOnBroadcastSide(), descriptors=[RULES])
    h.process_broadcast_element({"op": "put", "name": "r1", "rule": rule})
    rule["tags"].append("later")
    assert h.broadcast_state(RULES)["r1"]["tags"] == ["a"]


class ReadEverything(KeyedBroadcastProcessFunction):
    """Reports what each side sees through the whole read API."""

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(RULES)
        if value.get("op") == "put_all":
            state.put_all(value["rules"])
        elif value.get("op") == "remove":
            state.remove(value["name"])
            state.remove("never-there")  # removing a missing key is a no-op
        elif value.get("op") == "clear":
            state.clear()
        elif value.get("op") == "del":
            del state[value["name"]]
        elif value.get("op") == "set":
            state[value["name"]] = value["rule"]
        yield "broadcast", self.describe(state)

    def process_element(self, value, ctx):
        yield "main", self.describe(ctx.get_broadcast_state(RULES))

    @staticmethod
    def describe(state):
        return {
            "items": sorted((k, dict(v)) for k, v in state.items()),
            "keys": sorted(state.keys()),
            "values": sorted(v["first"] for v in state.values()),
            "iter": sorted(state),
            "len": len(state),
            "empty": state.is_empty(),
            "has_r1": state.contains("r1") and "r1" in state,
            "r1": None if "r1" not in state else dict(state["r1"]),
            "missing": state.get("missing"),
            "read_only": isinstance(state, ReadOnlyBroadcastState),
            "writable": isinstance(state, BroadcastState),
        }


def test_the_read_api_on_both_sides(keyed):
    h = keyed(ReadEverything(), descriptors=[RULES])
    r1, r2 = {"first": "a"}, {"first": "b"}
    h.process_broadcast_element({"op": "put_all", "rules": {"r1": r1, "r2": r2}})
    h.process_element("x")
    (_, on_broadcast), (_, on_main) = h.output()
    expected = {"items": [("r1", r1), ("r2", r2)], "keys": ["r1", "r2"], "values": ["a", "b"],
                "iter": ["r1", "r2"], "len": 2, "empty": False, "has_r1": True, "r1": r1,
                "missing": None, "read_only": True}
    assert on_broadcast == {**expected, "writable": True}
    assert on_main == {**expected, "writable": False}


@pytest.mark.parametrize(
    ("op", "keys"),
    [
        ({"op": "remove", "name": "r1"}, ["r2"]),
        ({"op": "del", "name": "r2"}, ["r1"]),
        ({"op": "clear"}, []),
        ({"op": "set", "name": "r3", "rule": {"first": "c"}}, ["r1", "r2", "r3"]),
    ],
)
def test_broadcast_side_writes(keyed, op, keys):
    h = keyed(ReadEverything(), descriptors=[RULES])
    h.process_broadcast_element({"op": "put_all", "rules": {"r1": {"first": "a"},
                                                            "r2": {"first": "b"}}})
    h.process_broadcast_element(op)
    assert sorted(h.broadcast_state(RULES)) == keys
    assert h.output()[-1][1]["empty"] is (keys == [])


def test_deleting_a_missing_key_is_a_no_op_as_in_pyflink(keyed):
    h = keyed(ReadEverything(), descriptors=[RULES])
    h.process_broadcast_element({"op": "del", "name": "nope"})
    assert h.broadcast_state(RULES) == {}


class PutRaw(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        key, rule = value
        ctx.get_broadcast_state(RULES).put(key, rule)

    def process_element(self, value, ctx):
        yield value


@pytest.mark.parametrize(
    ("key", "rule", "message"),
    [
        (1, {}, "key 1 is not a str"),
        (None, {}, "keys cannot be None"),
        ("r1", ["not", "a", "dict"], "value of type list is not a dict"),
        ("r1", "text", "value of type str is not a dict"),
    ],
)
def test_puts_are_type_checked(non_keyed, key, rule, message):
    h = non_keyed(PutRaw(), descriptors=[RULES])
    with pytest.raises(StateTypeError, match=message):
        h.process_broadcast_element((key, rule))
    assert h.broadcast_state(RULES) == {}


def test_none_values_are_allowed(non_keyed):
    h = non_keyed(PutRaw(), descriptors=[RULES])
    h.process_broadcast_element(("r1", None))
    assert h.broadcast_state(RULES) == {"r1": None}


def test_values_the_codec_cannot_store_fail_in_the_harness(non_keyed):
    class Opaque:
        def __init__(self) -> None:
            self.handle = lambda: None  # code is not state

    h = non_keyed(PutRaw(), descriptors=[RULES])
    with pytest.raises(StateSerializationError, match="cannot store a function"):
        h.process_broadcast_element(("r1", {"model": Opaque()}))
    assert h.broadcast_state(RULES) == {}


def test_an_object_of_a_class_the_job_does_not_know_fails_naming_the_fix(non_keyed):
    class Local:  # not in the function's module, not declared, not registered
        pass

    h = non_keyed(PutRaw(), descriptors=[RULES])
    with pytest.raises(UnknownTypeError, match=r"Local, a class this job does not know: "
                                               r"register it \(sparkcast.register_types\(Local"):
        h.process_broadcast_element(("r1", {"model": Local()}))
    assert h.broadcast_state(RULES) == {}


class UsesOther(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(OTHER if value == "other" else "rules")

    def process_element(self, value, ctx):
        ctx.get_broadcast_state(OTHER)


def test_unknown_descriptor_on_the_main_side(keyed):
    h = keyed(UsesOther(), descriptors=[RULES])
    with pytest.raises(UnknownStateError, match=r"'other'.*broadcast states: \['rules'\]"):
        h.process_element("x")


@pytest.mark.parametrize("value", ["other", "not-a-descriptor"])
def test_unknown_descriptor_on_the_broadcast_side(keyed, value):
    h = keyed(UsesOther(), descriptors=[RULES])
    with pytest.raises(UnknownStateError, match="pass it to broadcast"):
        h.process_broadcast_element(value)


def test_unknown_descriptor_in_the_harness_is_a_key_error(keyed):
    h = keyed(UsesOther(), descriptors=[RULES])
    with pytest.raises(KeyError):
        h.broadcast_state(OTHER)


def test_several_descriptors_are_independent(non_keyed):
    class TwoStates(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).put(f"key.{value}", {"v": str(value)})
            ctx.get_broadcast_state(OTHER).put(str(value), {"n": value})

        def process_element(self, value, ctx):
            yield from sorted(ctx.get_broadcast_state(OTHER).keys())

    h = non_keyed(TwoStates(), descriptors=[RULES, OTHER])
    h.process_broadcast_element(5)
    h.process_broadcast_element(6)
    h.process_element("go")
    assert h.output() == ["5", "6"]
    assert h.broadcast_state(RULES) == {"key.5": {"v": "5"}, "key.6": {"v": "6"}}
