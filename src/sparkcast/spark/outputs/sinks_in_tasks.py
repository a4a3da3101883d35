"""``write_stream(sinks=...)`` with the outputs written by the pattern's own tasks: the consumer
of the ``foreachBatch`` driver (``batch_driver.py``) where the micro-batch engine runs the
pattern by subtask (``shapes.outputs_in_tasks``) and every sink is ``sinks.kafka`` or
``sinks.files``.

Written by the driver (``batch_outputs.py``, ``sink_writer.SinkWriter``), a micro-batch costs a job
that runs the pattern into a persisted frame and counts it, then, per Kafka output, the typed
frame's records shuffled into the sink's parts and a second job over the persisted frame, and
the driver builds each of those frames through py4j. Here ONE job does all of it: the pattern's
``mapInArrow`` (each row labelled with its subtask), Spark's ``to_json``/``to_avro`` of each
Kafka output's records in the same stage, and a second ``mapInArrow``
(``task_sinks.SinkTaskWriter``) that writes each subtask's rows of each Kafka output in one
transaction with its marker, and each files sink's rows into its staging folder. The dead letters
of malformed input rows (malformed-row capture) are in no subtask: one more task writes them, as
one more part (``kafka.malformed_part``). With a Kafka sink, each task attempt stages its
subtasks' keyed state, and the task publishes the state of the attempt each part's marker
names (``task_sinks.StagedState``). The driver then commits the files (after Kafka, as
before) and reports the counts the tasks took.

A part is a subtask (``kafka_marker_reads.PARTS_BY_SUBTASK`` in its markers), so the sinks'
``parallelism`` does not apply: a key's records are in one subtask, in the order the function
emitted them, and a replay gives the subtask the same rows. A checkpoint whose markers say the
driver split its rows by key keeps that way (``KafkaWriter.by_subtask``), as does a query
whose files Spark must write (another format, a column type pyarrow does not write as Spark
would). Which way a run goes is decided before its query starts (``SinksInTasks.decide``):
the checkpoint's query id is known then (``checkpoint_files.query_id``), and every Kafka part
is fenced and the markers read there, once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import IntegerType, StructField, StructType

from sparkcast.spark.execution.encoding import tagged_schema
from sparkcast.spark.execution.partitioned import PartitionedOutputs, PartitionedRunner
from sparkcast.spark.execution.phases import phase
from sparkcast.spark.execution.task_writer import FileLayout, Tally
from sparkcast.spark.layout import SUBTASK, TS
from sparkcast.spark.observe.listener import listen, log
from sparkcast.spark.outputs import batch_driver
from sparkcast.spark.outputs.batch_driver import Batch, BatchConsumer
from sparkcast.spark.outputs.batch_outputs import TypedFrames
from sparkcast.spark.outputs.file_writer import report
from sparkcast.spark.outputs.kafka import KafkaSink, KafkaWriter, malformed_part
from sparkcast.spark.outputs.kafka_values import encoded, header_records
from sparkcast.spark.outputs.sinks import TaggedOutputs, prepare_checkpoint
from sparkcast.spark.outputs.task_files import Written, file_layout
from sparkcast.spark.outputs.task_sinks import (
    WRITTEN,
    FilesTarget,
    KafkaTarget,
    SinkTaskWriter,
    StagedState,
    record_columns,
    with_subtask,
)
from sparkcast.spark.outputs.typed import typed_row
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import storage
from sparkcast.spark.state.commit_log import CommitLog


class SinkWriter(Protocol):
    """What this writer needs of the driver's sink writer (``sink_writer.SinkWriter``), which it
    falls back to: the sinks by kind and the query they belong to."""

    files: dict[Any, list[str]]  #: ``sinks.files`` sink (``path``, ``format``) → its outputs
    kafka: list[tuple[str, KafkaSink]]
    checkpoint: str
    interval: int  #: the files sinks' commit log compaction interval
    kafka_writer: KafkaWriter | None

    @property
    def query_id(self) -> str: ...

    def __call__(self, tagged: DataFrame, frames: Mapping[str, DataFrame], batch_id: int,
                 empty: frozenset[str]) -> None:
        """Write the batch from the driver (``batch_outputs.Consumer``)."""


@dataclass(frozen=True)
class _Files:
    """A files sink of this batch: its log, staging folder and what its tasks write."""

    log: CommitLog
    staging: str
    target: FilesTarget


class SinksInTasks:
    """Each micro-batch's outputs written by the pattern's tasks, or, where they cannot be, by
    ``fallback``, the driver's sink writer: decided once for the run, before the query starts
    (:meth:`decide`), from the checkpoint and the sinks."""

    def __init__(self, plan: RuntimePlan, writer: SinkWriter, fallback: BatchConsumer,
                 observation: str, query_name: str | None) -> None:
        self.plan = plan
        self.writer = writer
        self.fallback = fallback
        self.observation = observation
        self.query_name = query_name
        self.in_tasks: bool | None = None  # decided before the query starts
        self.layouts: dict[str, FileLayout | None] = {}  # by files sink's path

    def committed(self, batch_id: int) -> bool:
        return False  # the sinks tell a replay themselves

    def consume(self, batch: Batch) -> None:
        assert self.in_tasks is not None, "decide() before the query starts"
        if not self.in_tasks:
            self.fallback.consume(batch)
            return
        self._write(batch)

    def decide(self) -> None:
        """Whether the tasks write this run's batches: every files sink's layout is one they
        write, and no marker of the checkpoint says the driver split a Kafka output's rows by
        key. Every Kafka part is fenced and the markers read here, once a run, before the
        query starts (the fallback's Kafka writer is this one)."""
        spark, streamed = self.plan.spark, self.plan.streamed_input
        assert spark is not None and streamed is not None
        tagged = tagged_schema(self.plan.output_schema, streamed.schema[TS].dataType)
        layouts = {sink.path: file_layout(spark, tagged, sink.format)
                   for sink in self.writer.files}
        able = None not in layouts.values()
        kafka = KafkaWriter(self.writer.query_id, self.writer.checkpoint, self.writer.kafka,
                            self.plan.parallelism if able else None)
        kafka.run()
        self.writer.kafka_writer = kafka
        self.layouts = layouts
        self.in_tasks = able and kafka.by_subtask
        if self.in_tasks:
            self._warn_parallelism()

    def _warn_parallelism(self) -> None:
        """A Kafka sink's ``parallelism`` other than the subtasks' does not apply here."""
        for output, sink in self.writer.kafka:
            if sink.parallelism not in (None, self.plan.parallelism):
                log.warning(f"output {output!r}, sink {sink.describe()}: parallelism="
                            f"{sink.parallelism} does not apply: the pattern's "
                            f"{self.plan.parallelism} subtasks write its rows, one Kafka "
                            "transaction per subtask and micro-batch (docs/sinks.md)")

    def _write(self, batch: Batch) -> None:
        spark = self.plan.spark
        assert spark is not None and batch.outputs is not None
        parts = batch.outputs.parts(batch.frame, batch.batch_id, batch.partitions)
        files = self._files(batch.batch_id)
        kafka = self.writer.kafka_writer
        assert kafka is not None
        targets = []
        for index, (output, sink) in enumerate(self.writer.kafka):
            writer = kafka.part_writer(sink, output, batch.batch_id)
            if writer is not None:
                targets.append(KafkaTarget(output, index, writer))
        tagged = batch.outputs.output_type(batch.frame)
        runner, state = self._staged(batch, parts.runner, kafka)
        labelled = parts.main.mapInArrow(with_subtask(runner), StructType(
            [*tagged.fields, StructField(SUBTASK, IntegerType())]))
        if parts.corrupt is not None:  # in no subtask: one part of their own, one task
            part = F.lit(malformed_part(self.plan.parallelism)).cast("int")
            labelled = labelled.unionByName(
                parts.corrupt.withColumn(SUBTASK, part).coalesce(1))
        records = labelled.select("*", *self._record_columns(targets))
        held = (batch.outputs.subtasks_by_partition
                if isinstance(batch.outputs, PartitionedOutputs) else {})
        task_writer = SinkTaskWriter(tuple(f.target for f in files), tuple(targets), held,
                                     state)
        with phase(spark, "the pattern, its outputs written by its tasks"):
            rows = [row.asDict() for row in records.mapInArrow(task_writer, WRITTEN).collect()]
        for output, sink in self.writer.kafka:
            kafka.written(sink, output, batch.batch_id,
                          [r["part"] for r in rows if r["output"] == output
                           and r["part"] is not None])
        for index, staged in enumerate(files):
            names = [r["file"] for r in rows if r["sink"] == index and r["file"]]
            if names:
                staged.log.commit(batch.batch_id, staged.staging, names)
            else:
                staged.log.log_empty(batch.batch_id)
        listen(spark)
        report(batch.query, batch.batch_id, _counted(rows), parts.applied, self.observation,
               self.query_name or "write_stream")

    def _staged(self, batch: Batch, runner: Any, kafka: KafkaWriter
                ) -> tuple[Any, StagedState | None]:
        """``runner`` with each task attempt's keyed state staged for its Kafka parts' markers
        to name, and what the tasks publish it by; ``runner`` as it is (None) without a keyed
        store or a Kafka sink."""
        if not isinstance(runner, PartitionedRunner) or not self.writer.kafka:
            return runner, None
        assert isinstance(batch.outputs, PartitionedOutputs)
        nonce = uuid.uuid4().hex
        return runner.staged(nonce), StagedState(batch.outputs.checkpoint, batch.batch_id,
                                                 nonce, kafka.named_attempts(batch.batch_id))

    def _files(self, batch_id: int) -> list[_Files]:
        """The files sinks that have not committed the batch, each with a clean staging
        folder (an interrupted attempt's files removed)."""
        found = []
        for sink, names in self.writer.files.items():
            log = CommitLog(sink.path, self.writer.interval)
            if log.committed(batch_id):
                continue
            staging = log.staging(batch_id)
            storage.delete(staging)
            layout = self.layouts[sink.path]
            assert layout is not None  # the tasks write only where every layout is known
            found.append(_Files(log, staging, FilesTarget(frozenset(names), staging, layout)))
        return found

    def _record_columns(self, targets: list[KafkaTarget]) -> list[Column]:
        """Each Kafka output's record key and value, on its rows (null on the others)."""
        columns = []
        sinks = dict(self.writer.kafka)
        for target in targets:
            sink = sinks[target.output]
            rows, typed = typed_row(self.plan, target.output)
            record = F.struct(*typed)
            value = encoded(record if sink.headers is None else record.dropFields(sink.headers),
                            sink.schema)
            key = (record.getField(sink.key).cast("string") if sink.key is not None
                   else F.lit(None).cast("string"))
            key_name, value_name, headers_name = record_columns(target.index)
            columns += [F.when(rows, key).alias(key_name), F.when(rows, value).alias(value_name)]
            if sink.headers is not None:
                headers = header_records(record.getField(sink.headers))
                columns.append(F.when(rows, headers).alias(headers_name))
        return columns


def _counted(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The observation's row from what the tasks counted."""
    written = Written({}, {}, Tally())
    written.add([row for row in rows if row["summary"] is not None])
    for row in rows:
        if row["file"] is None and row["part"] is None and row["output"] is not None:
            written.rows[row["output"]] = written.rows.get(row["output"], 0) + row["rows"]
    return written.observed_row()


def start(outputs: TaggedOutputs, writer: SinkWriter, checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """Check the checkpoint, then start the one query whose tasks write every batch (or, where
    they cannot, ``writer`` on the driver, as ``batch_outputs.start`` runs it)."""
    outputs = prepare_checkpoint(outputs, checkpoint_location)
    fallback = TypedFrames(outputs, writer, count=True, persist=True)
    consumer = SinksInTasks(outputs.plan, writer, fallback, fallback.observation, query_name)
    consumer.decide()
    return batch_driver.start(outputs.plan, lambda: outputs.tagged, consumer,
                              checkpoint_location, trigger, query_name)
