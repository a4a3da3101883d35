"""The ``_metrics`` row each subtask adds to its output per call, in the Python workers.

Both operator paths (``processor.py`` and the shuffle-free ``stateless.py``) call
``metrics_table`` after the engine ran; the row's payload is ``core/batch_metrics.py``'s report
with the micro-batch id, which Spark hands every task as the local property
``streaming.sql.batchId`` (so the driver can attribute a broadcast version to the batch that
applied it, even when the progress of that batch was not seen).
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
                  events_main: int, events_broadcast: int) -> pa.Table:
    """The call's ``_metrics`` row; ``encoder`` has just encoded the call's outputs and
    ``engine.meter.finish()`` closed the call's timing."""
    backend: Any = engine.backend
    report = subtask_report(
        engine.meter, subtask=subtask, batch=batch_id(), events_main=events_main,
        events_broadcast=events_broadcast, held=len(engine.hold.items),
        version=engine.broadcast_version,
        broadcast_entries={name: len(table) for name, table in engine.broadcast.tables.items()},
        outputs=encoder.counts, dead_letters=encoder.letters,
        keyed=getattr(backend, "written", None))
    return encoder.metrics_table(report)
