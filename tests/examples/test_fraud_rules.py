"""Fraud rules: broadcast rules score transactions keyed by account. A BLOCK goes to the main
output, a REVIEW to a side output; a velocity rule counts an account's transactions in a window
with keyed state and an event-time timer."""

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    Types,
    ValueStateDescriptor,
)
from sparkcast.errors import StateTypeError
from sparkcast.testing import KeyedBroadcastHarness

RULES = MapStateDescriptor("fraud_rules", Types.STRING(), Types.MAP(Types.STRING(), Types.INT()))
REVIEW = OutputTag("review", "tx_id string, rule string")
SEVERITY = {"BLOCK": 2, "REVIEW": 1}
OPS = {">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
       "!=": lambda a, b: a != b}


class FraudRules(KeyedBroadcastProcessFunction):
    WINDOW = ValueStateDescriptor("window_count", int)
    WINDOW_MS = 60_000

    def open(self, runtime_context):
        self.window_count = runtime_context.get_state(self.WINDOW)

    def process_broadcast_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES)
        if value.get("delete"):
            rules.remove(value["id"])
        else:
            rules.put(value["id"], value)

    def process_element(self, tx, ctx):
        count = (self.window_count.value() or 0) + 1
        if count == 1:
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + self.WINDOW_MS)
        self.window_count.update(count)
        facts = {**tx, "window_count": count}
        hits = [rule for _, rule in sorted(ctx.get_broadcast_state(RULES).items())
                if OPS[rule["op"]](facts[rule["field"]], rule["value"])]
        if not hits:
            return
        worst = max(hits, key=lambda rule: SEVERITY[rule["action"]])
        if worst["action"] == "BLOCK":
            yield {"tx_id": tx["tx_id"], "rule": worst["id"], "action": "BLOCK"}
        else:
            yield REVIEW, {"tx_id": tx["tx_id"], "rule": worst["id"]}

    def on_timer(self, timestamp, ctx):
        self.window_count.clear()


def rule(id_, field, op, value, action):
    return {"id": id_, "field": field, "op": op, "value": value, "action": action}


def tx(tx_id, account, amount, country="DE"):
    return {"tx_id": tx_id, "account": account, "amount": amount, "country": country}


@pytest.fixture
def h():
    harness = KeyedBroadcastHarness(FraudRules(), lambda t: t["account"], [RULES],
                                    on_error="dead_letter")
    harness.open()
    harness.process_broadcast_element(rule("big", "amount", ">", 10_000, "BLOCK"))
    harness.process_broadcast_element(rule("medium", "amount", ">", 1_000, "REVIEW"))
    return harness


def test_block_goes_to_main_output_and_review_to_side_output(h):
    h.process_element(tx("t1", "a1", 50), timestamp=1)
    h.process_element(tx("t2", "a1", 5_000), timestamp=2)
    h.process_element(tx("t3", "a2", 50_000), timestamp=3)
    assert h.output_records() == [({"tx_id": "t3", "rule": "big", "action": "BLOCK"}, 3)]
    assert h.side_output(REVIEW) == [{"tx_id": "t2", "rule": "medium"}]


def test_the_most_severe_matching_rule_wins(h):
    h.process_element(tx("t1", "a1", 20_000), timestamp=1)
    assert h.output() == [{"tx_id": "t1", "rule": "big", "action": "BLOCK"}]
    assert h.side_output(REVIEW) == []


def test_rules_change_while_running(h):
    h.process_broadcast_element({"id": "big", "delete": True})
    h.process_broadcast_element(rule("country", "country", "!=", "DE", "BLOCK"))
    h.process_element(tx("t1", "a1", 20_000), timestamp=1)
    h.process_element(tx("t2", "a2", 10, country="XX"), timestamp=2)
    assert h.side_output(REVIEW) == [{"tx_id": "t1", "rule": "medium"}]
    assert h.output() == [{"tx_id": "t2", "rule": "country", "action": "BLOCK"}]


def test_velocity_rule_uses_keyed_state_and_a_window_timer(h):
    h.process_broadcast_element(rule("velocity", "window_count", ">=", 3, "REVIEW"))
    for i, ts in enumerate([0, 10_000, 20_000]):
        h.process_element(tx(f"t{i}", "a1", 5), timestamp=ts)
    assert h.side_output(REVIEW) == [{"tx_id": "t2", "rule": "velocity"}]
    h.process_watermark(60_000)  # the window of a1 closes
    assert h.keyed_state(FraudRules.WINDOW, "a1") is None
    h.process_element(tx("t3", "a1", 5), timestamp=61_000)
    assert h.side_output(REVIEW) == [{"tx_id": "t2", "rule": "velocity"}]


def test_malformed_transactions_become_dead_letters(h):
    h.process_element({"tx_id": "bad", "account": "a1"}, timestamp=5)
    h.process_element(tx("t1", "a1", 20_000), timestamp=6)
    (letter,) = h.dead_letters()
    assert (letter.value["tx_id"], letter.key, letter.timestamp) == ("bad", "a1", 5)
    assert letter.error == "KeyError: 'amount'"
    assert h.output() == [{"tx_id": "t1", "rule": "big", "action": "BLOCK"}]


def test_rule_ids_are_type_checked_by_the_descriptor():
    h = KeyedBroadcastHarness(FraudRules(), lambda t: t["account"], [RULES], on_error="fail")
    h.open()
    with pytest.raises(StateTypeError, match="key 7 is not a str"):
        h.process_broadcast_element(rule(7, "amount", ">", 1, "BLOCK"))
