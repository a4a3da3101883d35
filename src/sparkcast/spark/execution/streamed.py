"""The micro-batch engine's work on each micro-batch where its driver works per micro-batch
(``RuntimePlan.per_batch_driver``), on the driver and in the workers.

On the operator engine every one of P subtasks receives, applies and checkpoints each broadcast
element (a cross join replicates it P times), and every main row crosses to Python twice and is
shuffled. A non-keyed function's main side only *reads* the broadcast state, so ``write_stream``
runs it as one ``foreachBatch`` query over the union of both inputs instead
(``outputs/batch_driver.py`` hands each micro-batch to what writes what this module builds)::

    union(main _side 0, broadcast _side 1, malformed _side 5) ─ foreachBatch(batch N):
      1. collect the broadcast rows; apply them once, on the driver, in the deterministic
         broadcast order, to the state after batch N-1 (``state/snapshots.py``), and write the
         state of batch N into the checkpoint before any main row runs (``BroadcastApplier``);
      2. main rows: one mapInArrow (``stateless.py``'s runner) whose engines read that snapshot,
         loaded once per Python worker (``SnapshotBinder``): no shuffle, one JVM↔Python round
         trip;
      3. the writer writes main rows, side outputs and dead letters as micro-batch N, once.

Every subtask reads the same snapshot, so broadcast state is identical everywhere by
construction. Outputs of ``process_broadcast_element`` are emitted as each of the P subtasks of
the operator engine would (its broadcast dead letters once,
``dead_letters.subtask_share``). The engine choice (``planning/choice.py``) takes the
micro-batch engine only where results equal the operator's; with state per subtask
(``by_subtask``) ``partitioned.py`` builds on this module's applier and outputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.core.backend import DictBackend
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.spark.execution.dead_letters import corrupt_letters, subtask_share
from sparkcast.spark.execution.encoding import OutputEncoder, tagged_schema
from sparkcast.spark.execution.engines import (
    CachedEngine,
    bind_snapshot,
    in_memory,
    plan_engine,
    writable_in_memory,
)
from sparkcast.spark.execution.phases import phase
from sparkcast.spark.execution.stateless import StatelessRunner
from sparkcast.spark.execution.static_side import static_tables
from sparkcast.spark.execution.values import collect_elements, collect_partitions
from sparkcast.spark.layout import (
    BROADCAST_SIDE,
    CORRUPT_SIDE,
    ERROR,
    MAIN_SIDE,
    ORDER,
    RAW,
    SIDE,
    TS,
    broadcast_column,
    main_column,
)
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import snapshots
from sparkcast.spark.state.compatibility import differences, layout_of, refuse


def streamed_runner(plan: RuntimePlan, snapshot: str | None, made_at: int | None = None
                    ) -> StatelessRunner:
    """What the per-batch driver ships to the workers for one micro-batch: the in-place
    runner, bound to the batch's broadcast ``snapshot`` file (None: empty state); ``made_at``:
    when the oldest update the snapshot applied was made (for the update-to-effect latency)."""
    return StatelessRunner(plan.for_workers(),
                           SnapshotBinder(snapshot, plan.blob_store, made_at))


class MicroBatchOutputs:
    """The outputs of one micro-batch of the per-batch driver as the operator's tagged frame: the
    batch's broadcast elements applied once (``BroadcastApplier``), its main rows run by the
    workers against the resulting snapshot, its malformed rows as dead letters."""

    def __init__(self, plan: RuntimePlan, checkpoint_location: str) -> None:
        assert plan.streamed_input is not None
        self.plan = plan
        self.applier = BroadcastApplier(plan, checkpoint_location)
        self.broadcast_columns = [TS, ORDER, *[broadcast_column(i) for i in
                                               range(len(plan.broadcast_fields))]]
        self.main_columns = [TS, *[main_column(i) for i in range(len(plan.main_fields))]]
        self.encoder = OutputEncoder.of(plan)
        #: whether the input carries malformed rows (``CORRUPT_SIDE``)
        self.corrupt = RAW in plan.streamed_input.schema.fieldNames()
        #: whether the input carries broadcast rows (not with a static broadcast side or none)
        self.broadcast = ORDER in plan.streamed_input.schema.fieldNames()

    def tagged(self, batch: DataFrame, batch_id: int, partitions: list[int] | None
               ) -> tuple[DataFrame, int]:
        """The batch's tagged frame, and how many broadcast elements the driver applied;
        ``partitions``: the batch's broadcast partitions (None: find the rows by filtering)."""
        parts = self.parts(batch, batch_id, partitions)
        tagged = parts.main.mapInArrow(parts.runner, self.output_type(batch))
        if parts.corrupt is not None:
            tagged = tagged.unionByName(parts.corrupt)
        if parts.emitted:
            assert self.plan.spark is not None
            tagged = tagged.unionByName(self.plan.spark.createDataFrame(
                pa.concat_tables(parts.emitted).to_pandas(), self.output_type(batch)))
        return tagged, parts.applied

    def parts(self, batch: DataFrame, batch_id: int, partitions: list[int] | None
              ) -> BatchParts:
        """The pieces of the batch's tagged frame (``tagged`` puts them together; the task
        writer, ``task_writer.py``, writes each where it is)."""
        side = F.col(SIDE)
        elements = self._elements(batch, partitions)
        file, outputs = self.applier.apply(batch_id, elements)
        main = batch.filter(side == MAIN_SIDE).select(*self.main_columns)
        corrupt = None
        if self.corrupt:
            bad = batch.filter(side == CORRUPT_SIDE).select(RAW, ERROR)
            corrupt = corrupt_letters(bad, self.plan.output_schema, batch.schema[TS].dataType)
        return BatchParts(main, streamed_runner(self.plan, file, self.applier.made_at), corrupt,
                          self._broadcast_outputs(outputs), len(elements))

    def output_type(self, batch: DataFrame) -> StructType:
        """The tagged frame's Spark schema for ``batch``."""
        return tagged_schema(self.plan.output_schema, batch.schema[TS].dataType)

    def _elements(self, batch: DataFrame, partitions: list[int] | None
                  ) -> list[BroadcastElement]:
        """The micro-batch's broadcast elements, from ``partitions`` of it (None: all)."""
        if not self.broadcast:
            return []
        frame = batch.filter(F.col(SIDE) == BROADCAST_SIDE).select(*self.broadcast_columns)
        with phase(self.plan.spark, "broadcast rows"):
            if partitions is None:
                return collect_elements(frame, self.plan.broadcast_fields)
            rows = collect_partitions(frame, partitions) if partitions else []
            return collect_elements(frame, self.plan.broadcast_fields, rows)

    def _broadcast_outputs(self, outputs: list[list[OutputRecord]]) -> list[pa.Table]:
        """What ``process_broadcast_element`` emitted, as every subtask of the operator engine
        emits it (its keyless dead letters once), as tagged tables: ``outputs`` holds one list
        for every subtask or one list per subtask."""
        if not any(outputs):
            return []
        return [table for subtask in range(self.plan.parallelism)
                for table in self.encoder.encode_tables(subtask_share(outputs, subtask), subtask)]


@dataclass(frozen=True)
class BatchParts:
    """One micro-batch of the micro-batch engine, before its tagged frame is put together."""

    main: DataFrame  #: the main rows as the runner takes them (``_ts, m_0 …``)
    #: the ``mapInArrow`` body, bound to the batch's snapshot (``StatelessRunner``; by
    #: subtask, ``PartitionedRunner``)
    runner: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    corrupt: DataFrame | None  #: malformed rows as tagged dead letters
    emitted: list[pa.Table]  #: tagged outputs of ``process_broadcast_element``
    applied: int  #: broadcast elements the driver applied


class BroadcastApplier:
    """The driver's engine: applies each micro-batch's broadcast elements once, from the
    snapshot of the batches before it, and writes the batch's snapshot."""

    def __init__(self, plan: RuntimePlan, checkpoint_location: str) -> None:
        self.plan = plan
        self.location = snapshots.folder(checkpoint_location)
        self.layout = layout_of(plan)
        self.engine = plan_engine(plan)
        self.engine.take_outputs()
        self.others: dict[int, SubtaskEngine] = {}
        #: the snapshot file the last batch's elements were applied to (None: empty state)
        self.base: str | None = None
        #: when the oldest update the last batch applied was made (epoch ms; None: no update):
        #: the workers' engines measure its update-to-effect latency, as they did not apply it
        self.made_at: int | None = None

    def apply(self, batch: int, elements: list[BroadcastElement]
              ) -> tuple[str | None, list[list[OutputRecord]]]:
        """The snapshot file batch ``batch``'s main rows read (None: empty state), and the
        outputs of applying its elements: one list the same on every subtask, or, for a
        function that asks which subtask it is, one list per subtask."""
        known = snapshots.batches(self.location)
        for stale in (b for b in known if b >= batch):  # an interrupted attempt of this batch
            snapshots.delete(self.location, stale)
        earlier = [b for b in known if b < batch]
        base = self.base = snapshots.name(self.location, earlier[-1]) if earlier else None
        self.made_at = None
        if not elements:
            if base is not None:
                self._check(snapshots.read(base, self.plan.blob_store, self.engine.types))
            return base, []
        state = snapshots.EMPTY if base is None else snapshots.read(base, self.plan.blob_store,
                                                                    self.engine.types)
        self._check(state)
        backend = self._run(self.engine, state, elements)
        self.made_at = self.engine.meter.take_pending()
        tables = {name: dict(table) for name, table in backend.broadcast.items()}
        snapshot = snapshots.Snapshot(self.layout, self.engine.broadcast_version, tables)
        snapshots.write(self.location, batch, snapshot, self.plan.blob_store, self.engine.types)
        for old in earlier[:-1]:  # only the base of a replay of this batch is still needed
            snapshots.delete(self.location, old)
        outputs = [self.engine.take_outputs()]
        if self.engine.reads_subtask:  # the other subtasks' outputs may differ: run them too
            for subtask in range(1, self.plan.parallelism):
                engine = self._other(subtask)
                self._run(engine, state, elements)
                engine.meter.take_pending()  # measured by the workers, as the first engine's
                outputs.append(engine.take_outputs())
        return snapshots.name(self.location, batch), outputs

    def apply_static(self) -> list[list[OutputRecord]]:
        """A static broadcast side: the plan's static side (its rows applied once by the
        planner, ``static_side.py``: what every subtask of the operator holds after its first
        call) written as snapshot ``SEED``, which every batch here reads; the outputs applying
        it emitted, as ``apply`` gives them."""
        static = self.plan.static
        assert static is not None
        version, tables = static_tables(static, self.engine.types)
        snapshots.write(self.location, snapshots.SEED,
                        snapshots.Snapshot(self.layout, version, tables), self.plan.blob_store,
                        self.engine.types)
        return [list(outputs) for outputs in static.outputs]

    def _run(self, engine: SubtaskEngine, state: snapshots.Snapshot,
             elements: list[BroadcastElement]) -> DictBackend:
        """``elements`` applied by ``engine`` to a copy of ``state``; the resulting backend."""
        backend = bind_snapshot(engine, state, writable_in_memory)
        engine.keyed_states.applied = False
        engine.run_micro_batch(elements, [], processing_time=int(time.time() * 1000))
        return backend

    def _other(self, subtask: int) -> SubtaskEngine:
        """The engine of another subtask, made when first needed."""
        if subtask not in self.others:
            self.others[subtask] = plan_engine(self.plan, subtask)
            self.others[subtask].take_outputs()
        return self.others[subtask]

    def _check(self, state: snapshots.Snapshot) -> None:
        lines = differences(state.layout, self.layout) if state.layout else []
        if lines:
            raise refuse(lines, f"the broadcast state in {self.location}")


class SnapshotBinder:
    """Shipped with the main side's runner: binds a worker's cached engine to the batch's
    snapshot unless the cache entry says it is bound to it already (decoded once per worker and
    shared by its subtasks: the main side only reads it); on a new snapshot the engine waits for
    the effect of the update made at ``made_at``."""

    def __init__(self, file: str | None, blob_store: str, made_at: int | None = None) -> None:
        self.file = file
        self.blob_store = blob_store
        self.made_at = made_at

    def __call__(self, cached: CachedEngine) -> None:
        wanted = self.file or ""
        if cached.bound == wanted:
            return
        engine = cached.engine
        bind_snapshot(engine, snapshots.read_or_empty(self.file, self.blob_store, engine.types),
                      in_memory)
        engine.meter.awaiting_effect(self.made_at)
        cached.bound = wanted
