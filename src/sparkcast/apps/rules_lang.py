"""A small rule language for fraud rules: parsed by hand, compiled to vectorized pandas.

Rules come from a stream, so they are data, never code: a hand-written lexer and
recursive-descent parser build a typed tree, which is checked against the known fields and
compiled into a closure over pandas Series. Nothing here calls ``eval``, ``exec`` or
``compile``.

Grammar (keywords are case-insensitive)::

    rule       := or_expr EOF
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := not_expr ("AND" not_expr)*
    not_expr   := "NOT" not_expr | comparison
    comparison := sum [ ("=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">=") sum
                      | ["NOT"] "IN" "(" literal ("," literal)* ")"
                      | ["NOT"] "BETWEEN" sum "AND" sum ]
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/" | "%") unary)*
    unary      := "-" unary | primary
    primary    := NUMBER | STRING | "TRUE" | "FALSE" | FIELD | FUNC "(" sum ")" | "(" or_expr ")"
    FUNC       := "ABS" | "LOWER" | "UPPER"

>>> rule = compile_rule("amount > 5000 AND ip_country != card_country", FIELDS)
>>> rule.evaluate(frame)          # a boolean pandas Series, one value per row
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from sparkcast.errors import SparkcastError

Kind = Literal["num", "str", "bool"]


class RuleError(SparkcastError, ValueError):
    """A rule that does not parse or does not type-check; ``position`` is a 0-based offset."""

    def __init__(self, message: str, text: str, position: int | None = None) -> None:
        self.message = message
        self.text = text
        self.position = position
        where = "" if position is None else f" at column {position + 1}"
        super().__init__(f"{message}{where}: {text!r}")


# ------------------------------------------------------------------------------------- lexer

@dataclass(frozen=True)
class Token:
    kind: str  # NUMBER STRING NAME OP KEYWORD EOF
    value: Any
    position: int


KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "TRUE", "FALSE"}
FUNCTIONS = {"ABS": "num", "LOWER": "str", "UPPER": "str"}
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<>|<=|>=|[-+*/%<>=(),])
""", re.VERBOSE)
_ESCAPE = re.compile(r"\\(.)")
MAX_RULE_LENGTH = 2_000


def tokenize(text: str) -> list[Token]:
    if len(text) > MAX_RULE_LENGTH:
        raise RuleError(f"rule is longer than {MAX_RULE_LENGTH} characters", text[:40] + "…")
    tokens: list[Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            bad = text[position]
            if bad in "'\"":
                raise RuleError("unterminated string", text, position)
            raise RuleError(f"unexpected character {bad!r}", text, position)
        kind = match.lastgroup
        raw = match.group()
        if kind == "number":
            tokens.append(Token("NUMBER", float(raw) if any(c in raw for c in ".eE") else int(raw),
                                position))
        elif kind == "string":
            tokens.append(Token("STRING", _ESCAPE.sub(r"\1", raw[1:-1]), position))
        elif kind == "name":
            upper = raw.upper()
            if upper in KEYWORDS or upper in FUNCTIONS:
                tokens.append(Token("KEYWORD", upper, position))
            else:
                tokens.append(Token("NAME", raw, position))
        elif kind == "op":
            tokens.append(Token("OP", "==" if raw == "=" else "!=" if raw == "<>" else raw,
                                position))
        position = match.end()
    tokens.append(Token("EOF", None, len(text)))
    return tokens


# -------------------------------------------------------------------------------------- tree

@dataclass(frozen=True)
class Literal_:
    value: Any


@dataclass(frozen=True)
class Field:
    name: str
    position: int


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "NOT"
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str  # arithmetic, comparison, AND, OR
    left: Node
    right: Node
    position: int


@dataclass(frozen=True)
class In:
    operand: Node
    values: tuple[Any, ...]
    negated: bool
    position: int


@dataclass(frozen=True)
class Call:
    function: str
    argument: Node
    position: int


Node = Literal_ | Field | Unary | Binary | In | Call
COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}


class Parser:
    """Recursive descent over the token list; one method per grammar rule."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    def parse(self) -> Node:
        if self.peek().kind == "EOF":
            raise RuleError("empty rule", self.text, 0)
        node = self.or_expr()
        token = self.peek()
        if token.kind != "EOF":
            raise RuleError(f"unexpected {_describe(token)}", self.text, token.position)
        return node

    # helpers
    def peek(self) -> Token:
        return self.tokens[self.index]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, kind: str, *values: Any) -> Token | None:
        token = self.peek()
        if token.kind == kind and (not values or token.value in values):
            return self.advance()
        return None

    def expect(self, kind: str, value: Any, what: str) -> Token:
        token = self.accept(kind, value)
        if token is None:
            found = self.peek()
            raise RuleError(f"expected {what}, found {_describe(found)}", self.text,
                            found.position)
        return token

    # grammar
    def or_expr(self) -> Node:
        node = self.and_expr()
        while (token := self.accept("KEYWORD", "OR")) is not None:
            node = Binary("OR", node, self.and_expr(), token.position)
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while (token := self.accept("KEYWORD", "AND")) is not None:
            node = Binary("AND", node, self.not_expr(), token.position)
        return node

    def not_expr(self) -> Node:
        if self.accept("KEYWORD", "NOT") is not None:
            return Unary("NOT", self.not_expr())
        return self.comparison()

    def comparison(self) -> Node:
        left = self.sum()
        token = self.peek()
        if token.kind == "OP" and token.value in COMPARISONS:
            self.advance()
            return Binary(token.value, left, self.sum(), token.position)
        negated = False
        if token.kind == "KEYWORD" and token.value == "NOT":
            following = self.tokens[self.index + 1]
            if following.kind == "KEYWORD" and following.value in ("IN", "BETWEEN"):
                self.advance()
                negated = True
        if self.accept("KEYWORD", "IN") is not None:
            return self.in_list(left, negated, token.position)
        if self.accept("KEYWORD", "BETWEEN") is not None:
            low = self.sum()
            self.expect("KEYWORD", "AND", "AND of BETWEEN … AND …")
            high = self.sum()
            node: Node = Binary("AND", Binary(">=", left, low, token.position),
                                Binary("<=", left, high, token.position), token.position)
            return Unary("NOT", node) if negated else node
        return left

    def in_list(self, left: Node, negated: bool, position: int) -> Node:
        self.expect("OP", "(", "'(' after IN")
        values = [self.literal()]
        while self.accept("OP", ",") is not None:
            values.append(self.literal())
        self.expect("OP", ")", "',' or ')' in the IN list")
        return In(left, tuple(values), negated, position)

    def literal(self) -> Any:
        negative = self.accept("OP", "-") is not None
        token = self.advance()
        if token.kind == "NUMBER":
            return -token.value if negative else token.value
        if not negative and token.kind == "STRING":
            return token.value
        if not negative and token.kind == "KEYWORD" and token.value in ("TRUE", "FALSE"):
            return token.value == "TRUE"
        raise RuleError(f"IN lists hold literals only, found {_describe(token)}", self.text,
                        token.position)

    def sum(self) -> Node:
        node = self.product()
        while (token := self.accept("OP", "+", "-")) is not None:
            node = Binary(token.value, node, self.product(), token.position)
        return node

    def product(self) -> Node:
        node = self.unary()
        while (token := self.accept("OP", "*", "/", "%")) is not None:
            node = Binary(token.value, node, self.unary(), token.position)
        return node

    def unary(self) -> Node:
        if self.accept("OP", "-") is not None:
            operand = self.unary()
            if isinstance(operand, Literal_) and isinstance(operand.value, (int, float)):
                return Literal_(-operand.value)
            return Unary("-", operand)
        return self.primary()

    def primary(self) -> Node:
        token = self.advance()
        if token.kind in ("NUMBER", "STRING"):
            return Literal_(token.value)
        if token.kind == "KEYWORD" and token.value in ("TRUE", "FALSE"):
            return Literal_(token.value == "TRUE")
        if token.kind == "KEYWORD" and token.value in FUNCTIONS:
            self.expect("OP", "(", f"'(' after {token.value}")
            argument = self.sum()
            self.expect("OP", ")", f"')' closing {token.value}(")
            return Call(token.value, argument, token.position)
        if token.kind == "NAME":
            return Field(token.value, token.position)
        if token.kind == "OP" and token.value == "(":
            node = self.or_expr()
            self.expect("OP", ")", "')'")
            return node
        raise RuleError(f"expected a value, found {_describe(token)}", self.text, token.position)


def _describe(token: Token) -> str:
    if token.kind == "EOF":
        return "end of rule"
    if token.kind == "STRING":
        return f"string {token.value!r}"
    return f"{token.value!r}"


def parse(text: str) -> Node:
    """The syntax tree of a rule; raises :class:`RuleError` with the column of the problem."""
    if not isinstance(text, str):
        raise RuleError("a rule is a string", repr(text))
    return Parser(text).parse()


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
        """One boolean per row; a comparison with a missing value is False (SQL's NULL)."""
        result = self._evaluate(frame)
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

    def calculate(frame: pd.DataFrame) -> Any:
        a, b = left(frame), right(frame)
        if not isinstance(a, pd.Series) and not isinstance(b, pd.Series):
            with np.errstate(all="ignore"):
                return arithmetic(np.float64(a), b)  # x / 0 is inf, as in the Series case
        with np.errstate(all="ignore"):
            return arithmetic(a, b)
    return calculate


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
