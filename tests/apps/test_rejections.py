"""Every error of rule parsing and model loading lands in its app's rejection output; rule
arithmetic that leaves int64 is an error for that rule, never a decision; model paths are
checked before the cache (harness)."""

import pandas as pd
import pytest

from sparkcast.apps import get_app, models
from sparkcast.apps.fraud import INVALID_RULES, RULES, TRANSACTION_FIELDS
from sparkcast.apps.model_serving import REJECTED, model_rows, train
from sparkcast.apps.rules import RuleError, compile_rule

from .conftest import harness_for
from .test_fraud import rule, tx

DEEP_RULES = {
    "parentheses": "(" * 400 + "amount > 1" + ")" * 400,
    "negations": "NOT " * 450 + "amount > 1",
    "minus": "-" * 1000 + "amount > 1",
    "chain": "+".join(["hour"] * 390) + " > 1",
    "functions": "ABS(" * 300 + "amount" + ")" * 300 + " > 1",
}


@pytest.mark.parametrize("name", sorted(DEEP_RULES))
def test_a_deeply_nested_rule_is_an_invalid_rule_not_a_recursion_error(name):
    h = harness_for(get_app("fraud"))
    h.process_broadcast_element(rule("ok", "amount > 10", "BLOCK"))
    h.process_broadcast_element(rule("deep", DEEP_RULES[name], "BLOCK", seq=1))
    (invalid,) = h.side_output(INVALID_RULES)
    assert invalid["rule_id"] == "deep" and "nested more than 50 levels" in invalid["error"]
    assert sorted(h.broadcast_state(RULES)) == ["ok"]


def test_an_integer_literal_beyond_int64_is_an_invalid_rule():
    h = harness_for(get_app("fraud"))
    h.process_broadcast_element(rule("huge", "mcc * 9223372036854775808 > 0", "BLOCK"))
    (invalid,) = h.side_output(INVALID_RULES)
    assert "out of range" in invalid["error"]


def test_overflowing_rule_arithmetic_is_an_error_for_that_rule_not_a_block():
    h = harness_for(get_app("fraud"), on_error="dead_letter")
    h.process_broadcast_element(rule("wraps", "mcc * 9223372036854775807 > 0", "BLOCK"))
    h.process_micro_batch(main=[tx("t1", 10, mcc=5411), tx("t2", 20, mcc=1),
                                tx("t3", 30, mcc=5732)])
    assert [(r["tx_id"], r["action"]) for r in h.output()] == [("t2", "BLOCK")]  # 1 * max fits
    letters = h.dead_letters()
    assert sorted(d.value["tx_id"] for d in letters) == ["t1", "t3"]
    for letter in letters:
        assert "integer overflow: '*' leaves the 64-bit range" in letter.error
        assert "mcc * 9223372036854775807 > 0" in letter.error


@pytest.mark.parametrize("condition", ["hour + 9223372036854775800 > 0",
                                       "0 - hour - 9223372036854775800 < 0"])
def test_overflow_is_checked_for_whole_columns(condition):
    frame = pd.DataFrame({"hour": [3, 10]})  # hour 3 stays in range, hour 10 leaves it
    with pytest.raises(RuleError, match=r"leaves the 64-bit range for 1 row\(s\)"):
        compile_rule(condition, TRANSACTION_FIELDS).evaluate(frame)
    assert compile_rule(condition, TRANSACTION_FIELDS).evaluate(frame.iloc[:1]).tolist() == [True]


@pytest.fixture
def serving(tmp_path):
    models.clear_cache()
    product, user = train(7, 50, drift=0.0)
    data = models.to_npz(product)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "p1.npz").write_bytes(data)
    h = harness_for(get_app("models"), tmp_path / "store")
    return h, product, models.sha256(data)


def test_a_nul_byte_in_a_model_path_is_a_rejected_model(serving):
    h, product, digest = serving
    h.process_broadcast_element(model_rows(3, "product", 1, product, path="p1\0.npz",
                                           digest=digest))
    (rejected,) = h.side_output(REJECTED)
    assert "not a valid path" in rejected["reason"]


def test_a_path_outside_the_store_is_refused_even_when_its_hash_is_cached(serving, tmp_path):
    h, product, digest = serving
    h.process_broadcast_element(model_rows(0, "product", 1, product, path="p1.npz",
                                           digest=digest))
    assert models.cache_size() == 1  # this worker has the hash cached now
    (tmp_path / "p1.npz").write_bytes((tmp_path / "store" / "p1.npz").read_bytes())
    h.process_broadcast_element(model_rows(1, "product", 2, product, path="../p1.npz",
                                           digest=digest))
    (rejected,) = h.side_output(REJECTED)
    assert rejected["version"] == 2 and "outside the artifact store" in rejected["reason"]


def test_a_deeply_nested_inline_model_is_a_rejected_model(serving):
    h, _, _ = serving
    h.process_broadcast_element({"seq": 5, "model": "user", "version": 1, "format": "json",
                                 "weights": "[" * 100_000 + "]" * 100_000, "path": None,
                                 "sha256": None})
    (rejected,) = h.side_output(REJECTED)
    assert "RecursionError" in rejected["reason"] or "not a JSON linear model" in rejected["reason"]
