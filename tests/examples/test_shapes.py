"""The rule-matching example of Flink's "Broadcast State Pattern" documentation, ported.

Items (colored shapes) are keyed by color; rules are broadcast. A rule names a first and a
second shape; an item of the first shape waits (keyed MapState of pending items per rule name)
until an item of the second shape of the same color arrives, which matches every waiting one.
"""

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor
from sparkcast.testing import KeyedBroadcastHarness

RULES = MapStateDescriptor("rules", str, dict)


class MatchRules(KeyedBroadcastProcessFunction):
    # Flink: MapStateDescriptor<String, List<Item>>("items", ...), pending first items per rule
    PENDING = MapStateDescriptor("items", str, list)

    def open(self, runtime_context):
        self.pending = runtime_context.get_map_state(self.PENDING)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)

    def process_element(self, value, ctx):
        shape = value["shape"]
        for name, rule in ctx.get_broadcast_state(RULES).items():
            stored = self.pending.get(name) or []
            if shape == rule["second"] and stored:
                for item in stored:
                    yield f"MATCH: {name}: {item['shape']}#{item['id']} - {shape}#{value['id']}"
                stored = []
            # no "else": a rule whose first and second shapes are equal still works
            if shape == rule["first"]:
                stored = stored + [value]
            if stored:
                self.pending.put(name, stored)
            else:
                self.pending.remove(name)


def item(id_, color, shape):
    return {"id": id_, "color": color, "shape": shape}


@pytest.fixture
def h():
    harness = KeyedBroadcastHarness(MatchRules(), key_selector=lambda v: v["color"],
                                    broadcast_descriptors=[RULES])
    harness.open()
    harness.process_broadcast_element({"name": "square-then-triangle", "first": "square",
                                       "second": "triangle"})
    return harness


def test_first_shapes_wait_for_the_second_of_the_same_color(h):
    h.process_element(item(1, "red", "square"))
    h.process_element(item(2, "blue", "square"))
    h.process_element(item(3, "red", "square"))
    assert h.output() == []
    assert h.keyed_state(MatchRules.PENDING, "red") == {
        "square-then-triangle": [item(1, "red", "square"), item(3, "red", "square")]}
    h.process_element(item(4, "red", "triangle"))
    assert h.output() == ["MATCH: square-then-triangle: square#1 - triangle#4",
                          "MATCH: square-then-triangle: square#3 - triangle#4"]
    assert h.keyed_state(MatchRules.PENDING, "red") is None  # cleared after matching
    assert h.keyed_state(MatchRules.PENDING, "blue") == {
        "square-then-triangle": [item(2, "blue", "square")]}


def test_a_second_shape_without_a_waiting_first_matches_nothing(h):
    h.process_element(item(1, "green", "triangle"))
    h.process_element(item(2, "green", "square"))
    assert h.output() == []


def test_rule_with_equal_shapes_pairs_consecutive_items(h):
    h.process_broadcast_element({"name": "two-circles", "first": "circle", "second": "circle"})
    for i in range(1, 4):
        h.process_element(item(i, "red", "circle"))
    assert h.output() == ["MATCH: two-circles: circle#1 - circle#2",
                          "MATCH: two-circles: circle#2 - circle#3"]


def test_a_rule_update_applies_to_later_items(h):
    h.process_broadcast_element({"name": "square-then-triangle", "first": "square",
                                 "second": "circle"})
    h.process_element(item(1, "red", "square"))
    h.process_element(item(2, "red", "triangle"))
    h.process_element(item(3, "red", "circle"))
    assert h.output() == ["MATCH: square-then-triangle: square#1 - circle#3"]


def test_items_before_any_rule_are_lost_in_flink_but_can_be_held():
    def run(**options):
        harness = KeyedBroadcastHarness(MatchRules(), lambda v: v["color"], [RULES], **options)
        harness.open()
        harness.process_element(item(1, "red", "square"))
        harness.process_broadcast_element({"name": "r", "first": "square", "second": "triangle"})
        harness.process_element(item(2, "red", "triangle"))
        return harness.output()

    assert run() == []  # as in Flink: the square arrived before the rule
    assert run(hold_until_ready=[RULES]) == ["MATCH: r: square#1 - triangle#2"]


def test_every_subtask_holds_the_same_rules():
    rules = [{"name": f"r{i}", "first": "square", "second": "circle"} for i in range(3)]
    states = []
    for index in range(3):
        harness = KeyedBroadcastHarness(MatchRules(), lambda v: v["color"], [RULES],
                                        parallelism=3, subtask_index=index)
        harness.open()
        harness.process_micro_batch(broadcast=rules[index:] + rules[:index])
        states.append(harness.broadcast_state(RULES))
    assert states[0] == states[1] == states[2] and len(states[0]) == 3
