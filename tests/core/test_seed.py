"""Prepared state (core/seed.py): the harness's initial_state, and moving state between subtasks."""

from __future__ import annotations

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Time,
    ValueStateDescriptor,
)
from sparkcast.core.seed import Seed, merged, split_by_key
from sparkcast.errors import PipelineError, SparkcastError
from sparkcast.testing import KeyedBroadcastHarness

RULES = MapStateDescriptor("rules", str, int)
COUNT = ValueStateDescriptor("count", int)
SEEN = ListStateDescriptor("seen", str)


class Count(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)
        self.seen = runtime_context.get_list_state(SEEN)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + ctx.get_broadcast_state(RULES).get("step")
        self.count.update(n)
        self.seen.add(value)
        yield value, n


def _harness(initial_state, **options):
    h = KeyedBroadcastHarness(Count(), key_selector=lambda v: v, broadcast_descriptors=[RULES],
                              initial_state=initial_state, **options)
    h.open()
    return h


def test_initial_state_fills_broadcast_and_keyed_state_before_the_first_element():
    h = _harness({RULES: [("step", 5)], "count": [("a", 100)], SEEN: [("a", ["x"])]},
                 hold_until_ready=[(RULES, "step")])
    assert h.held() == [] and h.broadcast_state(RULES) == {"step": 5}
    h.process_element("a")
    h.process_element("b")
    assert h.output() == [("a", 105), ("b", 5)]
    assert h.keyed_state(SEEN, "a") == ["x", "a"]


@pytest.mark.parametrize(("initial", "message"), [
    ({"nope": [("a", 1)]}, "neither a broadcast state nor a keyed state"),
    ({COUNT: [("a", "not an int")]}, "is not a int"),
    ({SEEN: [("a", "x")]}, "give a list"),
    ({RULES: [("step", "five")]}, "broadcast state .rules.: value of type str is not a int"),
])
def test_bad_initial_state_is_refused_with_the_reason(initial, message):
    with pytest.raises(SparkcastError, match=message):
        _harness(initial)


def test_initial_state_with_ttl_is_refused():
    ttl = ValueStateDescriptor("count", int)
    ttl.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(1)).build())

    class WithTtl(Count):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ttl)

    h = KeyedBroadcastHarness(WithTtl(), key_selector=lambda v: v, broadcast_descriptors=[RULES],
                              initial_state={"count": [("a", 1)]})
    with pytest.raises(PipelineError, match="TTL"):
        h.open()


def test_split_by_key_moves_keyed_state_timers_and_held_elements_and_copies_broadcast():
    whole = Seed(broadcast={"rules": [("step", 1)]}, keyed={"count": [("a", 1), ("b", 2)]},
                 timers={"EVENT_TIME": [[10, "a"], [20, "b"]]},
                 held=[["va", 5, "a"], ["vb", 6, "b"]], broadcast_version="v1")
    seeds = split_by_key(whole, {"a": 0, "b": 2}.__getitem__, 3)
    assert seeds[0].keyed == {"count": [("a", 1)]} and seeds[2].keyed == {"count": [("b", 2)]}
    assert seeds[2].timers == {"EVENT_TIME": [[20, "b"]]} and seeds[0].held == [["va", 5, "a"]]
    assert all(s.broadcast == whole.broadcast and s.broadcast_version == "v1"
               for s in seeds.values())
    assert seeds[1].keyed == {} and not seeds[1].held
    back = merged(seeds.values())
    assert sorted(back.keyed["count"]) == [("a", 1), ("b", 2)]
    assert back.timers == whole.timers and sorted(back.held) == whole.held
    assert Seed.from_bytes(whole.to_bytes()) == whole
