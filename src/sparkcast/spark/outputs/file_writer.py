"""``write_stream(path)`` on the micro-batch engine where its driver works per micro-batch: the
files consumer of the ``foreachBatch`` driver (``batch_driver.py``).

Each micro-batch's outputs are written once, as micro-batch N, through the batch-id-idempotent
commit log (``state/commit_log.py``): a replayed batch is skipped once committed, else rewritten
the same way. The tasks write the files themselves (``task_files.py``) where they can write
them as Spark would, else Spark writes the batch's tagged frame. Dead letters and the other
counts come from what the tasks returned (or an ``Observation`` of Spark's write: Spark does not
put a ``foreachBatch``'s own jobs into ``observedMetrics``) and go to the listener, which merges
them into the batch's progress.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql.streaming import StreamingQuery

from sparkcast.monitoring.progress import APPLIED_ONCE
from sparkcast.spark.execution.phases import phase
from sparkcast.spark.execution.task_writer import FileLayout, Runner
from sparkcast.spark.observe.listener import listen, log, report_streamed, warning
from sparkcast.spark.observe.observation import observed, observed_row
from sparkcast.spark.outputs.batch_driver import Batch
from sparkcast.spark.outputs.files import partitioned
from sparkcast.spark.outputs.task_files import file_layout, write_in_tasks
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import storage
from sparkcast.spark.state.commit_log import CommitLog, session_interval


class FilesWriter:
    """Writes every output of a micro-batch under ``path``, once."""

    def __init__(self, plan: RuntimePlan, path: str, format: str, observation: str,
                 query_name: str | None = None) -> None:
        spark = plan.spark
        assert spark is not None
        self.plan = plan
        self.format = format
        self.observation = observation
        self.query_name = query_name
        self.log = CommitLog(path, session_interval(spark))
        #: how the tasks write the files (None: Spark writes them), known at the first batch
        self.layout: FileLayout | None = None
        self.layout_known = False

    def committed(self, batch_id: int) -> bool:
        return self.log.committed(batch_id)

    def consume(self, batch: Batch) -> None:
        """The tasks write the files (``task_files.py``) where they can, else Spark does."""
        assert self.plan.spark is not None and batch.outputs is not None
        if not self.layout_known:  # found at the first batch: the schema and conf are fixed
            self.layout = file_layout(self.plan.spark, batch.outputs.output_type(batch.frame),
                                      self.format)
            self.layout_known = True
        if self.layout is None:
            self._write_by_spark(batch)
            return
        parts = batch.outputs.parts(batch.frame, batch.batch_id, batch.partitions)
        staging = self.log.staging(batch.batch_id)
        storage.delete(staging)  # an interrupted attempt's files
        frames: list[tuple[DataFrame, Runner | None]] = [(parts.main, parts.runner)]
        if parts.corrupt is not None:
            frames.append((parts.corrupt, None))
        with phase(self.plan.spark, "the pattern, its files written by its tasks"):
            written = write_in_tasks(frames, parts.emitted, staging, self.layout)
        self.log.commit(batch.batch_id, staging, written.files)
        listen(self.plan.spark)
        self._report(batch, written.observed_row(), parts.applied)

    def _write_by_spark(self, batch: Batch) -> None:
        assert batch.outputs is not None
        tagged, applied = batch.outputs.tagged(batch.frame, batch.batch_id, batch.partitions)
        counts = Observation(f"sparkcast-{self.plan.pipeline_id}-{batch.batch_id}")
        frame = partitioned(observed(tagged, counts, self.plan.spark))
        with phase(self.plan.spark, "the pattern, its files written by Spark"):
            written = self.log.write(batch.batch_id, frame, self.format)
        if written:
            self._report(batch, observed_row(counts), applied)

    def _report(self, batch: Batch, row: dict[str, Any], applied: int) -> None:
        report(batch.query, batch.batch_id, row, applied, self.observation,
               self.query_name or "write_stream")


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
