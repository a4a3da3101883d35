"""Spark DDL schema strings (``"user string, amount double"``) as Arrow schemas, without Spark.

The harness checks outputs against ``output_schema=`` and side-output schemas with the very code
Spark's workers use (``core/output_check.py``), so it needs the schema's Arrow types without a
Spark session. The types are those PySpark's ``to_arrow_schema`` gives (with the session time
zone UTC for ``timestamp``); a Spark test compares the two over many DDL strings.

>>> parse_ddl("user string, tags array<string>, price decimal(10,2)").names
['user', 'tags', 'price']
"""

from __future__ import annotations

import re

import pyarrow as pa

from sparkcast.errors import PipelineError

_SIMPLE = {
    "string": pa.string(), "varchar": pa.string(), "char": pa.string(),
    "int": pa.int32(), "integer": pa.int32(),
    "bigint": pa.int64(), "long": pa.int64(),
    "smallint": pa.int16(), "short": pa.int16(),
    "tinyint": pa.int8(), "byte": pa.int8(),
    "double": pa.float64(), "float": pa.float32(), "real": pa.float32(),
    "boolean": pa.bool_(), "binary": pa.binary(), "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"), "void": pa.null(),
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|-?\d+|[<>(),:])")


def parse_ddl(ddl: str) -> pa.Schema:
    """A DDL field list (or ``struct<...>``) as an Arrow schema; ``PipelineError`` if invalid."""
    parser = _Parser(ddl)
    try:
        fields = parser.schema()
    except (IndexError, ValueError) as exc:
        raise PipelineError(f"{ddl!r} is not a valid DDL schema: {exc}") from None
    if not fields:
        raise PipelineError(f"{ddl!r} is not a valid DDL schema: it has no field")
    return pa.schema(fields)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.tokens[self.at] if self.at < len(self.tokens) else ""
        if expected is not None and token.lower() != expected:
            raise PipelineError(f"expected {expected!r} at {token or 'the end'!r}")
        if not token:
            raise PipelineError("unexpected end")
        self.at += 1
        return token

    def schema(self) -> list[pa.Field]:
        if self.peek().lower() == "struct" and self.tokens[self.at + 1:self.at + 2] == ["<"]:
            kind = self.type()
            if self.peek():
                raise PipelineError(f"unexpected {self.peek()!r}")
            return list(kind)
        fields = [self.field()]
        while self.peek() == ",":
            self.take(",")
            fields.append(self.field())
        if self.peek():
            raise PipelineError(f"unexpected {self.peek()!r}")
        return fields

    def field(self) -> pa.Field:
        name = _name(self.take())
        if self.peek() == ":":
            self.take(":")
        kind = self.type()
        nullable = True
        if self.peek().lower() == "not":
            self.take()
            self.take("null")
            nullable = False
        if self.peek().lower() == "comment":
            self.take()
            self.take()
        return pa.field(name, kind, nullable=nullable)

    def type(self) -> pa.DataType:
        word = self.take().lower()
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return pa.list_(pa.field("element", element))
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return pa.map_(key, value)
        if word == "struct":
            return self.struct()
        if word in ("decimal", "dec", "numeric"):
            return self.decimal()
        if word in ("char", "varchar"):
            self.take("(")
            int(self.take())
            self.take(")")
        if word not in _SIMPLE:
            raise PipelineError(f"unknown or unsupported type {word!r}")
        return _SIMPLE[word]

    def struct(self) -> pa.DataType:
        self.take("<")
        fields: list[pa.Field] = []
        while self.peek() != ">":
            if fields:
                self.take(",")
            fields.append(self.field())
        self.take(">")
        return pa.struct(fields)

    def decimal(self) -> pa.DataType:
        if self.peek() != "(":
            return pa.decimal128(10, 0)
        self.take("(")
        precision = int(self.take())
        scale = 0
        if self.peek() == ",":
            self.take(",")
            scale = int(self.take())
        self.take(")")
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise PipelineError(f"decimal({precision},{scale}) is out of Spark's range")
        return pa.decimal128(precision, scale)


def _tokens(text: str) -> list[str]:
    tokens, at = [], 0
    text = text.rstrip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise PipelineError(f"{text!r} is not a valid DDL schema: unexpected "
                                f"{text[at:].strip()[:20]!r}")
        tokens.append(match.group(1))
        at = match.end()
    return tokens


def _name(token: str) -> str:
    if token.startswith("`"):
        return token[1:-1].replace("``", "`")
    if not (token[0].isalpha() or token[0] == "_"):
        raise PipelineError(f"expected a field name at {token!r}")
    return token
