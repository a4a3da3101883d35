"""Options beyond Flink: ``hold_until_ready`` forms, ``time_alignment``, ``on_error``."""

import dataclasses

import pytest

from sparkcast import HOLD_OVERFLOW, MapStateDescriptor, OutputTag
from sparkcast.api import ProcessOptions, ReadyCondition
from sparkcast.api.options import ANY_KEY, ready_conditions
from sparkcast.errors import PipelineError

RULES = MapStateDescriptor("rules", str, dict)
MODELS = MapStateDescriptor("models", str, dict)


def test_none_means_no_conditions():
    assert ready_conditions(None, [RULES]) == ()


def test_descriptor_means_non_empty():
    (condition,) = ready_conditions([RULES], [RULES, MODELS])
    assert condition == ReadyCondition("rules")
    assert condition.key is ANY_KEY


def test_descriptor_key_pair():
    assert ready_conditions([(MODELS, "current")], [RULES, MODELS]) == (
        ReadyCondition("models", "current"),
    )


def test_bare_key_of_the_only_descriptor():
    assert ready_conditions(["r1", "r2"], [RULES]) == (
        ReadyCondition("rules", "r1"), ReadyCondition("rules", "r2"),
    )


def test_a_single_item_need_not_be_a_list():
    assert ready_conditions(RULES, [RULES]) == (ReadyCondition("rules"),)
    assert ready_conditions("r1", [RULES]) == (ReadyCondition("rules", "r1"),)


def test_conditions_pass_through():
    condition = ReadyCondition("rules", "x")
    assert ready_conditions([condition], [RULES]) == (condition,)


def test_bare_key_is_ambiguous_with_several_descriptors():
    with pytest.raises(PipelineError, match=r"ambiguous.*\(descriptor, key\)"):
        ready_conditions(["r1"], [RULES, MODELS])


def test_conditions_must_name_a_broadcast_descriptor():
    with pytest.raises(PipelineError, match="'models', which is not broadcast"):
        ready_conditions([MODELS], [RULES])


def test_ready_condition_repr():
    assert repr(ReadyCondition("rules")) == "ReadyCondition('rules', <any>)"
    assert repr(ReadyCondition("rules", "r1")) == "ReadyCondition('rules', 'r1')"


def test_process_options_defaults():
    options = ProcessOptions()
    assert options.hold_until_ready == ()
    assert (options.time_alignment, options.on_error) == ("batch", "fail")
    assert options.hold_capacity == 100_000 and options.job_parameters == {}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"time_alignment": "processing"}, "time_alignment"),
        ({"on_error": "ignore"}, "on_error"),
        ({"hold_capacity": -1}, "hold_capacity"),
    ],
)
def test_process_options_are_checked(changes, message):
    with pytest.raises(PipelineError, match=message):
        ProcessOptions(**changes)


def test_process_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ProcessOptions().on_error = "dead_letter"  # type: ignore[misc]


def test_hold_overflow_is_an_output_tag():
    assert isinstance(HOLD_OVERFLOW, OutputTag)
    assert HOLD_OVERFLOW.tag_id == "hold_overflow"


def test_a_descriptor_wide_condition_survives_shipping_to_the_workers():
    """The plan reaches Spark's workers pickled; a hold on "any key" must still mean that
    there (an ``object()`` sentinel arrived as a copy, and such holds never released)."""
    import pickle

    from sparkcast.core.hold import HoldBuffer

    (condition,) = pickle.loads(pickle.dumps(ready_conditions([RULES], [RULES])))
    buffer = HoldBuffer((condition,), capacity=10)
    buffer.refresh({"rules": {"r1": 1}})
    assert buffer.ready
