"""Each micro-batch's typed outputs, for ``foreach_batch`` and ``write_stream(sinks=...)``: the
frames consumer of the ``foreachBatch`` driver (``batch_driver.py``), on either engine.

The batch's tagged frame (``layout.py``) is the query's input on the operator engine and the
micro-batch engine in place; where the micro-batch engine's driver works per micro-batch,
``execution/streamed.py`` builds it (broadcast applied once on the driver, main rows in one
``mapInArrow``). The frame is split into the typed outputs (``typed.Outputs``, each built
when the consumer first reads it). With ``persist`` (the sinks' writer, which writes every
output) it is persisted for the batch, as Spark recomputes an unpersisted ``foreachBatch``
frame from the sources at each action; ``foreach_batch`` leaves
that to the user's function (one action, one computation), except on the operator engine,
where the frame is always persisted and materialised, even if the consumer reads nothing: the
stateful operator must run each batch exactly once to commit its state. Where the batch's
counts are taken before the consumer runs (the sinks' writer on the micro-batch engine), the
consumer is also told which outputs hold no rows (``typed.empty_outputs``), so it need not
start a Spark job to write nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql.streaming import StreamingQuery

from sparkcast.spark.execution.phases import phase
from sparkcast.spark.observe.observation import next_name, observed
from sparkcast.spark.outputs import batch_driver
from sparkcast.spark.outputs.batch_driver import Batch
from sparkcast.spark.outputs.file_writer import report
from sparkcast.spark.outputs.sinks import TaggedOutputs, prepare_checkpoint
from sparkcast.spark.outputs.typed import Outputs, empty_outputs
from sparkcast.spark.planning.shapes import state_in_frame

#: ``(tagged, {output: typed frame}, batch_id, outputs known to hold no rows)``: what a
#: consumer of the query gets per batch
Consumer = Callable[[DataFrame, Mapping[str, DataFrame], int, frozenset[str]], None]


class TypedFrames:
    """Each micro-batch's tagged frame, split, to ``consumer``."""

    def __init__(self, outputs: TaggedOutputs, consumer: Consumer, count: bool,
                 persist: bool) -> None:
        plan = outputs.plan
        assert plan.spark is not None
        self.plan = plan
        self.consumer = consumer
        #: whether each batch's counts are observed and reported (costs one materialising job)
        self.count = count
        self.persist = persist or state_in_frame(plan)
        if outputs.observation is None:
            outputs.observation = next_name(plan.spark)
        self.observation = outputs.observation

    def committed(self, batch_id: int) -> bool:
        return False  # the consumer's sinks tell a replay themselves

    def consume(self, batch: Batch) -> None:
        with self._tagged(batch) as (tagged, counts):
            empty: frozenset[str] = frozenset()
            if counts is not None:
                with phase(self.plan.spark, "the pattern, its outputs counted"):
                    tagged.count()  # the observation's counts, reported after the consumer
                empty = empty_outputs(counts.get, self.plan)
            self.consumer(tagged, Outputs(tagged, self.plan), batch.batch_id, empty)

    @contextmanager
    def _tagged(self, batch: Batch) -> Iterator[tuple[DataFrame, Observation | None]]:
        """The batch's tagged frame, persisted while the consumer runs, and its counts."""
        with self._computed(batch) as (tagged, counts):
            if not self.persist:
                yield tagged, counts
                return
            tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                if state_in_frame(self.plan):
                    with phase(self.plan.spark, "the pattern"):
                        tagged.count()  # the state of this batch is committed only if it runs
                yield tagged, counts
            finally:
                tagged.unpersist()

    @contextmanager
    def _computed(self, batch: Batch) -> Iterator[tuple[DataFrame, Observation | None]]:
        """The batch's tagged frame and, where this writer counts it, the observation of its
        counts (filled by the first action on the frame)."""
        if batch.outputs is None:
            yield batch.frame, None
            return
        tagged, applied = batch.outputs.tagged(batch.frame, batch.batch_id, batch.partitions)
        if not self.count:
            yield tagged, None
            return
        counts = Observation(f"sparkcast-{self.plan.pipeline_id}-{batch.batch_id}")
        yield observed(tagged, counts, self.plan.spark), counts
        report(batch.query, batch.batch_id, counts.get, applied, self.observation,
               "write_stream")


def start(outputs: TaggedOutputs, consumer: Consumer, checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None, count: bool,
          persist: bool, before_start: Callable[[], None] | None = None) -> StreamingQuery:
    """Check the checkpoint, run ``before_start`` (the sinks' start of a run), then start the
    one query feeding ``consumer`` every batch."""
    outputs = prepare_checkpoint(outputs, checkpoint_location)
    if before_start is not None:
        before_start()
    frames = TypedFrames(outputs, consumer, count, persist)
    return batch_driver.start(outputs.plan, lambda: outputs.tagged, frames,
                              checkpoint_location, trigger, query_name)
