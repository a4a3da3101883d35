"""A sparkcast job for ``spark-submit`` on the test cluster, and its harness twin.

Run as a script (the driver), it reads ``<data>/events`` and ``<data>/rules`` (JSON lines, one
file per micro-batch) with a changing (streamed) broadcast side, and runs two queries to the end
of the data: a keyed pipeline (per-key counters, a threshold rule, a side output, dead letters
for bad rows) and a non-keyed one (enrichment by a category map). Both write with
``write_stream`` under ``<out>``. Imported by the test, the same functions run on the harness.

Event ``SLOW_ID`` sleeps in the keyed function and drops a file named after its Python worker's
pid in ``<data>/slow``: the test then kills that worker's executor while the batch is in flight.
Only the first attempt sleeps (the folder is empty then): Spark's retry of the task runs at once.

With a third argument ``<bootstrap>/<topic>`` only the keyed pipeline runs, its main output into
``sinks.kafka`` (written by the pattern's own tasks, one part per subtask) and its other outputs
into ``sinks.files`` (``test_cluster_kafka.py``). With ``attempts '<json>'`` the keyed pipeline
runs once per sink kind, one query after another in this one driver, each on its own checkpoint
(``ATTEMPT_QUERIES``, ``test_cluster_attempts.py``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)

RULES = MapStateDescriptor("rules", str, int)
LABELS = MapStateDescriptor("labels", str, str)
ALERTS = OutputTag("alerts", "k string, id long, amount long")
KEYED_OUTPUT = "k string, id long, n long, limit long"
ENRICHED_OUTPUT = "id long, category string, label string"
EVENTS_SCHEMA = "id long, k string, category string, amount long, ts long"
RULES_SCHEMA = "version long, limit long, category string, label string, ts long"
BATCHES = 6
EVENTS_PER_BATCH = 60
SLOW_ID = 3 * EVENTS_PER_BATCH + 7  # in micro-batch 3
SLOW_SECONDS = 8.0


class Thresholds(KeyedBroadcastProcessFunction):
    """Counts events per key; events above the current limit also go to ``ALERTS``."""

    def __init__(self, slow_dir: str | None = None) -> None:
        self.slow_dir = slow_dir

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put("limit", value["limit"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value["id"] == SLOW_ID and self.slow_dir and not os.listdir(self.slow_dir):
            # the first attempt only (no marker yet): the test kills it; the retry need not wait
            open(os.path.join(self.slow_dir, f"worker-{os.getpid()}"), "w").close()
            time.sleep(SLOW_SECONDS)
        limit = ctx.get_broadcast_state(RULES).get("limit")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if value["amount"] > limit:  # a null amount raises: a dead letter with the reason
            yield ALERTS, (value["k"], value["id"], value["amount"])
        yield value["k"], value["id"], n, limit


class Labels(BroadcastProcessFunction):
    """Enriches events with the label of their category, as the broadcast side has it now."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(LABELS).put(value["category"], value["label"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value["id"], value["category"], ctx.get_broadcast_state(LABELS).get(
            value["category"]) or "unknown"


def batches(count: int = BATCHES) -> list[tuple[list[dict], list[dict]]]:
    """``(rules, events)`` per micro-batch, the first ``count``; the limit and a label change
    in every batch. Distinct event times (``event_time="ts"``) order each key's events the same
    everywhere."""
    out = []
    for b in range(count):
        rules = [  # one file per micro-batch: a file source takes the next file, not "file b"
            {"version": b, "limit": 40 + 7 * b, "category": f"c{b % 3}", "label": f"L{b}",
             "ts": 1_000 * b}]
        events = []
        for i in range(EVENTS_PER_BATCH):
            n = b * EVENTS_PER_BATCH + i
            amount = None if n % 53 == 0 else (n * 37) % 100
            events.append({"id": n, "k": f"k{n % 11}", "category": f"c{n % 4}",
                           "amount": amount, "ts": 1_000 * b + 1 + i})
        out.append((rules, events))
    return out


def run(spark: Any, data: str, out: str, parallelism: int = 2) -> None:
    """Both pipelines to the end of the data, one micro-batch per file pair."""
    from sparkcast.spark import Stream

    events, rules = _sources(spark, data)
    keyed = (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES, order_by="version"))
             .process(Thresholds(f"{data.removeprefix('file://')}/slow"), KEYED_OUTPUT,
                      parallelism=parallelism, side_outputs=[ALERTS], event_time="ts"))
    enriched = (Stream(events).connect(Stream(rules).broadcast(LABELS, order_by="version"))
                .process(Labels(), ENRICHED_OUTPUT, parallelism=parallelism, event_time="ts"))
    queries = [result.write_stream(f"{out}/{name}", f"{out}/{name}-checkpoint",
                                   trigger={"availableNow": True}, query_name=name)
               for name, result in (("keyed", keyed), ("enriched", enriched))]
    for query in queries:  # both at once: the cluster's two cores serve both
        query.awaitTermination()


def _sources(spark: Any, data: str) -> tuple[Any, Any]:
    def source(name: str, schema: str) -> Any:
        return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                .json(f"{data}/{name}"))

    return source("events", EVENTS_SCHEMA), source("rules", RULES_SCHEMA)


def _keyed(spark: Any, data: str, parallelism: int = 2) -> Any:
    """The keyed pipeline (no slow event) over the data's files."""
    from sparkcast.spark import Stream

    events, rules = _sources(spark, data)
    return (Stream(events).key_by("k")
            .connect(Stream(rules).broadcast(RULES, order_by="version"))
            .process(Thresholds(), KEYED_OUTPUT, parallelism=parallelism,
                     side_outputs=[ALERTS], event_time="ts"))


def run_kafka(spark: Any, data: str, out: str, kafka: str) -> None:
    """The keyed pipeline to the end of the data, its main output into Kafka."""
    from sparkcast import sinks

    bootstrap, topic = kafka.split("/")
    files = sinks.files(f"{out}/keyed")
    chosen = {"main": sinks.kafka(bootstrap, topic, key="k"), ALERTS: files,
              "dead_letters": files}
    _keyed(spark, data).write_stream(checkpoint_location=f"{out}/keyed-checkpoint",
                                     sinks=chosen, trigger={"availableNow": True},
                                     query_name="keyed").awaitTermination()


#: the attempt tests' queries, run in this order: name -> (main, alerts) sink kinds; the
#: dead letters (and alerts marked files) go to ``<out>/<name>-files``; ``files`` alone is
#: ``write_stream(path)``. A Kafka output's topic and a JDBC output's table are named after
#: the query and output. ``kill-kafka``'s Kafka part is written by a driver job (a JDBC sink
#: in the query keeps the outputs from the pattern's tasks).
ATTEMPT_QUERIES = {"spec-kafka": ("kafka", "files"), "spec-files": ("files", "files"),
                   "spec-jdbc": ("jdbc", "files"), "kill-kafka": ("kafka", "jdbc")}


def sink_name(query: str, output: str) -> str:
    """The Kafka topic or JDBC table of ``query``'s ``output`` (``main`` or ``alerts``)."""
    return f"{query}_{output}".replace("-", "_")


def run_attempts(spark: Any, data: str, out: str, settings: dict[str, Any]) -> None:
    """Every query of ``ATTEMPT_QUERIES`` to the end of the data, one after another.
    ``settings``: ``bootstrap`` (Kafka) and ``url``, ``properties`` (the JDBC database)."""
    from sparkcast import sinks

    def sink(kind: str, query: str, output: str) -> Any:
        if kind == "kafka":
            return sinks.kafka(settings["bootstrap"], sink_name(query, output), key="k")
        if kind == "jdbc":
            return sinks.jdbc(settings["url"], sink_name(query, output),
                              settings["properties"], create_table=True)
        return sinks.files(f"{out}/{query}-files")

    for query, (main, alerts) in ATTEMPT_QUERIES.items():
        keyed, checkpoint = _keyed(spark, data), f"{out}/{query}-checkpoint"
        if main == alerts == "files":
            started = keyed.write_stream(f"{out}/{query}-files", checkpoint,
                                         trigger={"availableNow": True}, query_name=query)
        else:
            chosen = {"main": sink(main, query, "main"), ALERTS: sink(alerts, query, "alerts"),
                      "dead_letters": sink("files", query, "dead_letters")}
            started = keyed.write_stream(checkpoint_location=checkpoint, sinks=chosen,
                                         trigger={"availableNow": True}, query_name=query)
        started.awaitTermination()


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    data, out = argv[1], argv[2]
    spark = SparkSession.builder.appName("sparkcast-cluster-test").getOrCreate()
    if len(argv) > 4 and argv[3] == "attempts":
        run_attempts(spark, data, out, json.loads(argv[4]))
        spark.stop()
        return 0
    if len(argv) > 3:
        run_kafka(spark, data, out, argv[3])
        spark.stop()
        return 0
    run(spark, data, out)
    # where the executors' Python and sparkcast come from: the shipped environment
    import pyarrow as pa

    def where(batches: Any) -> Any:
        import sparkcast

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"python": [sys.executable],
                                              "sparkcast": [sparkcast.__file__]})

    for row in spark.range(1).mapInArrow(where, "python string, sparkcast string").collect():
        # one write: the JVM's threads share this log, and print() writes the newline apart
        sys.stdout.write(f"EXECUTOR-PYTHON {row.python} {row.sparkcast}\n")
        sys.stdout.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
