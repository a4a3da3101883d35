"""Built-in and user metrics reach the query's progress whatever the user consumes: here only
``result.main``, on the stateful operator and on the shuffle-free path."""

from __future__ import annotations

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.monitoring.progress import batch_record
from sparkcast.spark import Stream
from tests.spark.differential import read_stream, write_batch_file
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark

MODELS = MapStateDescriptor("models", str, int)


class Serve(KeyedBroadcastProcessFunction):
    """Counts predictions per model version, as the classic model-serving exercise does."""

    def open(self, runtime_context):
        self.group = runtime_context.get_metrics_group().add_group("model")
        self.scores = self.group.histogram("score")
        self.seen = 0
        self.group.gauge("seen", lambda: self.seen)
        self.per_user = runtime_context.get_state(ValueStateDescriptor("per_user", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODELS).put("current", value["version"])

    def process_element(self, value, ctx):
        version = ctx.get_broadcast_state(MODELS).get("current")
        self.group.add_group("version", str(version)).counter("predictions").inc()
        self.scores.update(value["id"] % 10)
        self.seen += 1
        self.per_user.update((self.per_user.value() or 0) + 1)
        yield value["id"], version


def _inputs(spark, tmp_path):
    events, models = tmp_path / "events", tmp_path / "models"
    write_batch_file(models, 0, [{"version": 1}])
    write_batch_file(events, 0, [{"id": i, "user": f"u{i % 5}"} for i in range(40)])
    write_batch_file(models, 1, [{"version": 2}])
    write_batch_file(events, 1, [{"id": i, "user": f"u{i % 5}"} for i in range(40, 70)])
    return (read_stream(spark, "id long, user string", events),
            read_stream(spark, "version long", models))


def _consume_main(result, tmp_path, name):
    query = (result.main.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    return query, [batch_record(p) for p in query.recentProgress]


def test_user_and_built_in_metrics_reach_the_progress_when_only_main_is_consumed(
        spark, tmp_path):
    events, models = _inputs(spark, tmp_path)
    result = Stream(events).key_by("user").connect(Stream(models).broadcast(MODELS)).process(
        Serve(), "id long, version long", parallelism=3)
    query, records = _consume_main(result, tmp_path, "metrics_main")
    name = result.observation
    progress_counters: dict[str, int] = {}
    for record in records:
        for key, count in (record["operators"].get(name, {}).get("user", {})
                           .get("counters", {})).items():
            progress_counters[key] = progress_counters.get(key, 0) + count
    assert progress_counters == {"model.version.1.predictions": 40,
                                 "model.version.2.predictions": 30}
    operators = [r["operators"][name] for r in records if name in r["operators"]]
    assert sum(o["events_main"] for o in operators) == 70
    assert sum(o["events_broadcast"] for o in operators) == 2 * 3  # replicated to 3 subtasks
    assert sum(o["broadcast_applied"] for o in operators) == 6
    assert sum(o["outputs"].get("main", 0) for o in operators) == 70
    assert sum(o["main_rows"] for o in operators) == 70
    assert sum(o["user"]["histograms"]["model.score"]["count"] for o in operators) == 70
    last = operators[-1]
    assert last["user"]["histograms"]["model.score"]["max"] == 9
    assert set(last["subtasks"]) == {"0", "1", "2"}
    assert {s["broadcast_entries"]["models"] for s in last["subtasks"].values()} == {1}
    # every subtask reports the batch that applied version 2 and the same version chain
    assert len({s["version"] for s in last["subtasks"].values()}) == 1
    # gauges: the last reading of each subtask that ran (an engine lives in one worker)
    seen = last["user"]["gauges"]["model.seen"]
    assert set(seen) == {"0", "1", "2"} and sum(seen.values()) >= 30
    # Spark's own progress already holds the summed counters and outputs
    raw = [p["observedMetrics"][name] for p in query.recentProgress
           if p.get("observedMetrics", {}).get(name)]
    assert sum(r["user_counters"].get("model.version.2.predictions", 0) for r in raw) == 30
    assert sum(r["outputs"]["main"] for r in raw) == 70


class Plain(BroadcastProcessFunction):
    """Non-keyed with a static broadcast side: the shuffle-free path."""

    def open(self, runtime_context):
        self.matched = runtime_context.get_metrics_group().counter("matched")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODELS).put("current", value["version"])

    def process_element(self, value, ctx):
        self.matched.inc()
        yield value["id"], ctx.get_broadcast_state(MODELS).get("current")


def test_the_shuffle_free_path_reports_its_metrics_too(spark, tmp_path):
    events, _ = _inputs(spark, tmp_path)
    models = spark.createDataFrame([(7,)], "version long")
    result = Stream(events).connect(Stream(models).broadcast(MODELS)).process(
        Plain(), "id long, version long", parallelism=2)
    assert kind_of(result) == "stateless"
    _, records = _consume_main(result, tmp_path, "metrics_stateless")
    operators = [r["operators"][result.observation] for r in records
                 if result.observation in r["operators"]]
    assert sum(o["user"]["counters"].get("matched", 0) for o in operators) == 70
    assert sum(o["events_main"] for o in operators) == 70
    assert sum(o["outputs"].get("main", 0) for o in operators) == 70
