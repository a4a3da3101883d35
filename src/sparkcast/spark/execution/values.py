"""Input rows as the function sees them, the same on every side and path, in the workers.

Input columns become Python lists once per column (``tolist`` is C-speed) and ``Row``s are built
from them (or one pandas frame for ``process_batch``); nested and temporal values are normalised.

PySpark hands the two inputs over by different routes, and they disagree: on the main side (Arrow)
a map arrives as a list of ``(key, value)`` pairs, a struct as a dict and a timestamp as an aware
UTC ``datetime``; on the broadcast side (pandas) an array arrives as a numpy array, a timestamp as
a naive ``pandas.Timestamp`` in the session's time zone; a static side (``collect``) gives
pyspark ``Row``s and naive local datetimes. The function should not care where a value came from,
so every route is normalised to what a user would write in a harness test:

=================  =============================================
Spark type         Python value
=================  =============================================
struct             ``sparkcast.Row`` with the struct's field names
map                ``dict``
array              ``list``
timestamp          ``datetime`` aware, in UTC
timestamp_ntz      naive ``datetime``
binary / decimal   ``bytes`` / ``decimal.Decimal`` (as delivered)
date               ``datetime.date`` (as delivered)
=================  =============================================

Columns of other types need nothing, and a schema without such columns costs nothing: the
converters are chosen once per plan and only nested or temporal columns are touched.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkcast.api.row import TupleRow, row_type
from sparkcast.core.keyed_process import CoElement, merged_by_time
from sparkcast.core.records import BroadcastElement

Convert = Callable[[Any], Any]


def converters(schema: Sequence[DataType], naive_zone: str | None) -> dict[int, Convert]:
    """Field index -> converter, for the fields that need one. ``naive_zone`` is the zone of naive
    timestamps on this route (the session's for pandas, ``None`` = the process's for collect)."""
    found = {}
    for index, kind in enumerate(schema):
        convert = converter(kind, naive_zone)
        if convert is not None:
            found[index] = convert
    return found


def converter(kind: DataType, naive_zone: str | None) -> Convert | None:
    if isinstance(kind, StructType):
        return _struct(kind, naive_zone)
    if isinstance(kind, MapType):
        key = converter(kind.keyType, naive_zone) or _same
        value = converter(kind.valueType, naive_zone) or _same
        return lambda v: None if v is None else {key(k): value(x) for k, x in _pairs(v)}
    if isinstance(kind, ArrayType):
        element = converter(kind.elementType, naive_zone)
        return lambda v: _list(v, element)
    if isinstance(kind, TimestampType):
        zone = datetime.UTC if naive_zone is None else ZoneInfo(naive_zone)
        local = naive_zone is None
        return lambda v: _instant(v, zone, local)
    if isinstance(kind, TimestampNTZType):
        return _naive
    return None


def column_values(series: pd.Series) -> list[Any]:
    """A column as Python values, nulls as None (pandas turns them into NaN/NaT)."""
    values = series.tolist()
    if series.dtype.kind in "Mm":
        return [None if v is pd.NaT else v for v in values]
    if series.dtype.kind == "f" or series.dtype == object or series.dtype.kind in "OSU":
        if series.isna().any():
            return [None if _is_null(v) else v for v in values]
    elif str(series.dtype) in ("str", "string"):
        if series.isna().any():
            return [None if _is_null(v) else v for v in values]
    return values


def main_input(table: pa.Table, first: int, fields: tuple[str, ...], vectorized: bool
               ) -> tuple[Any, list[int | None]]:
    """Main values from the columns ``first …`` of an Arrow table whose column 0 is ``_ts``:
    one pandas frame for ``process_batch``, else one Row per row."""
    timestamps = table.column(0).to_pylist()
    body = table.select(list(range(first, first + len(fields))))
    if vectorized:
        return body.rename_columns(list(fields)).to_pandas(), timestamps
    columns = [column.to_pylist() for column in body.columns]
    return list(map(row_type(fields)._make, zip(*columns, strict=True))), timestamps


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def rows_of(frame: pd.DataFrame, start: int, fields: tuple[str, ...],
            integral: frozenset[int]) -> list[TupleRow]:
    """Rows of ``fields`` from the frame's columns ``start …`` (positional, whatever their names).

    ``integral`` holds the field indexes of integer Spark types: a column with nulls arrives as
    float and is turned back into ints and None."""
    columns = []
    for i in range(len(fields)):
        values = column_values(frame.iloc[:, start + i])
        if i in integral and frame.iloc[:, start + i].dtype.kind == "f":
            values = [None if v is None else int(v) for v in values]
        columns.append(values)
    make = row_type(fields)._make
    return [make(values) for values in zip(*columns, strict=True)]


def main_values(table: Any, first: int, fields: tuple[str, ...], vectorized: bool,
                found: dict[int, Convert]) -> tuple[Any, list[int | None]]:
    """``main_input`` with nested and temporal fields converted."""
    values, timestamps = main_input(table, first, fields, vectorized)
    if vectorized:
        return convert_frame(values, found), timestamps
    return convert_rows(values, fields, found), timestamps


def key_values(table: pa.Table, first: int, positions: tuple[int, ...]) -> list[Any]:
    """The key of each row of ``table`` (fields from column ``first``): one value, or a tuple
    of the ``positions``' values."""
    columns = [table.column(first + p).to_pylist() for p in positions]
    return columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))


def co_elements(tables: tuple[pa.Table | None, pa.Table | None], fields: tuple[Any, Any],
                found: tuple[dict[int, Convert], dict[int, Convert]]
                ) -> tuple[list[Any], list[Any], list[Any]]:
    """A co-function's two keyed inputs (tables of ``_ts, _seq, <fields> …`` in source order;
    ``fields``: ``(names, key positions)`` of each) as one stream of ``CoElement``s with
    timestamps and keys, merged by event time without reordering either input
    (``keyed_process.merged_by_time``), the same on the operator and the micro-batch engine."""
    sides: list[list[tuple[int | None, tuple[CoElement, Any]]]] = []
    for number, (table, (names, positions), convert) in enumerate(
            zip(tables, fields, found, strict=True), start=1):
        if table is None or not table.num_rows:
            continue
        values, timestamps = main_values(table, 2, names, False, convert)
        sides.append(list(zip(timestamps, zip((CoElement(number, v) for v in values),
                                              key_values(table, 2, positions), strict=True),
                              strict=True)))
    merged = list(merged_by_time(sides))
    return ([element for _, (element, _) in merged], [ts for ts, _ in merged],
            [key for _, (_, key) in merged])


def convert_rows(rows: list[TupleRow], fields: tuple[str, ...], found: dict[int, Convert]
                 ) -> list[TupleRow]:
    """Rows with their converted fields (the input list when nothing needs converting)."""
    if not found or not rows:
        return rows
    make = row_type(fields)._make
    items = list(found.items())

    def fix(row: TupleRow) -> TupleRow:
        values = list(row)
        for index, convert in items:
            values[index] = convert(values[index])
        return make(values)
    return [fix(row) for row in rows]


def collect_elements(frame: DataFrame, fields: tuple[str, ...],
                     rows: list[Any] | None = None) -> list[BroadcastElement]:
    """Broadcast elements collected to the driver from ``frame`` = ``_ts`` (epoch millis, as
    Spark computed them), ``_order``, then the broadcast columns ``fields`` in order (``rows``:
    those already collected)."""
    rows = frame.collect() if rows is None else rows
    found = converters([f.dataType for f in frame.schema.fields[2:]], None)  # collect: local
    values = convert_rows([row_type(fields)._make(tuple(row)[2:]) for row in rows], fields, found)
    return [BroadcastElement(value, row[0], row[1])
            for value, row in zip(values, rows, strict=True)]


def collect_partitions(frame: DataFrame, partitions: list[int]) -> list[Any]:
    """The rows of ``partitions`` of ``frame`` by a JVM job, as ``DataFrame.collect`` gets them
    (pickled in the JVM, read from PySpark's local socket): ``SparkContext.runJob`` over
    ``frame.rdd`` would start a Python task per partition only to list its rows."""
    from pyspark.serializers import BatchedSerializer, CPickleSerializer
    from pyspark.util import _load_from_socket

    context = frame.sparkSession.sparkContext
    jvm: Any = context._jvm
    sock = jvm.PythonRDD.runJob(context._jsc.sc(), frame._jdf.javaToPython(), partitions)
    with _load_from_socket(sock, BatchedSerializer(CPickleSerializer())) as stream:
        return list(stream)


def convert_frame(frame: pd.DataFrame, found: dict[int, Convert]) -> pd.DataFrame:
    """The same for a ``process_batch`` frame: converted columns become object columns."""
    if not found or frame.empty:
        return frame
    frame = frame.copy()
    for index, convert in found.items():
        frame.isetitem(index, pd.Series([convert(v) for v in frame.iloc[:, index].tolist()],
                                        index=frame.index, dtype=object))
    return frame


def _struct(kind: StructType, naive_zone: str | None) -> Convert:
    names = tuple(kind.fieldNames())
    make = row_type(names)._make
    inner = [converter(f.dataType, naive_zone) or _same for f in kind.fields]

    def convert(value: Any) -> Any:
        if value is None:
            return None
        items = [value.get(n) for n in names] if isinstance(value, dict) else list(value)
        return make([c(x) for c, x in zip(inner, items, strict=True)])
    return convert


def _list(value: Any, element: Convert | None) -> list[Any] | None:
    if value is None:
        return None
    items = value.tolist() if isinstance(value, np.ndarray) else list(value)  # numpy scalars too
    return items if element is None else [element(x) for x in items]


def _pairs(value: Any) -> Any:
    return value.items() if isinstance(value, dict) else value


def _same(value: Any) -> Any:
    return value


def _instant(value: Any, zone: Any, local: bool) -> datetime.datetime | None:
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if value.tzinfo is None:
        value = value.astimezone() if local else value.replace(tzinfo=zone)
    return value.astimezone(datetime.UTC)


def _naive(value: Any) -> datetime.datetime | None:
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    return value.replace(tzinfo=None) if value.tzinfo is not None else value
