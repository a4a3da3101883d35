"""THE ``foreachBatch`` driver of every query of ours that needs one: ``write_stream`` to files
on the micro-batch engine, ``write_stream(sinks=...)`` and ``foreach_batch`` on either engine.

One function (``BatchDriver``) receives each micro-batch and hands it, as a ``Batch``, to one
consumer: the files writer (``file_writer.py``), or the typed frames of ``foreach_batch`` and
the sinks (``batch_outputs.py``). What it does first is the same for all of them:

* a consumer that already committed the batch (a replay) is not called;
* on the micro-batch engine, whose driver works per micro-batch (``RuntimePlan.per_batch_driver``),
  the query's input is the union of the inputs (``tagging.streamed_input``) and the batch
  arrives as an opaque ``LogicalRDD``: each action recomputes it from the sources. The
  broadcast rows are then read from the broadcast source's partitions alone
  (``batch_sides``), and the main rows once, by the consumer's write. Where the partitions
  cannot be told apart, or malformed rows make the write read the batch twice, the batch is
  persisted while the consumer runs, so the main rows are read (and counted) once;
* on the operator engine and the micro-batch engine in place, the query's input is the tagged
  frame itself, handed over as it is.

A micro-batch interrupted by ``query.stop()`` ends in a short error that says so
(``errors.MicroBatchInterrupted``). Spark tells a stop from a failure by matching the Python
error's text against its ``StreamExecution.PROXY_ERROR`` pattern, which recurses once per
character: the interrupted Spark job's own error, a Python traceback over a Java stack trace,
overflowed the stream thread's stack (``java.lang.StackOverflowError`` and pages of trace on
every stop).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from sparkcast.errors import MicroBatchInterrupted
from sparkcast.spark.execution.batch_sides import query_of, side_partitions
from sparkcast.spark.execution.streamed import MicroBatchOutputs
from sparkcast.spark.layout import BROADCAST_SIDE
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.planning.file_splits import fix_splits
from sparkcast.spark.planning.shapes import batch_outputs, input_writer, refuse_other_state

#: what Spark's ``StreamExecution.isInterruptionException`` takes for a stop: a Py4J error
#: whose text names one of these (``IO_EXCEPTION_NAMES``)
INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                 "java.nio.channels.ClosedByInterruptException")
_INTERRUPTED = re.compile("|".join(re.escape(name) for name in INTERRUPTIONS))


@dataclass(frozen=True)
class Batch:
    """One micro-batch as the driver hands it to a consumer."""

    frame: DataFrame  #: what ``foreachBatch`` received
    batch_id: int
    #: the micro-batch engine's builder of the batch's outputs (None: ``frame`` is tagged)
    outputs: MicroBatchOutputs | None = None
    query: StreamingQuery | None = None  #: the query running it (None: not found)
    #: the broadcast side's partitions of ``frame`` (None: find its rows by filtering)
    partitions: list[int] | None = None


class BatchConsumer(Protocol):
    """What the driver gives each micro-batch to."""

    def committed(self, batch_id: int) -> bool:
        """Whether this batch was committed before (a replay the consumer skips)."""
        ...

    def consume(self, batch: Batch) -> None: ...


class BatchDriver:
    """The ``foreachBatch`` function: each micro-batch, once, to the consumer."""

    def __init__(self, plan: RuntimePlan, checkpoint_location: str,
                 consumer: BatchConsumer) -> None:
        self.plan = plan
        self.consumer = consumer
        self.outputs = batch_outputs(plan, checkpoint_location)

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            self._consume(frame, batch_id)
        except Exception as error:  # noqa: BLE001 - only an interruption is rewritten
            found = _INTERRUPTED.search(str(error))
            if found is None:
                raise
            raise MicroBatchInterrupted(
                f"py4j.protocol.Py4JJavaError: An error occurred while calling micro-batch "
                f"{batch_id}: {found.group(0)} (the query was stopped)") from None

    def _consume(self, frame: DataFrame, batch_id: int) -> None:
        if self.consumer.committed(batch_id):
            return
        if self.outputs is None:
            self.consumer.consume(Batch(frame, batch_id))
            return
        with self._sides(frame) as (query, partitions):
            self.consumer.consume(Batch(frame, batch_id, self.outputs, query, partitions))

    @contextmanager
    def _sides(self, frame: DataFrame
               ) -> Iterator[tuple[StreamingQuery | None, list[int] | None]]:
        """The query and the broadcast partitions of ``frame``; without the partitions, the
        frame persisted while the consumer runs."""
        assert self.plan.spark is not None and self.outputs is not None
        query = query_of(frame, self.plan.spark)
        sides = None if self.outputs.corrupt else side_partitions(frame, query)
        if sides is not None:
            yield query, sides.get(BROADCAST_SIDE, [])
            return
        frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            yield query, None
        finally:
            frame.unpersist()


def start(plan: RuntimePlan, tagged: Callable[[], DataFrame], consumer: BatchConsumer,
          checkpoint_location: str, trigger: dict[str, Any] | None,
          query_name: str | None) -> StreamingQuery:
    """The one query feeding ``consumer`` every micro-batch: over the union of the inputs where
    the driver works per micro-batch (``shapes.batch_outputs``), else over ``tagged()``, the
    plan's tagged frame."""
    driver = BatchDriver(plan, checkpoint_location, consumer)
    if driver.outputs is not None:
        refuse_other_state(plan, checkpoint_location)
        assert plan.streamed_input is not None
        frame, writer = plan.streamed_input, input_writer(plan)
    else:
        frame = tagged()
        writer = frame.writeStream
    return start_query(frame, writer.foreachBatch(driver), checkpoint_location, trigger,
                       query_name)


def start_query(frame: DataFrame, stream: DataStreamWriter, checkpoint_location: str,
                trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """Start ``stream``, the writer of ``frame``, on its checkpoint with the user's trigger and
    query name (either may be left out), its file sources cut as the checkpoint's first start
    cut them."""
    stream = stream.option("checkpointLocation", checkpoint_location)
    if query_name:
        stream = stream.queryName(query_name)
    if trigger:
        stream = stream.trigger(**trigger)
    holds = fix_splits(frame, checkpoint_location)
    query = stream.start()
    holds(query)
    return query
