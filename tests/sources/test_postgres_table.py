"""A PostgreSQL table as the broadcast side, on Spark and a real PostgreSQL.

Rules live in a table that is updated while the query runs (an UPDATE and an INSERT between
micro-batches), the query is restarted from its checkpoint after more changes (a tombstone and
an INSERT), and the outputs equal the harness's for the same sequence: every rule change is
applied exactly once across the restart (the ``applied`` side output), none is missed, and a
row that does not fit the schema is one dead letter with the reason, without stalling the stream.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, OutputTag
from sparkcast.errors import DatabaseError, PipelineError
from sparkcast.sources import postgres_table, version_trigger_sql
from sparkcast.spark import Stream, read_output
from sparkcast.testing import BroadcastHarness
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("thresholds", str, float)
APPLIED = OutputTag("applied", "rule_id string, version long, deleted boolean")
SCHEMA = "rule_id string, threshold double, deleted boolean, version long"
OUTPUT = "id long, rule_id string, threshold double"


class Thresholds(BroadcastProcessFunction):
    """Flags an event over each rule's threshold; a ``deleted`` row is a tombstone."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        rules = ctx.get_broadcast_state(RULES)
        if value["deleted"]:
            rules.remove(value["rule_id"])
        else:
            rules.put(value["rule_id"], value["threshold"])
        yield APPLIED, (value["rule_id"], value["version"], value["deleted"])

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        for rule_id, threshold in sorted(ctx.get_broadcast_state(RULES).items()):
            if value["amount"] > threshold:
                yield value["id"], rule_id, threshold


def _events(start: int, amounts: list[float]) -> list[dict[str, Any]]:
    return [{"id": start + i, "amount": a} for i, a in enumerate(amounts)]


def _rules(db: Any) -> list[dict[str, Any]]:
    return [{"rule_id": r, "threshold": float(t), "deleted": d, "version": v}
            for r, t, d, v in db.query("SELECT rule_id, threshold, deleted, version FROM rules "
                                       "WHERE rule_id != 'bad' ORDER BY version")]


def _create_rules_table(db: Any) -> None:
    # threshold is text in the table, so an admin can type a value the schema refuses
    db.execute("CREATE TABLE rules (rule_id text PRIMARY KEY, threshold text NOT NULL, "
               "deleted boolean NOT NULL DEFAULT false, version bigint NOT NULL DEFAULT 0)")
    with db.connect() as connection:
        connection.execute(version_trigger_sql("rules"))


def _start(spark: Any, db: Any, tmp_path: Any, checkpoint: str) -> Any:
    rules = postgres_table(spark, db.conninfo, "rules", version_column="version", schema=SCHEMA)
    events = read_stream(spark, "id long, amount double", tmp_path / "events")
    result = (Stream(events).connect(Stream(rules).broadcast(RULES, order_by="version"))
              .process(Thresholds(), OUTPUT, parallelism=2, side_outputs=[APPLIED]))
    return result.write_stream(str(tmp_path / "out"), checkpoint,
                               trigger={"processingTime": "200 milliseconds"})


def test_a_table_updated_mid_run_and_restarted_gives_the_harness_output(spark, postgres,
                                                                         tmp_path):
    _create_rules_table(postgres)
    postgres.execute("INSERT INTO rules (rule_id, threshold) VALUES ('r1', '100'), "
                     "('r2', '500'), ('bad', 'lots')")
    checkpoint = str(tmp_path / "checkpoint")
    batches: list[tuple[list[Any], list[Any]]] = []
    write_batch_file(tmp_path / "events", 0, _events(0, [50, 150, 600]))
    query = _start(spark, postgres, tmp_path, checkpoint)
    try:
        query.processAllAvailable()
        batches.append((_events(0, [50, 150, 600]), _rules(postgres)))
        seen = postgres.query("SELECT max(version) FROM rules")[0][0]
        postgres.execute("UPDATE rules SET threshold = '300' WHERE rule_id = 'r1'")
        postgres.execute("INSERT INTO rules (rule_id, threshold) VALUES ('r3', '1000')")
        query.processAllAvailable()  # the rule changes alone, then the events that see them
        batches.append(([], [r for r in _rules(postgres) if r["version"] > seen]))
        write_batch_file(tmp_path / "events", 1, _events(10, [200, 400, 1200]))
        query.processAllAvailable()
        batches.append((_events(10, [200, 400, 1200]), []))
    finally:
        query.stop()
    assert query.exception() is None

    # while stopped: a tombstone and a new rule
    seen = postgres.query("SELECT max(version) FROM rules")[0][0]
    postgres.execute("UPDATE rules SET deleted = true WHERE rule_id = 'r2'")
    postgres.execute("INSERT INTO rules (rule_id, threshold) VALUES ('r4', '50')")
    write_batch_file(tmp_path / "events", 2, _events(20, [100, 700]))
    query = _start(spark, postgres, tmp_path, checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    batches.append((_events(20, [100, 700]), [r for r in _rules(postgres)
                                              if r["version"] > seen]))

    harness = BroadcastHarness(Thresholds(), [RULES], on_error="dead_letter")
    harness.open()
    for main, broadcast in batches:
        harness.process_micro_batch(main, broadcast)
    out = str(tmp_path / "out")
    assert sorted(tuple(r) for r in read_output(spark, out).collect()) == \
        sorted(harness.output())
    applied = Counter(tuple(r) for r in read_output(spark, out, "applied").collect())
    # each of the 2 subtasks applies each change once: none re-applied, none missed
    assert applied == Counter({tuple(a): 2 for a in harness.side_output(APPLIED)})
    assert [a[0] for a in sorted(applied, key=lambda a: a[1])] == \
        ["r1", "r2", "r1", "r3", "r2", "r4"]
    (letter,) = [r.asDict() for r in read_output(spark, out, "dead_letters").collect()]
    assert letter["callback"] == "input"
    raw = json.loads(letter["value"])
    assert raw["row"]["rule_id"] == "bad"
    assert raw["reason"].startswith("column threshold: 'lots' is not a double")


def test_bad_tables_are_refused_before_start(spark, postgres):
    with pytest.raises(PipelineError, match="table missing does not exist"):
        postgres_table(spark, postgres.conninfo, "missing", version_column="version")
    postgres.execute("CREATE TABLE loose (id int PRIMARY KEY, v text, version bigint)")
    with pytest.raises(PipelineError, match="SET NOT NULL"):
        postgres_table(spark, postgres.conninfo, "loose", version_column="version")
    with pytest.raises(PipelineError, match="version column 'nope' is not a column"):
        postgres_table(spark, postgres.conninfo, "loose", version_column="nope")
    postgres.execute("CREATE TABLE named (id int PRIMARY KEY, v text, version text NOT NULL)")
    with pytest.raises(PipelineError, match="it must be one of"):
        postgres_table(spark, postgres.conninfo, "named", version_column="version")
    postgres.execute("ALTER TABLE loose ALTER COLUMN version SET NOT NULL")
    with pytest.raises(PipelineError, match="schema field 'w' is not a column of loose"):
        postgres_table(spark, postgres.conninfo, "loose", version_column="version",
                       schema="id int, w string")
    with pytest.raises(PipelineError, match="does not read"):
        postgres_table(spark, postgres.conninfo, "loose", version_column="version",
                       schema="id int, v array<string>")
    with pytest.raises(DatabaseError, match="cannot connect to PostgreSQL"):
        postgres_table(spark, "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2",
                       "loose", version_column="version")


def test_the_default_schema_follows_the_table_and_batches_can_be_capped(spark, postgres,
                                                                         tmp_path):
    postgres.execute("CREATE TABLE flags (name text PRIMARY KEY, on_ boolean NOT NULL, "
                     "weight numeric(6,2), since timestamptz, n int, "
                     "version bigint NOT NULL DEFAULT 0)")
    with postgres.connect() as connection:
        connection.execute(version_trigger_sql("flags"))
    for i in range(5):
        postgres.execute("INSERT INTO flags (name, on_, weight, since, n) VALUES "
                         "(%s, %s, %s, '2024-05-06 07:08:09+02', %s)",
                         (f"f{i}", i % 2 == 0, f"{i}.5", i))
    df = postgres_table(spark, postgres.conninfo, "flags", version_column="version",
                        max_rows_per_batch=2)
    assert df.schema.simpleString() == (
        "struct<name:string,on_:boolean,weight:decimal(6,2),since:timestamp,n:int,"
        "version:bigint,_corrupt_record:string>")
    query = (df.writeStream.format("memory").queryName("capped_flags")
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="100 milliseconds").start())
    query.processAllAvailable()
    query.stop()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [2, 2, 1]
    rows = spark.sql("SELECT * FROM capped_flags ORDER BY version").collect()
    assert [r["name"] for r in rows] == ["f0", "f1", "f2", "f3", "f4"]
    assert str(rows[3]["weight"]) == "3.50" and rows[0]["on_"] is True
    assert rows[0]["since"].isoformat().startswith("2024-05-06T")  # 05:08:09 UTC, local time
    spark.catalog.dropTempView("capped_flags")


@pytest.mark.fresh_jvm
def test_the_source_is_registered_once_per_session(postgres, tmp_path):
    """Spark warns on every registration after the first ("replaced a previously registered
    data source"): a job that reads two tables must not say so. A fresh process, whose
    stderr is Spark's log as a user sees it."""
    import subprocess
    import sys

    postgres.execute("CREATE TABLE rules (id int PRIMARY KEY, version bigint NOT NULL)")
    postgres.execute("CREATE TABLE flags (id int PRIMARY KEY, version bigint NOT NULL)")
    script = ("import sys\n"
              "from sparkcast.sources import postgres_table\n"
              "from sparkcast.spark import session\n"
              "spark = session()\n"
              "for table in ('rules', 'flags', 'rules'):\n"
              "    postgres_table(spark, sys.argv[1], table, version_column='version')\n"
              "spark.stop()\n"
              "spark = session()  # a new session registers it again, without a word\n"
              "frame = postgres_table(spark, sys.argv[1], 'rules', version_column='version')\n"
              "print(frame.isStreaming)\n")
    run = subprocess.run([sys.executable, "-c", script, postgres.conninfo], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "True"
    assert "previously registered" not in run.stderr, run.stderr[-3000:]
