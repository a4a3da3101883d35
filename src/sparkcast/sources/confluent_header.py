"""Confluent's wire-format header on a Kafka value (the column ``_v``), read in the JVM: the
schema id, and the reasons a record of either Confluent-framed format (``Avro``, ``Protobuf``)
is refused for its header, worded once for both."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from sparkcast.api.formats import HEADER_SIZE, MAGIC_BYTE


def schema_id() -> Column:
    """The header's schema id (bytes 2..5, big-endian) of the value ``_v``."""
    return F.conv(F.hex(F.substring(F.col("_v"), 2, 4)), 16, 10).cast("long")


def header_reasons() -> list[tuple[Column, Column]]:
    """A value too short for the header, or without its magic byte."""
    value = F.col("_v")
    magic = F.hex(F.substring(value, 1, 1))
    return [
        (F.length(value) < HEADER_SIZE,
         F.concat(F.lit("the value has "), F.length(value).cast("string"),
                  F.lit(f" bytes, fewer than the Confluent wire format's {HEADER_SIZE}-"
                        "byte header"))),
        (magic != F.lit(f"{MAGIC_BYTE:02X}"),
         F.concat(F.lit("the first byte is 0x"), magic,
                  F.lit(f", not the Confluent wire format's magic byte 0x{MAGIC_BYTE:02X}")))]


def late(known: Sequence[int]) -> Column:
    """The value ``_v`` where its header is whole and its id is none of ``known`` (the ids the
    plan knows), else null: what the workers look up (``kafka_values.py``,
    ``kafka_protobuf.py``), so no other record's value reaches Python."""
    framed = ~functools.reduce(lambda one, other: one | other, [c for c, _ in header_reasons()])
    unknown = ~schema_id().isin(list(known)) if known else F.lit(True)
    return F.when(framed & unknown, F.col("_v"))


def other_id(expected: int) -> tuple[Column, Column]:
    """A record whose id is not ``expected``, the one every record must carry."""
    return (schema_id() != F.lit(expected),
            F.concat(F.lit("schema id "), schema_id().cast("string"),
                     F.lit(f", expected {expected}")))


def unknown_id(known: Sequence[int], among: str) -> tuple[Column, Column]:
    """A record whose id is none of ``known``, the ids ``among`` named when the query was
    planned (Spark fixes a query's expressions when it starts: a restart plans a new one in)."""
    where = (f": not among the {among} when the query started (ids "
             f"{', '.join(map(str, sorted(known))) or 'none'}); a schema registered since is "
             "read after a restart")
    return (~schema_id().isin(list(known)) if known else F.lit(True),
            F.concat(F.lit("schema id "), schema_id().cast("string"), F.lit(where)))
