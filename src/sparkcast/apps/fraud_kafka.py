"""The fraud demo on Kafka: transactions and rules are topics, decisions go to topics once.

``sparkcast demo fraud --kafka`` (``make demo-kafka``) starts a throwaway Kafka broker
(``sparkcast.testing.kafka``: KRaft, loopback, a temporary folder) and runs the fraud
application (``apps/fraud.py``) with::

    fraud-rules (compacted, keyed by rule_id) ─ kafka_topic ─ .broadcast(rules) ─┐
    fraud-transactions (3 partitions) ─ kafka_topic ─ Stream ─────────────────────┴ process
        → sinks.kafka, exactly once for read_committed consumers: fraud-decisions (main),
          fraud-reviews, fraud-invalid-rules, fraud-dead-letters

The query starts from the topics' beginning, so the rules already in the rules topic are the
broadcast state before the first transaction is decided (``hold_until_ready``). Midway the
admin's update is *produced* to the rules topic (one rule tightened, one added, one that does
not parse, one deleted by its tombstone). The demo ends when a ``read_committed`` consumer sees
every transaction decided; it fails on any transaction decided twice or never, and stops the
broker.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, Drop
from sparkcast.apps.feeding import DemoReport, Feeder
from sparkcast.apps.fraud import (
    APP,
    INITIAL_RULES,
    INVALID_RULES,
    REMOVED_RULE,
    REVIEW,
    UPDATED_RULES,
)
from sparkcast.testing.kafka import KafkaBroker

TRANSACTIONS, RULES_TOPIC = "fraud-transactions", "fraud-rules"
SINK_TOPICS = {"main": "fraud-decisions", REVIEW: "fraud-reviews",
               INVALID_RULES: "fraud-invalid-rules", "dead_letters": "fraud-dead-letters"}
RULE_FIELDS = "rule_id string, condition string, action string"


def create_topics(broker: KafkaBroker) -> None:
    broker.create_topic(TRANSACTIONS, partitions=3)
    broker.create_topic(RULES_TOPIC, config={"cleanup.policy": "compact"})
    for topic in SINK_TOPICS.values():
        broker.create_topic(topic, partitions=2)


def rule_records(rules: list[tuple[str, str, str]]) -> list[tuple[str, Any]]:
    return [(r, {"rule_id": r, "condition": c, "action": a}) for r, c, a in rules]


def produce_update(broker: KafkaBroker) -> None:
    """The admin's change: a rule tightened, two added (one does not parse), one deleted by a
    tombstone, in one flush."""
    broker.produce(RULES_TOPIC, [*rule_records(UPDATED_RULES), (REMOVED_RULE, None)])


def produce_transactions(broker: KafkaBroker, drop: Drop) -> None:
    broker.produce(TRANSACTIONS, [(row["card_id"], row) for row in drop.rows])


def rules_stream(spark: Any, bootstrap: str) -> Any:
    """The rules topic as the application's broadcast rows: ``op`` from the tombstone, ``seq``
    from the offset (one partition: the topic's order)."""
    from pyspark.sql import functions as F

    from sparkcast.sources import kafka_topic

    raw = kafka_topic(spark, bootstrap, RULES_TOPIC, RULE_FIELDS, key="rule_id",
                      tombstone="deleted", metadata=["offset"])
    op = F.when(F.col("deleted"), F.lit("delete")).otherwise(F.lit("upsert"))
    return raw.select(F.col("kafka_offset").alias("seq"), op.alias("op"), "rule_id",
                      "condition", "action", "_corrupt_record")


def start_query(spark: Any, bootstrap: str, root: Path, *, parallelism: int = 2,
                trigger_seconds: float = 1.0) -> Any:
    from sparkcast import sinks
    from sparkcast.apps.wiring import build
    from sparkcast.sources import kafka_topic

    events_df = kafka_topic(spark, bootstrap, TRANSACTIONS, APP.events_schema)
    result = build(APP, spark, root / EVENTS, root / BROADCAST, parallelism=parallelism,
                   artifacts=root / ARTIFACTS, rules_df=rules_stream(spark, bootstrap),
                   events_df=events_df)
    targets = {output: sinks.kafka(bootstrap, topic, key="tx_id" if output in (
        "main", REVIEW) else None, parallelism=2) for output, topic in SINK_TOPICS.items()}
    return result.write_stream(checkpoint_location=str(root / "checkpoint"), sinks=targets,
                               trigger={"processingTime": f"{trigger_seconds} seconds"},
                               query_name="sparkcast_fraud_kafka")


def spark_session(parallelism: int) -> Any:
    from sparkcast.spark import session
    from sparkcast.spark.launch.jars import with_spark_jars

    partitions = str(min(parallelism, 2))
    return session(conf=with_spark_jars({"spark.sql.shuffle.partitions": partitions,
                                         "spark.default.parallelism": partitions}))


def decisions(broker: KafkaBroker) -> list[dict[str, Any]]:
    """Every decision a ``read_committed`` consumer sees (reviews with action REVIEW)."""
    main = [json.loads(r.value) for r in broker.read(SINK_TOPICS["main"]) if r.value]
    reviews = [{**json.loads(r.value), "action": "REVIEW"}
               for r in broker.read(SINK_TOPICS[REVIEW]) if r.value]
    return main + reviews


def run_kafka_demo(*, seed: int = 7, scale: int = 2, files: int | None = None,
                   step_seconds: float = 4.0, timeout: float = 300.0, parallelism: int = 2,
                   workdir: Path | None = None, out: TextIO | None = None,
                   spark: Any = None) -> DemoReport:
    """Start a broker and the query, produce transactions and the rule update, stop when every
    transaction is decided (or after ``timeout``), report, stop the broker."""
    out = out or sys.stdout
    began = time.monotonic()
    drops = [d for d in APP.drops(seed, scale, files) if d.folder == EVENTS]
    expected = sum(len(d.rows) for d in drops)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sparkcast-fraud-kafka-"))
    root.mkdir(parents=True, exist_ok=True)
    with KafkaBroker() as broker:
        out.write(f"Kafka broker {broker.bootstrap} started in {broker.folder}\n")
        create_topics(broker)
        broker.produce(RULES_TOPIC, rule_records(INITIAL_RULES))
        spark = spark or spark_session(parallelism)
        query = start_query(spark, broker.bootstrap, root, parallelism=parallelism)
        feeder = Feeder(drops, lambda drop: produce_transactions(broker, drop),
                        lambda: len(decisions(broker)), lambda: produce_update(broker),
                        step_seconds, timeout)
        failure = feeder.drive(query, expected, began, out)
        lines = summary(broker, expected, failure)
    ok = failure is None and lines[-1].startswith("OK")
    lines.append("Kafka broker stopped and removed")
    return DemoReport(lines, ok, time.monotonic() - began)


def summary(broker: KafkaBroker, expected: int, failure: Any) -> list[str]:
    """What the topics hold for a ``read_committed`` consumer; the last line says whether every
    transaction was decided exactly once."""
    lines = ["fraud rules and transactions from Kafka, decisions written to Kafka (exactly "
             "once, read back with isolation.level=read_committed):"]
    if failure is not None:
        return [*lines, f"FAILED: the query stopped with {failure}"]
    for topic in SINK_TOPICS.values():
        lines.append(f"  {topic:<20} {len(broker.read(topic)):>6} records")
    found = decisions(broker)
    by_version = Counter((d["rules_version"], d["action"]) for d in found)
    lines.append("  decisions by rules version: " + ", ".join(
        f"v{v} {a} {n}" for (v, a), n in sorted(by_version.items())))
    for record in broker.read(SINK_TOPICS[INVALID_RULES]):
        rule = json.loads(record.value or "{}")
        lines.append(f"  rejected rule {rule.get('rule_id')}: {rule.get('error')}")
    rules = [(r.key, "deleted" if r.value is None else "") for r in broker.read(RULES_TOPIC)]
    lines.append("  rules topic: " + ", ".join(f"{k}{' (' + d + ')' if d else ''}"
                                               for k, d in rules))
    per_tx = Counter(d["tx_id"] for d in found)
    twice = sorted(t for t, n in per_tx.items() if n > 1)
    versions = sorted({v for v, _ in by_version})
    if len(per_tx) == expected and not twice and len(versions) >= 2:
        lines.append(f"OK: {expected} transactions, each decided exactly once; the rule update "
                     f"reached the query mid-run (rules versions {versions})")
    else:
        lines.append(f"NOT OK: {len(found)} decisions for {len(per_tx)} of {expected} "
                     f"transactions ({len(twice)} decided more than once, e.g. {twice[:3]}), "
                     f"rules versions {versions}")
    return lines
