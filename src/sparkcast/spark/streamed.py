"""The streamed-broadcast path: a non-keyed function over a broadcast side read as a stream.

On the operator path every one of P subtasks receives, applies and checkpoints each broadcast
element (a cross join replicates it P times), and every main row crosses to Python twice and is
shuffled. A non-keyed function's main side only *reads* the broadcast state, so ``write_stream``
runs it as one ``foreachBatch`` query over the union of both inputs instead::

    union(main _side 0, broadcast _side 1, malformed _side 2) ─ foreachBatch(batch N):
      1. collect the broadcast rows; apply them once, on the driver, in the deterministic
         broadcast order, to the state after batch N-1 (snapshots.py), and write the state of
         batch N into the checkpoint before any main row runs;
      2. main rows: one mapInArrow (stateless.py's runner) whose engines read that snapshot,
         loaded once per Python worker: no shuffle, one JVM↔Python round trip;
      3. write main rows, side outputs and dead letters as micro-batch N (commit_log.py):
         a replayed batch is skipped once committed, else rewritten the same way; dead
         letters are counted on that write (an ``Observation``) for the WARN line.

Every subtask reads the same snapshot, so broadcast state is identical everywhere by
construction. Outputs of ``process_broadcast_element`` are emitted as each of the P subtasks of
the operator path would (its broadcast dead letters once, ``processor.broadcast_letters_once``).

``takes_streamed_path`` allows it only where results equal the operator's: not keyed (keyed
state lives with its key's subtask), no ``hold_until_ready`` (held elements are per-subtask
state), ``time_alignment="batch"`` (event alignment interleaves broadcast and main elements
inside a batch) and not on Spark Connect (whose ``foreachBatch`` runs on the server).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sparkcast.core.backend import DictBackend
from sparkcast.core.engine import SubtaskEngine, fresh_function
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.monitoring.progress import APPLIED_ONCE
from sparkcast.spark import snapshots, storage
from sparkcast.spark.batch_sides import query_of, side_partitions
from sparkcast.spark.checks import is_connect
from sparkcast.spark.commit_log import CommitLog
from sparkcast.spark.compatibility import differences, layout_of, refuse
from sparkcast.spark.observe import log, observed, report_streamed, warning
from sparkcast.spark.rows import OutputEncoder
from sparkcast.spark.values import collect_elements

if TYPE_CHECKING:
    from sparkcast.spark.plan import RuntimePlan

SIDE = "_side"
MAIN_SIDE, BROADCAST_SIDE, CORRUPT_SIDE = 0, 1, 2
_BOUND: dict[tuple[str, int], str] = {}  # (pipeline, subtask) -> the snapshot its engine reads


def takes_streamed_path(plan: RuntimePlan, main: DataFrame, broadcast: DataFrame) -> bool:
    return (main.isStreaming and broadcast.isStreaming and not plan.keyed
            and not plan.keyed_descriptors and not plan.options.hold_until_ready
            and plan.options.time_alignment == "batch" and not is_connect(main.sparkSession))


def streamed_input(main: DataFrame, broadcast: Any, corrupt: DataFrame | None,
                   event_time: str | None) -> DataFrame:
    """Both inputs (and malformed rows) in one streaming frame, told apart by ``_side``."""
    from sparkcast.spark.plan import millis

    df: DataFrame = broadcast.df
    order = F.col(f"`{broadcast.order_by}`") if broadcast.order_by else F.lit(None).cast("long")
    frames = [
        main.select(F.lit(MAIN_SIDE).cast("byte").alias(SIDE),
                    millis(main, event_time).alias("_ts"),
                    *[F.col(f"`{c}`").alias(f"m_{i}") for i, c in enumerate(main.columns)]),
        df.select(F.lit(BROADCAST_SIDE).cast("byte").alias(SIDE),
                  millis(df, event_time).alias("_ts"), order.alias("_order"),
                  *[F.col(f"`{c}`").alias(f"b_{i}") for i, c in enumerate(df.columns)]),
    ]
    if corrupt is not None:
        frames.append(corrupt.select(F.lit(CORRUPT_SIDE).cast("byte").alias(SIDE), "*"))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union


class BroadcastApplier:
    """The driver's engine: applies each micro-batch's broadcast elements once, from the
    snapshot of the batches before it, and writes the batch's snapshot."""

    def __init__(self, plan: RuntimePlan, checkpoint_location: str) -> None:
        self.plan = plan
        self.location = snapshots.folder(checkpoint_location)
        self.layout = layout_of(plan)
        self.engine = SubtaskEngine(fresh_function(plan.function), plan.broadcast_descriptors,
                                    DictBackend(), options=plan.options,
                                    parallelism=plan.parallelism)
        self.engine.open()
        self.engine.take_outputs()

    def apply(self, batch: int, elements: list[BroadcastElement]
              ) -> tuple[str | None, list[OutputRecord]]:
        """The snapshot file batch ``batch``'s main rows read (None: empty state), and the
        outputs of applying its elements."""
        known = snapshots.batches(self.location)
        for stale in (b for b in known if b >= batch):  # an interrupted attempt of this batch
            snapshots.delete(self.location, stale)
        earlier = [b for b in known if b < batch]
        base = snapshots.name(self.location, earlier[-1]) if earlier else None
        if not elements:
            if base is not None:
                self._check(snapshots.read(base, self.plan.blob_store))
            return base, []
        state = snapshots.EMPTY if base is None else snapshots.read(base, self.plan.blob_store)
        self._check(state)
        engine = self.engine
        backend = DictBackend()
        for descriptor, table in state.tables.items():
            backend.broadcast_table(descriptor).update(table)
        backend.store("broadcast_version", state.version)
        engine.bind(backend)
        engine.run_micro_batch(elements, [], processing_time=int(time.time() * 1000))
        tables = {name: dict(table) for name, table in backend.broadcast.items()}
        snapshot = snapshots.Snapshot(self.layout, engine.broadcast_version, tables)
        snapshots.write(self.location, batch, snapshot, self.plan.blob_store)
        for old in earlier[:-1]:  # only the base of a replay of this batch is still needed
            snapshots.delete(self.location, old)
        return snapshots.name(self.location, batch), engine.take_outputs()

    def _check(self, state: snapshots.Snapshot) -> None:
        lines = differences(state.layout, self.layout) if state.layout else []
        if lines:
            raise refuse(lines, f"the broadcast state in {self.location}")


class SnapshotBinder:
    """Shipped with the main side's runner: binds a worker's engine to the batch's snapshot
    (decoded once per worker and shared by its subtasks: the main side only reads it)."""

    def __init__(self, file: str | None, blob_store: str) -> None:
        self.file = file
        self.blob_store = blob_store

    def __call__(self, engine: SubtaskEngine, pipeline_id: str, subtask: int) -> None:
        key = (pipeline_id, subtask)
        wanted = self.file or ""
        if _BOUND.get(key) == wanted:
            return
        state = snapshots.read(self.file, self.blob_store) if self.file else snapshots.EMPTY
        backend = DictBackend()
        backend.broadcast.update(state.tables)
        backend.store("broadcast_version", state.version)
        engine.bind(backend)
        _BOUND[key] = wanted


class StreamedWriter:
    """The ``foreachBatch`` function of ``write_stream`` on the streamed path."""

    def __init__(self, plan: RuntimePlan, path: str, checkpoint_location: str, format: str,
                 observation: str, query_name: str | None = None) -> None:
        from pyspark.sql.types import StructType

        self.plan = plan
        self.format = format
        self.observation = observation
        self.query_name = query_name
        spark = plan.spark
        assert spark is not None and plan.streamed_input is not None
        interval = int(spark.conf.get("spark.sql.streaming.fileSink.log.compactInterval")
                       or "10")
        self.log = CommitLog(path, interval)
        self.applier = BroadcastApplier(plan, checkpoint_location)
        schema = plan.streamed_input.schema
        self.broadcast_columns = ["_ts", "_order", *[f"b_{i}" for i in
                                                      range(len(plan.broadcast_fields))]]
        self.main_columns = ["_ts", *[f"m_{i}" for i in range(len(plan.main_fields))]]
        self.encoder = OutputEncoder(plan.output_schema, plan.side_schemas)
        self.corrupt = "_raw" in schema.fieldNames()
        self.output: StructType | None = None

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
        sides = None if self.corrupt else side_partitions(batch, query)
        if sides is not None:
            self._write(batch, batch_id, query, sides.get(BROADCAST_SIDE, []))
            return
        batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            self._write(batch, batch_id, query, None)
        finally:
            batch.unpersist()

    def _elements(self, batch: DataFrame, partitions: list[int] | None
                  ) -> list[BroadcastElement]:
        """The micro-batch's broadcast elements, from ``partitions`` of it (None: all)."""
        frame = batch.filter(F.col(SIDE) == BROADCAST_SIDE).select(*self.broadcast_columns)
        if partitions is None:
            return collect_elements(frame, self.plan.broadcast_fields)
        rows = (batch.sparkSession.sparkContext.runJob(frame.rdd, list, partitions)
                if partitions else [])
        return collect_elements(frame, self.plan.broadcast_fields, rows)

    def _write(self, batch: DataFrame, batch_id: int, query: StreamingQuery | None,
               partitions: list[int] | None) -> None:
        from sparkcast.spark.result import tagged_schema
        from sparkcast.spark.sink import partitioned
        from sparkcast.spark.stateless import StatelessRunner

        plan = self.plan
        side = F.col(SIDE)
        elements = self._elements(batch, partitions)
        file, outputs = self.applier.apply(batch_id, elements)
        output = tagged_schema(plan, batch.schema["_ts"].dataType)
        runner = StatelessRunner(plan.for_workers(), SnapshotBinder(file, plan.blob_store))
        tagged = batch.filter(side == MAIN_SIDE).select(*self.main_columns).mapInArrow(
            runner, output)
        if self.corrupt:
            from sparkcast.spark.corrupt import corrupt_letters

            bad = batch.filter(side == CORRUPT_SIDE).select("_raw", "_error")
            tagged = tagged.unionByName(corrupt_letters(bad, plan.output_schema,
                                                        batch.schema["_ts"].dataType))
        emitted = self._broadcast_outputs(outputs, output)
        if emitted is not None:
            tagged = tagged.unionByName(emitted)
        counts = Observation(f"sparkcast-{plan.pipeline_id}-{batch_id}")
        frame = partitioned(observed(tagged, counts, plan.spark))
        if self.log.write(batch_id, frame, self.format):
            self._report(query, batch_id, counts.get, len(elements))

    def _report(self, query: StreamingQuery | None, batch_id: int, row: dict[str, Any],
                applied: int) -> None:
        """The batch's counts, with the broadcast elements the driver applied once, to the
        listener that merges them into the batch's progress (the monitor, the progress log,
        Prometheus, the INFO and WARN lines); to the WARN line alone without the query."""
        row = {**row, APPLIED_ONCE: applied}
        if query is not None:
            report_streamed(str(query.id), batch_id, self.observation, row)
            return
        line = warning(row, self.query_name or "write_stream", batch_id)
        if line is not None:
            log.warning(line)

    def _broadcast_outputs(self, outputs: list[OutputRecord], schema: Any) -> DataFrame | None:
        """What ``process_broadcast_element`` emitted, as every subtask of the operator path
        emits it (its keyless dead letters once)."""
        if not outputs:
            return None
        from sparkcast.spark.processor import broadcast_letters_once

        plan = self.plan
        tables = self.encoder.encode_tables(outputs, 0)
        others = broadcast_letters_once(outputs)
        for subtask in range(1, plan.parallelism):
            tables += self.encoder.encode_tables(others, subtask)
        if not tables:
            return None
        assert plan.spark is not None
        return plan.spark.createDataFrame(pa.concat_tables(tables).to_pandas(), schema)


def start(plan: RuntimePlan, frame_writer: StreamedWriter, checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None) -> Any:
    """The one streaming query of the streamed path."""
    _refuse_operator_state(checkpoint_location)
    assert plan.streamed_input is not None
    stream = (plan.streamed_input.writeStream.foreachBatch(frame_writer)
              .option("checkpointLocation", checkpoint_location))
    if query_name:
        stream = stream.queryName(query_name)
    if trigger:
        stream = stream.trigger(**trigger)
    return stream.start()


def _refuse_operator_state(checkpoint_location: str) -> None:
    """A checkpoint with Spark operator state was written by the operator path (perhaps by a
    query the user started on ``result.main``, which records no layout file)."""
    fs, path = storage.resolve(storage.join(checkpoint_location, "state"))
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        raise IncompatibleCheckpointError(
            f"this pipeline cannot restart from checkpoint {checkpoint_location}; nothing was "
            "run. path: the checkpoint holds the stateful operator's state, this pipeline "
            "takes the streamed path (a non-keyed function over a streamed broadcast side, "
            "state applied once per micro-batch): start a new checkpoint. See "
            "docs/operations.md, 'What may change between restarts'.")
