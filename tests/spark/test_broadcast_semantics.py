"""Broadcast semantics on Spark: an update of micro-batch N reaches main elements of batch N and
later, never earlier ones; every subtask holds the same broadcast state; a static broadcast
DataFrame with a streaming main stream reaches every subtask. One streaming query (parallelism 4)
runs both operators."""

from __future__ import annotations

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor
from sparkcast.core.codec import fingerprint
from sparkcast.spark import Stream
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, dict)
OUTPUT = "op string, id long, batch long, version long, fp string, subtask int"
KEYS = 16
PARALLELISM = 4  # the 16 keys hash to all four subtasks


class Versioned(KeyedBroadcastProcessFunction):
    """Outputs, per element, the rule version it saw and a fingerprint of the whole state."""

    def __init__(self, op):
        self.op = op

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], {"version": value["version"]})

    def process_element(self, value, ctx):
        state = dict(ctx.get_broadcast_state(RULES).items())
        version = max((rule["version"] for rule in state.values()), default=0)
        yield self.op, value["id"], value["batch"], version, fingerprint(state), self.subtask


RULE_BATCHES = {0: [("r", 1)], 2: [("r", 2), ("s", 2)]}
BATCHES = 4


def _expected_state(batch):
    state = {}
    for b in range(batch + 1):
        for name, version in RULE_BATCHES.get(b, []):
            state[name] = {"version": version}
    return state


@pytest.fixture(scope="module")
def outputs(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("semantics")
    for b in range(BATCHES):
        events = [{"id": b * 100 + i, "k": f"k{i}", "batch": b} for i in range(KEYS)]
        write_batch_file(base / "events", b, events)
        rules = [{"name": n, "version": v} for n, v in RULE_BATCHES.get(b, [])]
        write_batch_file(base / "rules", b, rules)

    def events():
        return read_stream(spark, "id long, k string, batch long", base / "events")

    rules = read_stream(spark, "name string, version long", base / "rules")
    static = spark.createDataFrame([("r", 7)], "name string, version long")
    streamed = Stream(events()).key_by("k").connect(Stream(rules).broadcast(RULES)).process(
        Versioned("stream"), OUTPUT, parallelism=PARALLELISM)
    static_rules = Stream(events()).key_by("k").connect(Stream(static).broadcast(RULES)).process(
        Versioned("static"), OUTPUT, parallelism=PARALLELISM)
    frame = streamed.main.unionByName(static_rules.main)
    query = (frame.writeStream.format("memory").queryName("semantics").outputMode("append")
             .option("checkpointLocation", str(base / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = [r.asDict() for r in spark.table("semantics").collect()]
    spark.catalog.dropTempView("semantics")
    return rows


def test_an_update_reaches_its_own_batch_and_later_ones_never_earlier(outputs):
    streamed = [r for r in outputs if r["op"] == "stream"]
    assert sorted(r["id"] for r in streamed) == [b * 100 + i for b in range(BATCHES)
                                                 for i in range(KEYS)]
    seen = {r["batch"]: set() for r in streamed}
    for r in streamed:
        seen[r["batch"]].add(r["version"])
    assert seen == {0: {1}, 1: {1}, 2: {2}, 3: {2}}


def test_every_subtask_holds_the_same_broadcast_state(outputs):
    streamed = [r for r in outputs if r["op"] == "stream"]
    for batch in range(BATCHES):
        rows = [r for r in streamed if r["batch"] == batch]
        assert {r["subtask"] for r in rows} == set(range(PARALLELISM))
        assert {r["fp"] for r in rows} == {fingerprint(_expected_state(batch))}


def test_a_static_broadcast_dataframe_reaches_every_subtask(outputs):
    static = [r for r in outputs if r["op"] == "static"]
    assert len(static) == BATCHES * KEYS
    assert {r["version"] for r in static} == {7}
    assert {r["fp"] for r in static} == {fingerprint({"r": {"version": 7}})}
    for batch in range(BATCHES):
        assert {r["subtask"] for r in static if r["batch"] == batch} == set(range(PARALLELISM))
