"""``freeze``: read-only views shared by the main side; ``thaw``: mutable copies for writers."""

import copy
import json

import numpy as np
import pytest

from sparkcast import Row
from sparkcast.core.frozen import FrozenDict, FrozenList, freeze, thaw
from sparkcast.errors import ReadOnlyStateError


@pytest.fixture
def frozen():
    return freeze({"rule": {"first": "square"}, "tags": ["a", {"b": 1}], "t": (1, [2])})


MUTATIONS = [
    lambda v: v.__setitem__("x", 1),
    lambda v: v.__delitem__("rule"),
    lambda v: v.clear(),
    lambda v: v.pop("rule"),
    lambda v: v.popitem(),
    lambda v: v.setdefault("x", 1),
    lambda v: v.update(x=1),
    lambda v: v.__ior__({"x": 1}),
    lambda v: v["rule"].__setitem__("first", "circle"),
    lambda v: v["tags"].append("c"),
    lambda v: v["tags"].extend(["c"]),
    lambda v: v["tags"].insert(0, "c"),
    lambda v: v["tags"].pop(),
    lambda v: v["tags"].remove("a"),
    lambda v: v["tags"].reverse(),
    lambda v: v["tags"].sort(),
    lambda v: v["tags"].clear(),
    lambda v: v["tags"].__setitem__(0, "z"),
    lambda v: v["tags"].__delitem__(0),
    lambda v: v["tags"].__iadd__(["c"]),
    lambda v: v["tags"].__imul__(2),
    lambda v: v["tags"][1].__setitem__("b", 2),
    lambda v: v["t"][1].append(3),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_every_mutation_raises_read_only_state_error(frozen, mutate):
    with pytest.raises(ReadOnlyStateError, match="read-only"):
        mutate(frozen)
    assert thaw(frozen) == {"rule": {"first": "square"}, "tags": ["a", {"b": 1}], "t": (1, [2])}


def test_augmented_assignment_raises(frozen):
    tags = frozen["tags"]
    with pytest.raises(ReadOnlyStateError):
        tags += ["c"]
    with pytest.raises(TypeError):  # ReadOnlyStateError is a TypeError
        frozen |= {"x": 1}


def test_frozen_values_still_look_like_builtins(frozen):
    assert isinstance(frozen, dict) and isinstance(frozen["tags"], list)
    assert frozen == {"rule": {"first": "square"}, "tags": ["a", {"b": 1}], "t": (1, [2])}
    assert json.loads(json.dumps(frozen))["tags"] == ["a", {"b": 1}]
    assert hash(freeze({"a": [1]})) == hash(freeze({"a": [1]}))


def test_copies_are_plain_and_mutable(frozen):
    for clone in (copy.copy(frozen), copy.deepcopy(frozen), dict(frozen)):
        assert type(clone) is dict
        clone["x"] = 1
    deep = copy.deepcopy(frozen)
    deep["tags"].append("c")
    assert frozen["tags"] == ["a", {"b": 1}]


def test_freeze_copies_containers_once():
    source = {"a": [1]}
    frozen = freeze(source)
    source["a"].append(2)
    assert frozen == {"a": [1]}
    assert freeze(frozen) is frozen


def test_freeze_other_types():
    assert freeze({1, 2}) == frozenset({1, 2})
    assert freeze(bytearray(b"x")) == b"x"
    row = freeze(Row(name="r", items=[1]))
    assert isinstance(row.items, FrozenList) and row.name == "r"
    array = freeze(np.array([1, 2]))
    with pytest.raises(ValueError, match="read-only"):
        array[0] = 5
    for scalar in ("s", 1, 1.5, None, b"b", True):
        assert freeze(scalar) is scalar


def test_thaw_gives_deep_mutable_copies(frozen):
    thawed = thaw(frozen)
    assert type(thawed) is dict and type(thawed["tags"]) is list
    assert type(thawed["tags"][1]) is dict
    thawed["tags"][1]["b"] = 5
    assert frozen["tags"][1]["b"] == 1
    assert thaw(frozenset({1})) == {1} and isinstance(thaw(frozenset({1})), set)
    row = thaw(freeze(Row(items=[1])))
    row.items.append(2)
    array = thaw(freeze(np.array([1, 2])))
    array[0] = 9
    assert array[0] == 9


def test_frozen_types_are_exported_for_isinstance_checks():
    assert issubclass(FrozenDict, dict) and issubclass(FrozenList, list)
