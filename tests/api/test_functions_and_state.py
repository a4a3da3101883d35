"""The function base classes and state interfaces: PyFlink's names and shapes."""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    BroadcastState,
    KeyedBroadcastProcessFunction,
    ListState,
    MapState,
    ReadOnlyBroadcastState,
    TimeDomain,
)
from sparkcast.api import BaseBroadcastProcessFunction, Function
from sparkcast.api.functions import defines
from sparkcast.api.state import ReadableMap, WritableMap


class OnlyBroadcast(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        return None


class Batch(BroadcastProcessFunction):
    def process_batch(self, batch, ctx):
        return batch


def test_contexts_are_nested_as_in_pyflink():
    assert issubclass(KeyedBroadcastProcessFunction.OnTimerContext,
                      KeyedBroadcastProcessFunction.ReadOnlyContext)
    assert issubclass(BroadcastProcessFunction.Context, BaseBroadcastProcessFunction.Context)
    assert issubclass(BroadcastProcessFunction.ReadOnlyContext,
                      BaseBroadcastProcessFunction.ReadOnlyContext)
    assert hasattr(KeyedBroadcastProcessFunction.Context, "apply_to_keyed_state")
    assert hasattr(KeyedBroadcastProcessFunction.ReadOnlyContext, "timer_service")
    assert not hasattr(BroadcastProcessFunction.ReadOnlyContext, "get_current_key")


def test_functions_are_generic_like_pyflink():
    assert KeyedBroadcastProcessFunction[str, dict, dict, str] is not None
    assert BroadcastProcessFunction[dict, dict, str] is not None


def test_lifecycle_hooks_are_optional():
    function = OnlyBroadcast()
    assert isinstance(function, Function)
    assert function.open(None) is None and function.close() is None


def test_missing_callbacks_raise_not_implemented_naming_the_class():
    with pytest.raises(NotImplementedError, match="OnlyBroadcast must define process_element"):
        OnlyBroadcast().process_element(1, None)
    with pytest.raises(NotImplementedError, match="process_broadcast_element"):
        Batch().process_broadcast_element(1, None)


def test_keyed_on_timer_defaults_to_nothing():
    class Keyed(KeyedBroadcastProcessFunction):
        pass

    assert Keyed().on_timer(5, None) is None


def test_defines_sees_user_overrides_only():
    assert defines(OnlyBroadcast(), "process_broadcast_element")
    assert not defines(OnlyBroadcast(), "process_element")
    assert defines(Batch(), "process_batch")
    assert not defines(OnlyBroadcast(), "process_batch")
    assert not defines(OnlyBroadcast(), "on_timer")


def test_time_domain_values():
    assert {d.name for d in TimeDomain} == {"EVENT_TIME", "PROCESSING_TIME"}


class DictMap(WritableMap):
    """The smallest concrete map: the mixin methods must work on top of it."""

    def __init__(self):
        self.data = {}

    def get(self, key):
        return self.data.get(key)

    def contains(self, key):
        return key in self.data

    def items(self):
        return self.data.items()

    def keys(self):
        return self.data.keys()

    def values(self):
        return self.data.values()

    def is_empty(self):
        return not self.data

    def put(self, key, value):
        self.data[key] = value

    def put_all(self, dict_value):
        self.data.update(dict_value)

    def remove(self, key):
        self.data.pop(key, None)


def test_map_mixins_give_python_syntax():
    m = DictMap()
    m["a"] = 1
    m["b"] = None
    assert m["a"] == 1 and m["b"] is None  # a stored None is not a missing key
    assert "a" in m and "z" not in m
    assert list(m) == ["a", "b"] and len(m) == 2
    del m["a"]
    assert m["a"] is None  # PyFlink's MapState.__getitem__ is get(key): None when missing


def test_state_class_hierarchy():
    assert issubclass(BroadcastState, ReadOnlyBroadcastState)
    assert issubclass(BroadcastState, WritableMap)
    assert not issubclass(ReadOnlyBroadcastState, WritableMap)
    assert issubclass(ReadOnlyBroadcastState, ReadableMap)
    assert issubclass(MapState, WritableMap)


def test_list_state_iterates_its_get():
    class FixedList(ListState):
        def get(self):
            return [1, 2]

        def add(self, value):
            pass

        def add_all(self, values):
            pass

        def update(self, values):
            pass

        def clear(self):
            pass

    assert list(FixedList()) == [1, 2]
