"""The task side of writing a micro-batch's outputs from the pattern's own tasks
(``sinks_in_tasks.py``): the ``mapInArrow`` body that follows the pattern in the same Spark
stage.

Its input is the pattern's tagged frame (``layout.py``) with the subtask that emitted each row
(``_subtask``) and, for every output into ``sinks.kafka``, that output's record key and value
as Spark's ``to_json``/``to_avro`` made them (``kafka_values.py``) in two columns, and its
headers in a third for a sink with ``headers=``. Per task:

* every row is counted as the observation would count it (rows per output, dead letters,
  ``_metrics`` reports);
* a ``sinks.files`` output's rows go into that sink's staging folder, as the files writer's
  tasks write them (``task_writer.OutputFiles``);
* a Kafka output's rows are buffered per subtask, then each subtask's rows go to the topic in
  ONE transaction with the marker ``(query, output, subtask) → batch``
  (``kafka_transactions.PartWriter``): a key lives in one subtask, so its records stay in
  order, and a subtask's rows of a batch are the same in a replay (source order), so the
  marker tells a replay what to skip (``PartWriter.write_once``: every attempt of a part finds
  out exactly whether it is in before it writes). The whole partition is read before the first
  transaction begins, so a row Spark cannot encode fails the task before it writes anything;
* last, each of the partition's subtasks publishes the keyed state that the pattern staged
  under this task attempt's name (:class:`StagedState`, ``state/keyed_store.py``), or, where a
  part of the subtask was in already, the state of the attempt its marker names: the state
  after the batch is the state that produced the outputs Kafka holds.

It returns small rows (:data:`WRITTEN`): the files, the Kafka parts written, the rows per
output and the tally. This module is what the tasks unpickle: it imports pyarrow, the keyed
store (sqlite3) and, through the part writer, confluent-kafka only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcast.errors import SinkError
from sparkcast.spark.execution.task_writer import (
    FileLayout,
    OutputFiles,
    Tally,
    by_output,
    task_partition,
)
from sparkcast.spark.layout import SUBTASK
from sparkcast.spark.outputs.kafka_client import LOG
from sparkcast.spark.outputs.kafka_transactions import PartWriter
from sparkcast.spark.state import checkpoint_files, keyed_store

#: a task's rows: a file of files sink ``sink``; a Kafka ``part`` written; an output's
#: ``rows`` (no file, no part); the tally (``summary``)
WRITTEN = "sink int, output string, file string, part int, rows long, summary string"
_WRITTEN = pa.schema([pa.field("sink", pa.int32()), pa.field("output", pa.string()),
                      pa.field("file", pa.string()), pa.field("part", pa.int32()),
                      pa.field("rows", pa.int64()), pa.field("summary", pa.string())])


def record_columns(index: int) -> tuple[str, str, str]:
    """The key, value and headers columns of the ``index``-th Kafka output of the writer's
    input (the headers only for a sink with ``headers=``)."""
    return f"_kafka_key_{index}", f"_kafka_value_{index}", f"_kafka_headers_{index}"


@dataclass(frozen=True)
class FilesTarget:
    """A ``sinks.files`` sink whose batch is not committed: its outputs, its staging folder."""

    outputs: frozenset[str]
    staging: str
    layout: FileLayout


@dataclass(frozen=True)
class KafkaTarget:
    """A ``sinks.kafka`` output, the ``index`` of its record columns, its part writer (one
    part per subtask)."""

    output: str
    index: int
    writer: PartWriter


@dataclass(frozen=True)
class StagedState:
    """The batch's keyed state as each task attempt of the pattern staged it
    (``keyed_store.publish``), to publish per subtask once its Kafka parts are decided: the
    attempt a committed part's marker names (a replay adopts it, and never the state its own
    run computed), or this attempt where its parts are its own."""

    checkpoint: str
    batch_id: int
    nonce: str  #: the driver's for this batch's job (``keyed_store.attempt_token``)
    #: subtask → the attempts its parts' markers of the batch name, read at the run's start
    named: Mapping[int, tuple[str, ...]]

    @property
    def location(self) -> str:
        """The keyed store's folder in the checkpoint."""
        return keyed_store.folder(self.checkpoint)

    def publish(self, subtasks: tuple[int, ...], kafka: tuple[KafkaTarget, ...]) -> None:
        """Each of ``subtasks``' state, unless Spark committed the batch already: this attempt
        is then a zombie (its executor declared lost, its stage re-attempted), and the batch's
        state was published by the attempt that counted (a later batch may have read it)."""
        if checkpoint_files.committed(self.checkpoint, self.batch_id):
            LOG.info(f"micro-batch {self.batch_id} is committed: this attempt of subtasks "
                     f"{list(subtasks)} publishes no keyed state (a zombie's)")
            return
        own = keyed_store.attempt_token(self.nonce)
        for subtask in subtasks:
            named = sorted({*self.named.get(subtask, ()),
                            *(a for t in kafka if (a := t.writer.named_attempt(subtask)))})
            if len(named) > 1:
                LOG.warning(f"subtask {subtask} of micro-batch {self.batch_id}: its Kafka "
                            f"outputs' parts were committed by different attempts ({named}); "
                            f"its keyed state is {named[0]}'s, which the other parts' "
                            "outputs did not come from")
            if named and named[0] != own:
                if keyed_store.publish(self.location, subtask, self.batch_id, named[0]):
                    continue
                LOG.warning(f"subtask {subtask} of micro-batch {self.batch_id}: the keyed "
                            f"state of attempt {named[0]}, whose outputs Kafka holds, is gone; "
                            "this attempt's is kept, which may not be the state those "
                            "outputs came from")
            if not keyed_store.publish(self.location, subtask, self.batch_id, own):
                raise SinkError(f"subtask {subtask} of micro-batch {self.batch_id}: this "
                                "attempt staged no keyed state to publish")


@dataclass(frozen=True)
class SinkTaskWriter:
    """The ``mapInArrow`` body: one partition's tagged rows into the targets, then each of its
    subtasks' staged keyed state published (``state``; None: the runner wrote it in place)."""

    files: tuple[FilesTarget, ...]
    kafka: tuple[KafkaTarget, ...]
    #: the subtasks each partition holds: their Kafka producers are made ready while the
    #: pattern runs (``PartWriter.prepare``), their state published at the end
    subtasks_by_partition: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    state: StagedState | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        partition = task_partition()
        for kafka_target in self.kafka:
            for subtask in self.subtasks_by_partition.get(partition, ()):
                kafka_target.writer.prepare(subtask)
        received = [b for b in batches if b.num_rows]
        files = [OutputFiles(t.staging, t.layout, partition) for t in self.files]
        kafka = {t.output: t for t in self.kafka}
        parts: dict[tuple[str, int], list[pa.RecordBatch]] = {}
        rows: dict[str, int] = {}
        tally = Tally()
        for batch in received:
            for name, found in by_output(batch):
                rows[name] = rows.get(name, 0) + found.num_rows
                tally.count(name, found)
                for target, written in zip(self.files, files, strict=True):
                    if name in target.outputs:
                        written.add(name, found)
                if name in kafka:
                    for subtask, records in _records(found, kafka[name].index):
                        parts.setdefault((name, subtask), []).append(records)
        result = [{**row, "sink": index} for index, written in enumerate(files)
                  for row in written.close()]
        attempt = (keyed_store.attempt_token(self.state.nonce) if self.state is not None
                   else None)
        for (name, subtask), records in parts.items():
            count = kafka[name].writer.write_once(subtask, records, attempt)
            if count is not None:
                result.append({"output": name, "part": subtask, "rows": count})
        result.extend({"output": name, "rows": count} for name, count in rows.items())
        result.append({"summary": tally.encode()})
        if self.state is not None:
            self.state.publish(self.subtasks_by_partition.get(partition, ()), self.kafka)
        yield pa.RecordBatch.from_pylist(result, schema=_WRITTEN)


def _records(rows: pa.RecordBatch, index: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``rows`` as ``key``/``value`` batches (and ``headers``, for a sink with them), per
    subtask (the runner emits a subtask's rows together; Spark's Arrow batches may hold the end
    of one and the start of the next)."""
    names = ["key", "value", "headers"]
    chosen = [(name, column) for name, column in zip(names, record_columns(index), strict=True)
              if column in rows.schema.names]
    records = pa.RecordBatch.from_arrays([rows.column(column) for _, column in chosen],
                                         names=[name for name, _ in chosen])
    subtasks = rows.column(SUBTASK)
    for subtask in pc.unique(subtasks).to_pylist():
        yield subtask, records.filter(pc.equal(subtasks, subtask))


def with_subtask(runner: Any) -> Any:
    """``runner`` (``PartitionedRunner``) as a ``mapInArrow`` body whose tagged batches end
    with the ``_subtask`` column of the subtask that emitted them."""
    return _Labelled(runner)


@dataclass(frozen=True)
class _Labelled:
    runner: Any

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for subtask, outputs in self.runner.by_subtask(batches):
            for batch in outputs:
                label = pa.array([subtask] * batch.num_rows, pa.int32())
                yield pa.RecordBatch.from_arrays([*batch.columns, label],
                                                 names=[*batch.schema.names, SUBTASK])
