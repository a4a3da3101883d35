"""The micro-batch engine in place (``RuntimePlan.in_place``): a non-keyed function whose
broadcast side is a static DataFrame, and the shuffle-free runner of its main rows.

Such a function's broadcast state is the static rows applied in their deterministic order, fixed
for the life of the query, and its main side only reads it. There is then nothing to checkpoint
and no reason for main rows to meet in subtasks: one ``mapInArrow`` runs the engine over each
partition where it lies. That is one JVM↔Python round trip and no shuffle, where the operator
engine (``processor.py``) needs two round trips (packing, then transformWithStateInPandas) and
a shuffle. Outputs are the same (the differential tests run both engines); a replayed partition
gives the same rows, so it is exactly-once with any idempotent sink.

The engine choice (``planning/choice.py``) runs a plan in place only when
:func:`needs_no_state`: no keyed state, no ``hold_until_ready``, and applying the static rows on
the driver emitted nothing (outputs of ``process_broadcast_element`` would otherwise repeat in
every task). The per-batch driver's main side (``streamed.py``) runs the same
:class:`StatelessRunner`, bound to each micro-batch's broadcast snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pyarrow as pa

from sparkcast.core.engine import SubtaskEngine
from sparkcast.spark.execution.encoding import OutputEncoder
from sparkcast.spark.execution.engines import ENGINES, CachedEngine, static_engine
from sparkcast.spark.execution.metrics_rows import metrics_table
from sparkcast.spark.execution.values import converters, main_values
from sparkcast.spark.plan import RuntimePlan

# process_batch sees frames of at least this many rows (Spark's Arrow batches are 10k rows;
# a function that prepares its broadcast state per call should not pay that 100 times per 1M)
MIN_FRAME_ROWS = 100_000


def needs_no_state(plan: RuntimePlan) -> bool:
    """Whether running in place gives the operator engine's results (checked on the driver,
    which applies the static rows once, as every task will)."""
    if plan.keyed or plan.keyed_descriptors or plan.options.hold_until_ready:
        return False
    engine = static_engine(plan, 0)
    emitted = engine.take_outputs()
    engine.close()
    return not emitted


class StatelessRunner:
    """The ``mapInArrow`` body: input ``_ts, m_0 … m_k``; output the operator's tagged rows.
    ``bind`` (the per-batch driver's ``streamed.SnapshotBinder``) gives the cached engine the
    broadcast state of the current micro-batch; without it the engine holds the static rows."""

    def __init__(self, plan: RuntimePlan,
                 bind: Callable[[CachedEngine], None] | None = None) -> None:
        self.plan = plan
        self.bind = bind

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        subtask = _partition() % plan.parallelism
        cached = ENGINES.entry(plan, subtask, lambda: static_engine(plan, subtask))
        engine = cached.engine
        if self.bind is not None:
            self.bind(cached)
        encoder = OutputEncoder.of(plan)
        found = converters(plan.main_types, plan.time_zone)
        engine.meter.begin()
        events = 0
        for table in _frames(batches, MIN_FRAME_ROWS if engine.vectorized else 1):
            values, timestamps = main_values(table, 1, plan.main_fields, engine.vectorized,
                                             found)
            events += table.num_rows
            engine.run_micro_batch([], values, timestamps,
                                   processing_time=int(time.time() * 1000))
            yield from self.emit(engine, encoder, subtask)
        engine.meter.finish()
        yield from metrics_table(engine, encoder, subtask, events, 0).to_batches()

    @staticmethod
    def emit(engine: SubtaskEngine, encoder: OutputEncoder, subtask: int
             ) -> Iterator[pa.RecordBatch]:
        """The one place this runner (in place, and bound to a snapshot) takes the engine's
        outputs, as tagged Arrow batches."""
        for out in encoder.encode_tables(engine.take_outputs(), subtask):
            yield from out.to_batches()


def _frames(batches: Iterator[pa.RecordBatch], min_rows: int) -> Iterator[pa.Table]:
    pending: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        rows += batch.num_rows
        if rows >= min_rows:
            yield pa.Table.from_batches(pending)
            pending, rows = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
