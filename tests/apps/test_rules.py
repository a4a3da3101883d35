"""The fraud rule language (apps/rules/): parsing, type checking, errors with positions,
vectorized meaning."""

import pandas as pd
import pytest

from sparkcast.apps.rules import RuleError, compile_rule, parse
from sparkcast.apps.rules.parser import Binary, Field, In, Literal_

FIELDS = {"amount": "num", "hour": "num", "ip_country": "str", "card_country": "str",
          "merchant": "str"}
FRAME = pd.DataFrame({
    "amount": [6000.0, 100.0, 2500.0, None],
    "hour": [3, 14, 23, 2],
    "ip_country": ["NG", "DE", "FR", "DE"],
    "card_country": ["DE", "DE", "FR", None],
    "merchant": ["Casino", "shop", "it's", "shop"],
})


def matches(text):
    return compile_rule(text, FIELDS).evaluate(FRAME).tolist()


@pytest.mark.parametrize("text, expected", [
    ("amount > 5000 AND ip_country != card_country", [True, False, False, False]),
    ("amount > 5000 and ip_country <> card_country", [True, False, False, False]),
    ("amount >= 2500 OR hour < 3", [True, False, True, True]),
    ("NOT amount < 1000", [True, False, True, True]),  # NOT of an unknown comparison
    ("ip_country IN ('NG', 'RU')", [True, False, False, False]),
    ("ip_country NOT IN ('NG', 'RU')", [False, True, True, True]),
    ("amount BETWEEN 100 AND 2500", [False, True, True, False]),
    ("amount NOT BETWEEN 100 AND 2500", [True, False, False, True]),
    ("amount * 2 + 1 > 5001", [True, False, False, False]),
    ("amount - 100 * 2 = 5800", [True, False, False, False]),  # * binds tighter than -
    ("(amount - 100) * 2 = 11800", [True, False, False, False]),
    ("amount / 0 > 1", [True, True, True, False]),  # x/0 is inf, not an error
    ("hour % 2 = 1 AND -hour < -10", [False, False, True, False]),
    ("abs(amount - 3000) < 1000 OR lower(merchant) = 'casino'", [True, False, True, False]),
    ("merchant = 'it\\'s'", [False, False, True, False]),
    ("card_country = \"DE\"", [True, True, False, False]),
    ("TRUE", [True, True, True, True]),
    ("amount > 1e3 AND amount < .5e4", [False, False, True, False]),
    ("NOT (ip_country = 'DE' OR ip_country = 'FR') AND hour < 6", [True, False, False, False]),
    ("amount = 1 OR amount > 0", [True, True, True, False]),
])
def test_valid_rules_evaluate_on_a_whole_batch(text, expected):
    assert matches(text) == expected


def test_precedence_and_or_not():
    tree = parse("NOT a = 1 OR b = 2 AND c IN (3)")
    assert isinstance(tree, Binary) and tree.op == "OR"
    assert tree.left.op == "NOT"
    assert tree.right.op == "AND" and isinstance(tree.right.right, In)
    assert parse("-3") == Literal_(-3)
    assert parse("x") == Field("x", 0)


@pytest.mark.parametrize("text, message, column", [
    ("", "empty rule", 1),
    ("amount >> 5", "expected a value, found '>'", 9),
    ("amount > 5000 AND", "expected a value, found end of rule", 18),
    ("(amount > 1", "expected ')', found end of rule", 12),
    ("amount > 1)", "unexpected ')'", 11),
    ("amount $ 3", "unexpected character '$'", 8),
    ("merchant = 'open", "unterminated string", 12),
    ("amount IN 5", "expected '(' after IN", 11),
    ("amount IN (1, hour)", "IN lists hold literals only", 15),
    ("amount BETWEEN 1 OR 2", "expected AND of BETWEEN", 18),
    ("amount", "a rule must be a condition", 1),
    ("amont > 1", "unknown field 'amont'", 1),
    ("amount > 'big'", "cannot apply '>' to a number and a string", 8),
    ("merchant + 1 > 2", "cannot apply '+' to a string and a number", 10),
    ("merchant + merchant = 'x'", "arithmetic '+' needs numbers", 10),
    ("amount AND hour > 1", "AND joins conditions", 8),
    ("ip_country IN ('DE', 2)", "IN list value 2 is not a string", 12),
    ("abs(merchant) > 1", "ABS takes a number", 1),
    ("NOT amount", "NOT needs a condition", None),
    ("amount > 1 amount < 2", "unexpected 'amount'", 12),
])
def test_invalid_rules_are_rejected_with_a_message_and_column(text, message, column):
    with pytest.raises(RuleError) as error:
        compile_rule(text, FIELDS)
    assert message in str(error.value)
    assert error.value.position == (None if column is None else column - 1)


@pytest.mark.parametrize("text", [
    "__import__('os').system('rm -rf /')",
    "amount > 1; import os",
    "exec('x') = 1",
    "amount.__class__ > 1",
    "lambda: 1",
])
def test_code_is_never_executed_only_rejected(text):
    with pytest.raises(RuleError):
        compile_rule(text, FIELDS)


def test_overlong_rules_are_refused():
    with pytest.raises(RuleError, match="longer than"):
        compile_rule("amount > 1 OR " * 400 + "amount > 1", FIELDS)


def test_compiled_rule_names_its_fields():
    rule = compile_rule("amount > 5000 AND ip_country != card_country", FIELDS)
    assert rule.fields == {"amount", "ip_country", "card_country"}
