"""Where ``ProcessResult.write_stream`` puts the outputs, and how to read them back.

One query writes the operator's tagged frame, partitioned by output (``<path>/_output=main/``,
``_output=<tag>/``, ``_output=dead_letters/``; ``layout.py``), through an ``OutputSink``: Spark's
own file sink (exactly-once: its ``_spark_metadata`` log commits each micro-batch's files
atomically; readers see only committed files; one Spark job per micro-batch), or, on the
streamed path, ``foreachBatch`` with the same commit log written by ``commit_log.py``. A
manifest beside the data records the side outputs' schemas, so ``read_output`` returns typed
columns, and refuses an output it cannot type. The subtasks' ``_metrics`` rows land under
``_output=_metrics``, and the driver's listener appends each micro-batch's merged record to
``<path>/_sparkcast_progress.jsonl`` (for ``sparkcast view`` and ``sparkcast report``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.api.output_tag import OutputTag
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import PipelineError
from sparkcast.spark.checks import query_blob_store
from sparkcast.spark.compatibility import check_checkpoint
from sparkcast.spark.layout import (
    DEAD_LETTER_SCHEMA,
    MAIN,
    OUTPUT,
    PAYLOAD,
    RESERVED,
    TAG,
    progress_log_path,
    read_manifest,
    write_manifest,
)
from sparkcast.spark.observe import PROGRESS_LOGS, next_name

if TYPE_CHECKING:
    from sparkcast.spark.plan import RuntimePlan
    from sparkcast.spark.result import ProcessResult


class OutputSink(Protocol):
    """How ``write_stream`` writes the tagged outputs under ``path`` as one query. Both sinks
    leave the same files (``_output=<name>/`` folders, Spark's ``_spark_metadata`` commit log,
    the manifest), so ``read_output`` reads either the same way."""

    def start(self, result: ProcessResult, path: str, checkpoint_location: str, format: str,
              trigger: dict[str, Any] | None, query_name: str | None) -> Any: ...


class FileSink:
    """Spark's file sink over the tagged DataFrame (the stateless and operator paths)."""

    def start(self, result: ProcessResult, path: str, checkpoint_location: str, format: str,
              trigger: dict[str, Any] | None, query_name: str | None) -> Any:
        stream = (partitioned(result.tagged).writeStream.format(format).partitionBy(OUTPUT)
                  .outputMode("append").option("path", path)
                  .option("checkpointLocation", checkpoint_location))
        if query_name:
            stream = stream.queryName(query_name)
        if trigger:
            stream = stream.trigger(**trigger)
        return stream.start()


class BatchSink:
    """``foreachBatch`` with batch-id-idempotent commits (the streamed path, streamed.py)."""

    def start(self, result: ProcessResult, path: str, checkpoint_location: str, format: str,
              trigger: dict[str, Any] | None, query_name: str | None) -> Any:
        from sparkcast.spark import streamed

        spark = result.plan.spark
        assert spark is not None
        if result.observation is None:  # the name its counts have in the monitoring
            result.observation = next_name(spark)
        writer = streamed.StreamedWriter(result.plan, path, checkpoint_location, format,
                                         result.observation, query_name)
        return streamed.start(result.plan, writer, checkpoint_location, trigger, query_name)


def sink_for(plan: RuntimePlan) -> OutputSink:
    return BatchSink() if plan.streamed else FileSink()


def start_sink(result: ProcessResult, path: str, checkpoint_location: str, format: str,
               trigger: dict[str, Any] | None, query_name: str | None) -> Any:
    check_checkpoint(result.plan, checkpoint_location)  # refuses before anything is written
    plan = result.plan
    plan.blob_store = query_blob_store(plan, checkpoint_location)
    result.reset()
    earlier = (read_manifest(path) or {}).get("side_outputs", {})
    write_manifest(path, plan.output_schema.simpleString(), {
        **earlier,  # a side output dropped on a restart keeps its schema for read_output
        HOLD_OVERFLOW.tag_id: None,
        **{tag: (None if schema is None else schema.simpleString())
           for tag, schema in plan.side_schemas.items()}})
    query = sink_for(plan).start(result, path, checkpoint_location, format, trigger,
                                 query_name)
    log = progress_log_path(path)
    if log is not None:
        PROGRESS_LOGS[str(query.id)] = log
    return query


def partitioned(tagged: DataFrame) -> DataFrame:
    """The tagged frame as written: ``_tag`` replaced by the partition column ``_output``."""
    return tagged.withColumn(OUTPUT, F.coalesce(F.col(TAG), F.lit(MAIN))).drop(TAG)


def read_output(spark: Any, path: str, output: str | OutputTag = "main",
                format: str = "parquet") -> DataFrame:
    """Read one output written by ``write_stream``: ``"main"``, ``"dead_letters"``, a side
    output's tag or its name, typed by the tag's schema (a tag declared without one gives a
    JSON ``value`` column); an output that was never declared is refused."""
    name = output.tag_id if isinstance(output, OutputTag) else output
    rows = spark.read.format(format).load(path).filter(F.col(OUTPUT) == F.lit(name))
    if name == MAIN:
        return rows.select(*[F.col(f"`{c}`") for c in rows.columns if c not in RESERVED])
    schema = DEAD_LETTER_SCHEMA if name == DEAD_LETTERS.tag_id else _side_schema(path, output)
    if schema is None:
        return rows.select(F.col(PAYLOAD).alias("value"))
    return rows.select(F.from_json(PAYLOAD, schema).alias("v")).select("v.*")


def _side_schema(path: str, output: str | OutputTag) -> str | None:
    if isinstance(output, OutputTag) and output.schema is not None:
        return output.schema
    name = output.tag_id if isinstance(output, OutputTag) else output
    manifest = read_manifest(path) or {"side_outputs": {}}
    known: dict[str, str | None] = manifest["side_outputs"]
    if name not in known:
        raise PipelineError(
            f"read_output cannot type output {name!r}: {path} records the outputs "
            f"{['main', 'dead_letters', *sorted(known)]}; pass an OutputTag with its schema "
            f"(OutputTag({name!r}, '<field type, ...>')), or declare it in side_outputs=[...]")
    return known[name]
