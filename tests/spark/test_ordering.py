"""A key's events reach the function in their source order, as Flink promises: a file's lines
in line order, whatever their event times, on both engines and with or without event time; the
harness fed the same rows in the same order gives the same outputs. Each file is its own input
partition here, so a micro-batch's rows come from several tasks and Spark's shuffle interleaves
them; the runtime puts each subtask's rows back in source-position order."""

from __future__ import annotations

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import write_batch_file
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, int)
EVENTS_SCHEMA = "id long, user string, step string, ts long"
OUTPUT = "user string, id long, prev long, state string, valid boolean"
NEXT = {None: "opened", "opened": "paid", "paid": "shipped", "shipped": "opened"}
STEPS = ("opened", "paid", "shipped")


class Orders(KeyedBroadcastProcessFunction):
    """Per user: the id of the event before this one ("time since the previous event") and a
    state machine opened → paid → shipped → opened …: both give other answers in another order."""

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last", int))
        self.state = runtime_context.get_state(ValueStateDescriptor("state", str))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("version", value["version"])

    def process_element(self, value, ctx):
        prev, state = self.last.value(), self.state.value()
        valid = NEXT[state] == value["step"]
        self.last.update(value["id"])
        if valid:
            self.state.update(value["step"])
        yield value["user"], value["id"], prev, self.state.value(), valid


def user_file(index: int, users: list[str], count: int) -> list[dict]:
    """``count`` events of ``users`` interleaved, each user's steps in order; event times are a
    permutation of the lines (out of line order), so sorting by them would break every user."""
    return [{"id": index * 1000 + i, "user": users[i % len(users)],
             "step": STEPS[(i // len(users)) % 3], "ts": index * 1000 + (i * 37) % count}
            for i in range(count)]


#: three files per micro-batch; within a micro-batch a user's events are in one file (the
#: order of two files' rows for one key is their partitions' order, which the harness cannot
#: know), across micro-batches a user's events spread over files
#: (each user's events in a file are a multiple of three: its next file starts at "opened")
BATCHES = [[user_file(0, ["u0", "u1", "u2"], 126), user_file(1, ["v0"], 30),
            user_file(2, ["v1"], 30)],
           [user_file(3, ["u0", "v0"], 36), user_file(4, ["u1", "v1"], 36),
            user_file(5, ["u2", "v2"], 36)]]


@pytest.fixture
def small_file_partitions(spark):
    """One input partition per file (Spark packs small files into one partition otherwise)."""
    keys = ("spark.sql.files.openCostInBytes", "spark.sql.files.maxPartitionBytes")
    saved = {k: spark.conf.get(k) for k in keys}
    spark.conf.set("spark.sql.files.openCostInBytes", "1")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    yield
    for key, value in saved.items():
        spark.conf.set(key, value)


def on_spark(spark, root, engine: str, event_time: str | None, parallelism: int) -> list:
    events_dir, rules_dir = root / "events", root / "rules"
    files = [rows for batch in BATCHES for rows in batch]
    for index, rows in enumerate(files):
        write_batch_file(events_dir, index, rows)
    write_batch_file(rules_dir, 0, [{"version": 1, "ts": 0}])
    main = (spark.readStream.schema(EVENTS_SCHEMA)
            .option("maxFilesPerTrigger", len(BATCHES[0])).json(str(events_dir)))
    rules = spark.readStream.schema("version long, ts long").json(str(rules_dir))
    result = Stream(main).key_by("user").connect(Stream(rules).broadcast(RULES)).process(
        Orders(), OUTPUT, parallelism=parallelism, event_time=event_time, engine=engine)
    assert kind_of(result) == ("operator" if engine == "operator" else "partitioned")
    query = result.write_stream(str(root / "out"), str(root / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    # one micro-batch per BATCHES entry (the rules file joins the first)
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == len(BATCHES)
    return sorted(tuple(r) for r in read_output(spark, str(root / "out")).collect())


def on_harness() -> list:
    """The harness fed each micro-batch's files in file order, each file in line order."""
    h = KeyedBroadcastHarness(Orders(), lambda v: v["user"], [RULES], output_schema=OUTPUT)
    h.open()
    h.process_micro_batch(broadcast=[{"version": 1, "ts": 0}])
    for batch in BATCHES:
        rows = [row for file in batch for row in file]
        h.process_micro_batch(main=rows, main_timestamps=[r["ts"] for r in rows])
    return sorted(h.output())


def test_the_harness_plays_each_users_events_in_line_order():
    outputs = on_harness()
    assert len(outputs) == sum(len(f) for b in BATCHES for f in b)
    assert all(valid for *_, valid in outputs)  # every user's steps in order: all valid
    by_id = {id_: prev for _, id_, prev, _, _ in outputs}
    assert by_id[3] == 0 and by_id[6] == 3  # u0's second and third events of file 0


@pytest.mark.parametrize(("engine", "event_time", "parallelism"), [
    ("micro_batch", None, 2), ("micro_batch", "ts", 3), ("operator", None, 3),
    ("operator", "ts", 2)])
def test_each_users_events_run_in_source_order_as_on_the_harness(
        spark, tmp_path, small_file_partitions, engine, event_time, parallelism):
    assert on_spark(spark, tmp_path, engine, event_time, parallelism) == on_harness()
