"""Fraud rules through the harness: decisions, runtime rule changes, invalid rules."""

from sparkcast.apps import get_app
from sparkcast.apps.fraud import INVALID_RULES, REVIEW, RULES, RULESET, generate

from .conftest import harness_for

APP = get_app("fraud")


def rule(rule_id, condition, action, seq=0, op="upsert"):
    return {"seq": seq, "op": op, "rule_id": rule_id, "condition": condition, "action": action}


def tx(tx_id, amount, ip="DE", card="DE", merchant="shop", hour=12, mcc=5411):
    return {"tx_id": tx_id, "card_id": "c1", "amount": amount, "merchant": merchant, "mcc": mcc,
            "card_country": card, "ip_country": ip, "hour": hour, "ts": 0}


def fresh():
    h = harness_for(APP)
    h.process_broadcast_element(rule("big-foreign", "amount > 5000 AND ip_country != card_country",
                                     "BLOCK"))
    h.process_broadcast_element(rule("mid", "amount BETWEEN 1000 AND 5000", "REVIEW"))
    h.process_broadcast_element(rule("vip", "merchant IN ('trusted')", "ALLOW"))
    return h


def test_block_to_main_review_to_side_allow_wins():
    h = fresh()
    h.process_micro_batch(main=[tx("t1", 9000, ip="NG"), tx("t2", 2000), tx("t3", 10),
                                tx("t4", 9000, ip="NG", merchant="trusted")])
    main = {r["tx_id"]: (r["action"], r["rule_id"]) for r in h.output()}
    assert main == {"t1": ("BLOCK", "big-foreign"), "t3": ("ALLOW", None),
                    "t4": ("ALLOW", "vip")}
    assert [(r["tx_id"], r["rule_id"]) for r in h.side_output(REVIEW)] == [("t2", "mid")]
    assert {r["rules_version"] for r in h.output()} == {3}
    assert {r["subtask"] for r in h.output()} == {0}


def test_rules_are_updated_and_removed_at_runtime():
    h = fresh()
    h.process_micro_batch(main=[tx("t1", 2000)])
    h.process_micro_batch(broadcast=[rule("mid", "amount > 1500", "BLOCK", seq=5),
                                     rule("vip", None, None, seq=6, op="delete")],
                          main=[tx("t2", 2000), tx("t3", 100, merchant="trusted")])
    assert [r["tx_id"] for r in h.side_output(REVIEW)] == ["t1"]
    later = [(r["tx_id"], r["action"], r["rule_id"], r["rules_version"]) for r in h.output()]
    assert later == [("t2", "BLOCK", "mid", 5), ("t3", "ALLOW", None, 5)]
    assert set(h.broadcast_state(RULES)) == {"big-foreign", "mid"}


def test_an_invalid_rule_is_rejected_and_disturbs_nothing():
    h = fresh()
    h.process_broadcast_element(rule("bad", "amount >> 5", "BLOCK", seq=9))
    h.process_broadcast_element(rule("bad-action", "amount > 1", "DELETE_ALL", seq=10))
    h.process_broadcast_element(rule("big-foreign", "amont > 1", "BLOCK", seq=11))  # update
    (parse_error, action_error, field_error) = h.side_output(INVALID_RULES)
    assert parse_error["rule_id"] == "bad" and "expected a value" in parse_error["error"]
    assert parse_error["seq"] == 9
    assert "action must be one of" in action_error["error"]
    assert "unknown field 'amont'" in field_error["error"]
    assert h.broadcast_state(RULESET) == {"version": 3}
    assert h.broadcast_state(RULES)["big-foreign"]["condition"].startswith("amount > 5000")
    h.process_element(tx("t1", 9000, ip="NG"))
    assert h.output()[0]["action"] == "BLOCK"


def test_transactions_before_any_rule_are_held_not_dropped():
    h = harness_for(APP)
    h.process_micro_batch(main=[tx("t1", 9000, ip="NG")])
    assert h.output() == [] and len(h.held()) == 1
    h.process_micro_batch(broadcast=[rule("b", "amount > 1", "BLOCK")])
    assert [r["tx_id"] for r in h.output()] == ["t1"]


def test_generated_stream_every_transaction_is_decided_once(run_app):
    drops = generate(7, files=4, per_file=50)
    h = run_app(APP, drops)
    ids = [r["tx_id"] for r in h.output()] + [r["tx_id"] for r in h.side_output(REVIEW)]
    assert sorted(ids) == [f"tx{i:06d}" for i in range(200)]
    assert [r["rule_id"] for r in h.side_output(INVALID_RULES)] == ["broken"]
    versions = [r["rules_version"] for r in h.output()]
    assert versions[0] == 3 and versions[-1] == 6  # 3 initial; +2 upserts +1 delete
    assert {r["action"] for r in h.output()} == {"ALLOW", "BLOCK"}


def test_the_generator_is_reproducible():
    assert generate(3) == generate(3)
    assert generate(3) != generate(4)
