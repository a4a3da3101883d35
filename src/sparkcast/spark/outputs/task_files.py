"""The driver's half of writing outputs from the Python tasks (``execution/task_writer.py``).

``write_in_tasks`` runs the ``mapInArrow`` writers of one micro-batch as one Spark job (and
writes the driver's own tagged tables with the same code), and gathers what the tasks returned:
the files to commit and the counts the observation would have given (``observe.counted_row``),
so the progress, the listener and the WARN line see what they saw when Spark wrote the files.

``file_layout`` says whether the tasks can write a plan's files as Spark would: Parquet, a codec
pyarrow writes under Spark's name, and column types whose Parquet form Spark reads back as the
same type. Anything else (another format, an interval or a variant column) keeps Spark's writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from sparkcast.spark.execution.encoding import arrow_schema
from sparkcast.spark.execution.task_writer import (
    CODECS,
    WRITTEN,
    FileLayout,
    Runner,
    Tally,
    TaskWriter,
)
from sparkcast.spark.layout import TAG
from sparkcast.spark.observe.observation import counted_row

_ATOMIC = (T.StringType, T.BinaryType, T.BooleanType, T.ByteType, T.ShortType, T.IntegerType,
           T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.DateType, T.TimestampType,
           T.TimestampNTZType)


def file_layout(spark: SparkSession, tagged: T.StructType, format: str) -> FileLayout | None:
    """How the tasks write the tagged frame ``tagged``'s files; None when Spark must."""
    codec = (spark.conf.get("spark.sql.parquet.compression.codec") or "snappy").lower()
    data = T.StructType([f for f in tagged.fields if f.name != TAG])
    if format.lower() != "parquet" or codec not in CODECS or not _written_as_is(data):
        return None
    return FileLayout.of(arrow_schema(data), data.json(), spark.version, codec)


def _written_as_is(kind: T.DataType) -> bool:
    if isinstance(kind, T.StructType):
        return all(_written_as_is(f.dataType) for f in kind.fields)
    if isinstance(kind, T.ArrayType):
        return _written_as_is(kind.elementType)
    if isinstance(kind, T.MapType):
        return _written_as_is(kind.keyType) and _written_as_is(kind.valueType)
    return isinstance(kind, _ATOMIC) and not isinstance(kind, (T.CharType, T.VarcharType))


@dataclass
class Written:
    """What one micro-batch's writers wrote: files by path under the staging folder, and the
    counts for the batch's progress."""

    files: dict[str, str]  # path under the staging folder -> output
    rows: dict[str, int]  # rows per output
    tally: Tally

    def observed_row(self) -> dict[str, Any]:
        """The row the observation of the tagged frame would have given."""
        tally = self.tally
        return counted_row(self.rows, tally.letters, tally.first_letter, tally.reports)

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["summary"] is not None:
                more = Tally.decode(row["summary"])
                for callback, count in more.letters.items():
                    self.tally.letters[callback] = self.tally.letters.get(callback, 0) + count
                firsts = [f for f in (self.tally.first_letter, more.first_letter) if f is not None]
                self.tally.first_letter = min(firsts) if firsts else None
                self.tally.reports.extend(more.reports)
                continue
            self.files[row["file"]] = row["output"]
            self.rows[row["output"]] = self.rows.get(row["output"], 0) + row["rows"]


def write_in_tasks(frames: list[tuple[DataFrame, Runner | None]], tables: list[pa.Table],
                   staging: str, layout: FileLayout) -> Written:
    """Write each frame through its runner (None: the frame is tagged already) in its tasks, as
    one job, and ``tables`` (tagged) here; what was written."""
    written = Written({}, {}, Tally())
    jobs = [frame.mapInArrow(TaskWriter(runner, staging, layout), WRITTEN)
            for frame, runner in frames]
    if jobs:
        union = jobs[0]
        for more in jobs[1:]:
            union = union.union(more)
        written.add([row.asDict() for row in union.collect()])
    if tables:
        writer = TaskWriter(None, staging, layout)
        written.add(writer.write((b for t in tables for b in t.to_batches()), 0))
    return written
