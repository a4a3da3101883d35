"""hold_until_ready: main elements that arrive before the broadcast state they need are held,
then processed in arrival order right after the broadcast element that makes them processable."""

import pytest

from sparkcast import (
    HOLD_OVERFLOW,
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
)
from sparkcast.api.options import ProcessOptions, ready_conditions
from sparkcast.core import DictBackend, OutputRecord, SubtaskEngine
from sparkcast.errors import PipelineError

RULES = MapStateDescriptor("rules", str, dict)
MODELS = MapStateDescriptor("models", str, dict)


class Enrich(BroadcastProcessFunction):
    """Broadcast elements are (descriptor name, key, payload), a None payload removes the key;
    main elements are echoed with their timestamp and the broadcast keys they saw."""

    def process_broadcast_element(self, value, ctx):
        name, key, payload = value
        state = ctx.get_broadcast_state(RULES if name == "rules" else MODELS)
        if payload is None:
            state.remove(key)
        else:
            state.put(key, payload)
        yield f"BR:{name}.{key}"

    def process_element(self, value, ctx):
        yield (value, ctx.timestamp(), sorted(ctx.get_broadcast_state(RULES).keys()),
               sorted(ctx.get_broadcast_state(MODELS).keys()))


@pytest.fixture
def make(non_keyed):
    def build(hold, **options):
        return non_keyed(Enrich(), descriptors=[RULES, MODELS], hold_until_ready=hold, **options)
    return build


def test_held_until_a_descriptor_is_non_empty_then_released_in_order(make):
    h = make([RULES])
    h.process_element("e1", timestamp=5)
    h.process_element("e2", timestamp=3)
    assert h.held() == ["e1", "e2"] and h.output() == []
    h.process_broadcast_element(("models", "m", {}))
    assert h.held() == ["e1", "e2"]  # another descriptor does not make this one ready
    h.process_broadcast_element(("rules", "r1", {}), timestamp=9)
    assert h.held() == []
    assert h.output_records() == [
        ("BR:models.m", None),
        ("BR:rules.r1", 9),
        (("e1", 5, ["r1"], ["m"]), 5),  # released right after, with their own timestamps
        (("e2", 3, ["r1"], ["m"]), 3),
    ]
    h.process_element("e3")
    assert h.output()[-1] == ("e3", None, ["r1"], ["m"])  # no longer held


def test_descriptor_key_pairs_need_every_condition(make):
    h = make([(RULES, "r1"), (MODELS, "current")])
    h.process_element("e1")
    h.process_broadcast_element(("rules", "r1", {}))
    h.process_broadcast_element(("models", "old", {}))
    assert h.held() == ["e1"]
    h.process_broadcast_element(("models", "current", {}))
    assert h.held() == [] and h.output()[-1] == ("e1", None, ["r1"], ["current", "old"])


class OnlyRules(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, {})

    def process_element(self, value, ctx):
        yield value


def test_bare_keys_of_the_only_descriptor(non_keyed):
    h = non_keyed(OnlyRules(), descriptors=[RULES], hold_until_ready=["r1", "r2"])
    h.process_element("e1")
    h.process_broadcast_element("r2")
    h.process_broadcast_element("other")
    assert h.held() == ["e1"]
    h.process_broadcast_element("r1")
    assert h.held() == [] and h.output() == ["e1"]


def test_bare_key_with_two_descriptors_is_ambiguous(make):
    with pytest.raises(PipelineError, match="ambiguous"):
        make(["r1"])


def test_readiness_is_lost_again_when_the_state_empties(make):
    h = make([RULES])
    h.process_broadcast_element(("rules", "r1", {}))
    h.process_element("e1")
    h.process_broadcast_element(("rules", "r1", None))  # removed
    h.process_element("e2")
    assert h.held() == ["e2"]
    h.process_broadcast_element(("rules", "r9", {}))
    assert h.held() == [] and h.output()[-1] == ("e2", None, ["r9"], [])


def test_capacity_overflow_goes_to_the_side_output(make):
    h = make([RULES], hold_capacity=2)
    for i in range(4):
        h.process_element(f"e{i}", timestamp=i)
    assert h.held() == ["e0", "e1"]
    assert h.side_output(HOLD_OVERFLOW) == ["e2", "e3"]
    h.process_broadcast_element(("rules", "r1", {}))
    assert [v[0] for v in h.output() if isinstance(v, tuple)] == ["e0", "e1"]
    assert h.side_output(HOLD_OVERFLOW) == ["e2", "e3"]  # never lost, never processed twice


def test_zero_capacity_sends_everything_to_overflow(make):
    h = make([RULES], hold_capacity=0)
    h.process_element("e0", timestamp=7)
    assert h.held() == [] and h.side_output(HOLD_OVERFLOW) == ["e0"]


def test_no_conditions_means_nothing_is_held(make):
    h = make(None)
    h.process_element("e0")
    assert h.held() == [] and h.output() == [("e0", None, [], [])]


class KeyedCount(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, {})

    def process_element(self, value, ctx):
        yield ctx.get_current_key(), value


def test_keyed_elements_are_released_with_their_keys(keyed):
    h = keyed(KeyedCount(), key_selector=lambda v: v["user"], hold_until_ready=[RULES])
    h.process_element({"user": "u1", "n": 1})
    h.process_element({"user": "u2", "n": 2})
    h.process_broadcast_element("r")
    assert h.output() == [("u1", {"user": "u1", "n": 1}), ("u2", {"user": "u2", "n": 2})]


def test_held_elements_survive_a_restart():
    backend = DictBackend()
    options = ProcessOptions(hold_until_ready=ready_conditions([RULES], [RULES, MODELS]))
    first = SubtaskEngine(Enrich(), [RULES, MODELS], backend, options=options)
    first.open()
    first.process_element("e1", 4)
    first.flush()
    second = SubtaskEngine(Enrich(), [RULES, MODELS], backend, options=options)
    second.open()
    assert [value for value, _, _ in second.hold.items] == ["e1"]
    second.process_broadcast_element(("rules", "r1", {}))
    outputs = map(OutputRecord._make, second.take_outputs())
    assert [r.value for r in outputs] == ["BR:rules.r1", ("e1", 4, ["r1"], [])]


def test_micro_batch_releases_held_elements_after_the_broadcast(make):
    h = make([RULES])
    h.process_micro_batch(main=["early"], main_timestamps=[1])
    assert h.held() == ["early"]
    h.process_micro_batch(main=["later"], broadcast=[("rules", "r1", {})],
                          main_timestamps=[2], broadcast_timestamps=[3])
    assert [v[0] if isinstance(v, tuple) else v for v in h.output()] == [
        "BR:rules.r1", "early", "later"]
