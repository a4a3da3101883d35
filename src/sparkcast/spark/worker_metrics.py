"""The ``_metrics`` row each subtask adds to its output per call, in the Python workers.

Any path that runs a ``SubtaskEngine`` reports the same way, with three steps: call
``engine.meter.begin()`` before the call's first engine work, encode every output of the call
with one ``OutputEncoder`` (it counts rows per output and dead letters per callback in bulk),
then ``engine.meter.finish()`` and append ``metrics_table(engine, encoder, ...)`` to the call's
output. The observation (``observe.py``) and the driver (``monitoring``) do the rest. Both
operator paths do this (``processor.py`` and the shuffle-free ``stateless.py``).

The row's payload is ``core/batch_metrics.py``'s report with the micro-batch id, which Spark
hands every task as the local property ``streaming.sql.batchId`` (so the driver can attribute a
broadcast version to the batch that applied it, even when the progress of that batch was not
seen).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from sparkcast.core.batch_metrics import subtask_report
from sparkcast.core.engine import SubtaskEngine
from sparkcast.spark.rows import OutputEncoder

BATCH_ID = "streaming.sql.batchId"


def batch_id() -> int | None:
    """The micro-batch this task belongs to (None outside a streaming query)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty(BATCH_ID) if context is not None else None
    return int(value) if value is not None else None


def metrics_table(engine: SubtaskEngine, encoder: OutputEncoder, subtask: int,
                  events_main: int, events_broadcast: int, batch: int | None = None
                  ) -> pa.Table:
    """The call's ``_metrics`` row (one-row Arrow table in the operator's output layout);
    takes the counts ``encoder`` gathered since the last row. ``batch`` defaults to the task's
    micro-batch id (give it where the engine runs outside a task, e.g. in ``foreachBatch``)."""
    backend: Any = engine.backend
    outputs, letters = encoder.take_counts()
    report = subtask_report(
        engine.meter, subtask=subtask, batch=batch if batch is not None else batch_id(),
        events_main=events_main, events_broadcast=events_broadcast,
        held=len(engine.hold.items), version=engine.broadcast_version,
        broadcast_entries={name: len(table) for name, table in engine.broadcast.tables.items()},
        outputs=outputs, dead_letters=letters, keyed=getattr(backend, "written", None))
    return encoder.metrics_table(report)
