"""The sinks of ``write_stream(sinks=...)`` (``sparkcast.sinks`` builds them) and the writer that
gives each micro-batch to all of them in ONE query (``batch_outputs.py``).

A micro-batch is written in phases, so that a sink that fails leaves nothing of the batch in
the sinks that can hold it back:

1. stage: files sinks write to their staging folder, JDBC sinks to their staging tables
   (``jdbc.py``); a sink that committed this batch before (a replay) is skipped;
2. Kafka sinks commit their parts, each with its marker (``kafka.py``): exactly once;
3. the other sinks append their rows: Delta exactly once by its idempotent writes
   (``txnAppId`` = query and output, ``txnVersion`` = batch, which Delta records in its log);
   ``table`` and the user's own at-least-once, ``table`` with a stable row id (batch, row);
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
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from sparkcast.errors import PipelineError, SinkError
from sparkcast.spark.execution.phases import phase
from sparkcast.spark.layout import MAIN, TAG
from sparkcast.spark.outputs import batch_outputs, sinks_in_tasks
from sparkcast.spark.outputs.files import partitioned
from sparkcast.spark.outputs.guarded import guard_output
from sparkcast.spark.outputs.jdbc import (
    BATCH_COLUMN,
    LEDGER,
    QUERY_COLUMN,
    ROW_COLUMN,
    STAGING_SUFFIX,
    Database,
    Ledger,
    driver_class,
    execute,
    java_message,
)
from sparkcast.spark.outputs.kafka import KafkaSink, KafkaWriter
from sparkcast.spark.outputs.sinks import TaggedOutputs, start_sink, write_files_manifest
from sparkcast.spark.outputs.typed import output_names, schemas
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.planning.shapes import outputs_in_tasks
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.commit_log import CommitLog, session_interval

#: the stable row id that ``table`` sinks add (at-least-once targets deduplicate on it)
ROW_BATCH, ROW_ID = "_sparkcast_batch", "_sparkcast_row"


@runtime_checkable
class Sink(Protocol):
    """A user's own sink: ``write`` is called once or more per micro-batch and output (a replay
    after a failure calls it again with the same rows: at-least-once; deduplicate on
    ``batch_id``). An optional ``check(output, schema, spark)`` runs before the query starts and
    raises to refuse it."""

    def write(self, frame: DataFrame, output: str, batch_id: int) -> None: ...


@dataclass(frozen=True)
class FilesSink:
    """``files(path, format)``: today's layout, ``path/_output=<name>/``, read by ``read_output``;
    exactly once through the commit log."""

    path: str
    format: str = "parquet"

    def describe(self) -> str:
        return f"files({self.path!r}, format={self.format!r})"


@dataclass(frozen=True)
class TableSink:
    """``table(name, format, options)``: any Spark batch format or catalog table, appended to;
    at-least-once with a row id (``sinks.delta`` is Delta's exactly-once sink)."""

    name: str | None = None
    format: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    row_id: bool = True

    def describe(self) -> str:
        return f"table({self.name!r}, format={self.format!r})"

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        if self.name is None and not self.options.get("path") and self.format != "noop":
            raise SinkError(f"output {output!r}, sink {self.describe()}: no table name and no "
                            "options['path']; give one of them")
        if self.name is None or self.format not in (None, "parquet", "delta", "orc"):
            return
        if not spark.catalog.tableExists(self.name):
            return  # the first append creates it
        missing = _missing(schema, spark.table(self.name).columns)
        if missing:
            raise SinkError(f"output {output!r}, sink {self.describe()}: the table has no "
                            f"column {missing}; add them or write the output elsewhere")

    def write(self, frame: DataFrame, output: str, batch_id: int) -> None:
        if self.row_id:
            frame = frame.withColumn(ROW_BATCH, F.lit(batch_id)).withColumn(
                ROW_ID, F.monotonically_increasing_id())
        writer = frame.write.mode("append")
        if self.format:
            writer = writer.format(self.format)
        _save(writer.options(**self.options), self.name)


@dataclass(frozen=True)
class DeltaSink:
    """``delta(path=..., table=...)``: appended exactly once by Delta's idempotent writes: each
    micro-batch's commit carries ``txnAppId`` (query and output) and ``txnVersion`` (batch), and
    Delta skips a write whose version its log already holds for that app id (a replay)."""

    path: str | None = None
    table: str | None = None
    options: dict[str, str] = field(default_factory=dict, hash=False)

    def describe(self) -> str:
        return f"delta({self.table or self.path!r})"

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        where = f"output {output!r}, sink {self.describe()}"
        if (self.path is None) == (self.table is None):
            raise SinkError(f"{where}: give exactly one of path and table")
        if self.table is not None and spark.catalog.tableExists(self.table):
            columns = spark.table(self.table).columns
        elif self.path is not None and _is_delta(spark, self.path):
            columns = spark.read.format("delta").load(self.path).columns
        else:
            return  # the first write creates it
        missing = _missing(schema, columns)
        if missing:
            raise SinkError(f"{where}: the Delta table has no column {missing}; add them or "
                            "write the output elsewhere")

    def write(self, frame: DataFrame, output: str, batch_id: int, query_id: str) -> None:
        writer = frame.write.format("delta").mode("append").options(
            **{**self.options, "txnAppId": f"{query_id}-{output}", "txnVersion": str(batch_id)})
        if self.table is None:
            writer = writer.option("path", self.path)
        _save(writer, self.table)


def _save(writer: Any, table: str | None) -> None:
    if table is not None:
        writer.saveAsTable(table)
    else:
        writer.save()


def _is_delta(spark: Any, path: str) -> bool:
    jvm = spark._jvm
    return bool(jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, path))


@dataclass(frozen=True)
class JdbcSink:
    """``jdbc(url, table, properties)``: end-to-end exactly once (``jdbc.py``)."""

    url: str
    table: str
    properties: dict[str, str] = field(default_factory=dict)
    ledger: str = LEDGER
    create_table: bool = False

    def describe(self) -> str:
        return f"jdbc({self.url!r}, {self.table!r})"

    @property
    def staging(self) -> str:
        return f"{self.table}{STAGING_SUFFIX}"

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        """Reach the database, find the table and its columns (``create_table``: create a
        missing one), create the ledger, and drop a staging table of another schema (it holds
        only uncommitted attempts)."""
        where = f"output {output!r}, sink {self.describe()}"
        database = Database(spark, self.url, self.properties)
        try:
            with database.connect() as connection:
                columns = database.columns(connection, self.table)
                if columns is None and self.create_table:
                    self._create(where, spark, schema)
                    columns = database.columns(connection, self.table)
                if columns is None:
                    raise SinkError(f"{where}: table {self.table} does not exist; create it with "
                                    f"the output's columns ({schema.simpleString()}), or pass "
                                    "create_table=True")
                missing = _missing(schema, columns)
                if missing:
                    raise SinkError(f"{where}: table {self.table} has no column {missing} of the "
                                    f"output ({schema.simpleString()}); add them")
                Ledger(database, self.ledger).create(connection)
                staged = database.columns(connection, self.staging)
                wanted = [*schema.fieldNames(), ROW_COLUMN, QUERY_COLUMN, BATCH_COLUMN]
                if staged is not None and {c.lower() for c in staged} != {
                        c.lower() for c in wanted}:
                    execute(connection, f"DROP TABLE {self.staging}")
        except SinkError:
            raise
        except Exception as error:
            raise SinkError(f"{where}: cannot reach the database ({java_message(error)}); start "
                            "it, or correct the url and properties") from error

    def _create(self, where: str, spark: Any, schema: StructType) -> None:
        """The table, with the output's columns as Spark's JDBC writer types them for this
        database: Spark's writer creates it, from no rows."""
        try:
            spark.createDataFrame([], schema).write.jdbc(
                self.url, self.table, mode="append", properties=self._writer_properties())
        except Exception as error:
            raise SinkError(f"{where}: cannot create table {self.table} with the output's "
                            f"columns ({schema.simpleString()}): {java_message(error)}; create "
                            "it yourself") from error

    def _writer_properties(self) -> dict[str, str]:
        # the driver named: Spark's own lookup by URL would find the wrapper its registry put
        # into DriverManager (for the driver-side connections), which it cannot instantiate
        return {**self.properties, "driver": driver_class(self.url, self.properties)}

    def stage(self, frame: DataFrame, batch_id: int, query_id: str) -> None:
        """Append the batch's rows to the staging table, each with its row id (``jdbc.py``:
        the same in every attempt of its task, so ``move`` takes each row once)."""
        staged = frame.withColumn(ROW_COLUMN, F.monotonically_increasing_id()).withColumn(
            QUERY_COLUMN, F.lit(query_id)).withColumn(BATCH_COLUMN, F.lit(batch_id).cast("long"))
        staged.write.jdbc(self.url, self.staging, mode="append",
                          properties=self._staging_properties())

    def _staging_properties(self) -> dict[str, str]:
        """The staging write's properties: PostgreSQL's driver sends Spark's batched inserts as
        multi-row statements (``reWriteBatchedInserts``: 100,000 rows staged in ~0.27 s rather
        than ~0.42 s here), unless the user's properties set it; the staging table is ours."""
        properties = self._writer_properties()
        if self.url.startswith("jdbc:postgresql:"):
            return {"reWriteBatchedInserts": "true", **properties}
        return properties

    def move(self, connection: Any, database: Database, frame: DataFrame, batch_id: int,
             query_id: str) -> None:
        """Inside the batch's transaction: the staged rows into the table, each row id once
        (two attempts of a staging task that both committed staged the same rows twice)."""
        target = {c.lower(): c for c in database.columns(connection, self.table) or []}
        names = frame.schema.fieldNames()
        into = ", ".join(database.quote(target.get(n.lower(), n)) for n in names)
        select = ", ".join(database.quote(n) for n in names)
        where = f"{database.quote(QUERY_COLUMN)} = ? AND {database.quote(BATCH_COLUMN)} = ?"
        execute(connection, f"INSERT INTO {self.table} ({into}) SELECT {select} FROM (SELECT "
                f"DISTINCT {database.quote(ROW_COLUMN)}, {select} FROM {self.staging} WHERE "
                f"{where}) staged", query_id, batch_id)
        execute(connection, f"DELETE FROM {self.staging} WHERE {where}", query_id, batch_id)

    def clear(self, connection: Any, database: Database, batch_id: int, query_id: str) -> None:
        """Rows an interrupted attempt of the batch staged, and those of earlier (committed)
        batches that a task attempt still running at their commit staged after it."""
        if database.columns(connection, self.staging) is None:
            return
        execute(connection, f"DELETE FROM {self.staging} WHERE {database.quote(QUERY_COLUMN)} "
                f"= ? AND {database.quote(BATCH_COLUMN)} <= ?", query_id, batch_id)


#: the sinks ``sparkcast.sinks`` builds
BUILT_IN = (FilesSink, TableSink, JdbcSink, KafkaSink, DeltaSink)


def _missing(schema: StructType, columns: list[str]) -> list[str]:
    have = {c.lower() for c in columns}
    return [n for n in schema.fieldNames() if n.lower() not in have]


def describe(sink: Any) -> str:
    return sink.describe() if hasattr(sink, "describe") else type(sink).__name__


def kind(sink: Any) -> str:
    """A sink's kind (``kafka``, ``files``, ``jdbc``, ...), which names its jobs' phase: no
    address, path or topic (a job's description is shown to anyone who sees the UI)."""
    return describe(sink).split("(", 1)[0]


def normalise(sinks: dict[Any, Any], names: list[str], default_letters: str) -> dict[str, Any]:
    """``{output name: sink}`` for every output; keys may be tags. An unknown output, a value
    that is no sink, or an output without a sink is refused (dead letters default to files
    beside the checkpoint)."""
    result: dict[str, Any] = {}
    for key, sink in sinks.items():
        name = getattr(key, "tag_id", key)
        if name not in names:
            raise PipelineError(f"sinks names output {name!r}, which this pipeline does not "
                                f"have; its outputs are {names}")
        if not isinstance(sink, BUILT_IN) and not isinstance(sink, Sink):
            raise PipelineError(f"the sink of output {name!r} is a {type(sink).__name__}; use "
                                "sparkcast.sinks.files/jdbc/kafka/delta/table or an object "
                                "with write(frame, output, batch_id)")
        result[name] = sink
    result.setdefault(names[-1], FilesSink(default_letters))
    missing = [n for n in names if n not in result]
    if missing:
        raise PipelineError(f"outputs {missing} have no sink; add them to sinks= (e.g. "
                            f"sinks={{{missing[0]!r}: sparkcast.sinks.files('out')}})")
    return result


def check(sinks: dict[str, Any], schemas: dict[str, StructType], spark: Any) -> None:
    """Each sink's own check before start, where it has one."""
    for name, sink in sinks.items():
        if hasattr(sink, "check"):
            sink.check(name, schemas[name], spark)


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
        #: the query's Kafka writer, made at the first batch that writes Kafka
        self.kafka_writer: KafkaWriter | None = None
        self._query_id: str | None = None

    @property
    def tasks_may_write(self) -> bool:
        """Whether the pattern's tasks may write every sink (``sinks_in_tasks.py``): Kafka and
        files only, Kafka among them."""
        return bool(self.kafka) and not self.jdbc and not self.direct

    @property
    def query_id(self) -> str:
        """The query's id from the checkpoint (stable across restarts, new with a new one)."""
        if self._query_id is None:
            metadata = checkpoint_files.read_json(self.checkpoint, ("metadata",)) or {}
            self._query_id = str(metadata["id"])
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
        if self.kafka_writer is None:
            self.kafka_writer = KafkaWriter(self.query_id, self.checkpoint, self.kafka)
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


def start(outputs: TaggedOutputs, sinks: dict[Any, Any], checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """``write_stream(sinks=...)``: check every sink, then ONE query for all of them (files
    sinks alone at one path: today's writer, ``sinks.start_sink``)."""
    plan = outputs.plan
    names = output_names(plan)
    chosen = normalise(sinks, names, f"{checkpoint_location.rstrip('/')}_dead_letters")
    distinct: list[Any] = []
    for sink in chosen.values():
        if sink not in distinct:
            distinct.append(sink)
    if len(distinct) == 1 and isinstance(next(iter(distinct)), FilesSink):
        only = next(iter(distinct))
        return start_sink(outputs, only.path, checkpoint_location, only.format, trigger,
                          query_name)
    files = [sink for sink in distinct if isinstance(sink, FilesSink)]
    for sink in files:
        guard_output(plan, sink.path, checkpoint_location)
    check(chosen, schemas(plan), plan.spark)
    for sink in files:
        write_files_manifest(plan, sink.path, checkpoint_location)
    writer = SinkWriter(plan, chosen, checkpoint_location)
    if outputs_in_tasks(plan) and writer.tasks_may_write:
        return sinks_in_tasks.start(outputs, writer, checkpoint_location, trigger, query_name)
    return batch_outputs.start(outputs, writer, checkpoint_location, trigger, query_name,
                               count=True, persist=True)
