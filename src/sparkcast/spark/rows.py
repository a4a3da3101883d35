"""Between pandas frames of the operator and the engine's Python values, in the workers.

Input columns become Python lists once per column (``tolist`` is C-speed) and rows are built
from them; outputs are checked against the output schema by Arrow, in bulk, and only when that
fails row by row, so one bad output becomes a dead letter instead of failing the batch.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sparkcast.api.row import Row, row_type
from sparkcast.core.records import DEAD_LETTERS, DeadLetter, OutputRecord


def row_from_spark(fields: tuple[str, ...], values: Sequence[Any]) -> Row:
    return row_type(fields)._make(values)


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
            integral: frozenset[int]) -> list[Row]:
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


def to_jsonable(value: Any, field_names: Sequence[str] | None = None) -> Any:
    """A JSON-ready form of an output value; tuples map onto the tag's field names."""
    if isinstance(value, Row) and value.__fields__:
        return {k: to_jsonable(v) for k, v in zip(value.__fields__, value, strict=True)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        if field_names is not None and len(value) == len(field_names):
            return {k: to_jsonable(v) for k, v in zip(field_names, value, strict=True)}
        return [to_jsonable(v) for v in value]
    return _json_scalar(value)


def _json_scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def payload(value: Any, field_names: Sequence[str] | None = None) -> str:
    return json.dumps(to_jsonable(value, field_names), ensure_ascii=False)


def dead_letter_payload(letter: DeadLetter, subtask: int) -> str:
    return json.dumps({
        "callback": letter.callback,
        "error": letter.error,
        "key": None if letter.key is None else payload(letter.key),
        "value": payload(letter.value),
        "timestamp": letter.timestamp,
        "subtask": subtask,
    }, ensure_ascii=False)


class OutputEncoder:
    """Turns engine outputs into the operator's output frame:
    ``_tag`` (None = main), ``_ts``, ``_payload`` (JSON of side outputs), then the main fields."""

    def __init__(self, output_schema: Any, side_fields: dict[str, list[str] | None]) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.fields = list(output_schema.fieldNames())
        self.main_schema = to_arrow_schema(output_schema)
        self.schema = pa.schema([pa.field("_tag", pa.string()), pa.field("_ts", pa.int64()),
                                 pa.field("_payload", pa.string()), *self.main_schema])
        self.side_fields = side_fields

    def encode(self, records: list[OutputRecord], subtask: int) -> list[pd.DataFrame]:
        """Output frames (none when there is nothing: Spark wants no frame, not an empty one)."""
        return [_to_pandas(t) for t in self.encode_tables(records, subtask)]

    def encode_tables(self, records: list[OutputRecord], subtask: int) -> list[pa.Table]:
        """The same as Arrow tables, none of them empty."""
        main: list[tuple[Any, ...]] = []
        main_ts: list[int | None] = []
        frames: list[pd.DataFrame] = []
        extra: list[tuple[str, int | None, str]] = []
        fields = len(self.fields)
        for record in records:
            tag, value, timestamp, batch = record
            if batch:
                self._batch(OutputRecord(*record), frames, extra, subtask)
            elif tag is None:
                if type(value) is tuple and len(value) == fields:  # the common case, fast
                    main.append(value)
                    main_ts.append(timestamp)
                else:
                    self._main_value(OutputRecord(*record), main, main_ts, extra, subtask)
            elif tag == DEAD_LETTERS:
                extra.append((DEAD_LETTERS.tag_id, timestamp, dead_letter_payload(value, subtask)))
            else:
                names = self.side_fields.get(tag.tag_id)
                extra.append((tag.tag_id, timestamp, payload(value, names)))
        tables = [self._main_table(main, main_ts, extra, subtask)]
        tables += [self._frame_table(f, extra, subtask) for f in frames]
        tables.append(self._extra_table(extra))
        return [t for t in tables if t is not None and t.num_rows]

    def _main_value(self, record: OutputRecord, main: list, main_ts: list, extra: list,
                    subtask: int) -> None:
        value = record.value
        if isinstance(value, dict):
            missing = [f for f in self.fields if f not in value]
            if missing or len(value) != len(self.fields):
                self._reject(record, f"output fields {sorted(value)} do not match the output "
                             f"schema {self.fields}", extra, subtask)
                return
            value = tuple(value[f] for f in self.fields)
        elif isinstance(value, Row) and value.__fields__:
            if set(value.__fields__) != set(self.fields):
                self._reject(record, f"output Row fields {list(value.__fields__)} do not match "
                             f"the output schema {self.fields}", extra, subtask)
                return
            value = tuple(value[f] for f in self.fields)
        elif not isinstance(value, (tuple, list)):
            if len(self.fields) != 1:
                self._reject(record, f"output {type(value).__name__} is not a tuple, dict or Row "
                             f"of the output schema {self.fields}", extra, subtask)
                return
            value = (value,)
        if len(value) != len(self.fields):
            self._reject(record, f"output has {len(value)} fields, the output schema "
                         f"{len(self.fields)} ({self.fields})", extra, subtask)
            return
        main.append(tuple(value))
        main_ts.append(record.timestamp)

    def _main_table(self, rows: list[tuple], ts: list, extra: list, subtask: int
                    ) -> pa.Table | None:
        if not rows:
            return None
        try:
            return self._table_of(rows, ts)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            good, good_ts = [], []
            for row, t in zip(rows, ts, strict=True):
                try:
                    self._table_of([row], [t])
                except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                        OverflowError) as exc:
                    letter = DeadLetter("output", f"output does not match the output schema: "
                                        f"{exc}", row, None, t)
                    extra.append((DEAD_LETTERS.tag_id, t, dead_letter_payload(letter, subtask)))
                    continue
                good.append(row)
                good_ts.append(t)
            return self._table_of(good, good_ts) if good else None

    def _table_of(self, rows: list[tuple], ts: list) -> pa.Table:
        columns: list[Any] = list(zip(*rows, strict=True)) if rows else [[] for _ in self.fields]
        arrays = [pa.array(list(c), type=f.type) for c, f in zip(columns, self.main_schema,
                                                                   strict=True)]
        count = len(rows)
        return pa.Table.from_arrays(
            [pa.nulls(count, pa.string()), pa.array(ts, pa.int64()),
             pa.nulls(count, pa.string()), *arrays], schema=self.schema)

    def _frame_table(self, frame: pd.DataFrame, extra: list, subtask: int) -> pa.Table | None:
        missing = [f for f in self.fields if f not in frame.columns]
        if missing:
            letter = DeadLetter("process_batch", f"returned frame lacks output columns {missing}",
                                f"<DataFrame of {len(frame)} rows, columns "
                                f"{list(frame.columns)}>", None, None)
            extra.append((DEAD_LETTERS.tag_id, None, dead_letter_payload(letter, subtask)))
            return None
        try:  # column-wise, at Arrow speed
            body = pa.Table.from_pandas(_nan_as_null(frame[self.fields]),
                                        schema=self.main_schema, preserve_index=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            rows = list(frame[self.fields].itertuples(index=False, name=None))
            return self._main_table(rows, [None] * len(rows), extra, subtask)
        count = body.num_rows
        return pa.Table.from_arrays(
            [pa.nulls(count, pa.string()), pa.nulls(count, pa.int64()),
             pa.nulls(count, pa.string()), *body.columns], schema=self.schema)

    def _batch(self, record: OutputRecord, frames: list, extra: list, subtask: int) -> None:
        if record.tag is None:
            frames.append(record.value)
            return
        names = self.side_fields.get(record.tag.tag_id)
        values = (record.value.to_dict("records") if isinstance(record.value, pd.DataFrame)
                  else list(record.value))
        extra.extend((record.tag.tag_id, None, payload(v, names)) for v in values)

    def _reject(self, record: OutputRecord, reason: str, extra: list, subtask: int) -> None:
        letter = DeadLetter("output", reason, record.value, None, record.timestamp)
        extra.append((DEAD_LETTERS.tag_id, record.timestamp, dead_letter_payload(letter, subtask)))

    def _extra_table(self, extra: list[tuple[str, int | None, str]]) -> pa.Table | None:
        if not extra:
            return None
        tags, ts, payloads = zip(*extra, strict=True)
        count = len(extra)
        return pa.Table.from_arrays(
            [pa.array(tags, pa.string()), pa.array(ts, pa.int64()),
             pa.array(payloads, pa.string()),
             *[pa.nulls(count, f.type) for f in self.main_schema]], schema=self.schema)


def _nan_as_null(frame: pd.DataFrame) -> pd.DataFrame:
    """pandas writes a missing value into an object column as NaN (a float), which Arrow refuses
    for a string column; in a DataFrame NaN means null, so make it one."""
    objects = [c for c in frame.columns if frame[c].dtype == object and frame[c].isna().any()]
    if not objects:
        return frame
    frame = frame.copy()
    for column in objects:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


# ints as pandas' masked arrays: nulls stay nulls without boxing every value into an object
_NULLABLE_INTS = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(),
                  pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """Column by column: all-null columns (most rows are main rows, whose tag and payload are
    null) are made without Arrow's per-value boxing; strings stay object dtype, which PySpark's
    output conversion handles (pandas 3's Arrow-backed strings broke it, DESIGN.md §5)."""
    count = table.num_rows
    columns: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if column.null_count == count and (pa.types.is_string(kind) or pa.types.is_binary(kind)):
            columns[name] = np.full(count, None, dtype=object)
        elif column.null_count == count and kind in _NULLABLE_INTS:
            columns[name] = pd.arrays.IntegerArray(np.zeros(count, dtype=kind.to_pandas_dtype()),
                                                   np.ones(count, dtype=bool))
        else:
            series = pa.table({name: column}).to_pandas(types_mapper=_NULLABLE_INTS.get,
                                                        date_as_object=True)[name]
            columns[name] = series.astype(object) if pa.types.is_string(kind) else series
    return pd.DataFrame(columns)
