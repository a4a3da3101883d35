"""The streamed path's ``foreachBatch`` function: each micro-batch's outputs written once.

``execution/streamed.py`` builds a micro-batch's tagged frame (broadcast applied once on the
driver, main rows in one ``mapInArrow``); this writes it as micro-batch N through the
batch-id-idempotent commit log (``state/commit_log.py``): a replayed batch is skipped once
committed, else rewritten the same way. Dead letters and the other counts are observed on that
write (an ``Observation``: Spark does not put a ``foreachBatch``'s own jobs into
``observedMetrics``) and handed to the listener, which merges them into the batch's progress.
"""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.monitoring.progress import APPLIED_ONCE
from sparkcast.spark.execution.batch_sides import query_of, side_partitions
from sparkcast.spark.execution.partitioned import micro_batch_outputs
from sparkcast.spark.execution.task_writer import FileLayout, Runner
from sparkcast.spark.layout import BROADCAST_SIDE
from sparkcast.spark.observe.listener import listen, log, report_streamed, warning
from sparkcast.spark.observe.observation import observed, observed_row
from sparkcast.spark.outputs.files import partitioned
from sparkcast.spark.outputs.task_files import file_layout, write_in_tasks
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import checkpoint_files, keyed_store, storage
from sparkcast.spark.state.commit_log import CommitLog


class StreamedWriter:
    """The ``foreachBatch`` function of ``write_stream`` on the streamed path."""

    def __init__(self, plan: RuntimePlan, path: str, checkpoint_location: str, format: str,
                 observation: str, query_name: str | None = None) -> None:
        spark = plan.spark
        assert spark is not None
        self.plan = plan
        self.format = format
        self.observation = observation
        self.query_name = query_name
        interval = int(spark.conf.get("spark.sql.streaming.fileSink.log.compactInterval")
                       or "10")
        self.log = CommitLog(path, interval)
        self.outputs = micro_batch_outputs(plan, checkpoint_location)
        #: how the tasks write the files (None: Spark writes them), known at the first batch
        self.layout: FileLayout | None = None
        self.layout_known = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """``batch`` arrives as an opaque ``LogicalRDD``: each action recomputes it from the
        sources. The broadcast rows are read from the broadcast source's partitions alone
        (``batch_sides``), and the main rows once, by the write (the query's ``numInputRows``
        then counts each broadcast row twice). Where the partitions cannot be told apart, or
        malformed rows make the write read the batch twice, the batch is persisted instead,
        so the main rows are read (and counted) once."""
        if self.log.committed(batch_id):
            return
        assert self.plan.spark is not None
        query = query_of(batch, self.plan.spark)
        sides = None if self.outputs.corrupt else side_partitions(batch, query)
        if sides is not None:
            self._write(batch, batch_id, query, sides.get(BROADCAST_SIDE, []))
            return
        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._write(batch, batch_id, query, None)
        finally:
            batch.unpersist()

    def _write(self, batch: DataFrame, batch_id: int, query: StreamingQuery | None,
               partitions: list[int] | None) -> None:
        """The tasks write the files (``task_files.py``) where they can, else Spark does."""
        assert self.plan.spark is not None
        if not self.layout_known:  # found at the first batch: the schema and conf are fixed
            self.layout = file_layout(self.plan.spark, self.outputs.output_type(batch),
                                      self.format)
            self.layout_known = True
        layout = self.layout
        if layout is None:
            self._write_by_spark(batch, batch_id, query, partitions)
            return
        parts = self.outputs.parts(batch, batch_id, partitions)
        staging = self.log.staging(batch_id)
        storage.delete(staging)  # an interrupted attempt's files
        frames: list[tuple[DataFrame, Runner | None]] = [(parts.main, parts.runner)]
        if parts.corrupt is not None:
            frames.append((parts.corrupt, None))
        written = write_in_tasks(frames, parts.emitted, staging, layout)
        self.log.commit(batch_id, staging, written.files)
        listen(self.plan.spark)
        self._report(query, batch_id, written.observed_row(), parts.applied)

    def _write_by_spark(self, batch: DataFrame, batch_id: int, query: StreamingQuery | None,
                        partitions: list[int] | None) -> None:
        tagged, applied = self.outputs.tagged(batch, batch_id, partitions)
        counts = Observation(f"sparkcast-{self.plan.pipeline_id}-{batch_id}")
        frame = partitioned(observed(tagged, counts, self.plan.spark))
        if self.log.write(batch_id, frame, self.format):
            self._report(query, batch_id, observed_row(counts), applied)

    def _report(self, query: StreamingQuery | None, batch_id: int, row: dict[str, Any],
                applied: int) -> None:
        report(query, batch_id, row, applied, self.observation, self.query_name or "write_stream")


def report(query: StreamingQuery | None, batch_id: int, row: dict[str, Any], applied: int,
           observation: str, query_name: str) -> None:
    """A batch's counts, with the broadcast elements the driver applied once, to the listener
    that merges them into the batch's progress (the monitor, the progress log, Prometheus, the
    INFO and WARN lines); to the WARN line alone without the query."""
    row = {**row, APPLIED_ONCE: applied}
    if query is not None:
        report_streamed(str(query.id), batch_id, observation, row)
        return
    line = warning(row, query_name, batch_id)
    if line is not None:
        log.warning(line)


def start(plan: RuntimePlan, writer: StreamedWriter, checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """The one streaming query of the streamed path."""
    refuse_other_state(plan, checkpoint_location)
    return start_query(input_stream(plan).foreachBatch(writer)
                       .option("checkpointLocation", checkpoint_location), trigger, query_name)


def input_stream(plan: RuntimePlan) -> DataStreamWriter:
    """The writer of the one query over the plan's input: in ``update`` mode when the input
    holds the clock of event-time timers (``tagging.clock``: an aggregation)."""
    assert plan.streamed_input is not None
    writer = plan.streamed_input.writeStream
    return writer.outputMode("update") if plan.clocked else writer


def start_query(stream: DataStreamWriter, trigger: dict[str, Any] | None,
                query_name: str | None) -> StreamingQuery:
    """Start ``stream`` with the user's trigger and query name (either may be left out)."""
    if query_name:
        stream = stream.queryName(query_name)
    if trigger:
        stream = stream.trigger(**trigger)
    return stream.start()


def refuse_other_state(plan: RuntimePlan, checkpoint_location: str) -> None:
    """A checkpoint with Spark operator state was written by the operator engine (perhaps by a
    query the user started on ``result.main``, which records no layout file; a clocked plan's
    own clock keeps state there too, and its layout record tells the engines apart). One with
    keyed stores kept state per subtask, which a plan without such state would drop (a plan
    that gains it starts from empty stores, as the operator starts from empty state)."""
    held = None
    if not plan.clocked and checkpoint_files.holds_operator_state(checkpoint_location):
        held = ("the checkpoint holds the stateful operator's state, this pipeline runs on "
                "the micro-batch engine")
    elif not plan.by_subtask and storage.is_dir(keyed_store.folder(checkpoint_location)):
        held = ("the checkpoint keeps state per subtask (keyed state, timers or held "
                "elements), this pipeline has none and would drop it")
    if held:
        raise IncompatibleCheckpointError(
            f"this pipeline cannot restart from checkpoint {checkpoint_location}; nothing was "
            f"run. state: {held}: start a new checkpoint, or keep the function's state. See "
            "docs/operations.md, 'What may change between restarts'.")
