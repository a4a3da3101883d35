"""A rule's tree to a vectorized pandas evaluator: type checking, then compilation.

The tree from :mod:`sparkcast.apps.rules.parser` is checked against the known fields (each a
:data:`Kind`) and compiled into a closure over pandas Series that evaluates a whole micro-batch
at once. Nothing here calls ``eval``, ``exec`` or ``compile``.

>>> rule = compile_rule("amount > 5000 AND ip_country != card_country", FIELDS)
>>> rule.evaluate(frame)          # a boolean pandas Series, one value per row
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from sparkcast.apps.rules.parser import (
    COMPARISONS,
    Binary,
    Call,
    Field,
    In,
    Literal_,
    Node,
    RuleError,
    Unary,
    parse,
)

#: what a field or an expression holds: a number, a string or a condition
Kind = Literal["num", "str", "bool"]


# ----------------------------------------------------------------------------- type checking

def check(node: Node, fields: Mapping[str, Kind], text: str) -> Kind:
    """The kind of a node, checked against the known ``fields``; raises on misuse."""
    if isinstance(node, Literal_):
        return _kind_of(node.value)
    if isinstance(node, Field):
        if node.name not in fields:
            raise RuleError(f"unknown field {node.name!r} (known: {', '.join(sorted(fields))})",
                            text, node.position)
        return fields[node.name]
    if isinstance(node, Unary):
        kind = check(node.operand, fields, text)
        wanted: Kind = "bool" if node.op == "NOT" else "num"
        if kind != wanted:
            raise RuleError(f"{node.op} needs a {_NAMES[wanted]}, not a {_NAMES[kind]}", text)
        return wanted
    if isinstance(node, Call):
        kind = check(node.argument, fields, text)
        wanted = "num" if node.function == "ABS" else "str"
        if kind != wanted:
            raise RuleError(f"{node.function} takes a {_NAMES[wanted]}, not a {_NAMES[kind]}",
                            text, node.position)
        return wanted
    if isinstance(node, In):
        kind = check(node.operand, fields, text)
        for value in node.values:
            if _kind_of(value) != kind:
                raise RuleError(f"IN list value {value!r} is not a {_NAMES[kind]}", text,
                                node.position)
        return "bool"
    return _check_binary(node, fields, text)


def _check_binary(node: Binary, fields: Mapping[str, Kind], text: str) -> Kind:
    left, right = check(node.left, fields, text), check(node.right, fields, text)
    if node.op in ("AND", "OR"):
        if left != "bool" or right != "bool":
            raise RuleError(f"{node.op} joins conditions, not a {_NAMES[left]} and a "
                            f"{_NAMES[right]}", text, node.position)
        return "bool"
    if left != right:
        raise RuleError(f"cannot apply {node.op!r} to a {_NAMES[left]} and a {_NAMES[right]}",
                        text, node.position)
    if node.op in COMPARISONS:
        if left == "bool" and node.op not in ("==", "!="):
            raise RuleError(f"cannot order booleans with {node.op!r}", text, node.position)
        return "bool"
    if left != "num":
        raise RuleError(f"arithmetic {node.op!r} needs numbers, not {_NAMES[left]}s", text,
                        node.position)
    return "num"


_NAMES = {"num": "number", "str": "string", "bool": "condition"}


def _kind_of(value: Any) -> Kind:
    if isinstance(value, bool):
        return "bool"
    return "str" if isinstance(value, str) else "num"


# ------------------------------------------------------------------------------- compilation

Evaluator = Callable[[pd.DataFrame], Any]
_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
               "%": operator.mod}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True)
class CompiledRule:
    """A checked rule, ready to evaluate a whole pandas batch at once."""

    text: str
    tree: Node
    fields: frozenset[str]
    _evaluate: Evaluator

    def evaluate(self, frame: pd.DataFrame) -> pd.Series:
        """One boolean per row; a comparison with a missing value is False (SQL's NULL).
        Integer arithmetic that leaves int64 raises :class:`RuleError` naming this rule: a
        wrapped number would silently decide (``mcc * 9223372036854775807 > 0`` once blocked
        every transaction)."""
        try:
            result = self._evaluate(frame)
        except RuleError as exc:
            raise RuleError(exc.message, self.text, exc.position) from None
        if not isinstance(result, pd.Series):
            return pd.Series(bool(result), index=frame.index, dtype=bool)
        return _as_bool(result, frame)


def compile_rule(text: str, fields: Mapping[str, Kind]) -> CompiledRule:
    """Parse, type-check (the rule must be a condition over known ``fields``) and compile."""
    tree = parse(text)
    if check(tree, fields, text) != "bool":
        raise RuleError("a rule must be a condition (a comparison, IN, AND/OR/NOT)", text, 0)
    return CompiledRule(text, tree, frozenset(_fields_of(tree)), _compile(tree))


def _fields_of(node: Node) -> set[str]:
    if isinstance(node, Field):
        return {node.name}
    if isinstance(node, Binary):
        return _fields_of(node.left) | _fields_of(node.right)
    if isinstance(node, (Unary,)):
        return _fields_of(node.operand)
    if isinstance(node, In):
        return _fields_of(node.operand)
    if isinstance(node, Call):
        return _fields_of(node.argument)
    return set()


def _compile(node: Node) -> Evaluator:
    if isinstance(node, Literal_):
        value = node.value
        return lambda frame: value
    if isinstance(node, Field):
        name = node.name
        return lambda frame: frame[name]
    if isinstance(node, Unary):
        inner = _compile(node.operand)
        if node.op == "NOT":
            return lambda frame: ~_as_bool(inner(frame), frame)
        return lambda frame: -inner(frame)
    if isinstance(node, Call):
        inner = _compile(node.argument)
        if node.function == "ABS":
            return lambda frame: abs(inner(frame))
        method = str.lower if node.function == "LOWER" else str.upper
        return lambda frame: _string_call(inner(frame), method)
    if isinstance(node, In):
        inner = _compile(node.operand)
        values = list(node.values)
        negated = node.negated

        def member(frame: pd.DataFrame) -> Any:
            operand = inner(frame)
            if isinstance(operand, pd.Series):
                found = operand.isin(values) & operand.notna()
            else:
                found = operand in values
            return ~_as_bool(found, frame) if negated else found
        return member
    return _compile_binary(node)


def _compile_binary(node: Binary) -> Evaluator:
    left, right = _compile(node.left), _compile(node.right)
    if node.op == "AND":
        return lambda frame: _as_bool(left(frame), frame) & _as_bool(right(frame), frame)
    if node.op == "OR":
        return lambda frame: _as_bool(left(frame), frame) | _as_bool(right(frame), frame)
    if node.op in _COMPARE:
        compare = _COMPARE[node.op]
        return lambda frame: _compare(compare, left(frame), right(frame))
    arithmetic = _ARITHMETIC[node.op]
    op, position = node.op, node.position

    def calculate(frame: pd.DataFrame) -> Any:
        a, b = left(frame), right(frame)
        if not isinstance(a, pd.Series) and not isinstance(b, pd.Series):
            with np.errstate(all="ignore"):
                return arithmetic(np.float64(a), b)  # x / 0 is inf, as in the Series case
        with np.errstate(all="ignore"):
            result = arithmetic(a, b)
        if op in _WRAPPING and _integral(a) and _integral(b):
            _check_overflow(op, _ints(a), _ints(b), _ints(result), position)
        return result
    return calculate


_WRAPPING = {"+", "-", "*"}
_INT64_MIN = np.int64(-(2**63))


def _integral(value: Any) -> bool:
    if isinstance(value, pd.Series):
        return value.dtype.kind in "iu"
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _ints(value: Any) -> Any:
    if isinstance(value, pd.Series):
        return value.to_numpy(dtype=np.int64, na_value=0)
    return np.int64(value)


def _check_overflow(op: str, a: Any, b: Any, result: Any, position: int) -> None:
    """Whether int64 ``a op b`` wrapped, for whole arrays at once (two's complement rules)."""
    with np.errstate(all="ignore"):
        if op == "+":
            wrapped = ((a ^ result) & (b ^ result)) < 0
        elif op == "-":
            wrapped = ((a ^ b) & (a ^ result)) < 0
        else:
            divisor = np.where(b == 0, 1, b)
            wrapped = (((b != 0) & (result // divisor != a))
                       | ((a == _INT64_MIN) & (b == -1)) | ((b == _INT64_MIN) & (a == -1)))
    count = int(np.count_nonzero(wrapped))
    if count:
        raise RuleError(f"integer overflow: {op!r} leaves the 64-bit range for {count} "
                        f"row(s)", "", position)


def _compare(compare: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """Compare, reading NULL as unknown, which a rule treats as False (SQL's three values)."""
    series = [side for side in (a, b) if isinstance(side, pd.Series)]
    if not series:
        return compare(a, b)
    present = series[0].notna()
    for side in series[1:]:
        present &= side.notna()
    if bool(present.all()):
        return compare(a, b)
    mask = present.to_numpy()
    result = np.zeros(len(mask), dtype=bool)
    a = a[present] if isinstance(a, pd.Series) else a
    b = b[present] if isinstance(b, pd.Series) else b
    result[mask] = np.asarray(compare(a, b), dtype=bool)
    return pd.Series(result, index=present.index)


def _as_bool(value: Any, frame: pd.DataFrame) -> Any:
    if isinstance(value, pd.Series):
        if value.dtype == bool:
            return value
        return value.astype(object).where(value.notna(), False).astype(bool)
    return pd.Series(bool(value), index=frame.index, dtype=bool)


def _string_call(value: Any, method: Callable[[str], str]) -> Any:
    if isinstance(value, pd.Series):
        return value.str.lower() if method is str.lower else value.str.upper()
    return method(value)
