"""Rule text to a typed tree: a hand-written lexer and recursive-descent parser.

Rules come from a stream, so they are data, never code: this module only turns text into a typed
tree (:func:`parse`), with errors that name the column; :mod:`sparkcast.apps.rules.compiler`
type-checks and compiles the tree.

Grammar (keywords are case-insensitive; one :class:`Parser` method per rule)::

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sparkcast.errors import RuleError

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
#: nesting (parentheses, NOT, unary minus, functions) and tree depth (chains such as a+a+...+a):
#: the parser, checker and compiler recurse, and a rule from a stream must not reach Python's
#: recursion limit (a RecursionError escaped every rejection path)
MAX_DEPTH = 50
INT64_MAX = 2**63 - 1


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
            number = float(raw) if any(c in raw for c in ".eE") else int(raw)
            if isinstance(number, int) and number > INT64_MAX:
                raise RuleError(f"integer {raw} is out of range (at most {INT64_MAX}); write "
                                f"{raw}.0 for a floating-point number", text, position)
            tokens.append(Token("NUMBER", number, position))
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
        self.depth = 0

    def nested(self, position: int) -> None:
        """One level deeper (left by ``unnest``); refuses rules nested beyond MAX_DEPTH."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise RuleError(f"rule is nested more than {MAX_DEPTH} levels deep", self.text,
                            position)

    def unnest(self) -> None:
        self.depth -= 1

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
        if (token := self.accept("KEYWORD", "NOT")) is not None:
            self.nested(token.position)
            node = Unary("NOT", self.not_expr())
            self.unnest()
            return node
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
        if (token := self.accept("OP", "-")) is not None:
            self.nested(token.position)
            operand = self.unary()
            self.unnest()
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
            self.nested(token.position)
            argument = self.sum()
            self.unnest()
            self.expect("OP", ")", f"')' closing {token.value}(")
            return Call(token.value, argument, token.position)
        if token.kind == "NAME":
            return Field(token.value, token.position)
        if token.kind == "OP" and token.value == "(":
            self.nested(token.position)
            node = self.or_expr()
            self.unnest()
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
    tree = Parser(text).parse()
    if depth(tree) > MAX_DEPTH:
        raise RuleError(f"rule is nested more than {MAX_DEPTH} levels deep (split long chains "
                        "of operators with parentheses, or into several rules)", text)
    return tree


def depth(tree: Node) -> int:
    """The tree's depth, without recursion (a chain of 1,000 '+' is 1,000 deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in _children(node))
    return deepest


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, (Unary, In)):
        return (node.operand,)
    if isinstance(node, Call):
        return (node.argument,)
    return ()
