"""The fraud demo the real way: rules in a PostgreSQL table, decisions written to PostgreSQL.

``sparkcast demo fraud --postgres`` (``make demo-postgres``) starts a throwaway PostgreSQL
(``testing/postgres.py``), creates the tables, and runs the fraud application (``apps/fraud.py``)
with::

    fraud_rules (PostgreSQL) ─ postgres_table ─ .broadcast(rules) ─┐
    events/ (JSON files arriving over time) ─ Stream ──────────────┴ process(FraudRules)
        → jdbc sinks, exactly once: fraud_decisions (main), fraud_reviews, fraud_invalid_rules,
          fraud_dead_letters

Midway an admin's transaction changes the rules with UPDATEs and INSERTs (one rule tightened,
one added, one that does not parse, one deleted through its tombstone, ``deleted = true``);
the query picks them up from the table's version column. The demo ends when every transaction
has exactly one decision in the database, prints what the tables hold, and stops the cluster.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, write_drop
from sparkcast.apps.feeding import DemoReport, Feeder
from sparkcast.apps.fraud import (
    APP,
    INITIAL_RULES,
    INVALID_RULES,
    REMOVED_RULE,
    REVIEW,
    UPDATED_RULES,
)
from sparkcast.testing.postgres import PostgresCluster, PostgresDatabase, jdbc_jar

RULES_TABLE = "fraud_rules"
#: the output tables, created before the query starts (the jdbc sink checks their columns)
TABLES = {
    RULES_TABLE: "rule_id text PRIMARY KEY, condition text NOT NULL, action text NOT NULL, "
                 "deleted boolean NOT NULL DEFAULT false, version bigint NOT NULL DEFAULT 0",
    "fraud_decisions": "tx_id text, card_id text, amount double precision, action text, "
                       "rule_id text, rules_version bigint, subtask int",
    "fraud_reviews": "tx_id text, card_id text, amount double precision, rule_id text, "
                     "rules_version bigint, subtask int",
    "fraud_invalid_rules": "rule_id text, condition text, action text, error text, seq bigint",
    "fraud_dead_letters": "callback text, error text, key text, value text, "
                          "\"timestamp\" bigint, subtask int",
}
SINK_TABLES = {"main": "fraud_decisions", REVIEW: "fraud_reviews",
               INVALID_RULES: "fraud_invalid_rules", "dead_letters": "fraud_dead_letters"}


def create_tables(db: PostgresDatabase) -> None:
    from sparkcast.sources import version_trigger_sql

    with db.connect() as connection:
        for name, columns in TABLES.items():
            connection.execute(f"CREATE TABLE {name} ({columns})")
        connection.execute(version_trigger_sql(RULES_TABLE))


def insert_rules(db: PostgresDatabase, rules: list[tuple[str, str, str]]) -> None:
    with db.connect() as connection:
        connection.cursor().executemany(
            f"INSERT INTO {RULES_TABLE} (rule_id, condition, action) VALUES (%s, %s, %s)", rules)


def update_rules(db: PostgresDatabase) -> None:
    """The admin's change, one transaction: UPDATE a rule, add two (one does not parse), and
    delete one through its tombstone."""
    with db.connect(autocommit=False) as connection, connection.transaction():
        for rule_id, condition, action in UPDATED_RULES:
            connection.execute(
                f"INSERT INTO {RULES_TABLE} (rule_id, condition, action) VALUES (%s, %s, %s) "
                "ON CONFLICT (rule_id) DO UPDATE SET condition = excluded.condition, "
                "action = excluded.action", (rule_id, condition, action))
        connection.execute(f"UPDATE {RULES_TABLE} SET deleted = true WHERE rule_id = %s",
                           (REMOVED_RULE,))


def rules_stream(spark: Any, db: PostgresDatabase) -> Any:
    """The rules table as the fraud application's broadcast rows (``op`` from the tombstone,
    ``seq`` from the version)."""
    from pyspark.sql import functions as F

    from sparkcast.sources import postgres_table

    raw = postgres_table(spark, db.conninfo, RULES_TABLE, version_column="version",
                         schema="rule_id string, condition string, action string, "
                                "deleted boolean, version long")
    op = F.when(F.col("deleted"), F.lit("delete")).otherwise(F.lit("upsert"))
    return raw.select(F.col("version").alias("seq"), op.alias("op"), "rule_id", "condition",
                      "action", "_corrupt_record")


def start_query(spark: Any, db: PostgresDatabase, events: Path, checkpoint: Path, *,
                parallelism: int = 2, trigger_seconds: float = 1.0) -> Any:
    from sparkcast import sinks
    from sparkcast.apps.wiring import build

    result = build(APP, spark, events, events.parent / BROADCAST, parallelism=parallelism,
                   artifacts=events.parent / ARTIFACTS, rules_df=rules_stream(spark, db))
    targets = {output: sinks.jdbc(db.jdbc_url, table, properties=db.jdbc_properties)
               for output, table in SINK_TABLES.items()}
    return result.write_stream(checkpoint_location=str(checkpoint), sinks=targets,
                               trigger={"processingTime": f"{trigger_seconds} seconds"},
                               query_name="sparkcast_fraud_postgres")


def spark_session(parallelism: int) -> Any:
    from sparkcast.spark import session

    partitions = str(min(parallelism, 2))
    return session(conf={"spark.sql.shuffle.partitions": partitions,
                         "spark.default.parallelism": partitions,
                         "spark.jars": str(jdbc_jar())})


def decided(db: PostgresDatabase) -> int:
    return int(db.query("SELECT (SELECT count(*) FROM fraud_decisions) + "
                        "(SELECT count(*) FROM fraud_reviews)")[0][0])


def run_postgres_demo(*, seed: int = 7, scale: int = 2, files: int | None = None,
                      step_seconds: float = 4.0, timeout: float = 300.0, parallelism: int = 2,
                      workdir: Path | None = None, out: TextIO | None = None,
                      spark: Any = None) -> DemoReport:
    """Start PostgreSQL and the query, let transactions arrive and the rules change, stop when
    every transaction is decided (or after ``timeout``), report, stop PostgreSQL."""
    out = out or sys.stdout
    began = time.monotonic()
    drops = [d for d in APP.drops(seed, scale, files) if d.folder == EVENTS]
    expected = sum(len(d.rows) for d in drops)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sparkcast-fraud-pg-"))
    (root / EVENTS).mkdir(parents=True, exist_ok=True)
    with PostgresCluster("fraud") as db:
        out.write(f"PostgreSQL {db.host}:{db.port}/{db.database} started in {db.folder}\n")
        create_tables(db)
        insert_rules(db, INITIAL_RULES)
        spark = spark or spark_session(parallelism)
        query = start_query(spark, db, root / EVENTS, root / "checkpoint",
                            parallelism=parallelism)
        feeder = Feeder(drops, lambda drop: write_drop(root, drop), lambda: decided(db),
                        lambda: update_rules(db), step_seconds, timeout)
        failure = feeder.drive(query, expected, began, out)
        lines = summary(db, expected, failure)
    ok = failure is None and lines[-1].startswith("OK")
    lines.append("PostgreSQL stopped and removed")
    return DemoReport(lines, ok, time.monotonic() - began)


def summary(db: PostgresDatabase, expected: int, failure: Any) -> list[str]:
    """What the tables hold; the last line says whether every transaction was decided once."""
    lines = ["fraud rules in PostgreSQL, decisions written to PostgreSQL (exactly once):"]
    if failure is not None:
        return [*lines, f"FAILED: the query stopped with {failure}"]
    for table in SINK_TABLES.values():
        lines.append(f"  {table:<20} {db.query(f'SELECT count(*) FROM {table}')[0][0]:>6} rows")
    by_version = db.query(
        "SELECT rules_version, action, count(*) FROM (SELECT rules_version, action FROM "
        "fraud_decisions UNION ALL SELECT rules_version, 'REVIEW' FROM fraud_reviews) d "
        "GROUP BY 1, 2 ORDER BY 1, 2")
    lines.append("  decisions by rules version: " + ", ".join(
        f"v{v} {a} {n}" for v, a, n in by_version))
    for rule_id, error in db.query("SELECT rule_id, error FROM fraud_invalid_rules"):
        lines.append(f"  rejected rule {rule_id}: {error}")
    rules = db.query(f"SELECT rule_id, version, deleted FROM {RULES_TABLE} ORDER BY version")
    lines.append("  rules table: " + ", ".join(
        f"{r} (v{v}{', deleted' if d else ''})" for r, v, d in rules))
    total, distinct = db.query(
        "SELECT count(*), count(DISTINCT tx_id) FROM (SELECT tx_id FROM fraud_decisions "
        "UNION ALL SELECT tx_id FROM fraud_reviews) d")[0]
    versions = {v for v, _, _ in by_version}
    if total == distinct == expected and len(versions) >= 2:
        lines.append(f"OK: {expected} transactions, each decided exactly once; the rule update "
                     f"reached the query mid-run (rules versions {sorted(versions)})")
    else:
        lines.append(f"NOT OK: {total} decisions for {distinct} of {expected} transactions, "
                     f"rules versions {sorted(versions)}")
    return lines
