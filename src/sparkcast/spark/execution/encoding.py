"""The engine's outputs as the operator's tagged output (``layout.py``), in the workers.

Outputs are checked against the output schema by Arrow, in bulk, and only when that fails row
by row, so one bad output becomes a dead letter instead of failing the batch; main rows stay
typed Arrow columns, side outputs and dead letters become JSON payloads (``payloads.py``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql.types import DataType, StringType, StructField, StructType

from sparkcast.core.output_check import Checked, CheckedOutput, OutputChecker
from sparkcast.core.records import DEAD_LETTERS, OutputRecord
from sparkcast.spark.execution.payloads import dead_letter_payload, payload, to_jsonable
from sparkcast.spark.layout import MAIN, METRICS, PAYLOAD, TAG, TS
from sparkcast.spark.plan import RuntimePlan, WorkerPlan


class OutputEncoder:
    """Turns engine outputs into the operator's output frame (``layout.py``): every output is
    checked by the core's ``OutputChecker`` (the harness's code), main rows stay typed Arrow
    columns, side outputs and dead letters become JSON payloads."""

    def __init__(self, output_schema: StructType,
                 side_schemas: Mapping[str, StructType | None],
                 *, encoded: frozenset[str] = frozenset(), fail: bool = False) -> None:
        self.fields = list(output_schema.fieldNames())
        self.main_schema = arrow_schema(output_schema)
        self.schema = pa.schema([pa.field(TAG, pa.string()), pa.field(TS, pa.int64()),
                                 pa.field(PAYLOAD, pa.string()), *self.main_schema])
        self.checker = OutputChecker(self.main_schema, {
            tag: None if s is None else arrow_schema(s) for tag, s in side_schemas.items()},
            encoded=encoded, fail=fail)
        #: rows per output and dead letters per callback encoded since ``take_counts``
        self.counts: dict[str, int] = {}
        self.letters: dict[str, int] = {}

    @classmethod
    def of(cls, plan: RuntimePlan | WorkerPlan) -> OutputEncoder:
        """The encoder of a plan's outputs (``on_error="fail"``: a bad output stops the run)."""
        return cls(plan.output_schema, plan.side_schemas, encoded=plan.encoded,
                   fail=plan.options.on_error == "fail")

    def encode(self, records: list[OutputRecord], subtask: int) -> list[pd.DataFrame]:
        """Output frames (none when there is nothing: Spark wants no frame, not an empty one)."""
        return [to_pandas(t) for t in self.encode_tables(records, subtask)]

    def encode_tables(self, records: list[OutputRecord], subtask: int) -> list[pa.Table]:
        """The same as Arrow tables, none of them empty."""
        checked = self.checker.check(records)
        self._count(checked)
        tables = [self._main_table(t, ts) for t, ts in _pairs(checked.outputs.get(None))]
        extra: list[tuple[str, int | None, str]] = []
        for tag_id, output in checked.outputs.items():
            if tag_id is not None:
                for table, timestamps in _pairs(output):
                    extra.extend((tag_id, t, json.dumps(to_jsonable(row), ensure_ascii=False))
                                 for row, t in zip(table.to_pylist(), timestamps, strict=True))
        extra.extend((tag_id, t, payload(v)) for tag_id, v, t in checked.untyped)
        extra.extend((DEAD_LETTERS.tag_id, t, dead_letter_payload(letter, subtask))
                     for letter, t in checked.letters)
        tables.append(self._extra_table(extra))
        return [t for t in tables if t is not None and t.num_rows]

    def metrics_table(self, report: dict[str, Any]) -> pa.Table:
        """The one ``_metrics`` row of a call (``layout.METRICS``)."""
        extra = self._extra_table([(METRICS, None, json.dumps(report, ensure_ascii=False))])
        assert extra is not None
        return extra

    def take_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Rows per output and dead letters per callback since the last call (the call's
        ``_metrics`` row reports them)."""
        counts, letters = self.counts, self.letters
        self.counts, self.letters = {}, {}
        return counts, letters

    def _count(self, checked: Checked) -> None:
        """In bulk: table sizes per output, a loop only over the (few) letters and untyped."""
        counts, letters = self.counts, self.letters
        for tag, output in checked.outputs.items():
            name = MAIN if tag is None else tag
            counts[name] = counts.get(name, 0) + sum(t.num_rows for t in output.tables)
        for tag_id, _, _ in checked.untyped:
            counts[tag_id] = counts.get(tag_id, 0) + 1
        for letter, _ in checked.letters:
            letters[letter.callback] = letters.get(letter.callback, 0) + 1
        if checked.letters:
            dead = DEAD_LETTERS.tag_id
            counts[dead] = counts.get(dead, 0) + len(checked.letters)

    def _main_table(self, body: pa.Table, timestamps: list[int | None]) -> pa.Table:
        count = body.num_rows
        return pa.Table.from_arrays(
            [pa.nulls(count, pa.string()), pa.array(timestamps, pa.int64()),
             pa.nulls(count, pa.string()), *body.columns],
            schema=self.schema)

    def _extra_table(self, extra: list[tuple[str, int | None, str]]) -> pa.Table | None:
        if not extra:
            return None
        tags, ts, payloads = zip(*extra, strict=True)
        count = len(extra)
        return pa.Table.from_arrays(
            [pa.array(tags, pa.string()), pa.array(ts, pa.int64()),
             pa.array(payloads, pa.string()),
             *[pa.nulls(count, f.type) for f in self.main_schema]], schema=self.schema)


def tagged_schema(output_schema: StructType, ts_type: DataType) -> StructType:
    """The tagged frame's Spark schema (``layout.py``): ``_tag``, ``_ts``, ``_payload``, then
    the main fields."""
    return StructType([StructField(TAG, StringType()), StructField(TS, ts_type),
                       StructField(PAYLOAD, StringType()), *output_schema.fields])


def arrow_schema(schema: StructType) -> pa.Schema:
    """A Spark schema's Arrow types as PySpark's conversion gives them (timestamps in UTC, as
    the core's DDL parser, ``core/ddl.py``, gives them to the harness)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:  # PySpark 4.2 and later
        return to_arrow_schema(schema, timezone="UTC")
    # PySpark 4.0 and 4.1: the same types under the older keyword
    return to_arrow_schema(schema, timestamp_utc=True)  # type: ignore[call-arg]


def _pairs(output: CheckedOutput | None) -> list[tuple[pa.Table, list[int | None]]]:
    if output is None:
        return []
    return list(zip(output.tables, output.timestamps, strict=True))


# ints as pandas' masked arrays: nulls stay nulls without boxing every value into an object
_NULLABLE_INTS = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(),
                  pa.int32(): pd.Int32Dtype(), pa.int64(): pd.Int64Dtype()}


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """Column by column: all-null columns (most rows are main rows, whose tag and payload are
    null) are made without Arrow's per-value boxing; strings stay object dtype, which PySpark's
    output conversion handles (pandas 3's Arrow-backed strings broke it, DESIGN.md §5).

    Floating columns stay Arrow-backed: PySpark converts a numpy-backed column with the mask
    ``series.isnull()``, which turns every NaN into null; an Arrow-backed one it passes as is,
    so NaN stays NaN (and null stays null)."""
    count = table.num_rows
    columns: dict[str, Any] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = column.type
        if column.null_count == count and (pa.types.is_string(kind) or pa.types.is_binary(kind)):
            columns[name] = np.full(count, None, dtype=object)
        elif pa.types.is_floating(kind):
            columns[name] = pd.Series(pd.arrays.ArrowExtensionArray(column.combine_chunks()))
        elif column.null_count == count and kind in _NULLABLE_INTS:
            columns[name] = pd.arrays.IntegerArray(np.zeros(count, dtype=kind.to_pandas_dtype()),
                                                   np.ones(count, dtype=bool))
        else:
            # maps as dicts: PySpark's conversion calls .items() on a map value (Arrow's default
            # list of pairs failed the micro-batch)
            series = pa.table({name: column}).to_pandas(types_mapper=_NULLABLE_INTS.get,
                                                        date_as_object=True,
                                                        maps_as_pydicts="strict")[name]
            columns[name] = series.astype(object) if pa.types.is_string(kind) else series
    return pd.DataFrame(columns)
