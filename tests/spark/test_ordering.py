"""Keyed order does not depend on Spark's shuffle: main rows spread over several files, read as
several partitions per micro-batch, reach the operator interleaved in whatever order the shuffle
delivers them; the runtime sorts each subtask's rows by (event time, content hash) so keyed state
sees event-time order. Two runs with different file splits per micro-batch give the same outputs,
and the same as the harness fed the same micro-batches."""

from __future__ import annotations

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import write_batch_file

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, int)
EVENTS_SCHEMA = "id long, k string, ts long"
OUTPUT = "k string, id long, n long, prev long"
FILES, PER_FILE, GROUP = 6, 40, 3  # files of one group interleave in event time


class Sequence(KeyedBroadcastProcessFunction):
    """Per key: the event's position and the id of the event before it (order-sensitive)."""

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last", list))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("version", value["version"])

    def process_element(self, value, ctx):
        n, prev = self.last.value() or [0, None]
        self.last.update([n + 1, value["id"]])
        yield value["k"], value["id"], n + 1, prev


def events(index: int) -> list[dict]:
    """File ``index``: its group's event times interleave with the group's other files (file
    0 holds t, t+3, t+6..., file 1 t+1, t+4...), later groups come later in event time."""
    group, member = divmod(index, GROUP)
    base = group * GROUP * PER_FILE * 10
    return [{"id": index * 1000 + i, "k": "abcd"[(i * 7 + index) % 4],
             "ts": base + (i * GROUP + member) * 10} for i in range(PER_FILE)]


def run_on_spark(spark, root, files_per_trigger: int) -> list[tuple]:
    events_dir, rules_dir = root / "events", root / "rules"
    for index in range(FILES):
        write_batch_file(events_dir, index, events(index))
    write_batch_file(rules_dir, 0, [{"version": 1, "ts": 0}])
    main = (spark.readStream.schema(EVENTS_SCHEMA)
            .option("maxFilesPerTrigger", files_per_trigger).json(str(events_dir)))
    rules = spark.readStream.schema("version long, ts long").json(str(rules_dir))
    result = Stream(main).key_by("k").connect(Stream(rules).broadcast(RULES)).process(
        Sequence(), OUTPUT, parallelism=2, event_time="ts")
    query = result.write_stream(str(root / "out"), str(root / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    assert all(p["numInputRows"] > 0 for p in query.recentProgress[:2])
    return sorted(tuple(r) for r in read_output(spark, str(root / "out")).collect())


def run_on_harness(files_per_trigger: int) -> list[tuple]:
    h = KeyedBroadcastHarness(Sequence(), lambda v: v["k"], [RULES])
    h.open()
    h.process_micro_batch(broadcast=[{"version": 1, "ts": 0}])
    for first in range(0, FILES, files_per_trigger):
        rows = sorted((r for i in range(first, first + files_per_trigger) for r in events(i)),
                      key=lambda r: r["ts"])
        h.process_micro_batch(main=rows, main_timestamps=[r["ts"] for r in rows])
    return sorted(h.output())


@pytest.fixture
def small_file_partitions(spark):
    """One input partition per file (Spark packs small files into one partition otherwise),
    so a micro-batch's rows come from several tasks and the shuffle interleaves them."""
    keys = ("spark.sql.files.openCostInBytes", "spark.sql.files.maxPartitionBytes")
    saved = {k: spark.conf.get(k) for k in keys}
    spark.conf.set("spark.sql.files.openCostInBytes", "1")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "1024")
    yield
    for key, value in saved.items():
        spark.conf.set(key, value)


def test_keyed_outputs_do_not_depend_on_the_shuffle_or_the_file_split(
        spark, tmp_path, small_file_partitions):
    expected = run_on_harness(GROUP)
    assert expected == run_on_harness(2 * GROUP)  # event time decides, not the split
    assert len(expected) == FILES * PER_FILE
    assert run_on_spark(spark, tmp_path / "three", GROUP) == expected
    assert run_on_spark(spark, tmp_path / "six", 2 * GROUP) == expected
