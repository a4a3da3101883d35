"""Kafka in, the pattern, Kafka out: throughput against Spark's own Kafka sink and the best
hand-written Spark job, and the update latency a ``read_committed`` consumer sees.

``python benchmarks/kafka.py --mode quick|full [--write]`` starts a throwaway broker
(``sparkcast.testing.kafka``) and one local Spark session (``local[2]``) and runs, side by side
in one run, the systems taking turns (forward, then backward; the best run of each counts):

Throughput (W1 enrichment, ``logic.enrich_frame``; events on a 4-partition topic, the dimension
rows on a topic of their own, both read by Spark's Kafka source, ``availableNow`` in batches of
``per_batch``):

* ``hand-written``: ``foreachBatch`` that re-reads the dimension topic per batch into a
  broadcast variable, ``mapInPandas``, Spark's Kafka sink (at least once);
* ``sparkcast → Spark's sink``: ``EnrichBatch`` (``process_batch``) over both topics, the main
  output written by Spark's Kafka sink from a user's sink (at least once);
* ``sparkcast → sinks.kafka``: the same with sparkcast's exactly-once Kafka sink.

Latency (a keyed counter whose outputs carry the broadcast version they used, ``KeyedVersioned``,
events produced at ``rate``/s to the events topic, one version record every ``interval`` s to a
topic with ``LogAppendTime``): from the version record's append time to the moment a
``read_committed`` consumer of the decisions topic (``sinks.kafka``) first reads a decision that
carries it or a later version, measured once the query has caught up with the backlog of its
start (its micro-batches hold under two seconds of events).

``--write`` replaces the Kafka section of docs/benchmarks.md with the run's table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Spark's Python workers import logic and spark_systems too: they inherit this from the JVM
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH"))
                                           if p)

import logic  # noqa: E402
from spark_systems import DIM, VERSION, EnrichBatch, KeyedVersioned  # noqa: E402

from sparkcast.testing.kafka import KafkaBroker  # noqa: E402

MODES = {
    "quick": {"events": 400_000, "per_batch": 100_000, "keys": 10_000, "repeats": 1,
              "latency": {"updates": 8, "interval": 2.0, "warmup": 15.0, "rate": 20_000}},
    "full": {"events": 2_000_000, "per_batch": 250_000, "keys": 10_000, "repeats": 3,
             "latency": {"updates": 30, "interval": 2.0, "warmup": 20.0, "rate": 20_000}},
}
EVENTS_SCHEMA = "key int, amount double"
DIM_SCHEMA = "key int, weight double"
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
BEGIN, END = "<!-- kafka:begin -->", "<!-- kafka:end -->"
#: the machine's load before the run: other work on it shows here
LOAD_AT_START = os.getloadavg()[0]


def produce(broker: KafkaBroker, topic: str, rows: list[dict], key: str | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer(broker.client_config(**{"linger.ms": 20}))
    for row in rows:
        while True:
            try:
                producer.produce(topic, json.dumps(row),
                                 None if key is None else str(row[key]))
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def parsed(spark, broker: KafkaBroker, topic: str, schema: str, extra: dict | None = None):
    """A topic as a stream of its JSON values' columns (Spark's own Kafka source)."""
    from pyspark.sql import functions as F

    # the fetch wait sparkcast.sources.kafka_topic sets by default, for every system alike
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.fetch.max.wait.ms", "50"))
    for name, value in (extra or {}).items():
        reader = reader.option(name, value)
    frame = reader.load()
    return frame.select(F.from_json(F.col("value").cast("string"), schema).alias("v"),
                        F.col("timestamp")).select("v.*", "timestamp")


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
                  per_batch: int, exactly_once: bool):
    from sparkcast import sinks
    from sparkcast.spark import Stream

    events = parsed(spark, broker, source, EVENTS_SCHEMA,
                    {"maxOffsetsPerTrigger": per_batch}).select("key", "amount")
    dim = parsed(spark, broker, "dim", DIM_SCHEMA).select("key", "weight")
    result = Stream(events).connect(Stream(dim).broadcast(DIM)).process(
        EnrichBatch(), "key int, value double", parallelism=2)
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


def latency(spark, broker: KafkaBroker, mode: dict, scratch: Path) -> dict:
    from sparkcast import sinks
    from sparkcast.spark import Stream

    settings = mode["latency"]
    broker.create_topic("lat-events", partitions=4)
    broker.create_topic("lat-versions", partitions=1,
                        config={"message.timestamp.type": "LogAppendTime"})
    broker.create_topic("lat-decisions", partitions=4)
    stop = threading.Event()
    feeder = threading.Thread(target=_feed_events, args=(broker, settings["rate"], stop))
    feeder.start()
    events = parsed(spark, broker, "lat-events", "key int").select("key")
    versions = parsed(spark, broker, "lat-versions", "version long").selectExpr(
        "version", "cast(unix_millis(timestamp) as long) as written_ms")
    result = Stream(events).key_by("key").connect(Stream(versions).broadcast(VERSION)).process(
        KeyedVersioned(), "key int, count long, version long, written_ms long", parallelism=2)
    query = result.write_stream(
        checkpoint_location=str(scratch / "lat-ckpt"),
        sinks={"main": sinks.kafka(broker.bootstrap, "lat-decisions", key="key", parallelism=2),
               "dead_letters": sinks.files(str(scratch / "lat-letters"))})
    seen: dict[int, float] = {}
    watcher = threading.Thread(target=_watch, args=(broker, seen, stop))
    watcher.start()
    try:
        time.sleep(settings["warmup"])
        _caught_up(query, settings["rate"])
        for version in range(1, settings["updates"] + 1):
            produce(broker, "lat-versions", [{"version": version}])
            time.sleep(settings["interval"])
        deadline = time.monotonic() + 60  # a backlog drains before the run ends
        while len(seen) < settings["updates"] and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        progress = [p.durationMs for p in query.recentProgress if p.numInputRows]
        failed = None if query.isActive else str(query.exception()).splitlines()[0][:300]
        query.stop()
        feeder.join()
        watcher.join()
    appended = _append_times(broker)
    delays = sorted(seen[v] - appended[v] for v in appended if v in seen)
    return {"updates": settings["updates"], "seen": len(delays),
            "p50_ms": _percentile(delays, 50), "p99_ms": _percentile(delays, 99),
            "batch_ms": _median_durations(progress), "failed": failed}


def _median_durations(progress: list[dict]) -> dict[str, float]:
    """Spark's per-phase time of a micro-batch (``durationMs``), median over the run's batches
    with input: where an update's latency goes besides waiting for the next trigger."""
    phases = sorted({name for durations in progress for name in durations})
    return {name: _percentile(sorted(d.get(name, 0) for d in progress), 50) or 0.0
            for name in phases}


def _caught_up(query, rate: int, timeout: float = 120.0) -> None:
    """Wait until the query's micro-batches hold under two seconds of events: the backlog of
    its start is behind it, so an update's latency is the steady state's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = query.lastProgress
        if last is not None and 0 < last["numInputRows"] < 2 * rate:
            return
        time.sleep(0.5)


def _feed_events(broker: KafkaBroker, rate: int, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer(broker.client_config(**{"linger.ms": 5}))
    sent, began = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - began) * rate)
        while sent < due:
            try:
                producer.produce("lat-events", json.dumps({"key": sent % 10_000}))
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(0.005)
    producer.flush(30)


def _watch(broker: KafkaBroker, seen: dict[int, float], stop: threading.Event) -> None:
    """The wall time at which a read_committed consumer first reads each version."""
    from confluent_kafka import Consumer

    consumer = Consumer(broker.client_config(**{
        "group.id": "latency-watch", "isolation.level": "read_committed",
        "auto.offset.reset": "earliest"}))
    consumer.subscribe(["lat-decisions"])
    while not stop.is_set():
        message = consumer.poll(0.1)
        if message is None or message.error() is not None:
            continue
        version, now = json.loads(message.value())["version"], time.time() * 1000
        for reflected in range(1, version + 1):  # a later version reflects the earlier ones
            seen.setdefault(reflected, now)
    consumer.close()


def _append_times(broker: KafkaBroker) -> dict[int, float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(broker.client_config(**{"group.id": "latency-versions"}))
    consumer.assign([TopicPartition("lat-versions", 0, 0)])
    found = {}
    while True:
        message = consumer.poll(2.0)
        if message is None:
            break
        if message.error() is None:
            found[json.loads(message.value())["version"]] = float(message.timestamp()[1])
    consumer.close()
    return found


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))]


def table(mode_name: str, rates: dict, lat: dict) -> str:
    names = list(rates)
    hand, spark_sink, exactly = (rates[n] for n in names)
    sizes = MODES[mode_name]
    lines = [f"One run of `python benchmarks/kafka.py --mode {mode_name}` on {machine()}. "
             f"Throughput: {sizes['events']:,} events on a 4-partition topic, "
             f"{sizes['per_batch']:,} per micro-batch (`availableNow`), {sizes['keys']:,} "
             f"dimension rows on a topic of their own, the best of {sizes['repeats']} "
             "alternating runs per system:", "",
             "| system | events/s | ratio |", "|---|---:|---|"]
    lines.append(f"| {names[0]} | {hand:,.0f} | 1.00x |")
    lines.append(f"| {names[1]} | {spark_sink:,.0f} | {spark_sink / hand:.2f}x the "
                 "hand-written job (target ≥ 0.9x) |")
    lines.append(f"| {names[2]} | {exactly:,.0f} | {exactly / spark_sink:.2f}x sparkcast "
                 "with Spark's sink (target ≥ 0.8x) |")
    lines += ["", f"Update latency, keyed, events at {MODES[mode_name]['latency']['rate']:,}/s "
              "into Kafka, decisions out through `sinks.kafka`, read by a `read_committed` "
              f"consumer: p50 {_ms(lat['p50_ms'])}, p99 {_ms(lat['p99_ms'])} over "
              f"{lat['seen']} of {lat['updates']} updates (target p99 < 1 s).", "",
              "Where a micro-batch's time goes (Spark's `durationMs`, median over the run's "
              "batches; `addBatch` is sparkcast's `foreachBatch`: the pattern and the Kafka "
              "transactions):", "", "| phase | ms |", "|---|---:|"]
    lines += [f"| {name} | {ms:,.0f} |" for name, ms in lat["batch_ms"].items()]
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} ms"


def machine() -> str:
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, local[2], "
            f"{time.strftime('%Y-%m-%d')}, load average {LOAD_AT_START:.1f} at the start")


def write_doc(text: str) -> None:
    doc = DOC.read_text()
    section = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in doc:
        doc = re.sub(f"{re.escape(BEGIN)}.*?{re.escape(END)}", lambda _: section, doc,
                     flags=re.S)
    else:
        doc += f"\n## Kafka in and out\n\n{section}\n"
    DOC.write_text(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="quick")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--latency-only", action="store_true",
                        help="measure the update latency alone (no throughput, no --write)")
    parser.add_argument("--rate", type=int, help="events/s of the latency run (default 20,000)")
    args = parser.parse_args()
    from sparkcast.spark import session
    from sparkcast.spark.launch.jars import with_spark_jars

    spark = session("local[2]", "sparkcast-kafka-bench",
                    conf=with_spark_jars({"spark.sql.shuffle.partitions": "2"}))
    with KafkaBroker(heap="1g") as broker, tempfile.TemporaryDirectory() as scratch:
        if args.rate:
            MODES[args.mode]["latency"]["rate"] = args.rate
        if args.latency_only:
            print(json.dumps(latency(spark, broker, MODES[args.mode], Path(scratch))))
            spark.stop()
            return
        print("throughput", flush=True)
        rates = throughput(spark, broker, MODES[args.mode], Path(scratch))
        print("latency", flush=True)
        lat = latency(spark, broker, MODES[args.mode], Path(scratch))
    text = table(args.mode, rates, lat)
    print(text)
    if args.write:
        write_doc(text)
    spark.stop()


if __name__ == "__main__":
    main()
