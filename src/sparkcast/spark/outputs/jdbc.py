"""Exactly once into a database over JDBC: staged by the tasks, moved by one driver transaction.

Per micro-batch N of a query Q (Q: the query id in the checkpoint's ``metadata``, stable across
restarts, new with a new checkpoint):

1. the ledger (``sparkcast_ledger``: ``query_id``, ``batch_id``) says whether N was committed;
   a replay of a committed batch stops here;
2. each output's rows are appended by Spark's JDBC writer (the tasks, in parallel) to a staging
   table ``<table>_sparkcast_staging`` with three more columns, the row's id, Q and N, after
   the rows of an interrupted attempt of N (and those a late attempt staged for a batch
   before N, which was committed) are deleted;
3. ONE transaction on the driver, per database: for every output, ``INSERT INTO <table> SELECT
   ... FROM (SELECT DISTINCT <row id>, ... FROM <staging> WHERE Q, N)`` and the staged rows
   deleted; then (Q, N) into the ledger; commit. All of N in every table of that database, or
   none of it, and each row once.

Why the row id: Spark's JDBC writer commits each task's rows in the task's own transaction
and asks no one whether it may (its file writers ask Spark's ``OutputCommitCoordinator``), so
two attempts of one staging task can both commit their rows: a speculative copy beside a slow
first attempt whose insert or commit, once started, Spark's kill does not stop (the JDBC
driver's socket is not interrupted), or a task whose executor was lost after its commit and
before Spark heard of it. On the suite's cluster (``test_cluster_attempts.py``: the first
attempt of a staging task held in the database until its speculative copy began to insert)
the table received that task's rows of the batch twice before the row id (20 extra rows; 176
expected; the copy was killed once the first attempt succeeded, its rows were in all the
same), and the query exited 0. The id (``monotonically_increasing_id``: the task's
partition and the row's place in it) is the same in every attempt, which read the same
persisted frame of the batch, so ``DISTINCT`` keeps one of each row's copies, and two rows of
one attempt are never merged (their ids differ). Not covered: attempts that computed different
rows (a persisted block lost with its executor, recomputed by a function that reads the clock);
both copies of such a row are moved. A late attempt's commit after the move leaves rows that
no move takes (the ledger has N); the next batch's staging deletes them. The ``DISTINCT``
costs the move ~0.11 s per 100,000 staged rows of two columns here (0.10 s -> 0.22 s, median
of 7, PostgreSQL 15), against ~1.7 s for the whole batch (docs/architecture.md).

The driver's transaction goes through the JVM's ``java.sql.DriverManager`` with the driver
Spark's writer uses (``spark.jars``): any database with a JDBC driver, no Python client to
install, and the same URL and properties as Spark's ``df.write.jdbc``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.typed import missing_columns

QUERY_COLUMN = "_sparkcast_query"
BATCH_COLUMN = "_sparkcast_batch"
#: a staged row's id: its task's partition and its place there (``monotonically_increasing_id``)
ROW_COLUMN = "_sparkcast_row"
STAGING_SUFFIX = "_sparkcast_staging"
LEDGER = "sparkcast_ledger"
#: drivers known by URL, so ``properties`` need not name them
DRIVERS = {"postgresql": "org.postgresql.Driver", "mysql": "com.mysql.cj.jdbc.Driver",
           "mariadb": "org.mariadb.jdbc.Driver", "h2": "org.h2.Driver",
           "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
           "sqlite": "org.sqlite.JDBC", "oracle": "oracle.jdbc.OracleDriver"}


def driver_class(url: str, properties: dict[str, str]) -> str:
    """The JDBC driver's class: ``properties["driver"]``, else known from the URL."""
    if properties.get("driver"):
        return properties["driver"]
    kind = url.split(":")[1] if url.startswith("jdbc:") and url.count(":") > 1 else ""
    if kind not in DRIVERS:
        raise SinkError(f"jdbc sink {url!r}: no JDBC driver is known for this URL; name it "
                        "in properties={'driver': '<class>'} and put its jar in spark.jars")
    return DRIVERS[kind]


def java_message(error: BaseException) -> str:
    """The first line of a Java exception's message (Py4J wraps it with its stack)."""
    java = getattr(error, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


class Database:
    """JDBC connections from the driver, through the JVM of ``spark``."""

    def __init__(self, spark: Any, url: str, properties: dict[str, str]) -> None:
        self.spark = spark
        self.url = url
        self.properties = dict(properties)
        self.driver = driver_class(url, self.properties)
        self.dialect = spark._jvm.org.apache.spark.sql.jdbc.JdbcDialects.get(url)

    def quote(self, name: str) -> str:
        return str(self.dialect.quoteIdentifier(name))

    @contextmanager
    def connect(self) -> Iterator[Any]:
        jvm = self.spark._jvm
        try:
            jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry.register(
                self.driver)
        except Exception as error:
            raise SinkError(f"jdbc sink {self.url!r}: driver {self.driver} is not on Spark's "
                            f"classpath ({java_message(error)}); add its jar to spark.jars "
                            "(PostgreSQL: apt-get install libpostgresql-jdbc-java, then "
                            "/usr/share/java/postgresql.jar)") from error
        props = jvm.java.util.Properties()
        for key, value in self.properties.items():
            props.setProperty(key, str(value))
        connection = jvm.java.sql.DriverManager.getConnection(self.url, props)
        try:
            yield connection
        finally:
            connection.close()

    def columns(self, connection: Any, table: str) -> list[str] | None:
        """The table's column names (None: there is no such table)."""
        statement = connection.createStatement()
        try:
            result = statement.executeQuery(f"SELECT * FROM {table} WHERE 1 = 0")
        except Exception:  # noqa: BLE001 - the driver's way of saying the table is missing
            statement.close()
            return None
        meta = result.getMetaData()
        names = [str(meta.getColumnName(i + 1)) for i in range(meta.getColumnCount())]
        statement.close()
        return names


def _prepared(connection: Any, sql: str, values: tuple[Any, ...]) -> Any:
    """``sql`` prepared with its positional ``?`` values (integers as longs, the rest as text)."""
    statement = connection.prepareStatement(sql)
    for index, value in enumerate(values, start=1):
        if isinstance(value, int):
            statement.setLong(index, value)
        else:
            statement.setString(index, str(value))
    return statement


def execute(connection: Any, sql: str, *values: Any) -> int:
    """Run one statement with positional ``?`` values; the number of rows it changed."""
    statement = _prepared(connection, sql, values)
    try:
        return int(statement.executeUpdate())
    finally:
        statement.close()


def exists(connection: Any, sql: str, *values: Any) -> bool:
    statement = _prepared(connection, sql, values)
    try:
        result = statement.executeQuery()
        return bool(result.next())
    finally:
        statement.close()


class Ledger:
    """The committed batches of the queries writing into one database."""

    def __init__(self, database: Database, table: str = LEDGER) -> None:
        self.database = database
        self.table = table

    def create(self, connection: Any) -> None:
        if self.database.columns(connection, self.table) is None:
            execute(connection, f"CREATE TABLE {self.table} (query_id VARCHAR(64) NOT NULL, "
                    "batch_id BIGINT NOT NULL, PRIMARY KEY (query_id, batch_id))")

    def committed(self, connection: Any, query_id: str, batch_id: int) -> bool:
        return exists(connection, f"SELECT 1 FROM {self.table} WHERE query_id = ? AND "
                      "batch_id = ?", query_id, batch_id)

    def record(self, connection: Any, query_id: str, batch_id: int) -> None:
        execute(connection, f"INSERT INTO {self.table} (query_id, batch_id) VALUES (?, ?)",
                query_id, batch_id)


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
                missing = missing_columns(schema, columns)
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
