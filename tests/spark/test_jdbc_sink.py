"""``write_stream(sinks=...)`` into a REAL PostgreSQL (the throwaway cluster of
``sparkcast.testing.postgres``): keyed and non-keyed pipelines with a side output and dead letters,
every table exactly once and equal to the harness, across restarts, a failing sink, and a
SIGKILL of the driver between the database's commit and Spark's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sparkcast import sinks
from sparkcast.errors import PipelineError, SinkError
from sparkcast.spark import read_output
from sparkcast.spark.outputs.jdbc import Database
from tests.spark import sink_pipeline as pipeline
from tests.spark.holds import FileEvents, arm, disarm, reached

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def _create_tables(db):
    for name, table in pipeline.TABLES.items():
        db.execute(f"CREATE TABLE {table} ({pipeline.CREATE[name]})")


def _table_rows(db, name):
    table = pipeline.TABLES[name]
    if name == "dead_letters":
        return Counter(pipeline.letter_key({"callback": c, "error": e})
                       for c, e in db.query(f"SELECT callback, error FROM {table}"))
    return Counter(tuple(r) for r in db.query(f"SELECT id, scaled FROM {table}"))


@pytest.mark.parametrize("kind", pipeline.KINDS)
def test_every_output_into_its_table_exactly_once_across_a_restart(spark, tmp_path, postgres,
                                                                   kind):
    _create_tables(postgres)
    chosen = pipeline.jdbc_sinks(postgres.jdbc_url, postgres.jdbc_properties)
    pipeline.write_inputs(tmp_path, [0, 1])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, kind), tmp_path, chosen)
    assert {n: _table_rows(postgres, n) for n in pipeline.TABLES} == pipeline.expected(kind, 2)

    pipeline.write_inputs(tmp_path, [2, 3])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, kind), tmp_path, chosen)
    assert query.exception() is None
    assert {n: _table_rows(postgres, n) for n in pipeline.TABLES} == pipeline.expected(kind)
    for table in pipeline.TABLES.values():  # nothing left staged
        assert postgres.query(f"SELECT count(*) FROM {table}_sparkcast_staging") == [(0,)]
    batches = postgres.query("SELECT batch_id FROM sparkcast_ledger ORDER BY batch_id")
    assert [b for (b,) in batches] == list(range(len(pipeline.EVENTS)))


def test_a_batch_two_attempts_staged_is_moved_once(spark, postgres):
    """Spark's JDBC writer commits each task's rows in the task's own transaction, so two
    attempts of one staging task can both commit (a speculative copy beside a slow first
    attempt, an executor lost after its task committed); staging the batch twice stands for
    them here (``tests/deploy/test_cluster_attempts.py`` holds a real copy on a cluster). The
    move takes each staged row once, and two equal rows of one attempt both."""
    postgres.execute("CREATE TABLE twice (id bigint, label text)")
    sink = sinks.jdbc(postgres.jdbc_url, "twice", postgres.jdbc_properties)
    frame = spark.createDataFrame([(1, "a"), (1, "a"), (2, None), (3, "c")],
                                  "id long, label string").coalesce(2)
    sink.check("main", frame.schema, spark)
    for _ in range(2):
        sink.stage(frame, 7, "query")
    assert postgres.query(f"SELECT count(*) FROM {sink.staging}") == [(8,)]
    database = Database(spark, sink.url, sink.properties)
    with database.connect() as connection:
        sink.move(connection, database, frame, 7, "query")
    assert Counter(postgres.query("SELECT id, label FROM twice")) == {
        (1, "a"): 2, (2, None): 1, (3, "c"): 1}
    assert postgres.query(f"SELECT count(*) FROM {sink.staging}") == [(0,)]


def test_sinks_are_checked_before_the_query_starts(spark, tmp_path, postgres):
    pipeline.write_inputs(tmp_path, [0])
    result = pipeline.build(spark, tmp_path, "streamed")
    url, props = postgres.jdbc_url, postgres.jdbc_properties
    out = sinks.files(str(tmp_path / "out"))

    def start(chosen):
        return result.write_stream(checkpoint_location=str(tmp_path / "ckpt"), sinks=chosen)

    with pytest.raises(SinkError, match=r"output 'main', sink jdbc\(.*'scaled'\): table scaled "
                                        r"does not exist; create it.*create_table=True"):
        start({"main": sinks.jdbc(url, "scaled", props), "big": out})
    postgres.execute("CREATE TABLE scaled (id bigint, amount double precision)")
    with pytest.raises(SinkError, match=r"output 'main', .*has no column \['scaled'\].*add"):
        start({"main": sinks.jdbc(url, "scaled", props), "big": out})
    down = url.replace(f":{postgres.port}/", ":1/")
    with pytest.raises(SinkError, match=r"output 'main', .*cannot reach the database .*start it"):
        start({"main": sinks.jdbc(down, "scaled", props), "big": out})
    with pytest.raises(PipelineError, match=r"outputs \['big'\] have no sink"):
        start({"main": out})
    with pytest.raises(PipelineError, match="does not have"):
        start({"main": out, "big": out, "alerts": out})
    with pytest.raises(PipelineError, match="is a str"):
        start({"main": "jdbc:postgresql://x", "big": out})
    assert not spark.streams.active
    assert not (tmp_path / "ckpt" / "commits").exists()


def test_create_table_makes_each_missing_table_with_sparks_jdbc_types(spark, tmp_path,
                                                                       postgres):
    chosen = {name: sinks.jdbc(postgres.jdbc_url, table, postgres.jdbc_properties,
                               create_table=True)
              for name, table in pipeline.TABLES.items()}
    pipeline.write_inputs(tmp_path, [0, 1])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, chosen)
    assert query.exception() is None
    assert {n: _table_rows(postgres, n) for n in pipeline.TABLES} == pipeline.expected(
        "streamed", 2)

    def types(table):
        return dict(postgres.query("SELECT column_name, data_type FROM "
                                   f"information_schema.columns WHERE table_name = '{table}'"))

    number = {"id": "bigint", "scaled": "double precision"}  # LongType, DoubleType
    assert types("scaled") == types("big") == number
    assert types("letters") == {"callback": "text", "error": "text", "key": "text",
                                "value": "text", "timestamp": "bigint", "subtask": "integer"}
    assert types("scaled_sparkcast_staging") == {**number, "_sparkcast_row": "bigint",
                                                 "_sparkcast_query": "text",
                                                 "_sparkcast_batch": "bigint"}
    assert postgres.query("SELECT count(*) FROM sparkcast_ledger") == [(2,)]
    # a restart finds them: nothing created twice, nothing lost
    pipeline.write_inputs(tmp_path, [2, 3])
    assert pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, chosen
                ).exception() is None
    assert {n: _table_rows(postgres, n) for n in pipeline.TABLES} == pipeline.expected(
        "streamed")


def test_a_failing_sink_fails_the_query_and_a_restart_writes_the_batch_once(
        spark, tmp_path, postgres):
    """A constraint the big side output breaks in micro-batch 2: the query fails naming the
    sink, nothing of batch 2 is in any table (or in the dead letters' default files beside the
    checkpoint); after the fix, a restart writes it exactly once."""
    _create_tables(postgres)
    postgres.execute("ALTER TABLE big ADD CONSTRAINT small CHECK (scaled < 400)")
    url, props = postgres.jdbc_url, postgres.jdbc_properties
    chosen = {"main": sinks.jdbc(url, "scaled", props), "big": sinks.jdbc(url, "big", props)}
    pipeline.write_inputs(tmp_path)
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, chosen)
    assert "outputs ['main', 'big'], sink jdbc(" in str(query.exception())
    assert "small" in str(query.exception())  # the database's reason
    before = pipeline.expected("streamed", 2)
    assert _table_rows(postgres, "main") == before["main"]
    assert _table_rows(postgres, "big") == before["big"]
    letters = str(tmp_path / "checkpoint_dead_letters")
    written = Counter(pipeline.letter_key(r) for r in
                      read_output(spark, letters, "dead_letters").collect())
    assert written == before["dead_letters"]

    postgres.execute("ALTER TABLE big DROP CONSTRAINT small")
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, chosen)
    assert query.exception() is None
    want = pipeline.expected("streamed")
    assert _table_rows(postgres, "main") == want["main"]
    assert _table_rows(postgres, "big") == want["big"]
    written = Counter(pipeline.letter_key(r) for r in
                      read_output(spark, letters, "dead_letters").collect())
    assert written == want["dead_letters"]


class ListSink:
    """A user's own sink: at-least-once, so it keys what it got by batch id."""

    def __init__(self):
        self.batches: dict[int, list] = {}

    def write(self, frame, output, batch_id):
        self.batches[batch_id] = [(output, *r) for r in frame.collect()]


def test_table_and_own_sinks_beside_a_jdbc_sink(spark, tmp_path, postgres):
    _create_tables(postgres)
    own = ListSink()
    chosen = {"main": sinks.jdbc(postgres.jdbc_url, "scaled", postgres.jdbc_properties),
              "big": sinks.table(format="parquet", options={"path": str(tmp_path / "big")}),
              "dead_letters": own}
    pipeline.write_inputs(tmp_path)
    assert pipeline.run_to_end(pipeline.build(spark, tmp_path, "operator"), tmp_path, chosen
                ).exception() is None
    want = pipeline.expected("operator")
    assert _table_rows(postgres, "main") == want["main"]
    big = spark.read.parquet(str(tmp_path / "big"))
    assert Counter((r.id, r.scaled) for r in big.collect()) == want["big"]
    ids = big.select("_sparkcast_batch", "_sparkcast_row").distinct().count()
    assert ids == big.count()  # a stable id per row to deduplicate on
    letters = Counter(pipeline.letter_key({"callback": r[1], "error": r[2]})
                      for rows in own.batches.values() for r in rows)
    assert letters == want["dead_letters"]


@pytest.mark.parametrize("kind", ["streamed", "partitioned"])
def test_an_output_without_rows_in_a_batch_is_committed_without_a_write(
        spark, tmp_path, postgres, monkeypatch, kind):
    """The batch's counts say which outputs are empty: their sinks commit the batch (the ledger,
    the files' log) without a Spark job to write nothing; the outputs are still exact."""
    from sparkcast.spark.outputs.jdbc import JdbcSink
    from sparkcast.spark.state.commit_log import CommitLog

    staged = []  # (output or folder, batch): the writes that ran (the driver calls them)
    jdbc_stage, files_stage = JdbcSink.stage, CommitLog.stage

    def stage_table(sink, frame, batch, query):
        staged.append((sink.table, batch))
        return jdbc_stage(sink, frame, batch, query)

    def stage_files(log, batch, frame, format):
        staged.append(("letters", batch))
        return files_stage(log, batch, frame, format)

    monkeypatch.setattr(JdbcSink, "stage", stage_table)
    monkeypatch.setattr(CommitLog, "stage", stage_files)
    _create_tables(postgres)
    chosen = {"main": sinks.jdbc(postgres.jdbc_url, "scaled", postgres.jdbc_properties),
              "big": sinks.jdbc(postgres.jdbc_url, "big", postgres.jdbc_properties),
              "dead_letters": sinks.files(str(tmp_path / "letters"))}
    pipeline.write_inputs(tmp_path)
    assert pipeline.run_to_end(pipeline.build(spark, tmp_path, kind), tmp_path, chosen
                               ).exception() is None
    # batch 1 alone has dead letters, and no row over 100 for "big"
    assert sorted(staged) == sorted([("scaled", b) for b in range(4)]
                                    + [("big", 0), ("big", 2), ("big", 3), ("letters", 1)])
    want = pipeline.expected(kind)
    assert _table_rows(postgres, "main") == want["main"]
    assert Counter(tuple(r) for r in postgres.query("SELECT id, scaled FROM big")) == want["big"]
    letters = read_output(spark, str(tmp_path / "letters"), "dead_letters").collect()
    assert Counter(pipeline.letter_key(r.asDict()) for r in letters) == want["dead_letters"]
    ledger = postgres.query("SELECT batch_id FROM sparkcast_ledger ORDER BY batch_id")
    assert [b for (b,) in ledger] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- SIGKILL


def _committed_by_spark(base: Path) -> set[int]:
    commits = base / "checkpoint" / "commits"
    return {int(n) for n in os.listdir(commits) if n.isdigit()} if commits.is_dir() else set()


@pytest.mark.fresh_jvm
def test_sigkill_between_the_database_commit_and_sparks_commit(spark, tmp_path, postgres):
    """The driver dies after the ledger holds batch 1 and before Spark's checkpoint commits it
    (the pipeline holds there, the first run only, and says so by a file: no polling the
    database): the restart replays batch 1, the ledger skips it, and every table holds every
    row once."""
    _create_tables(postgres)
    pipeline.write_inputs(tmp_path)
    log = tmp_path / "run.log"
    holds = pipeline.holds(tmp_path)
    arm(holds, pipeline.AFTER_DATABASE_1)
    command = [sys.executable, "-m", "tests.spark.sink_pipeline", str(tmp_path), "operator",
               postgres.jdbc_url, postgres.user]
    process = subprocess.Popen(command, cwd=ROOT, stdout=log.open("ab"),
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with FileEvents([holds]) as events:
            held = events.wait(lambda: reached(holds, pipeline.AFTER_DATABASE_1),
                               lambda: process.poll() is None, timeout=300)
        in_the_database = held and postgres.query(
            "SELECT batch_id FROM sparkcast_ledger WHERE batch_id = 1") == [(1,)]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        disarm(holds)
    landed = held and in_the_database and 1 not in _committed_by_spark(tmp_path)
    assert landed, log.read_text()[-3000:]
    assert postgres.query("SELECT count(*) FROM sparkcast_ledger") == [(2,)]

    # the restart, in this test's session: the same checkpoint, one JVM start fewer
    pipeline.write_jdbc(spark, tmp_path, "operator", postgres.jdbc_url, postgres.user)
    assert _committed_by_spark(tmp_path) >= set(range(len(pipeline.EVENTS)))
    want = pipeline.expected("operator")
    assert {n: _table_rows(postgres, n) for n in pipeline.TABLES} == want
