"""Kafka in, the pattern, Kafka out: throughput against Spark's own Kafka sink and the best
hand-written Spark job, and the latency of decisions against the job a Spark user writes by hand.

``python benchmarks/kafka.py --mode quick|full [--write]`` starts a throwaway broker
(``sparkcast.testing.kafka``) and one local Spark session (``local[2]``) and runs, side by side
in one run, the systems taking turns:

Throughput (W1 enrichment, ``logic.enrich_frame``; events on a 4-partition topic, the dimension
rows on a topic of their own, both read by Spark's Kafka source, ``availableNow`` in batches of
``per_batch``; forward, then backward, the best run of each counts):

* ``hand-written``: ``foreachBatch`` that re-reads the dimension topic per batch into a
  broadcast variable, ``mapInPandas``, Spark's Kafka sink (at least once);
* ``sparkcast → Spark's sink``: ``EnrichBatch`` (``process_batch``) over both topics, the main
  output written by Spark's Kafka sink from a user's sink (at least once);
* ``sparkcast → sinks.kafka``: the same with sparkcast's exactly-once Kafka sink;
* the same two keyed by ``key`` (``KeyedEnrich`` per element, the engine by subtask): through
  Spark's sink from a user's sink the driver writes, and into ``sinks.kafka``, which the
  pattern's own tasks write (``outputs/sinks_in_tasks.py``).

Latency (``kafka_latency.py``): the job a Spark user writes by hand (a stream-static join with
the versions topic, Spark's Kafka sink), sparkcast's keyed job into ``sinks.kafka`` and the same
with a processing-time timer per key, each alone at 5,000 and at 20,000 events/s from a producer
process; update and event latency as a ``read_committed`` reader process sees them, whether the
job kept up, where its micro-batches' time goes.

``--write`` replaces the Kafka section of docs/benchmarks.md with the run's table.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import logic  # noqa: E402
from kafka_latency import LATENCY_JOBS, PEER, latency, latency_table  # noqa: E402
from kafka_topics import parsed, produce  # noqa: E402
from spark_systems import DIM, EnrichBatch, KeyedEnrich  # noqa: E402

from sparkcast.testing.kafka import KafkaBroker  # noqa: E402

MODES = {
    "quick": {"events": 400_000, "per_batch": 100_000, "keys": 10_000, "repeats": 1,
              "latency": {"rates": [5_000, 20_000], "updates": 5, "interval": 2.0,
                          "warmup": 5.0, "catch_up": 15.0, "drain": 10.0}},
    "full": {"events": 2_000_000, "per_batch": 250_000, "keys": 10_000, "repeats": 3,
             "latency": {"rates": [5_000, 20_000], "updates": 15, "interval": 2.0,
                         "warmup": 15.0, "catch_up": 30.0, "drain": 20.0}},
}
EVENTS_SCHEMA = "key int, amount double"
DIM_SCHEMA = "key int, weight double"
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
BEGIN, END = "<!-- kafka:begin -->", "<!-- kafka:end -->"
HEADING = "## Kafka in and out"
#: the machine's load before the run: other work on it shows here
LOAD_AT_START = os.getloadavg()[0]


def workers_find_benchmarks() -> None:
    """Spark's Python workers import logic and spark_systems too: they inherit PYTHONPATH from
    the JVM, so set it before the session starts."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)


class SparkKafkaSink:
    """A user's sink: the frame as JSON values through Spark's own Kafka sink."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic

    def write(self, frame, output, batch_id) -> None:
        from pyspark.sql import functions as F

        (frame.select(F.to_json(F.struct("*")).alias("value")).write.format("kafka")
         .option("kafka.bootstrap.servers", self.bootstrap).option("topic", self.topic).save())


def hand_written(spark, broker: KafkaBroker, source: str, out: str, base: Path, per_batch: int):
    """The best hand-written job: the dimension topic re-read per batch, a broadcast variable,
    ``mapInPandas``, Spark's Kafka sink."""
    from pyspark.sql import functions as F

    def batch(frame, batch_id):
        dim = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
               .option("subscribe", "dim").load()
               .select(F.from_json(F.col("value").cast("string"), DIM_SCHEMA).alias("v"))
               .select("v.*").collect())
        weights = spark.sparkContext.broadcast({r.key: r.weight for r in dim})

        def enrich(frames):
            import pandas as pd

            series = pd.Series(weights.value, dtype="float64")
            for part in frames:
                yield logic.enrich_frame(part, series)

        (frame.select("key", "amount").mapInPandas(enrich, "key int, value double")
         .select(F.to_json(F.struct("*")).alias("value")).write.format("kafka")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out).save())

    events = parsed(spark, broker, source, EVENTS_SCHEMA, {"maxOffsetsPerTrigger": per_batch})
    return (events.writeStream.foreachBatch(batch).option("checkpointLocation", str(base))
            .trigger(availableNow=True).start())


def sparkcast_job(spark, broker: KafkaBroker, source: str, out: str, base: Path,
                  per_batch: int, exactly_once: bool, keyed: bool = False):
    """W1 over both topics: ``EnrichBatch`` (``process_batch``), or ``keyed``, ``KeyedEnrich``
    per element keyed by ``key`` (the engine by subtask, whose tasks write ``sinks.kafka``)."""
    from sparkcast import sinks
    from sparkcast.spark import Stream

    events = parsed(spark, broker, source, EVENTS_SCHEMA,
                    {"maxOffsetsPerTrigger": per_batch}).select("key", "amount")
    dim = parsed(spark, broker, "dim", DIM_SCHEMA).select("key", "weight")
    stream = Stream(events).key_by("key") if keyed else Stream(events)
    result = stream.connect(Stream(dim).broadcast(DIM)).process(
        KeyedEnrich() if keyed else EnrichBatch(), "key int, value double", parallelism=2)
    main = (sinks.kafka(broker.bootstrap, out, parallelism=2) if exactly_once
            else SparkKafkaSink(broker.bootstrap, out))
    return result.write_stream(checkpoint_location=str(base), trigger={"availableNow": True},
                               sinks={"main": main,
                                      "dead_letters": sinks.files(str(base) + "-letters")})


def throughput(spark, broker: KafkaBroker, mode: dict, scratch: Path) -> dict:
    n, keys = mode["events"], mode["keys"]
    broker.create_topic("tx", partitions=4)
    broker.create_topic("dim", partitions=1)
    produce(broker, "dim", [{"key": k, "weight": 1.0 + k % 7} for k in range(keys)], "key")
    produce(broker, "tx", [{"key": i % keys, "amount": float(i % 1000)} for i in range(n)])
    systems = {
        "hand-written (broadcast variable + mapInPandas + Spark's Kafka sink)":
            lambda base, out: hand_written(spark, broker, "tx", out, base, mode["per_batch"]),
        "sparkcast → Spark's Kafka sink (at least once)":
            lambda base, out: sparkcast_job(spark, broker, "tx", out, base, mode["per_batch"],
                                            False),
        "sparkcast → sinks.kafka (exactly once)":
            lambda base, out: sparkcast_job(spark, broker, "tx", out, base, mode["per_batch"],
                                            True),
        "sparkcast keyed → Spark's Kafka sink (at least once, a user's sink on the driver)":
            lambda base, out: sparkcast_job(spark, broker, "tx", out, base, mode["per_batch"],
                                            False, keyed=True),
        "sparkcast keyed → sinks.kafka (exactly once, written by the pattern's tasks)":
            lambda base, out: sparkcast_job(spark, broker, "tx", out, base, mode["per_batch"],
                                            True, keyed=True),
    }
    rates: dict[str, list[float]] = {name: [] for name in systems}
    order = list(systems.items())
    for repeat in range(mode["repeats"]):  # forward, backward, ...: warm-up and drift spread
        for index, (name, start) in enumerate(order if repeat % 2 == 0 else order[::-1]):
            out = f"out-{repeat}-{index}"
            broker.create_topic(out, partitions=4)
            began = time.monotonic()
            start(scratch / f"ckpt-{repeat}-{index}", out).awaitTermination()
            rates[name].append(n / (time.monotonic() - began))
            print(f"  {name}: {rates[name][-1]:,.0f} events/s", flush=True)
    return {name: max(values) for name, values in rates.items()}


def table(mode_name: str, rates: dict, runs: list[dict]) -> str:
    sizes = MODES[mode_name]
    lines = [f"One run of `python benchmarks/kafka.py --mode {mode_name}` on {machine()}.", ""]
    if rates:
        lines += throughput_table(sizes, rates) + [""]
    if runs:
        lines += latency_table(sizes, runs)
    return "\n".join(lines)


def throughput_table(sizes: dict, rates: dict) -> list[str]:
    names = list(rates)
    hand, spark_sink, exactly, keyed_spark, keyed_exactly = (rates[n] for n in names)
    return [f"Throughput: {sizes['events']:,} events on a 4-partition topic, "
            f"{sizes['per_batch']:,} per micro-batch (`availableNow`), {sizes['keys']:,} "
            f"dimension rows on a topic of their own, the best of {sizes['repeats']} "
            "alternating runs per system:", "",
            "| system | events/s | ratio |", "|---|---:|---|",
            f"| {names[0]} | {hand:,.0f} | 1.00x |",
            f"| {names[1]} | {spark_sink:,.0f} | {spark_sink / hand:.2f}x the hand-written job "
            "(target ≥ 0.9x) |",
            f"| {names[2]} | {exactly:,.0f} | {exactly / spark_sink:.2f}x sparkcast with "
            "Spark's sink (target ≥ 0.9x) |",
            f"| {names[3]} | {keyed_spark:,.0f} | {keyed_spark / hand:.2f}x the hand-written "
            "job (keyed: a shuffle by key and state per element) |",
            f"| {names[4]} | {keyed_exactly:,.0f} | {keyed_exactly / keyed_spark:.2f}x sparkcast "
            "keyed with Spark's sink (target ≥ 0.9x) |"]


def machine() -> str:
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, local[2], "
            f"{time.strftime('%Y-%m-%d')}, load average {LOAD_AT_START:.1f} at the start")


def write_doc(text: str) -> None:
    """Replace the Kafka section of docs/benchmarks.md (its heading and what lies between the
    markers; ``report.write`` keeps it when a full run rewrites the rest), or add it."""
    doc = DOC.read_text()
    section = f"{HEADING}\n\n{BEGIN}\n{text}\n{END}"
    pattern = f"(?:{re.escape(HEADING)}\\n\\n)?{re.escape(BEGIN)}.*?{re.escape(END)}"
    if BEGIN in doc:
        doc = re.sub(pattern, lambda _: section, doc, flags=re.S)
    else:
        doc += f"\n{section}\n"
    DOC.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="quick")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--latency-only", action="store_true",
                        help="measure the latency alone (no throughput, no --write)")
    parser.add_argument("--rate", type=int, nargs="+",
                        help="events/s of the latency runs (default 5,000 and 20,000)")
    parser.add_argument("--job", choices=LATENCY_JOBS, nargs="+",
                        help="the latency runs' jobs (default all)")
    args = parser.parse_args()
    mode = MODES[args.mode]
    if args.rate:
        mode["latency"]["rates"] = args.rate
    if args.job:
        for name in set(LATENCY_JOBS) - set(args.job) - {PEER}:
            del LATENCY_JOBS[name]
    workers_find_benchmarks()
    from sparkcast.spark import session
    from sparkcast.spark.launch.jars import with_spark_jars

    spark = session("local[2]", "sparkcast-kafka-bench",
                    conf=with_spark_jars({"spark.sql.shuffle.partitions": "2"}))
    began = time.monotonic()
    with KafkaBroker(heap="1g") as broker, tempfile.TemporaryDirectory() as scratch:
        rates = {}
        if not args.latency_only:
            print("throughput", flush=True)
            rates = throughput(spark, broker, mode, Path(scratch))
        print("latency", flush=True)
        runs = latency(spark, broker, mode, Path(scratch))
    text = table(args.mode, rates, runs)
    print(text)
    print(f"\n({time.monotonic() - began:.0f} s)")
    if args.write and not args.latency_only:
        write_doc(text)
    spark.stop()


if __name__ == "__main__":
    main()
