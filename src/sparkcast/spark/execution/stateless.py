"""The micro-batch engine in place (``RuntimePlan.in_place``): a non-keyed function whose
broadcast side is a static DataFrame, and the shuffle-free runner of its main rows.

Such a function's broadcast state is the static rows applied in their deterministic order, fixed
for the life of the query, and its main side only reads it. There is then nothing to checkpoint
and no reason for main rows to meet in subtasks: one ``mapInArrow`` runs the engine over each
partition where it lies. That is one JVM↔Python round trip and no shuffle, where the operator
engine (``processor.py``) needs two round trips (packing, then transformWithStateInPandas) and
a shuffle. Outputs are the same (the differential tests run both engines); a replayed partition
gives the same rows, so it is exactly-once with any idempotent sink.

The static rows are applied once, on the driver, into the plan's static side
(``static_side.py``), which each worker decodes once and its subtasks share. The engine choice
(``planning/choice.py``) runs a plan in place only when nothing needs state: no keyed state, no
``hold_until_ready``, and applying the static rows emitted nothing (outputs of
``process_broadcast_element`` would otherwise repeat in every task). Each task runs its
partition through the one subtask runner (``subtask.py``). The per-batch driver's main side
(``streamed.py``) runs the same :class:`StatelessRunner`, bound to each micro-batch's broadcast
snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from sparkcast.spark.execution.engines import ENGINES, CachedEngine, plan_engine
from sparkcast.spark.execution.static_side import StaticBinder
from sparkcast.spark.execution.subtask import SubtaskRunner
from sparkcast.spark.plan import WorkerPlan

# process_batch sees frames of at least this many rows (Spark's Arrow batches are 10k rows;
# a function that prepares its broadcast state per call should not pay that 100 times per 1M)
MIN_FRAME_ROWS = 100_000


class StatelessRunner:
    """The ``mapInArrow`` body: input ``_ts, m_0 … m_k``; output the operator's tagged rows.
    ``bind`` gives the cached engine its broadcast state: the plan's static side
    (``static_side.StaticBinder``), or the per-batch driver's snapshot of the current
    micro-batch (``streamed.SnapshotBinder``)."""

    def __init__(self, plan: WorkerPlan, bind: Callable[[CachedEngine], None] | None = None
                 ) -> None:
        self.plan = plan
        self.bind = bind if bind is not None else StaticBinder(plan.static)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan = self.plan
        subtask = _partition() % plan.parallelism
        cached = ENGINES.entry(plan, subtask, lambda: plan_engine(plan, subtask))
        self.bind(cached)
        engine = cached.engine
        runner = SubtaskRunner(plan)
        engine.meter.begin()
        events = 0
        for table in _frames(batches, MIN_FRAME_ROWS if engine.vectorized else 1):
            events += table.num_rows
            main = runner.read(engine, table, positioned=False)
            for out in runner.run(engine, subtask, main):
                yield from out.to_batches()
        yield from runner.report(engine, subtask, events, 0).to_batches()


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
