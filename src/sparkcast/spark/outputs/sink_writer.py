"""One micro-batch of ``write_stream(sinks=...)`` into every sink, in ONE query, in an order that
makes a replay exactly once (``SinkWriter``, the consumer of ``batch_outputs.py``).

A micro-batch is written in phases, so that a sink that fails leaves nothing of the batch in
the sinks that can hold it back:

1. stage: files sinks write to their staging folder, JDBC sinks to their staging tables
   (``jdbc.py``); a sink that committed this batch before (a replay) is skipped;
2. Kafka sinks commit their parts, each with its marker (``kafka.py``): exactly once;
3. the other sinks append their rows (``tables.py``): Delta exactly once by its idempotent
   writes (``txnAppId`` = query and output, ``txnVersion`` = batch, which Delta records in its
   log); ``table`` and the user's own at-least-once, ``table`` with a stable row id (batch, row);
4. commit: one transaction per database moves every JDBC output's rows and records the batch
   in its ledger; then each files sink publishes and logs its files.

A kill anywhere replays the batch: what a sink committed, it recognises and skips. An output
that the batch's counts show to be empty (``typed.empty_outputs``) is staged, moved or sent by
no Spark job: its files sink logs the batch with no file, its JDBC ledger still records it.

Where the engine runs the pattern by subtask and every sink is Kafka or files, the pattern's
own tasks do steps 1 and 2 in the pattern's job (``sinks_in_tasks.py``), and this writer is
kept for a checkpoint whose Kafka parts the driver wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.errors import SinkError
from sparkcast.spark.execution.phases import phase
from sparkcast.spark.layout import MAIN, TAG
from sparkcast.spark.outputs.files import FilesSink, partitioned
from sparkcast.spark.outputs.jdbc import Database, JdbcSink, Ledger, java_message
from sparkcast.spark.outputs.kafka import KafkaSink, KafkaWriter
from sparkcast.spark.outputs.tables import DeltaSink
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.commit_log import CommitLog, session_interval


def describe(sink: Any) -> str:
    return sink.describe() if hasattr(sink, "describe") else type(sink).__name__


def kind(sink: Any) -> str:
    """A sink's kind (``kafka``, ``files``, ``jdbc``, ...), which names its jobs' phase: no
    address, path or topic (a job's description is shown to anyone who sees the UI)."""
    return describe(sink).split("(", 1)[0]


class SinkWriter:
    """The consumer of ``batch_outputs``: one micro-batch into every sink, in phases."""

    def __init__(self, plan: RuntimePlan, sinks: dict[str, Any], checkpoint_location: str
                 ) -> None:
        spark = plan.spark
        assert spark is not None
        self.spark = spark
        self.checkpoint = checkpoint_location
        self.interval = session_interval(spark)
        self.files: dict[FilesSink, list[str]] = {}
        self.jdbc: dict[tuple[str, str, str], list[tuple[str, JdbcSink]]] = {}
        self.kafka: list[tuple[str, KafkaSink]] = []
        self.direct: list[tuple[str, Any]] = []
        for name, sink in sinks.items():
            if isinstance(sink, FilesSink):
                self.files.setdefault(sink, []).append(name)
            elif isinstance(sink, JdbcSink):
                group = (sink.url, repr(sorted(sink.properties.items())), sink.ledger)
                self.jdbc.setdefault(group, []).append((name, sink))
            elif isinstance(sink, KafkaSink):
                self.kafka.append((name, sink))
            else:
                self.direct.append((name, sink))
        #: the query's Kafka writer, made before the query starts (``start_run``)
        self.kafka_writer: KafkaWriter | None = None
        self._query_id: str | None = None

    @property
    def tasks_may_write(self) -> bool:
        """Whether the pattern's tasks may write every sink (``sinks_in_tasks.py``): Kafka and
        files only, Kafka among them."""
        return bool(self.kafka) and not self.jdbc and not self.direct

    def start_run(self) -> None:
        """Before the query starts: every Kafka part fenced and the markers read, once a run
        (``kafka.KafkaWriter``), so a checkpoint its sinks cannot continue is refused by
        ``write_stream`` itself."""
        if self.kafka:
            self.kafka_writer = KafkaWriter(self.query_id, self.checkpoint, self.kafka)
            self.kafka_writer.run()

    @property
    def query_id(self) -> str:
        """The query's id from the checkpoint (stable across restarts, new with a new one)."""
        if self._query_id is None:
            self._query_id = checkpoint_files.query_id(self.checkpoint)
        return self._query_id

    def __call__(self, tagged: DataFrame, frames: Mapping[str, DataFrame], batch_id: int,
                 empty: frozenset[str]) -> None:
        """Write the batch; ``empty``: outputs known to hold no rows, which the files, JDBC and
        Kafka sinks commit without a Spark job (the user's sinks and Delta are still called)."""
        files = self._stage_files(tagged, batch_id, empty)
        databases = self._stage_jdbc(frames, batch_id, empty)
        for name, sink in self.kafka:
            self._write_kafka(name, sink, frames[name], batch_id, name in empty)
        for name, sink in self.direct:
            self._write(name, sink, frames[name], batch_id)
        for database, group in databases:
            self._commit_jdbc(database, group, frames, batch_id, empty)
        for log, staging in files:
            if staging is None:
                log.log_empty(batch_id)
            else:
                log.commit(batch_id, staging)

    def _stage_files(self, tagged: DataFrame, batch_id: int, empty: frozenset[str]
                     ) -> list[tuple[CommitLog, str | None]]:
        """Each files sink's rows of the batch staged (None: it has none to stage)."""
        staged: list[tuple[CommitLog, str | None]] = []
        for sink, names in self.files.items():
            log = CommitLog(sink.path, self.interval)
            if log.committed(batch_id):
                continue
            if empty.issuperset(names):
                staged.append((log, None))
                continue
            rows = partitioned(tagged.filter(F.coalesce(F.col(TAG), F.lit(MAIN)).isin(names)))
            try:
                with phase(self.spark, f"sink {kind(sink)}, outputs {', '.join(names)}"):
                    staged.append((log, log.stage(batch_id, rows, sink.format)))
            except Exception as error:
                raise _failed(names, sink, error) from error
        return staged

    def _stage_jdbc(self, frames: Mapping[str, DataFrame], batch_id: int, empty: frozenset[str]
                    ) -> list[tuple[Database, list[tuple[str, JdbcSink]]]]:
        pending = []
        for group in self.jdbc.values():
            first = group[0][1]
            database = Database(self.spark, first.url, first.properties)
            try:
                with database.connect() as connection:
                    if Ledger(database, first.ledger).committed(connection, self.query_id,
                                                                 batch_id):
                        continue  # a replay of a batch this database committed
                    for _, sink in group:
                        sink.clear(connection, database, batch_id, self.query_id)
                for name, sink in group:
                    if name not in empty:
                        with phase(self.spark, f"sink {kind(sink)} (staging), output {name}"):
                            sink.stage(frames[name], batch_id, self.query_id)
            except Exception as error:
                raise _failed([n for n, _ in group], first, error) from error
            pending.append((database, group))
        return pending

    def _commit_jdbc(self, database: Database, group: list[tuple[str, JdbcSink]],
                     frames: Mapping[str, DataFrame], batch_id: int, empty: frozenset[str]
                     ) -> None:
        """ONE transaction: every output's staged rows into its table (the ``empty`` ones
        staged nothing), the batch into the ledger; a batch already in the ledger (a
        concurrent attempt) changes nothing."""
        ledger = Ledger(database, group[0][1].ledger)
        try:
            with database.connect() as connection:
                connection.setAutoCommit(False)
                try:
                    if not ledger.committed(connection, self.query_id, batch_id):
                        for name, sink in group:
                            if name in empty:
                                continue
                            sink.move(connection, database, frames[name], batch_id,
                                      self.query_id)
                        ledger.record(connection, self.query_id, batch_id)
                    connection.commit()
                except BaseException:
                    connection.rollback()
                    raise
        except Exception as error:
            raise _failed([n for n, _ in group], group[0][1], error) from error

    def _write_kafka(self, name: str, sink: KafkaSink, frame: DataFrame, batch_id: int,
                     empty: bool) -> None:
        assert self.kafka_writer is not None, "start_run() before the query starts"
        try:
            with phase(self.spark, f"sink {kind(sink)}, output {name}"):
                self.kafka_writer.write(sink, name, frame, batch_id, empty)
        except Exception as error:
            raise _failed([name], sink, error) from error

    def _write(self, name: str, sink: Any, frame: DataFrame, batch_id: int) -> None:
        try:
            with phase(self.spark, f"sink {kind(sink)}, output {name}"):
                if isinstance(sink, DeltaSink):
                    sink.write(frame, name, batch_id, self.query_id)
                else:
                    sink.write(frame, name, batch_id)
        except Exception as error:
            raise _failed([name], sink, error) from error


def _failed(names: list[str], sink: Any, error: BaseException) -> SinkError:
    return SinkError(f"outputs {names}, sink {describe(sink)}: writing the micro-batch failed "
                     f"({java_message(error)}); fix the cause and restart from the same "
                     "checkpoint: the batch is replayed, and the exactly-once sinks skip what "
                     "they committed of it")
