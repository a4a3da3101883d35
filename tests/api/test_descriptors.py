"""State descriptors: names, kinds, equality, TTL, the function arguments of reducing and
aggregating state."""

import pytest

from sparkcast import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReduceFunction,
    ReducingStateDescriptor,
    StateTtlConfig,
    Time,
    Types,
    ValueStateDescriptor,
)
from sparkcast.api import StateDescriptor
from sparkcast.errors import PipelineError


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


@pytest.mark.parametrize("name", ["rules", "_x", "a.b-c_9", "R" * 128])
def test_valid_names_are_kept(name):
    assert MapStateDescriptor(name, str, dict).get_name() == name


@pytest.mark.parametrize("name", ["", "9lives", "has space", "a/b", "é", "R" * 129, None, 5])
def test_invalid_names_raise_pipeline_error_naming_the_rule(name):
    with pytest.raises(PipelineError, match="letters, digits"):
        MapStateDescriptor(name, str, dict)


def test_pipeline_error_is_a_value_error():
    with pytest.raises(ValueError):
        ValueStateDescriptor("no spaces allowed")


def test_kinds_and_type_infos():
    m = MapStateDescriptor("m", Types.STRING(), Types.LONG())
    assert (m.kind, m.key_type_info, m.value_type_info) == ("map", str, int)
    assert ValueStateDescriptor("v", int).kind == "value"
    assert ListStateDescriptor("l", str).type_info is str
    assert ReducingStateDescriptor("r", Sum(), int).kind == "reducing"
    assert AggregatingStateDescriptor("a", Average(), list).kind == "aggregating"


def test_equality_is_by_kind_and_name():
    assert MapStateDescriptor("x", str, int) == MapStateDescriptor("x", int, str)
    assert MapStateDescriptor("x") != ValueStateDescriptor("x")
    assert MapStateDescriptor("x") != MapStateDescriptor("y")
    assert len({MapStateDescriptor("x"), MapStateDescriptor("x"), ValueStateDescriptor("x")}) == 2
    assert repr(ListStateDescriptor("l")) == "ListStateDescriptor('l')"
    assert isinstance(ValueStateDescriptor("v"), StateDescriptor)


def test_reducing_descriptor_takes_a_reduce_function_or_a_lambda():
    function = Sum()
    by_class = ReducingStateDescriptor("r", function, int)
    assert by_class.reduce(2, 3) == 5
    assert by_class.get_reduce_function() is function
    by_lambda = ReducingStateDescriptor("r", lambda a, b: max(a, b))
    assert by_lambda.reduce(2, 3) == 3


def test_reducing_descriptor_rejects_non_callables():
    with pytest.raises(TypeError, match="ReduceFunction"):
        ReducingStateDescriptor("r", 42)


def test_aggregating_descriptor_needs_an_aggregate_function():
    function = Average()
    assert AggregatingStateDescriptor("a", function).get_agg_function() is function
    with pytest.raises(TypeError, match="AggregateFunction"):
        AggregatingStateDescriptor("a", lambda a, b: a)


def test_aggregate_function_merge_is_optional_and_explains_itself():
    with pytest.raises(NotImplementedError, match="not needed"):
        Average().merge([1, 1], [2, 1])


def test_enable_time_to_live_keeps_enabled_configs_only():
    descriptor = ValueStateDescriptor("v", int)
    assert descriptor.ttl_config is None
    config = StateTtlConfig.new_builder(Time.seconds(1)).build()
    descriptor.enable_time_to_live(config)
    assert descriptor.ttl_config is config
    disabled = (StateTtlConfig.new_builder(Time.seconds(1))
                .set_update_type(StateTtlConfig.UpdateType.Disabled).build())
    descriptor.enable_time_to_live(disabled)
    assert descriptor.ttl_config is None


def test_enable_time_to_live_rejects_a_builder_or_a_duration():
    descriptor = ValueStateDescriptor("v", int)
    with pytest.raises(TypeError, match="new_builder"):
        descriptor.enable_time_to_live(StateTtlConfig.new_builder(1000))
    with pytest.raises(TypeError):
        descriptor.enable_time_to_live(1000)
