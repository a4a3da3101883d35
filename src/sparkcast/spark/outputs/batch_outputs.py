"""ONE ``foreachBatch`` query for every output, on any path: ``foreach_batch`` and
``write_stream(sinks=...)`` consume it.

Each micro-batch's tagged frame (``layout.py``) comes from the plan's path:

* streamed: the query's input is the union of both sides, and ``execution/streamed.py`` builds
  the batch's frame (broadcast applied once on the driver, main rows in one ``mapInArrow``): the
  fast path, where it is correct;
* operator and stateless: the query's input IS the tagged frame; Spark's state store (operator)
  and the deterministic runner (stateless) give a replayed batch the same rows.

The frame is split into the typed outputs (``typed.py``). With ``persist`` (the sinks' writer,
which writes every output) it is persisted for the batch, as Spark recomputes an unpersisted
``foreachBatch`` frame from the sources at each action; ``foreach_batch`` leaves that to the
user's function (one action, one computation), except on the operator path, where the frame is
always persisted and materialised, even if the consumer reads nothing: the stateful operator
must run each batch exactly once to commit its state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql.streaming import StreamingQuery

from sparkcast.spark.execution.batch_sides import query_of, side_partitions
from sparkcast.spark.execution.partitioned import micro_batch_outputs
from sparkcast.spark.layout import BROADCAST_SIDE
from sparkcast.spark.observe.observation import next_name, observed
from sparkcast.spark.outputs import streamed_writer
from sparkcast.spark.outputs.sinks import TaggedOutputs, prepare_checkpoint
from sparkcast.spark.outputs.typed import split
from sparkcast.spark.plan import Engine

#: ``(tagged, {output: typed frame}, batch_id)``: what a consumer of the query gets per batch
Consumer = Callable[[DataFrame, dict[str, DataFrame], int], None]


class TaggedBatches:
    """The query's input and each micro-batch's tagged frame, for the plan's path."""

    def __init__(self, outputs: TaggedOutputs, checkpoint_location: str, count: bool,
                 persist: bool) -> None:
        plan = outputs.plan
        assert plan.spark is not None
        self.plan = plan
        #: whether each batch's counts are observed and reported (costs one materialising job)
        self.count = count
        self.persist = persist or plan.engine is Engine.OPERATOR
        if outputs.observation is None:
            outputs.observation = next_name(plan.spark)
        self.observation = outputs.observation
        self.streamed = (micro_batch_outputs(plan, checkpoint_location)
                         if plan.per_batch_driver else None)
        self.input = plan.streamed_input if self.streamed is not None else outputs.tagged

    @contextmanager
    def tagged(self, batch: DataFrame, batch_id: int) -> Iterator[DataFrame]:
        """The batch's tagged frame, persisted while the consumer runs."""
        with self._computed(batch, batch_id) as tagged:
            if not self.persist:
                yield tagged
                return
            tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
            try:
                if self.plan.engine is Engine.OPERATOR:
                    tagged.count()  # the state of this batch is committed only if it runs
                yield tagged
            finally:
                tagged.unpersist()

    @contextmanager
    def _computed(self, batch: DataFrame, batch_id: int) -> Iterator[DataFrame]:
        if self.streamed is None:
            yield batch
            return
        spark = self.plan.spark
        assert spark is not None
        query = query_of(batch, spark)
        sides = None if self.streamed.corrupt else side_partitions(batch, query)
        if sides is None:
            batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            partitions = None if sides is None else sides.get(BROADCAST_SIDE, [])
            tagged, applied = self.streamed.tagged(batch, batch_id, partitions)
            if not self.count:
                yield tagged
                return
            counts = Observation(f"sparkcast-{self.plan.pipeline_id}-{batch_id}")
            tagged = observed(tagged, counts, spark)
            yield tagged
            streamed_writer.report(query, batch_id, counts.get, applied, self.observation,
                                   "write_stream")
        finally:
            if sides is None:
                batch.unpersist()


class BatchFunction:
    """The ``foreachBatch`` function: the batch's tagged frame, split, to the consumer."""

    def __init__(self, batches: TaggedBatches, consumer: Consumer) -> None:
        self.batches = batches
        self.consumer = consumer

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.batches.tagged(batch, batch_id) as tagged:
            if self.batches.count and self.batches.streamed is not None:
                tagged.count()  # the observation's counts, reported after the consumer
            self.consumer(tagged, split(tagged, self.batches.plan), batch_id)


def start(outputs: TaggedOutputs, consumer: Consumer, checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None, count: bool,
          persist: bool) -> StreamingQuery:
    """Check the checkpoint, then start the one query feeding ``consumer`` every batch."""
    prepare_checkpoint(outputs, checkpoint_location)
    if outputs.plan.per_batch_driver:
        streamed_writer.refuse_other_state(outputs.plan, checkpoint_location)
    batches = TaggedBatches(outputs, checkpoint_location, count, persist)
    assert batches.input is not None
    writer = (streamed_writer.input_stream(outputs.plan) if batches.streamed is not None
              else batches.input.writeStream)
    stream = (writer.foreachBatch(BatchFunction(batches, consumer))
              .option("checkpointLocation", checkpoint_location))
    return streamed_writer.start_query(stream, trigger, query_name)
