"""A user's own sink (``Sink``) and the table sinks of ``write_stream(sinks=...)``: ``table``
appends to any Spark batch format or catalog table, at least once, each row with a stable id a
reader deduplicates on; ``delta`` appends exactly once through Delta's idempotent writes. The
micro-batch's writer (``sink_writer.py``) calls them after Kafka's parts are in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.typed import missing_columns

#: the stable row id that ``table`` sinks add (at-least-once targets deduplicate on it)
ROW_BATCH, ROW_ID = "_sparkcast_batch", "_sparkcast_row"


@runtime_checkable
class Sink(Protocol):
    """A user's own sink: ``write`` is called once or more per micro-batch and output (a replay
    after a failure calls it again with the same rows: at-least-once; deduplicate on
    ``batch_id``). An optional ``check(output, schema, spark)`` runs before the query starts and
    raises to refuse it."""

    def write(self, frame: DataFrame, output: str, batch_id: int) -> None: ...


@dataclass(frozen=True)
class TableSink:
    """``table(name, format, options)``: any Spark batch format or catalog table, appended to;
    at-least-once with a row id (``sinks.delta`` is Delta's exactly-once sink)."""

    name: str | None = None
    format: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    row_id: bool = True

    def describe(self) -> str:
        return f"table({self.name!r}, format={self.format!r})"

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        if self.name is None and not self.options.get("path") and self.format != "noop":
            raise SinkError(f"output {output!r}, sink {self.describe()}: no table name and no "
                            "options['path']; give one of them")
        if self.name is None or self.format not in (None, "parquet", "delta", "orc"):
            return
        if not spark.catalog.tableExists(self.name):
            return  # the first append creates it
        missing = missing_columns(schema, spark.table(self.name).columns)
        if missing:
            raise SinkError(f"output {output!r}, sink {self.describe()}: the table has no "
                            f"column {missing}; add them or write the output elsewhere")

    def write(self, frame: DataFrame, output: str, batch_id: int) -> None:
        if self.row_id:
            frame = frame.withColumn(ROW_BATCH, F.lit(batch_id)).withColumn(
                ROW_ID, F.monotonically_increasing_id())
        writer = frame.write.mode("append")
        if self.format:
            writer = writer.format(self.format)
        _save(writer.options(**self.options), self.name)


@dataclass(frozen=True)
class DeltaSink:
    """``delta(path=..., table=...)``: appended exactly once by Delta's idempotent writes: each
    micro-batch's commit carries ``txnAppId`` (query and output) and ``txnVersion`` (batch), and
    Delta skips a write whose version its log already holds for that app id (a replay)."""

    path: str | None = None
    table: str | None = None
    options: dict[str, str] = field(default_factory=dict, hash=False)

    def describe(self) -> str:
        return f"delta({self.table or self.path!r})"

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        where = f"output {output!r}, sink {self.describe()}"
        if (self.path is None) == (self.table is None):
            raise SinkError(f"{where}: give exactly one of path and table")
        if self.table is not None and spark.catalog.tableExists(self.table):
            columns = spark.table(self.table).columns
        elif self.path is not None and _is_delta(spark, self.path):
            columns = spark.read.format("delta").load(self.path).columns
        else:
            return  # the first write creates it
        missing = missing_columns(schema, columns)
        if missing:
            raise SinkError(f"{where}: the Delta table has no column {missing}; add them or "
                            "write the output elsewhere")

    def write(self, frame: DataFrame, output: str, batch_id: int, query_id: str) -> None:
        writer = frame.write.format("delta").mode("append").options(
            **{**self.options, "txnAppId": f"{query_id}-{output}", "txnVersion": str(batch_id)})
        if self.table is None:
            writer = writer.option("path", self.path)
        _save(writer, self.table)


def _save(writer: Any, table: str | None) -> None:
    if table is not None:
        writer.saveAsTable(table)
    else:
        writer.save()


def _is_delta(spark: Any, path: str) -> bool:
    jvm = spark._jvm
    return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, path))
