"""The streaming reader behind ``postgres_table``: PySpark's Python data source API (Spark 4.2+).

It runs in Spark's Python workers (the offsets on the driver's source runner, ``read`` in a
task), so it imports only psycopg, PySpark's data source classes and this module's helpers.

An offset is ``{"version": <the last version read, as PostgreSQL's text>}`` (``None`` before
the first row). A micro-batch reads the rows with ``start < version <= end`` in one task,
ordered by the version column and then the key columns, so a range always yields its rows in
the same order. Every value is fetched as PostgreSQL's text and parsed here into the field's
Spark type; a row that does not fit (a value that does not parse, a null in a non-nullable
field, a number out of range) keeps its place as a ``_corrupt_record`` row (the raw row and the
reason, as JSON), which sparkcast turns into a dead letter: it never stalls the stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkcast.errors import DatabaseError, MissingDependencyError
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN as CORRUPT

SOURCE_NAME = "sparkcast_postgres"
#: every session reads timestamps in UTC and dates as ISO, whatever the server's defaults
SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=iso_8601"

_INTEGRAL = {ByteType: 8, ShortType: 16, IntegerType: 32, LongType: 64}


def connect(conninfo: str) -> Any:
    """A read-only psycopg connection in UTC (``DatabaseError`` naming the cause if it fails)."""
    try:
        import psycopg
    except ImportError as missing:
        raise MissingDependencyError(
            "reading a PostgreSQL table needs psycopg: pip install 'sparkcast[postgres]'"
        ) from missing
    try:
        connection = psycopg.connect(conninfo, options=SESSION_OPTIONS, autocommit=True)
    except psycopg.Error as error:
        raise DatabaseError(f"cannot connect to PostgreSQL ({_safe(conninfo)}): {error}. Check "
                            "that the server runs and the connection string is right.") from error
    connection.read_only = True
    return connection


def _safe(conninfo: str) -> str:
    """The connection string without its password, for messages."""
    return " ".join(p for p in conninfo.split() if not p.lower().startswith("password="))


def quote(name: str) -> str:
    """A SQL identifier, quoted (a ``schema.table`` name is quoted part by part)."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


# ------------------------------------------------------------------------ text -> Spark value

class Unfit(str):
    """What a parser returns for a text that does not fit its type: the reason."""


def _integral(bits: int) -> Callable[[str], int | Unfit]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def parse(text: str) -> int | Unfit:
        value = int(text)
        if not low <= value <= high:
            return Unfit(f"{value} is out of range for a {bits}-bit integer")
        return value
    return parse


def _boolean(text: str) -> bool | Unfit:
    lowered = text.strip().lower()
    if lowered in ("t", "true", "1", "yes", "on"):
        return True
    if lowered in ("f", "false", "0", "no", "off"):
        return False
    return Unfit("not t/f, true/false, 1/0, yes/no or on/off")


def _decimal(kind: DecimalType) -> Callable[[str], Decimal | Unfit]:
    def parse(text: str) -> Decimal | Unfit:
        try:
            value = Decimal(text).quantize(Decimal(1).scaleb(-kind.scale))
        except InvalidOperation:
            return Unfit(f"more than {kind.precision} digits, or not a number")
        if len(value.as_tuple().digits) > kind.precision or not value.is_finite():
            return Unfit(f"more than {kind.precision} digits, or not finite")
        return value
    return parse


def _timestamp(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _timestamp_ntz(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=None)


def _binary(text: str) -> bytes | Unfit:
    if not text.startswith("\\x"):
        return Unfit("binary values must be bytea (hex output)")
    return bytes.fromhex(text[2:])


def parser(kind: DataType) -> Callable[[str], Any] | None:
    """How PostgreSQL's text of a value becomes the Spark type's Python value (None: a type
    this source does not read)."""
    for integral, bits in _INTEGRAL.items():
        if isinstance(kind, integral):
            return _integral(bits)
    simple: list[tuple[type, Callable[[str], Any]]] = [
        (StringType, str), (DoubleType, float), (FloatType, float), (BooleanType, _boolean),
        (DateType, date.fromisoformat), (TimestampNTZType, _timestamp_ntz),
        (TimestampType, _timestamp), (BinaryType, _binary)]
    for spark_type, parse in simple:
        if isinstance(kind, spark_type):
            return parse
    if isinstance(kind, DecimalType):
        return _decimal(kind)
    return None


def convert_row(texts: Sequence[str | None], schema: StructType,
                parsers: Sequence[Callable[[str], Any]]) -> tuple[tuple[Any, ...] | None, str]:
    """The row as the schema's values, or ``(None, reason)`` when it does not fit."""
    values: list[Any] = []
    for field, parse, text in zip(schema.fields, parsers, texts, strict=True):
        if text is None:
            if not field.nullable:
                return None, f"column {field.name} is null, but the schema says NOT NULL"
            values.append(None)
            continue
        try:
            value = parse(text)
        except (ValueError, OverflowError) as error:
            value = Unfit(str(error))
        if isinstance(value, Unfit):
            return None, (f"column {field.name}: {text[:200]!r} is not a "
                          f"{field.dataType.simpleString()} ({value})")
        values.append(value)
    return tuple(values), ""


# -------------------------------------------------------------------------------- reader

class _Range(InputPartition):
    def __init__(self, start: str | None, end: str) -> None:
        super().__init__((start, end))
        self.start = start
        self.end = end


class PostgresTableSource(DataSource):
    """``spark.readStream.format("sparkcast_postgres")``: options ``conninfo``, ``table``,
    ``version_column``, ``version_type``, ``columns`` and ``order`` (JSON lists), and
    ``max_rows_per_batch``. ``postgres_table`` fills them in; use that."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:  # postgres_table always passes the schema; this is the fallback
        raise DatabaseError("the sparkcast_postgres source needs a schema: use "
                            "sparkcast.sources.postgres_table, which infers it from the table")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PostgresTableReader(schema, dict(self.options))


class PostgresTableReader(DataSourceStreamReader):
    """Offsets from the version column; one ordered task per micro-batch."""

    def __init__(self, schema: StructType, options: dict[str, str]) -> None:
        self.schema = schema
        self.conninfo = options["conninfo"]
        self.table = options["table"]
        self.version = options["version_column"]
        self.version_type = options["version_type"]
        self.columns: list[str] = json.loads(options["columns"])
        self.order: list[str] = json.loads(options["order"])
        self.max_rows = int(options.get("max_rows_per_batch") or 0)

    def initialOffset(self) -> dict:
        return {"version": None}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        after, params = self._after(start.get("version"))
        source = f"{quote(self.table)} WHERE {quote(self.version)} IS NOT NULL{after}"
        if isinstance(limit, ReadMaxRows):
            source = (f"(SELECT {quote(self.version)} FROM {source} "
                      f"ORDER BY {quote(self.version)} LIMIT {int(limit.max_rows)}) AS head")
        sql = f"SELECT max({quote(self.version)})::text FROM {source}"
        latest = self._fetch(sql, params)[0][0]
        return {"version": latest} if latest is not None else start

    def reportLatestOffset(self) -> dict | None:
        latest = self._fetch(f"SELECT max({quote(self.version)})::text FROM "
                             f"{quote(self.table)}", [])[0][0]
        return {"version": latest}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if end.get("version") is None or start.get("version") == end["version"]:
            return []
        return [_Range(start.get("version"), end["version"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        after, params = self._after(partition.start)
        texts = ", ".join(f"{quote(c)}::text" for c in self.columns)
        order = ", ".join(f"{quote(c)} ASC NULLS FIRST" for c in self.order)
        sql = (f"SELECT {texts} FROM {quote(self.table)} WHERE {quote(self.version)} <= "
               f"%s::{self.version_type}{after} ORDER BY {order}")
        fields = StructType([f for f in self.schema.fields if f.name != CORRUPT])
        parsers = [parser(f.dataType) for f in fields.fields]
        assert all(p is not None for p in parsers)
        for texts_row in self._fetch(sql, [partition.end, *params]):
            values, reason = convert_row(texts_row, fields, parsers)  # type: ignore[arg-type]
            if values is not None:
                yield (*values, None)
            else:
                raw = {"table": self.table, "reason": reason,
                       "row": dict(zip(self.columns, texts_row, strict=True))}
                yield (*([None] * len(fields.fields)), json.dumps(raw, sort_keys=True))

    def _after(self, version: str | None) -> tuple[str, list[Any]]:
        if version is None:
            return "", []
        return f" AND {quote(self.version)} > %s::{self.version_type}", [version]

    def _fetch(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        with connect(self.conninfo) as connection:
            try:
                return list(connection.execute(sql, params).fetchall())
            except psycopg.Error as error:
                raise DatabaseError(f"reading {self.table} failed: {error}") from error
