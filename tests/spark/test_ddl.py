"""The core's DDL parser (used by the harness) gives the Arrow types Spark's own parsing gives."""

from __future__ import annotations

import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from sparkcast.core.ddl import parse_ddl

pytestmark = pytest.mark.spark

DDLS = [
    "a string", "a int, b integer, c bigint, d long, e smallint, f short, g tinyint, h byte",
    "x double, y float, z real, b boolean, raw binary", "d date, t timestamp, n timestamp_ntz",
    "p decimal(10,2), q decimal, r decimal(38, 18), s dec(5), t numeric(7,3)",
    "tags array<string>", "m map<string,string>", "m map<string, array<double>>",
    "s struct<a:int,b:string>", "s struct<a int, b array<struct<c:long,d:map<int,date>>>>",
    "`weird name` string, `a``b` long", "a: string, b: long",
    "a string NOT NULL, b long COMMENT 'the b'", "USER STRING, Amount DOUBLE",
    "struct<a:int,b:string>", "  a   string ,b  long  ",
]


@pytest.mark.parametrize("ddl", DDLS)
def test_the_parser_agrees_with_spark(spark, ddl):
    expected = to_arrow_schema(spark.createDataFrame([], ddl).schema, timezone="UTC")
    assert parse_ddl(ddl) == expected
    assert parse_ddl(ddl).names == expected.names
