"""The ``_metrics`` row each subtask adds to its output per call, in the Python workers.

The operator engine's processor and the micro-batch engine's runners report with three
steps: call ``engine.meter.begin()`` before the call's first engine work, encode every
output of the call with one ``OutputEncoder`` (it counts rows per output and dead letters per
callback in bulk), then ``engine.meter.finish()`` and append ``metrics_table(engine, encoder,
...)`` to the call's output. The observation (``observe/observation.py``) and the driver
(``monitoring``) do the rest. The micro-batch engine's driver, which applies each micro-batch's
broadcast elements once, sends no row of its own: its writer reports the count of elements
applied with the batch's observed row (``outputs/file_writer.py``).

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
from sparkcast.spark.execution.encoding import OutputEncoder

BATCH_ID = "streaming.sql.batchId"


def batch_id() -> int | None:
    """The micro-batch this task belongs to (None outside a streaming query)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = context.getLocalProperty(BATCH_ID) if context is not None else None
    return int(value) if value is not None else None


def metrics_table(engine: SubtaskEngine, encoder: OutputEncoder, subtask: int,
                  events_main: int, events_broadcast: int) -> pa.Table:
    """The call's ``_metrics`` row (one-row Arrow table in the operator's output layout), for
    the task's micro-batch; takes the counts ``encoder`` gathered since the last row."""
    backend: Any = engine.backend
    outputs, letters = encoder.take_counts()
    report = subtask_report(
        engine.meter, subtask=subtask, batch=batch_id(),
        events_main=events_main, events_broadcast=events_broadcast,
        held=len(engine.hold.items), version=engine.broadcast_version,
        broadcast_entries={name: len(table) for name, table in engine.broadcast.tables.items()},
        outputs=outputs, dead_letters=letters, keyed=getattr(backend, "written", None))
    return encoder.metrics_table(report)
