"""The Spark-based systems: sparkcast (per element, process_batch), foreachBatch + a re-broadcast
variable + mapInPandas, and Spark's JVM stream-static broadcast join.

Every run is one streaming query over the same Parquet files (``readStream.parquet``, trigger
``availableNow``, all files in one micro-batch unless ``files_per_trigger`` is given), writing to
Spark's ``noop`` sink; the broadcast side is a static Parquet DataFrame. The time of a run is
from ``start()`` to the end of ``awaitTermination()`` (the query's whole life: planning, every
micro-batch, commits), plus, separately, the time to build the pipeline.

Run as a process: ``python spark_systems.py`` reads one JSON job per line on stdin and answers
each with a line ``@@RESULT {...}`` on stdout; one Spark session serves all jobs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import child  # noqa: E402
import data  # noqa: E402
import logic  # noqa: E402
import procmem  # noqa: E402

from sparkcast import (  # noqa: E402
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    ValueStateDescriptor,
)

DIM = MapStateDescriptor("dim", int, float)
RULES = MapStateDescriptor("rules", int, tuple)
THRESHOLD = MapStateDescriptor("threshold", str, int)
MODEL = MapStateDescriptor("model", str, tuple)
LARGE = MapStateDescriptor("large", int, str)

OUTPUT_SCHEMAS = {
    "W1": "key int, value double",
    "W2": "user int, matched int",
    "W3": "user int, count long, flagged boolean",
    "W4": "user int, score double",
    "W6": "key int, size int",
    "W7": "user int, count long, version long, written_ms long",
}

# --------------------------------------------------------------------------------------------
# sparkcast functions (per element and process_batch); the bodies are logic.py's


class Enrich(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        out = logic.enrich(value.key, value.amount, ctx.get_broadcast_state(DIM))
        if out is not None:
            yield out

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(DIM).put(value.key, value.weight)


class KeyedEnrich(KeyedBroadcastProcessFunction):
    """W1's enrichment keyed by its key: the same rows, on the engine by subtask (the Kafka
    benchmark's keyed throughput rows, whose outputs the pattern's tasks may write)."""

    process_element = Enrich.process_element
    process_broadcast_element = Enrich.process_broadcast_element


class EnrichBatch(Enrich):
    def process_batch(self, batch, ctx):
        import pandas as pd

        items = ctx.get_broadcast_state(DIM).items()
        weights = pd.Series(dict(items), dtype="float64")
        return logic.enrich_frame(batch, weights)


class Rules(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES).values()
        yield value.user, logic.match_rules(value.amount, value.country, value.merchant,
                                            value.hour, value.device, rules)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.rule_id, tuple(value))


class RulesBatch(Rules):
    def process_batch(self, batch, ctx):
        return logic.match_rules_frame(batch, list(ctx.get_broadcast_state(RULES).values()))


class Counter(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_element(self, value, ctx):
        threshold = ctx.get_broadcast_state(THRESHOLD).get("threshold")
        count, flagged = logic.count_and_flag(self.count.value(), threshold)
        self.count.update(count)
        yield value.user, count, flagged

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(THRESHOLD).put(value.name, value.value)


class Score(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODEL).get("lr")
        if model is None:  # an event before the model: dropped, as in Flink
            return
        weights, bias = model
        yield value.user, logic.score(value[1:], weights, bias)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODEL).put(value.name, (tuple(value.weights), value.bias))


class ScoreBatch(Score):
    def process_batch(self, batch, ctx):
        model = ctx.get_broadcast_state(MODEL).get("lr")
        return None if model is None else logic.score_frame(batch, *model)


class Large(BroadcastProcessFunction):
    """W6: a 100 MB broadcast state; each event looks one entry up."""

    def process_element(self, value, ctx):
        payload = ctx.get_broadcast_state(LARGE).get(value.key % data.LARGE_ROWS)
        yield value.key, len(payload) if payload is not None else -1

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LARGE).put(value.key, value.payload)


VERSION = MapStateDescriptor("version", str, tuple)


class Versioned(BroadcastProcessFunction):
    """W5: every output carries the broadcast version it was computed with."""

    def process_element(self, value, ctx):
        current = ctx.get_broadcast_state(VERSION).get("v")
        version, written = current if current is not None else (-1, -1)
        yield value.key, version, written

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(VERSION)
        current = state.get("v")
        if current is None or value.version > current[0]:
            state.put("v", (value.version, value.written_ms))


class VersionedBatch(Versioned):
    def process_batch(self, batch, ctx):
        import pandas as pd

        current = ctx.get_broadcast_state(VERSION).get("v")
        version, written = current if current is not None else (-1, -1)
        return pd.DataFrame({"key": batch["key"].astype("int32"), "version": version,
                             "written_ms": written})


class KeyedVersioned(KeyedBroadcastProcessFunction):
    """W5 keyed: a per-user counter whose outputs carry the broadcast version they used."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_element(self, value, ctx):
        current = ctx.get_broadcast_state(VERSION).get("v")
        version, written = current if current is not None else (-1, -1)
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        yield value.key, count, version, written

    def process_broadcast_element(self, value, ctx):
        Versioned.process_broadcast_element(self, value, ctx)


class KeyedDecision(KeyedVersioned):
    """The Kafka latency run's keyed job: ``KeyedVersioned`` whose outputs also carry their
    event's ``event_ms`` (its append time on the events topic), so a reader of the decisions
    can tell each event's latency as well as each version's."""

    def process_element(self, value, ctx):
        for key, count, version, written in KeyedVersioned.process_element(self, value, ctx):
            yield key, count, version, written, value.event_ms


class KeyedDecisionTimer(KeyedDecision):
    """``KeyedDecision`` with a processing-time timer per key: each event registers one 1–2 s
    ahead, on the whole second (so a key holds one or two timers, as Flink's coalesced timers);
    a timer that fires does nothing. What the timers' bookkeeping costs, alone."""

    def process_element(self, value, ctx):
        timers = ctx.timer_service()
        timers.register_processing_time_timer((timers.current_processing_time() // 1000 + 2)
                                              * 1000)
        yield from KeyedDecision.process_element(self, value, ctx)

    def on_timer(self, timestamp, ctx):
        return None


SESSION = MapStateDescriptor("session", str, tuple)


class SessionCount(KeyedBroadcastProcessFunction):
    """W7: Flink's count-with-timeout example (``CountWithTimeoutFunction``) with the timeout
    broadcast. Per user a count and the session's deadline (the last event's time + the
    timeout), an event-time timer registered at every event's deadline; a timer that fires at
    the current deadline (no event for the timeout) ends the session: ``(user, count, version,
    written_ms)``, with the broadcast version the timer saw. Earlier timers of the user fire and
    find a later deadline, as in Flink's example."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))
        self.deadline = runtime_context.get_state(ValueStateDescriptor("deadline", int))

    def process_element(self, value, ctx):
        current = ctx.get_broadcast_state(SESSION).get("v")
        deadline = ctx.timestamp() + (current[2] if current is not None else data.TIMEOUT_W7)
        self.count.update((self.count.value() or 0) + 1)
        self.deadline.update(deadline)
        ctx.timer_service().register_event_time_timer(deadline)

    def on_timer(self, timestamp, ctx):
        if timestamp != self.deadline.value():
            return
        current = ctx.get_broadcast_state(SESSION).get("v")
        version, written = current[:2] if current is not None else (-1, -1)
        yield ctx.get_current_key(), self.count.value(), version, written
        self.count.clear()
        self.deadline.clear()

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(SESSION)
        current = state.get("v")
        if current is None or value.version > current[0]:
            state.put("v", (value.version, value.written_ms, value.timeout))


LATENCY_SCHEMAS = {"element": "key int, version long, written_ms long",
                   "batch": "key int, version long, written_ms long",
                   "keyed": "key int, count long, version long, written_ms long",
                   "timer": "key int, count long, version long, written_ms long"}
LATENCY_FUNCTIONS = {"element": Versioned, "batch": VersionedBatch, "keyed": KeyedVersioned,
                     "timer": SessionCount}
W5_USERS = 10_000  # the keyed W5 forms' users (key = rate value mod this)


def engine_of(result, consumer: str = "query") -> str:
    """The engine ``result`` runs on as ``result.explain()`` says: its own query's
    (``write_stream``, ``sinks=``, ``foreach_batch``) or, with ``consumer="dataframes"``, that
    of ``result.main``."""
    explained = result.explain()
    return (explained.engine if consumer == "query" else explained.dataframes.engine).value


def checked(result, engine: str, consumer: str = "query") -> None:
    """Fail unless ``result.explain()`` says ``result`` runs on ``engine``."""
    chosen = engine_of(result, consumer)
    assert chosen == engine, f"the plan runs on the {chosen} engine, not {engine}"


def with_watermark(df, column: str = "ts"):
    """Spark's watermark (zero delay) on an epoch-ms column, the columns unchanged: the clock
    of event-time timers."""
    from pyspark.sql import functions as F

    return (df.withColumn("_wm", F.timestamp_millis(F.col(column)))
            .withWatermark("_wm", "0 seconds").drop("_wm"))


def _percentile(values, q):
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return float(sorted(values)[index])


FUNCTIONS = {
    ("W1", "element"): (Enrich, DIM), ("W1", "batch"): (EnrichBatch, DIM),
    ("W2", "element"): (Rules, RULES), ("W2", "batch"): (RulesBatch, RULES),
    ("W3", "element"): (Counter, THRESHOLD),
    ("W4", "element"): (Score, MODEL), ("W4", "batch"): (ScoreBatch, MODEL),
    ("W6", "element"): (Large, LARGE), ("W7", "element"): (SessionCount, SESSION),
}

# --------------------------------------------------------------------------------------------
# baselines: foreachBatch + a broadcast variable re-made every micro-batch + mapInPandas


def _fb_function(workload: str):
    """Per micro-batch: read the broadcast side, make a broadcast variable, mapInPandas."""

    def body(frames, bc):
        value = bc.value
        for frame in frames:
            if workload == "W1":
                yield logic.enrich_frame(frame, value)
            elif workload == "W2":
                yield logic.match_rules_frame(frame, value)
            else:
                yield logic.score_frame(frame, *value)

    def prepare(pdf):
        import pandas as pd

        if workload == "W1":
            return pd.Series(pdf["weight"].to_numpy(), index=pdf["key"].to_numpy())
        if workload == "W2":
            return [tuple(r) for r in pdf.itertuples(index=False, name=None)]
        row = pdf.iloc[0]
        return tuple(row["weights"]), float(row["bias"])

    return body, prepare


# --------------------------------------------------------------------------------------------


class Runner:
    def __init__(self) -> None:
        from sparkcast.spark import session
        jar = Path("/usr/share/java/postgresql.jar")  # the JDBC sink rows (sinks.py)
        self.spark = session(conf={"spark.sql.shuffle.partitions": "2",
                                   "spark.default.parallelism": "2",
                                   **({"spark.jars": str(jar)} if jar.exists() else {})})
        self.postgres: Any = None
        self.tmp = Path(tempfile.mkdtemp(prefix="sparkcast-bench-"))
        self.jobs = 0

    def _checkpoint(self) -> str:
        self.jobs += 1
        path = self.tmp / f"ckpt-{self.jobs}"
        shutil.rmtree(path, ignore_errors=True)
        return str(path)

    def _events(self, workload: str, n: int, files_per_trigger: int | None):
        source = "W1" if workload == "W6" else workload
        reader = self.spark.readStream.schema(data.EVENT_SCHEMAS[source])
        if files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", files_per_trigger)
        return reader.parquet(str(data.events_dir(source, n)))

    def _broadcast(self, workload: str, streaming: bool = False):
        """The broadcast side as a static DataFrame, or (W6, and on request) as a streaming
        Parquet source. A static side travels inside the pickled plan: at 100 MB PySpark turns
        that command into a broadcast variable, which transformWithStateInPandas' driver-side
        worker cannot load (BROADCAST_VARIABLE_NOT_LOADED), so W6 streams it."""
        if workload == "W6":
            path, schema = str(data.large_broadcast_dir()), "key int, payload string"
        else:
            path, schema = str(data.broadcast_dir(workload)), data.BROADCAST_SCHEMAS[workload]
        if streaming or workload == "W6":
            return self.spark.readStream.schema(schema).parquet(path)
        return self.spark.read.parquet(path)

    def _run_query(self, df, extra=None) -> dict:
        writer = df.writeStream.format("noop").option("checkpointLocation", self._checkpoint())
        writer = writer.trigger(availableNow=True)
        start = time.perf_counter()
        query = writer.start()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        progress = query.recentProgress
        rows_in = sum(p["numInputRows"] for p in progress)
        rows_out = sum((p.get("sink") or {}).get("numOutputRows", 0) or 0 for p in progress)
        result = {"seconds": seconds, "batches": len([p for p in progress
                                                      if p["numInputRows"]]),
                  "rows_in": rows_in, "rows_out": rows_out}
        if extra:
            result.update(extra)
        return result

    def sparkcast(self, workload: str, n: int, mode: str, parallelism: int = 2,
                  files_per_trigger: int | None = None, streamed_broadcast: bool = False,
                  output: str = "main") -> dict:
        """One query over the events and the broadcast side (static, or with
        ``streamed_broadcast`` read as a stream: its rows arrive in the first micro-batch, with
        the events). ``output``: ``"main"``, ``result.main`` to Spark's ``noop`` sink (with a
        static side, a non-keyed function runs on the micro-batch engine, one ``mapInArrow``;
        a keyed one, or any over a streamed side, on the operator); ``"noop"``,
        ``foreach_batch`` writing the main frame to ``noop`` (the micro-batch engine over a
        streamed side, keyed or not); ``"files"``, ``write_stream`` to Parquet."""
        from sparkcast.spark import Stream

        build = time.perf_counter()
        cls, desc = FUNCTIONS[(workload, mode)]
        events = Stream(self._events(workload, n, files_per_trigger))
        if workload == "W3":
            events = events.key_by("user")
        broadcast = self._broadcast(workload, streaming=streamed_broadcast)
        result = events.connect(Stream(broadcast).broadcast(desc)).process(
            cls(), output_schema=OUTPUT_SCHEMAS[workload], parallelism=parallelism)
        if output == "main":
            main = result.main
            build = time.perf_counter() - build
            return self._run_query(main, {"build_seconds": build,
                                          "engine": engine_of(result, "dataframes")})
        out = self.tmp / f"out-{self.jobs}"
        trigger = {"availableNow": True}
        build = time.perf_counter() - build
        start = time.perf_counter()  # as _run_query: from the query's start to its end
        if output == "files":
            query = result.write_stream(str(out), self._checkpoint(), trigger=trigger)
        else:
            query = result.foreach_batch(lambda outputs, _: outputs["main"].write.format(
                "noop").mode("overwrite").save(), self._checkpoint(), trigger=trigger)
        query.awaitTermination()
        seconds = time.perf_counter() - start
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "build_seconds": build, "engine": engine_of(result),
                "rows_in": sum(p["numInputRows"] for p in query.recentProgress),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    def foreachbatch(self, workload: str, n: int, files_per_trigger: int | None = None) -> dict:
        from pyspark.sql.types import _parse_datatype_string

        body, prepare = _fb_function(workload)
        schema = _parse_datatype_string(OUTPUT_SCHEMAS[workload])
        spark, broadcast_path = self.spark, str(data.broadcast_dir(workload))
        counts = []

        def each(batch_df, batch_id):
            value = prepare(spark.read.parquet(broadcast_path).toPandas())
            bc = spark.sparkContext.broadcast(value)
            out = batch_df.mapInPandas(lambda frames: body(frames, bc), schema)
            out.write.format("noop").mode("overwrite").save()
            bc.unpersist()
            counts.append(batch_id)

        writer = self._events(workload, n, files_per_trigger).writeStream.foreachBatch(each)
        writer = writer.option("checkpointLocation", self._checkpoint()).trigger(availableNow=True)
        start = time.perf_counter()
        query = writer.start()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        rows_in = sum(p["numInputRows"] for p in query.recentProgress)
        return {"seconds": seconds, "batches": len(counts), "rows_in": rows_in, "rows_out": None}

    def jvm_join(self, workload: str, n: int, files_per_trigger: int | None = None) -> dict:
        from pyspark.sql import functions as F

        assert workload == "W1", "the JVM broadcast join is measured for W1 only"
        events = self._events(workload, n, files_per_trigger)
        dim = F.broadcast(self._broadcast(workload))
        out = events.join(dim, "key").select("key", (F.col("amount") * F.col("weight")).alias(
            "value"))
        return self._run_query(out)

    def arrow_floor(self, workload: str, n: int, files_per_trigger: int | None = None) -> dict:
        """The floor for any Python on Spark: every event column crosses to Python through
        ``mapInArrow`` and only the first comes back (no logic, no state)."""
        import pyarrow as pa

        def first_column(batches):
            for batch in batches:
                yield pa.RecordBatch.from_arrays([batch.column(0)], names=["c"])

        events = self._events(workload, n, files_per_trigger)
        kind = events.schema.fields[0].dataType.simpleString()
        return self._run_query(events.mapInArrow(first_column, f"c {kind}"))

    # ---------------------------------------------------------------- multi-batch, streamed

    def _streamed_inputs(self, workload: str, n: int, per_batch: int):
        """Events ``per_batch`` a micro-batch (``maxFilesPerTrigger``), the broadcast side read
        with ``readStream``: its rows in micro-batch 0, one update in each later one."""
        batches = n // per_batch
        events = (self.spark.readStream.schema(data.EVENT_SCHEMAS[workload])
                  .option("maxFilesPerTrigger", per_batch // data.CHUNK)
                  .parquet(str(data.events_mtimes_ordered(workload, n))))
        updates = (self.spark.readStream.schema(data.BROADCAST_SCHEMAS[workload])
                   .option("maxFilesPerTrigger", 1)
                   .parquet(str(data.broadcast_updates_dir(workload, batches))))
        return events, updates

    def streamed(self, workload: str, n: int, mode: str, engine: str, per_batch: int,
                 parallelism: int = 2) -> dict:
        """sparkcast over the streamed inputs, written by ``write_stream`` (Parquet files,
        exactly once) on ``engine``: ``"micro_batch"``, or ``"operator"``, the engine every
        streamed broadcast side took before the micro-batch engine. W3 and W7 are keyed by
        user; W7's timers run on event time (``ts``, Spark's watermark on the events)."""
        from sparkcast.spark import Stream

        build = time.perf_counter()
        events, updates = self._streamed_inputs(workload, n, per_batch)
        cls, desc = FUNCTIONS[(workload, mode)]
        timed = workload == "W7"
        stream = Stream(with_watermark(events) if timed else events)
        if workload in ("W3", "W7"):
            stream = stream.key_by("user")
        result = stream.connect(Stream(updates).broadcast(desc)).process(
            cls(), output_schema=OUTPUT_SCHEMAS[workload], parallelism=parallelism,
            engine=engine, event_time="ts" if timed else None)
        checked(result, engine)
        out = self.tmp / f"out-{self.jobs}"
        query = result.write_stream(str(out), self._checkpoint(), trigger={"availableNow": True})
        build = time.perf_counter() - build
        start = time.perf_counter()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        rows_in = sum(p["numInputRows"] for p in query.recentProgress)
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "build_seconds": build, "rows_in": rows_in,
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    def streamed_main(self, workload: str, n: int, mode: str, per_batch: int,
                      parallelism: int = 2) -> dict:
        """``result.main`` of the streamed inputs, as a user composes it with a sink of their
        own: here Spark's ``noop`` sink (beside ``foreachbatch_streamed(write="noop-sink")``)."""
        from sparkcast.spark import Stream

        build = time.perf_counter()
        events, updates = self._streamed_inputs(workload, n, per_batch)
        cls, desc = FUNCTIONS[(workload, mode)]
        result = Stream(events).connect(Stream(updates).broadcast(desc)).process(
            cls(), output_schema=OUTPUT_SCHEMAS[workload], parallelism=parallelism)
        main = result.main
        build = time.perf_counter() - build
        return self._run_query(main, {"build_seconds": build,
                                      "engine": engine_of(result, "dataframes")})

    def foreachbatch_streamed(self, workload: str, n: int, per_batch: int,
                              write: str = "parquet") -> dict:
        """The hand-written job: per micro-batch, re-read the broadcast files up to this batch,
        fold the updates, make a broadcast variable, ``mapInPandas``, append Parquet
        (``write="jdbc"``: ``df.write.jdbc`` into PostgreSQL; ``"noop-sink"``: Spark's ``noop``
        format; ``"noop"``: a no-op body)."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import _parse_datatype_string

        body, prepare = _fb_function(workload)
        schema = _parse_datatype_string(OUTPUT_SCHEMAS[workload])
        spark = self.spark
        events, _ = self._streamed_inputs(workload, n, per_batch)
        files = sorted(str(f) for f in data.broadcast_updates_dir(
            workload, n // per_batch).glob("part-*.parquet"))
        key = {"W1": "key", "W2": "rule_id", "W4": "name"}[workload]
        out = str(self.tmp / f"out-{self.jobs}")

        table = self._jdbc_table(workload) if write == "jdbc" else None

        def each(batch_df, batch_id):
            if write == "noop":
                return
            rows = (spark.read.parquet(*files[:batch_id + 1])
                    .withColumn("_file", F.input_file_name()).toPandas())
            rows = rows.sort_values("_file", kind="stable").drop_duplicates(key, keep="last")
            bc = spark.sparkContext.broadcast(prepare(rows.drop(columns="_file")))
            out_df = batch_df.mapInPandas(lambda frames: body(frames, bc), schema)
            if write == "noop-sink":
                out_df.write.format("noop").mode("overwrite").save()
            elif table is None:
                out_df.write.mode("append").parquet(out)
            else:
                out_df.write.jdbc(self.postgres.jdbc_url, table, mode="append",
                                  properties=self.postgres.jdbc_properties)
            bc.unpersist()

        writer = events.writeStream.foreachBatch(each).option(
            "checkpointLocation", self._checkpoint()).trigger(availableNow=True)
        start = time.perf_counter()
        query = writer.start()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        rows_in = sum(p["numInputRows"] for p in query.recentProgress)
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "rows_in": rows_in, **self._written(table),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    # ---------------------------------------------------------------- sinks (sinks.py)

    def sink_streamed(self, workload: str, n: int, per_batch: int, form: str) -> dict:
        """sparkcast on the streamed inputs through ``write_stream(sinks=...)`` or
        ``foreach_batch``: ``form`` is ``sinks-files`` (Parquet, exactly once),
        ``foreach-parquet`` (the main frame appended to Parquet), ``foreach-noop`` (a no-op
        body) or ``sinks-jdbc`` (PostgreSQL, exactly once)."""
        from sparkcast import sinks
        from sparkcast.spark import Stream

        events, updates = self._streamed_inputs(workload, n, per_batch)
        cls, desc = FUNCTIONS[(workload, "batch")]
        result = Stream(events).connect(Stream(updates).broadcast(desc)).process(
            cls(), output_schema=OUTPUT_SCHEMAS[workload], parallelism=2)
        checked(result, "micro_batch")
        out = str(self.tmp / f"out-{self.jobs}")
        checkpoint = self._checkpoint()
        trigger = {"availableNow": True}
        table = self._jdbc_table(workload) if form == "sinks-jdbc" else None
        start = time.perf_counter()
        if form == "sinks-files":
            query = result.write_stream(checkpoint_location=checkpoint, trigger=trigger,
                                        sinks={"main": sinks.files(out),
                                               "dead_letters": sinks.files(out)})
        elif form == "sinks-jdbc":
            target = sinks.jdbc(self.postgres.jdbc_url, table,
                                properties=self.postgres.jdbc_properties)
            query = result.write_stream(checkpoint_location=checkpoint, trigger=trigger,
                                        sinks={"main": target,
                                               "dead_letters": sinks.files(out)})
        elif form == "foreach-parquet":
            query = result.foreach_batch(
                lambda outputs, _: outputs["main"].write.mode("append").parquet(out),
                checkpoint, trigger=trigger)
        else:
            query = result.foreach_batch(lambda outputs, _: None, checkpoint, trigger=trigger)
        query.awaitTermination()
        seconds = time.perf_counter() - start
        rows_in = sum(p["numInputRows"] for p in query.recentProgress)
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "rows_in": rows_in, **self._written(table),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    def _jdbc_table(self, workload: str) -> str:
        """A new, empty PostgreSQL table for ``workload``'s output (the server starts once)."""
        from pyspark.sql.types import _parse_datatype_string

        if self.postgres is None:
            from sparkcast.testing.postgres import PostgresCluster

            self.postgres = PostgresCluster()
            self.postgres.start()
        self.tables = getattr(self, "tables", 0) + 1
        table = f"out_{self.tables}"
        columns = {"long": "bigint", "int": "integer", "double": "double precision",
                   "string": "text", "boolean": "boolean", "float": "real"}
        schema = _parse_datatype_string(OUTPUT_SCHEMAS[workload])
        self.postgres.execute(f"CREATE TABLE {table} (" + ", ".join(
            f'"{f.name}" {columns[f.dataType.simpleString()]}' for f in schema.fields) + ")")
        return table

    def _written(self, table: str | None) -> dict:
        if table is None:
            return {}
        [(rows,)] = self.postgres.query(f"SELECT count(*) FROM {table}")
        return {"rows_out": rows}

    def tws_counter(self, workload: str, n: int, per_batch: int) -> dict:
        """W3 written directly for Spark: a ``transformWithStateInPandas`` processor grouped by
        user, a ``ValueState`` count per user, the threshold re-read at every micro-batch."""
        import pyarrow.parquet as pq
        from pyspark.sql.streaming import StatefulProcessor

        assert workload == "W3"
        events, _ = self._streamed_inputs(workload, n, per_batch)
        updates = sorted(data.broadcast_updates_dir(workload, n // per_batch)
                         .glob("part-*.parquet"))

        class CountProcessor(StatefulProcessor):
            def init(self, handle):
                self.count = handle.getValueState("count", "count long")
                table = pq.read_table(str(updates[-1]))  # once per task, i.e. per micro-batch
                self.threshold = int(table.column("value")[0].as_py())

            def handleInputRows(self, key, rows, timerValues):
                import numpy as np
                import pandas as pd

                seen = sum(len(frame) for frame in rows)
                first = (self.count.get() or (0,))[0] if self.count.exists() else 0
                counts = np.arange(first + 1, first + seen + 1, dtype=np.int64)
                self.count.update((int(counts[-1]),))
                yield pd.DataFrame({"user": np.full(seen, key[0], dtype=np.int32),
                                    "count": counts, "flagged": counts > self.threshold})

            def close(self):
                pass

        out = events.groupBy("user").transformWithStateInPandas(
            statefulProcessor=CountProcessor(), outputStructType=OUTPUT_SCHEMAS["W3"],
            outputMode="Append", timeMode="None")
        target = self.tmp / f"out-{self.jobs}"
        query = (out.writeStream.format("parquet").option("path", str(target))
                 .option("checkpointLocation", self._checkpoint())
                 .trigger(availableNow=True).start())
        start = time.perf_counter()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        shutil.rmtree(target, ignore_errors=True)
        return {"seconds": seconds, "rows_in": sum(p["numInputRows"]
                                                   for p in query.recentProgress),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    def aipws_counter(self, workload: str, n: int, per_batch: int) -> dict:
        """W3 with ``applyInPandasWithState``: grouped by user, the count in the group state,
        the latest threshold file read once per task (as ``tws_counter`` does in ``init``)."""
        import pyarrow.parquet as pq
        from pyspark.sql.streaming.state import GroupStateTimeout

        assert workload == "W3"
        events, _ = self._streamed_inputs(workload, n, per_batch)
        latest = str(sorted(data.broadcast_updates_dir(workload, n // per_batch)
                            .glob("part-*.parquet"))[-1])
        cache: dict[str, int] = {}  # unpickled once per task

        def count(key, frames, state):
            import numpy as np
            import pandas as pd

            if "t" not in cache:
                cache["t"] = int(pq.read_table(latest).column("value")[0].as_py())
            total = state.get[0] if state.exists else 0
            for frame in frames:
                counts = np.arange(total + 1, total + len(frame) + 1, dtype=np.int64)
                total += len(frame)
                yield pd.DataFrame({"user": np.full(len(frame), key[0], dtype=np.int32),
                                    "count": counts, "flagged": counts > cache["t"]})
            state.update((total,))

        out = events.groupBy("user").applyInPandasWithState(
            count, outputStructType=OUTPUT_SCHEMAS["W3"], stateStructType="count long",
            outputMode="append", timeoutConf=GroupStateTimeout.NoTimeout)
        return self._timed_parquet(out)

    def fb_state_counter(self, workload: str, n: int, per_batch: int) -> dict:
        """W3 in ``foreachBatch`` with a state table: per micro-batch, read the previous state
        version (Parquet, one folder per batch id), number each user's events after its
        previous total (a window over the batch), flag them against the batch's threshold
        (its update file), append the outputs, and write the new state version (the previous
        one joined with the batch's per-user counts). A replayed batch overwrites its version."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        assert workload == "W3"
        spark = self.spark
        events, _ = self._streamed_inputs(workload, n, per_batch)
        files = sorted(str(f) for f in data.broadcast_updates_dir(
            workload, n // per_batch).glob("part-*.parquet"))
        root = self.tmp / f"fb-state-{self.jobs}"
        out = str(root / "out")
        order = Window.partitionBy("user").orderBy("_seq")

        def each(batch_df, batch_id):
            threshold = spark.read.parquet(files[min(batch_id, len(files) - 1)]).first()["value"]
            versions = [int(p.name) for p in root.glob("state/*")
                        if int(p.name) < batch_id and (p / "_SUCCESS").exists()]
            previous = (spark.read.parquet(str(root / "state" / str(max(versions))))
                        if versions else spark.createDataFrame([], "user int, total long"))
            batch_df.persist()
            numbered = batch_df.withColumn("_seq", F.monotonically_increasing_id()).withColumn(
                "_n", F.row_number().over(order))
            counts = numbered.join(previous, "user", "left").select(
                "user", (F.coalesce("total", F.lit(0)) + F.col("_n")).alias("count"))
            counts.withColumn("flagged", F.col("count") > F.lit(threshold)).write.mode(
                "append").parquet(out)
            totals = batch_df.groupBy("user").agg(F.count(F.lit(1)).alias("n"))
            previous.join(totals, "user", "full_outer").select(
                "user", (F.coalesce("total", F.lit(0)) + F.coalesce("n", F.lit(0))).alias(
                    "total")).write.mode("overwrite").parquet(str(root / "state" / str(batch_id)))
            batch_df.unpersist()

        query = (events.writeStream.foreachBatch(each)
                 .option("checkpointLocation", self._checkpoint()).trigger(availableNow=True))
        start = time.perf_counter()
        running = query.start()
        running.awaitTermination()
        seconds = time.perf_counter() - start
        shutil.rmtree(root, ignore_errors=True)
        return {"seconds": seconds, "rows_in": sum(p["numInputRows"]
                                                   for p in running.recentProgress),
                "batches": len([p for p in running.recentProgress if p["numInputRows"]])}

    def _timed_parquet(self, out) -> dict:
        """Append ``out`` to Parquet files with ``availableNow``; the query's time."""
        target = self.tmp / f"out-{self.jobs}"
        query = (out.writeStream.format("parquet").option("path", str(target))
                 .option("checkpointLocation", self._checkpoint())
                 .trigger(availableNow=True).start())
        start = time.perf_counter()
        query.awaitTermination()
        seconds = time.perf_counter() - start
        shutil.rmtree(target, ignore_errors=True)
        return {"seconds": seconds, "rows_in": sum(p["numInputRows"]
                                                   for p in query.recentProgress),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]])}

    def warmup(self) -> dict:
        """Start the Python workers and warm the JVM before anything is timed."""
        for mode in ("element", "batch"):
            self.sparkcast("W1", 20_000, mode)  # the micro-batch engine, one mapInArrow
        self.sparkcast("W1", 20_000, "batch", streamed_broadcast=True)  # the stateful operator
        self.sparkcast("W3", 20_000, "element")
        self.sparkcast("W3", 20_000, "element", streamed_broadcast=True, output="noop")
        self.streamed("W7", 100_000, "element", "micro_batch", 100_000)  # timers, event time
        self.foreachbatch("W1", 100_000)
        self.jvm_join("W1", 100_000)
        return {}

    def pandas_limit(self, workload: str, n: int) -> dict:
        """Single-process pandas: the same vectorized body over all events in this process."""
        import pandas_limit

        return pandas_limit.run(workload, n)

    def memory(self, n: int, parallelism: int = 8) -> dict:
        """W6: peak resident memory of the whole job (JVM + Python workers + driver), sampled
        every 0.25 s; ``before_mb`` is the same tree just before (session up, no job). Written
        by ``write_stream``, so the micro-batch engine applies the broadcast side once, on the
        driver."""
        before = procmem.tree_rss(os.getpid())["total"] / 1024 / 1024
        data.large_broadcast_dir()
        sampler = procmem.TreeSampler(os.getpid())
        sampler.start()
        try:
            result = self.sparkcast("W6", n, "element", parallelism=parallelism,
                                    output="files")
        finally:
            sampler.stop()
        result.update(sampler.summary())
        result["before_mb"] = before
        return result

    def latency(self, rate: int = 20_000, updates: int = 20, interval: float = 1.5,
                warmup: float = 8.0, mode: str = "element", timeout: float = 120.0,
                engine: str = "operator", trigger: dict | None = None) -> dict:
        """W5: a rate source at ``rate`` events/s; every ``interval`` s a broadcast update
        (``version``, ``written_ms``) is written atomically to a JSON file source. Per micro-batch
        the driver finds the versions present in the output and, for each version seen for the
        first time, records now - written_ms. Non-keyed forms (``mode`` ``"element"``,
        ``"batch"``) on ``engine="operator"``: foreachBatch on ``result.main``; on
        ``"micro_batch"``: ``write_stream``, the versions read from each micro-batch's files
        once its commit is logged (when readers can see them: the latency includes the
        exactly-once write). ``mode="keyed"`` (a per-user counter) and ``"timer"`` (W7's
        session count: outputs only when a user's event-time timer fires, ``ts`` from the rate
        source's timestamp, users in bursts as W7's data) are keyed by user, always written by
        ``write_stream`` and measured from the committed output, on either engine.
        ``trigger``: ``write_stream``'s (default: Spark's, micro-batches back to back)."""
        from pyspark.sql import functions as F

        from sparkcast.spark import Stream

        base = Path(tempfile.mkdtemp(prefix="w5-", dir=self.tmp))  # a failed job skips _checkpoint
        updates_dir = base / "updates"
        updates_dir.mkdir(parents=True)
        clock = UpdateClock()
        timed = mode == "timer"

        def update(version: int, ms: int) -> dict:
            if not timed:
                return {"version": version, "written_ms": ms}
            return {"version": version, "written_ms": ms, "ts": ms,
                    "timeout": data.TIMEOUT_W7 + 200 * (version % 2)}

        def write_update(version: int) -> None:
            clock.write(updates_dir / f"u{version:05d}.json", version,
                        lambda ms: [update(version, ms)])

        write_update(0)
        value = F.col("value")
        if timed:  # bursts of BURST_W7 events per user, as W7's data
            main = self._rate(rate).select(
                (F.floor(value / data.BURST_W7) % data.USERS_W7).cast("int").alias("key"),
                F.unix_millis("timestamp").alias("ts"))
            main = with_watermark(main)
        else:
            users = W5_USERS if mode == "keyed" else 1000
            main = self._rate(rate).select((value % users).cast("int").alias("key"),
                                           (value % 997).cast("double").alias("amount"))
        bcast = self.spark.readStream.schema(
            data.BROADCAST_SCHEMAS["W7"] if timed else "version long, written_ms long").json(
            str(updates_dir))
        by_main = engine == "operator" and mode in ("element", "batch")
        stream = Stream(main) if mode in ("element", "batch") else Stream(main).key_by("key")
        connected = stream.connect(Stream(bcast).broadcast(SESSION if timed else VERSION))
        result = connected.process(
            LATENCY_FUNCTIONS[mode](), output_schema=LATENCY_SCHEMAS[mode], parallelism=2,
            engine=engine, event_time="ts" if timed else None)
        checked(result, engine, "dataframes" if by_main else "query")

        def each(df, batch_id):
            rows = df.groupBy("version").count().collect()
            clock.note(max((r["version"] for r in rows if r["version"] is not None),
                           default=-1))

        stop = threading.Event()
        if by_main:
            writer = (result.main.writeStream.foreachBatch(each)
                      .option("checkpointLocation", self._checkpoint()))
            query = (writer.trigger(**trigger) if trigger else writer).start()
        else:
            out = base / "out"
            query = result.write_stream(str(out), self._checkpoint(), trigger=trigger)
            threading.Thread(target=_poll_commits, args=(out, clock.note, stop),
                             daemon=True).start()
        try:
            progress = clock.drive(query, write_update, range(1, updates + 1), interval,
                                   warmup, timeout, first=0)
        finally:
            stop.set()
            query.stop()
        return {**clock.summary(progress, first=1), "updates": updates, "rate": rate,
                "mode": mode, "engine": engine,
                "trigger": trigger}

    def _rate(self, rate: int):
        """Spark's ``rate`` source at ``rate`` rows/s in two partitions."""
        return (self.spark.readStream.format("rate").option("rowsPerSecond", rate)
                .option("numPartitions", 2).load())

    def fraud(self, n: int, per_batch: int, engine: str) -> dict:
        """The fraud demo's pipeline (``fraud_pipeline.py``) over ``n`` transactions in files
        of ``per_batch`` (one a micro-batch, a rule update in each), ``write_stream`` with
        ``availableNow``; the query's time."""
        import fraud_pipeline

        events, rules = fraud_pipeline.inputs(n, per_batch)
        result = fraud_pipeline.build(self.spark, self.spark.readStream.schema(
            fraud_pipeline.APP.events_schema).option("maxFilesPerTrigger", 1).json(str(events)),
            rules, engine=engine)
        checked(result, engine)
        out = self.tmp / f"out-{self.jobs}"
        start = time.perf_counter()
        query = result.write_stream(str(out), self._checkpoint(), trigger={"availableNow": True})
        query.awaitTermination()
        seconds = time.perf_counter() - start
        outputs = fraud_pipeline.count_outputs(out)
        shutil.rmtree(out, ignore_errors=True)
        return {"seconds": seconds, "rows_in": sum(p["numInputRows"]
                                                   for p in query.recentProgress),
                "batches": len([p for p in query.recentProgress if p["numInputRows"]]),
                "engine": engine, **outputs}

    def fraud_latency(self, engine: str, rate: int = 20_000, updates: int = 20,
                      interval: float = 1.5, warmup: float = 8.0, timeout: float = 120.0,
                      trigger: dict | None = None) -> dict:
        """The fraud pipeline at ``rate`` transactions/s (a rate source shaped as
        transactions); every ``interval`` s one rule upsert lands in the rules folder, which
        moves ``rules_version`` by one; latency from the committed main and review outputs."""
        import fraud_pipeline

        base = Path(tempfile.mkdtemp(prefix="fraud-", dir=self.tmp))
        rules = base / "rules"
        rules.mkdir(parents=True)
        clock = UpdateClock()
        first = len(fraud_pipeline.INITIAL)  # the ruleset version once the initial rules apply
        clock.write(rules / "rules-00000.json", first, lambda ms: fraud_pipeline.INITIAL)

        def write_update(k: int) -> None:
            clock.write(rules / f"rules-{k:05d}.json", first + k,
                        lambda ms: [fraud_pipeline.probe_rule(k)])

        result = fraud_pipeline.build(self.spark, fraud_pipeline.rate_transactions(
            self.spark, rate), str(rules), max_files=None, engine=engine)
        checked(result, engine)
        out = base / "out"
        stop = threading.Event()
        query = result.write_stream(str(out), self._checkpoint(), trigger=trigger)
        threading.Thread(target=_poll_commits, args=(out, clock.note, stop, "rules_version",
                                                     ("main", "review")), daemon=True).start()
        try:
            progress = clock.drive(query, write_update, range(1, updates + 1), interval,
                                   warmup, timeout, first=first)
        finally:
            stop.set()
            query.stop()
        return {**clock.summary(progress, first=first + 1), "updates": updates, "rate": rate,
                "engine": engine, "trigger": trigger}


class UpdateClock:
    """When each broadcast update was written and when a committed output first showed it.

    Updates that land within one micro-batch are applied together: an output made with
    version V was made with every update <= V, so each of them is visible from then on."""

    def __init__(self) -> None:
        self.written: dict[int, float] = {}
        self.seen: dict[int, float] = {}

    def write(self, target: Path, version: int, rows) -> None:
        """Write ``rows(written_ms)`` as JSON lines to ``target`` atomically (a hidden name,
        then a rename), as version ``version``."""
        hidden = target.with_name("." + target.name)
        rows_now = rows(int(time.time() * 1000))
        hidden.write_text("".join(json.dumps(r) + "\n" for r in rows_now))
        os.rename(hidden, target)
        self.written[version] = time.time() * 1000

    def note(self, newest: int) -> None:
        now = time.time() * 1000
        for version, at in list(self.written.items()):
            if version <= newest and version not in self.seen:
                self.seen[version] = now - at

    def drive(self, query, write_update, versions: range, interval: float, warmup: float,
              timeout: float, first: int) -> list[dict]:
        """Wait for version ``first`` in the output, warm up, write ``versions`` one per
        ``interval``, wait for the last; the query's recent progress."""
        deadline = time.time() + timeout
        while first not in self.seen and time.time() < deadline:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception())[:1000])
            time.sleep(0.2)
        time.sleep(warmup)
        for k in versions:
            write_update(k)
            time.sleep(interval)
        last = first + len(versions)
        deadline = time.time() + timeout
        while last not in self.seen and time.time() < deadline:
            time.sleep(0.2)
        return query.recentProgress

    def summary(self, progress: list[dict], first: int) -> dict:
        lat = sorted(v for k, v in self.seen.items() if k >= first)
        durations = sorted(p["durationMs"].get("triggerExecution", 0) for p in progress)
        return {"latencies_ms": lat, "seen": len(lat),
                "p50_ms": _percentile(lat, 50), "p99_ms": _percentile(lat, 99),
                "batch_ms_median": _percentile(durations, 50),
                "rows_per_batch_median": _percentile(sorted(p["numInputRows"] for p in progress),
                                                     50),
                "processed_per_s": _percentile(sorted(p.get("processedRowsPerSecond") or 0
                                                      for p in progress), 50)}


def _poll_commits(out: Path, note, stop: threading.Event, column: str = "version",
                  outputs: tuple[str, ...] = ("main",)) -> None:
    """Call ``note(newest version)`` for each micro-batch ``write_stream`` commits to ``out``
    (its log file in ``_spark_metadata``; a ``.compact`` one repeats earlier files): the
    largest ``column`` in the batch's files of ``outputs``."""
    import pyarrow.parquet as pq

    done: set[str] = set()
    log = out / "_spark_metadata"
    while not stop.is_set():
        for entry in sorted(log.iterdir()) if log.is_dir() else []:
            if entry.name in done or not entry.name.split(".")[0].isdigit():
                continue
            try:
                files = [json.loads(line)["path"] for line in entry.read_text().splitlines()[1:]
                         if line.strip()]
            except (OSError, ValueError):
                continue  # not written whole yet
            done.add(entry.name)
            main = [f.removeprefix("file://") for f in files
                    if any(f"_output={o}/" in f for o in outputs) and f not in done]
            done.update(files)
            versions = [v for f in main
                        for v in pq.read_table(f, columns=[column]).column(0).to_pylist()
                        if v is not None]
            if versions:
                note(max(versions))
        time.sleep(0.05)


def serve() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed goes to stderr
    runner = Runner()
    print("@@READY", file=out, flush=True)
    lock = threading.Lock()
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        try:
            method = getattr(runner, job.pop("op"))
            result = {"ok": True, **method(**job)}
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
                      "trace": traceback.format_exc()[-4000:]}
        with lock:
            child.answer(result, out)
    if runner.postgres is not None:
        runner.postgres.stop()
    shutil.rmtree(runner.tmp, ignore_errors=True)  # the jobs' checkpoints and outputs


if __name__ == "__main__":
    serve()
