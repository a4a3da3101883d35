"""Where ``ProcessResult.write_stream(path)`` puts the outputs: one query, written one of two
ways that leave the same files (``outputs/files.py``: ``_output=<name>/`` folders, Spark's
``_spark_metadata`` commit log, the manifest), so ``read_output`` reads either the same way:

* Spark's own file sink over the tagged frame (the operator engine, the micro-batch engine in
  place): exactly-once, its ``_spark_metadata`` log commits each micro-batch's files atomically;
* the ``foreachBatch`` driver with the files writer (``batch_driver.py``, ``file_writer.py``:
  the micro-batch engine where its driver works per micro-batch), committing to the same log
  through ``state/commit_log.py``.

Before the query starts, the output folder is checked to be this checkpoint's (or new), the
plan is checked against the checkpoint's layout record and copied with its blob store, files no
committed micro-batch lists are removed (``guarded.py``), and the manifest and progress log are
set up.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.spark.layout import OUTPUT
from sparkcast.spark.observe.listener import PROGRESS_LOGS
from sparkcast.spark.observe.observation import next_name
from sparkcast.spark.outputs import batch_driver
from sparkcast.spark.outputs.file_writer import FilesWriter
from sparkcast.spark.outputs.files import (
    partitioned,
    progress_log_path,
    read_manifest,
    write_manifest,
)
from sparkcast.spark.outputs.guarded import guard_output, owner_record, remove_orphans
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.planning.checks import query_blob_store
from sparkcast.spark.planning.shapes import by_shape
from sparkcast.spark.planning.tagging import recorded_groups
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.commit_log import CommitLog, session_interval
from sparkcast.spark.state.compatibility import check_checkpoint


class TaggedOutputs(Protocol):
    """What a sink writes: a plan's tagged output frame (``ProcessResult`` is one)."""

    plan: RuntimePlan
    #: the name of its counts in the monitoring (``observe/observation.py``)
    observation: str | None

    @property
    def tagged(self) -> DataFrame: ...

    def with_plan(self, plan: RuntimePlan) -> TaggedOutputs: ...


def _spark_file_sink(outputs: TaggedOutputs, path: str, checkpoint_location: str, format: str,
                     trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """Spark's file sink over the tagged frame (the operator engine, the micro-batch engine in
    place): its ``_spark_metadata`` log commits each micro-batch's files atomically."""
    # the batch Spark's repartition added (rescale_in_place) wrote no output
    CommitLog(path, session_interval(outputs.plan.spark)).fill(
        checkpoint_files.committed_batches(checkpoint_location))
    frame = partitioned(outputs.tagged)
    return batch_driver.start_query(
        frame, frame.writeStream.format(format).partitionBy(OUTPUT).outputMode("append")
        .option("path", path), checkpoint_location, trigger, query_name)


def _files_writer(outputs: TaggedOutputs, path: str, checkpoint_location: str, format: str,
                  trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """The ``foreachBatch`` driver with the files writer, whose commit log is the same."""
    plan = outputs.plan
    assert plan.spark is not None
    if outputs.observation is None:  # the name its counts have in the monitoring
        outputs.observation = next_name(plan.spark)
    writer = FilesWriter(plan, path, format, outputs.observation, query_name)
    return batch_driver.start(plan, lambda: outputs.tagged, writer, checkpoint_location,
                              trigger, query_name)


def start_sink(outputs: TaggedOutputs, path: str, checkpoint_location: str, format: str,
               trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """Check the checkpoint, set up the files beside the output, start the plan's sink."""
    plan = outputs.plan
    guard_output(plan, path, checkpoint_location)
    outputs = prepare_checkpoint(outputs, checkpoint_location)
    write_files_manifest(outputs.plan, path, checkpoint_location)
    start = by_shape(outputs.plan, tagged=_spark_file_sink, per_batch=_files_writer)
    query = start(outputs, path, checkpoint_location, format, trigger, query_name)
    log = progress_log_path(path)
    if log is not None:
        PROGRESS_LOGS[str(query.id)] = log
    return query


def prepare_checkpoint(outputs: TaggedOutputs, checkpoint_location: str) -> TaggedOutputs:
    """Refuse a checkpoint the plan cannot restart from (before anything is written); the
    outputs over the query's own copy of the plan, with the checkpoint's grouping keys and the
    query's blob store (the result's plan is never changed)."""
    plan = recorded_groups(outputs.plan, checkpoint_location)
    check_checkpoint(plan, checkpoint_location)
    return outputs.with_plan(replace(plan, blob_store=query_blob_store(plan, checkpoint_location)))


def write_files_manifest(plan: RuntimePlan, path: str, checkpoint_location: str) -> None:
    """The side outputs' schemas beside the files under ``path``, for ``read_output``, and the
    checkpoint that writes them; files of micro-batches that were never committed removed
    first, and a new folder's log started at the checkpoint's next batch (call after
    ``guard_output``: the folder is this checkpoint's)."""
    remove_orphans(path)
    CommitLog(path, session_interval(plan.spark)).start(
        checkpoint_files.committed_batches(checkpoint_location))
    earlier = (read_manifest(path) or {}).get("side_outputs", {})
    write_manifest(path, plan.output_schema.simpleString(), {
        **earlier,  # a side output dropped on a restart keeps its schema for read_output
        HOLD_OVERFLOW.tag_id: None,
        **{tag: (None if schema is None else schema.simpleString())
           for tag, schema in plan.side_schemas.items()}}, owner_record(checkpoint_location))
