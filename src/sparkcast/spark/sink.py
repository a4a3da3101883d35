"""``foreachBatch`` writer behind ``ProcessResult.write_stream``: all outputs, one query.

Each output goes to ``<path>/<name>/batch_id=<id>/`` with overwrite, so a micro-batch replayed
after a failure replaces its own files: no duplicates, no loss, readable as one partitioned table
(``spark.read.parquet(f"{path}/main")``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.core.engine import DEAD_LETTERS

if TYPE_CHECKING:
    from sparkcast.spark.result import ProcessResult


class BatchWriter:
    def __init__(self, result: ProcessResult, path: str, format: str) -> None:
        self.result = result
        self.path = path.rstrip("/")
        self.format = format
        self.fields = result.plan.output_schema.fieldNames()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist()
        try:
            tags = [r["_tag"] for r in batch.select("_tag").distinct().collect()]
            for tag in tags:
                self._write(self._output(batch, tag), "main" if tag is None else tag, batch_id)
        finally:
            batch.unpersist()

    def _output(self, batch: DataFrame, tag: str | None) -> DataFrame:
        if tag is None:
            return batch.filter(F.col("_tag").isNull()).select(
                *[F.col(f"`{f}`") for f in self.fields])
        rows = batch.filter(F.col("_tag") == F.lit(tag))
        if tag == DEAD_LETTERS.tag_id:
            from sparkcast.spark.result import DEAD_LETTER_SCHEMA

            return rows.select(F.from_json("_payload", DEAD_LETTER_SCHEMA).alias("v")).select(
                "v.*")
        schema = self.result.plan.side_schemas.get(tag)
        if schema is None:
            return rows.select(F.col("_payload").alias("value"))
        return rows.select(F.from_json("_payload", schema).alias("v")).select("v.*")

    def _write(self, frame: DataFrame, name: str, batch_id: int) -> None:
        target = f"{self.path}/{name}/batch_id={batch_id}"
        frame.write.mode("overwrite").format(self.format).save(target)


def read_output(spark: Any, path: str, name: str = "main", format: str = "parquet") -> DataFrame:
    """Read back one output written by ``write_stream`` (with its ``batch_id`` column)."""
    return spark.read.format(format).load(f"{path.rstrip('/')}/{name}")
