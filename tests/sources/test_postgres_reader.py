"""How a PostgreSQL row's text becomes a broadcast row, or a dead letter with the reason (the
Spark and PostgreSQL side is tests/sources/test_postgres_table.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkcast.sources.postgres_reader import convert_row, parser, quote  # noqa: E402

SCHEMA = StructType([
    StructField("i", IntegerType()), StructField("d", DecimalType(4, 2)),
    StructField("b", BooleanType()), StructField("raw", BinaryType()),
    StructField("n", LongType(), False), StructField("x", DoubleType()),
    StructField("s", StringType()), StructField("day", DateType()),
    StructField("at", TimestampType()), StructField("local", TimestampNTZType())])
PARSERS = [parser(f.dataType) for f in SCHEMA.fields]
GOOD = ["1", "12.5", "t", "\\x00ff", "5", "NaN", "text", "2024-05-06",
        "2024-05-06 07:08:09.5+00", "2024-05-06 07:08:09"]


def _with(**changes: str | None) -> list[str | None]:
    names = SCHEMA.fieldNames()
    return [changes.get(name, text) if name in changes else text
            for name, text in zip(names, GOOD, strict=True)]


def test_postgres_text_becomes_the_fields_values() -> None:
    values, reason = convert_row(GOOD, SCHEMA, PARSERS)  # type: ignore[arg-type]
    assert reason == ""
    assert values is not None
    assert values[:5] == (1, Decimal("12.50"), True, b"\x00\xff", 5)
    assert values[6:8] == ("text", date(2024, 5, 6))
    assert values[8] == datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)
    assert values[9] == datetime(2024, 5, 6, 7, 8, 9)


@pytest.mark.parametrize(("changes", "reason"), [
    ({"i": "99999999999"}, "column i: '99999999999' is not a int (99999999999 is out of range"),
    ({"i": "x"}, "column i: 'x' is not a int (invalid literal"),
    ({"d": "123.4"}, "column d: '123.4' is not a decimal(4,2) (more than 4 digits"),
    ({"b": "maybe"}, "column b: 'maybe' is not a boolean"),
    ({"raw": "zz"}, "column raw: 'zz' is not a binary (binary values must be bytea"),
    ({"n": None}, "column n is null, but the schema says NOT NULL"),
    ({"day": "yesterday"}, "column day: 'yesterday' is not a date"),
])
def test_a_row_that_does_not_fit_gives_the_reason(changes: dict, reason: str) -> None:
    values, why = convert_row(_with(**changes), SCHEMA, PARSERS)  # type: ignore[arg-type]
    assert values is None
    assert why.startswith(reason)


def test_a_null_in_a_nullable_field_is_none() -> None:
    values, _ = convert_row(_with(s=None), SCHEMA, PARSERS)  # type: ignore[arg-type]
    assert values is not None and values[6] is None


def test_nested_types_are_not_read_and_names_are_quoted() -> None:
    from pyspark.sql.types import ArrayType

    assert parser(ArrayType(StringType())) is None
    assert quote('public.we"ird') == '"public"."we""ird"'
