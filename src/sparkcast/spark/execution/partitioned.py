"""The micro-batch engine by subtask (``RuntimePlan.by_subtask``): keyed functions, timers,
``hold_until_ready`` and event-time alignment over a streamed broadcast side, a static one or
none, with the broadcast applied once and main rows in Python once.

The per-batch driver (``streamed.py``) shares a micro-batch's broadcast work between subtasks,
but its main side keeps no state. Here every subtask also owns keyed state (and timers, held
elements), so main rows must meet their key's subtask. ``write_stream`` runs it as the same one
``foreachBatch`` query; per micro-batch N::

    1. the driver applies the broadcast elements once, to the snapshot of the batches before,
       and writes snapshot N (``streamed.BroadcastApplier``);
    2. main rows get their subtask (``hash(key) mod P``, Spark's Murmur3 as on the operator engine)
       and one tick row per subtask joins them (so every subtask runs: timers, held elements);
       ``repartition`` by subtask, then one ``mapInArrow`` (``PartitionedRunner``) runs each
       subtask's rows in source order (``ordering.py``) against snapshot N and the subtask's
       keyed store at N-1 (``state/keyed_store.py``), and commits the store's delta N;
    3. the writer writes the tagged outputs as micro-batch N, once.

Without a broadcast side (``KeyedProcessFunction``, ``KeyedCoProcessFunction``) step 1 has
nothing to apply, and a co-function's second input is repartitioned with the main rows by the
same key hash. A static broadcast side's rows are applied once by the driver when the plan is
built (``static_side.py``); when a query starts on a new checkpoint, their state is written as
snapshot ``SEED`` (-1), which every batch reads; their outputs go out with its first batch, and
a restart keeps the snapshot (as the operator keeps its stored state).

Clocks are Spark's own for the batch, read from the offsets log (the watermark and the batch
time), so a replay sees the same ones. Broadcast elements run in the tasks only where their
effect reaches per-subtask state: with event-time alignment (they interleave with main
elements), when the driver saw ``apply_to_keyed_state`` (it needs each subtask's keys), and on a
subtask holding elements (``hold_until_ready`` releases them as the elements apply). Every other
subtask reads snapshot N and emits the outputs the driver's one run produced for it.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.core.scope import normal_key
from sparkcast.core.seed import Seed, apply_seed
from sparkcast.spark.execution.dead_letters import corrupt_letters, subtask_share
from sparkcast.spark.execution.engines import bind_snapshot, cached_engine, plan_engine
from sparkcast.spark.execution.ordering import SourcePositions
from sparkcast.spark.execution.routing import (
    group_column,
    partition_of,
    subtask_hash,
    subtask_rows,
)
from sparkcast.spark.execution.streamed import BatchParts, MicroBatchOutputs
from sparkcast.spark.execution.subtask import Clocks, SubtaskRunner
from sparkcast.spark.layout import (
    CORRUPT_SIDE,
    ERROR,
    MAIN_SIDE,
    RAW,
    SECOND_SIDE,
    SEQ,
    SIDE,
    SUBTASK,
    TICK_SIDE,
    TS,
    main_column,
    second_column,
)
from sparkcast.spark.plan import RuntimePlan, WorkerPlan
from sparkcast.spark.state import checkpoint_files, keyed_store, snapshots
from sparkcast.spark.state.compatibility import guard_subtask, layout_json, layout_of
from sparkcast.spark.state.keyed_store import SubtaskStore, attempt_token
from sparkcast.spark.state.store_backend import StoreBackend

ALWAYS, IF_HELD, NEVER = "always", "if_held", "never"  # which subtasks apply the elements


class PartitionedOutputs(MicroBatchOutputs):
    """A micro-batch of the micro-batch engine by subtask as the operator's tagged frame."""

    def __init__(self, plan: RuntimePlan, checkpoint_location: str) -> None:
        super().__init__(plan, checkpoint_location)
        self.checkpoint = checkpoint_location
        self.store_location = keyed_store.folder(checkpoint_location)
        self.store_id = keyed_store.store_id(checkpoint_location)
        self.layout = layout_json(plan)
        spark = plan.spark
        assert spark is not None
        self.partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
        groups = sorted(plan.subtask_of_group, key=plan.subtask_of_group.__getitem__)
        self.ticks = subtask_rows(spark, groups).select(
            SUBTASK, F.lit(TICK_SIDE).cast("byte").alias(SIDE))
        self.groups = groups
        self.positions = SourcePositions()
        fresh = not checkpoint_files.committed_batches(checkpoint_location)
        if plan.initial_seeds and fresh:
            write_seeds(plan, checkpoint_location, self.store_id)
        #: a static broadcast side's outputs, emitted with the first batch of a new checkpoint
        #: (a restart keeps the snapshot its first run wrote, as the operator keeps its state)
        self.static_outputs = (self.applier.apply_static() if plan.static is not None and fresh
                               else None)

    def parts(self, batch: DataFrame, batch_id: int, partitions: list[int] | None
              ) -> BatchParts:
        """The batch's pieces: its main rows by subtask and the runner that applies them (the
        tasks emit the driver's broadcast outputs too, so ``emitted`` is empty)."""
        plan = self.plan
        elements = self._elements(batch, partitions)
        snapshot, outputs = self.applier.apply(batch_id, elements)
        if self.static_outputs is not None:
            outputs, self.static_outputs = self.static_outputs, None
        mode = self._mode(elements)
        metadata = checkpoint_files.batch_metadata(self.checkpoint, batch_id)
        watermark = metadata.get("batchWatermarkMs") if plan.time_mode == "EventTime" else None
        runner = PartitionedRunner(
            plan.for_workers(), batch_id, snapshot, self.applier.base,
            elements if mode != NEVER else [], mode, self._encoded(outputs),
            Clocks(watermark, int(metadata.get("batchTimestampMs") or 0)),
            (self.store_location, self.store_id), self.layout, made_at=self.applier.made_at)
        corrupt = self._corrupt(batch) if self.corrupt else None
        return BatchParts(self._main(batch), runner, corrupt, [], len(elements))

    @cached_property
    def subtasks_by_partition(self) -> dict[int, tuple[int, ...]]:
        """The subtasks each of the main rows' partitions holds (``repartition`` by
        ``_subtask``, the subtask's grouping value)."""
        found: dict[int, tuple[int, ...]] = {}
        for subtask, group in enumerate(self.groups):
            partition = partition_of(group, self.partitions)
            found[partition] = (*found.get(partition, ()), subtask)
        return found

    def _mode(self, elements: list[BroadcastElement]) -> str:
        options = self.plan.options
        if not elements:
            return NEVER
        if options.time_alignment == "event" or self.applier.engine.keyed_states.applied:
            return ALWAYS
        return IF_HELD if options.hold_until_ready else NEVER

    def _main(self, batch: DataFrame) -> DataFrame:
        """Main rows as ``_subtask, _side, _ts, _seq, m_0 …`` (a co-function's second input's
        as ``… s_0 …``, to the subtask of the same key hash), ``_seq`` their source position,
        with the ticks, by subtask; one filter over the batch, which Spark computes again from
        the sources for each."""
        plan = self.plan
        inputs = [(MAIN_SIDE, [main_column(i) for i in range(len(plan.main_fields))],
                   plan.key_positions)]
        if plan.second_fields:
            inputs.append((SECOND_SIDE, [second_column(i)
                                         for i in range(len(plan.second_fields))],
                           plan.second_key_positions))
        rows = batch.filter(F.col(SIDE).isin(*[side for side, _, _ in inputs]))
        def hashed_by(names: list[str], keys: tuple[int, ...]) -> Any:
            return subtask_hash(rows, names, [names[p] for p in keys])
        hashed = hashed_by(*inputs[0][1:])
        for side, names, keys in inputs[1:]:
            hashed = F.when(F.col(SIDE) == side, hashed_by(names, keys)).otherwise(hashed)
        subtask = F.pmod(hashed, F.lit(len(self.groups))).cast("int")
        rows = rows.select(group_column(self.groups, subtask).alias(SUBTASK), F.col(SIDE),
                           F.col(TS), self.positions.column(batch).alias(SEQ),
                           *[name for _, names, _ in inputs for name in names])
        return rows.unionByName(self.ticks, allowMissingColumns=True).repartition(
            self.partitions, SUBTASK)

    def _corrupt(self, batch: DataFrame) -> DataFrame:
        bad = batch.filter(F.col(SIDE) == CORRUPT_SIDE).select(RAW, ERROR)
        return corrupt_letters(bad, self.plan.output_schema, batch.schema[TS].dataType)

    def _encoded(self, outputs: list[list[OutputRecord]]) -> dict[int, list[bytes]]:
        """The driver's broadcast outputs per subtask as Arrow IPC streams (its keyless broadcast
        dead letters on subtask 0 alone), for the tasks that do not apply the elements."""
        if not any(outputs):
            return {}
        return {subtask: [_ipc(t) for t in self.encoder.encode_tables(
                    subtask_share(outputs, subtask), subtask)]
                for subtask in range(self.plan.parallelism)}


def write_seeds(plan: RuntimePlan, checkpoint_location: str, store: str) -> None:
    """``initial_state``, before the first batch: each subtask's seed applied by an engine on
    the driver into its store (as batch ``SEED``'s snapshot), the broadcast entries (the same
    in every seed) as the broadcast snapshot of that batch."""
    location = keyed_store.folder(checkpoint_location)
    broadcast: snapshots.Snapshot | None = None
    with tempfile.TemporaryDirectory() as root:
        for subtask in range(plan.parallelism):
            engine = plan_engine(plan, subtask)
            subtask_store = SubtaskStore(location, store, subtask, root)
            subtask_store.open(snapshots.SEED)
            backend = StoreBackend(subtask_store, {}, writable_broadcast=True)
            engine.bind(backend)
            data = plan.initial_seeds.get(subtask)
            if data is not None:
                apply_seed(engine, Seed.from_bytes(data, engine.types))
            engine.flush()
            subtask_store.close()
            tables = {name: dict(table) for name, table in engine.broadcast.tables.items()}
            if broadcast is None and any(tables.values()):
                broadcast = snapshots.Snapshot(layout_of(plan), engine.broadcast_version, tables)
    if broadcast is not None:
        snapshots.write(snapshots.folder(checkpoint_location), snapshots.SEED, broadcast,
                        plan.blob_store)


class PartitionedRunner:
    """The ``mapInArrow`` body: the subtasks of one partition over one micro-batch, each bound
    to the batch's snapshot and its keyed store, run by the one subtask runner
    (``subtask.py``)."""

    def __init__(self, plan: WorkerPlan, batch: int, snapshot: str | None, base: str | None,
                 elements: list[BroadcastElement], mode: str,
                 emitted: dict[int, list[bytes]], clocks: Clocks,
                 store: tuple[str, str], layout: str, *, made_at: int | None = None) -> None:
        self.plan = plan
        self.batch = batch
        self.snapshot = snapshot
        self.base = base
        self.elements = elements
        self.mode = mode
        self.emitted = emitted
        self.clocks = clocks
        self.store = store
        self.layout = layout
        #: when the oldest update the driver applied was made (``BroadcastApplier.made_at``)
        self.made_at = made_at
        #: the driver's nonce of the batch's job where each attempt stages its keyed state for
        #: a sink's commit to name (``keyed_store.publish``); None: written in place
        self.stage_for: str | None = None

    def staged(self, nonce: str) -> PartitionedRunner:
        """This runner with each task attempt's keyed state staged under its name."""
        runner = copy.copy(self)
        runner.stage_for = nonce
        return runner

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _, outputs in self.by_subtask(batches):
            yield from outputs

    def by_subtask(self, batches: Iterator[pa.RecordBatch]
                   ) -> Iterator[tuple[int, Iterator[pa.RecordBatch]]]:
        """Each subtask of the partition with its tagged outputs, in subtask order (read each
        one's outputs to the end before the next: its store closes there)."""
        received = [b for b in batches if b.num_rows]
        if not received:
            return
        table = pa.Table.from_batches(received)
        groups = table.column(SUBTASK)
        runner = SubtaskRunner(self.plan)
        for group in sorted(pc.unique(groups).to_pylist()):
            rows = table.filter(pc.equal(groups, group))
            subtask = self.plan.subtask_of_group[group]
            yield subtask, self._run(subtask, rows, runner)

    def _run(self, subtask: int, rows: pa.Table, runner: SubtaskRunner
             ) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        attempt = attempt_token(self.stage_for) if self.stage_for is not None else None
        store = SubtaskStore(*self.store, subtask, attempt=attempt)
        store.open(self.batch)
        try:
            engine = cached_engine(plan, subtask, lambda: plan_engine(plan, subtask))
            engine.meter.begin()
            applies = self._bind(engine, store, subtask)
            main = runner.read(engine, *_sides(rows, plan))
            if main.keys is not None:
                self._prefetch(engine, main.keys)
            if not applies:  # the driver applied the elements: their outputs, encoded
                for blob in self.emitted.get(subtask, []):
                    yield from pa.ipc.open_stream(blob).read_all().to_batches()
            elements = self.elements if applies else []
            for out in runner.run(engine, subtask, main, elements, self.clocks):
                yield from out.to_batches()
            yield from runner.report(engine, subtask, len(main), len(elements)).to_batches()
        finally:
            store.close()

    def _bind(self, engine: SubtaskEngine, store: SubtaskStore, subtask: int) -> bool:
        """Bind ``engine`` to the subtask's state; whether it applies the elements itself (then
        from the base snapshot, into a copy nothing persists)."""
        plan = self.plan
        def guarded(tables: dict[str, dict[Any, Any]]) -> StoreBackend:
            backend = StoreBackend(store, tables, warm=True)
            guard_subtask(backend, plan.pipeline_id, subtask, self.layout)  # before it runs
            return backend

        bind_snapshot(engine, snapshots.read_or_empty(self.snapshot, plan.blob_store,
                                                      engine.types), guarded)
        applies = self.mode == ALWAYS or (self.mode == IF_HELD and bool(engine.hold.items))
        if applies:
            bind_snapshot(engine, snapshots.read_or_empty(self.base, plan.blob_store,
                                                          engine.types),
                          lambda tables: StoreBackend(store, tables, writable_broadcast=True,
                                                      warm=True))
        else:  # the driver applied the update: its effect is measured here
            engine.meter.awaiting_effect(self.made_at)
        return applies

    @staticmethod
    def _prefetch(engine: SubtaskEngine, keys: list[Any]) -> None:
        backend = engine.backend
        if isinstance(backend, StoreBackend):
            backend.prefetch(list(dict.fromkeys(normal_key(k) for k in keys)))


def _sides(rows: pa.Table, plan: WorkerPlan) -> tuple[pa.Table, pa.Table | None]:
    """A subtask's rows of each input as ``_ts, _seq, <fields> …`` (the second: a
    co-function's other keyed input; None without one)."""
    sides = rows.column(SIDE)
    first = rows.filter(pc.equal(sides, MAIN_SIDE)).select(
        [TS, SEQ, *[main_column(i) for i in range(len(plan.main_fields))]])
    if not plan.second_fields:
        return first, None
    second = rows.filter(pc.equal(sides, SECOND_SIDE)).select(
        [TS, SEQ, *[second_column(i) for i in range(len(plan.second_fields))]])
    return first, second


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
