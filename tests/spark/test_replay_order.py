"""A replayed micro-batch runs a key's rows in the order its committed attempt ran them: a file
source cut as before (``planning/file_splits.py``), Kafka's ranges in one order
(``execution/ordering.py``).

Micro-batch 1 reads two files, A (60 rows of key ``k``) and B (12 rows), with
``openCostInBytes`` so low that the batch's bytes over the cores decide the blocks: on 2 cores A
is cut in two and read before B; on 4 the last quarter of A, shorter than B, is read after it.
The query commits the batch's outputs to Kafka (``sinks.kafka``, exactly once); Spark's own
commit of it is then removed (a kill between the two), and the query restarts on a session with
4 cores, as after a lost executor: the replay skips the parts Kafka has and runs the pattern
again for the state. The function emits each row with the id its key saw before: an
order-dependent function, whose outputs are one unbroken chain only when the state after the
replay is the state that produced the committed outputs. (Spark's file sink skips a committed
batch without running it, so the state stays the first attempt's there.)
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor, sinks
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.sources import kafka_topic
from sparkcast.spark import Stream
from sparkcast.spark.planning.file_splits import MIN_PARTITIONS, RECORD, fix_splits
from sparkcast.spark.state import checkpoint_files
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import write_batch_file

pytestmark = [pytest.mark.spark,
              pytest.mark.filterwarnings("ignore:the (main|broadcast) input reads JSON")]
LAST = ValueStateDescriptor("last", str)
RULES = MapStateDescriptor("rules", str, int)
EVENTS = "k string, id string"
OUTPUT = "k string, id string, previous string"
CORES = "spark.sql.leafNodeDefaultParallelism"
OPEN_COST = {"spark.sql.files.openCostInBytes": "1"}


class Previous(KeyedBroadcastProcessFunction):
    """Each row with the id its key saw before it."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(LAST)

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value["k"], value["id"], self.last.value()
        self.last.update(value["id"])

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value["name"], value["limit"])


@contextmanager
def session_settings(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _rows(prefix: str, count: int) -> list[dict]:
    return [{"k": "k", "id": f"{prefix}{i:02d}"} for i in range(count)]


BATCHES = [[_rows("z", 3)], [_rows("a", 60), _rows("b", 12)], [_rows("c", 2)]]


def _write(base: Path, batch: int) -> list[Path]:
    first = sum(len(files) for files in BATCHES[:batch])
    return [write_batch_file(base / "events", first + i, rows)
            for i, rows in enumerate(BATCHES[batch])]


def _run(spark: Any, base: Path, engine: str, sink: Any = None, events: Any = None,
         function: Any = None, output: str = OUTPUT) -> None:
    if events is None:
        events = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 2)
                  .json(str(base / "events")))
    rules = spark.readStream.schema("name string, limit long").json(str(base / "rules"))
    result = (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES))
              .process(function or Previous(), output, parallelism=2, engine=engine))
    where = {"sinks": {"main": sink}} if sink else {"path": str(base / "out")}
    query = result.write_stream(checkpoint_location=str(base / "checkpoint"),
                                trigger={"availableNow": True}, **where)
    query.awaitTermination()
    assert query.exception() is None


def _read_order(spark: Any, files: list[Path], cores: str) -> list[str]:
    """The ids in the order a file source reads ``files`` as one batch on ``cores`` cores."""
    with session_settings(spark, {**OPEN_COST, MIN_PARTITIONS: cores}):
        rows = (spark.read.schema(EVENTS).json([str(f) for f in files])
                .select("id", F.monotonically_increasing_id().alias("at")).collect())
    return [r.id for r in sorted(rows, key=lambda r: r.at)]


def _forget_sparks_commit(checkpoint: Path, batch: int) -> None:
    for name in (str(batch), f".{batch}.crc"):
        if (checkpoint / "commits" / name).exists():
            os.remove(checkpoint / "commits" / name)


@pytest.fixture(autouse=True)
def unpinned(spark: Any) -> Iterator[None]:
    """The shared session as it was: a query's start pins the cores on it (and keeps them)."""
    with session_settings(spark, {}):
        spark.conf.unset(MIN_PARTITIONS)
        yield
        spark.conf.unset(MIN_PARTITIONS)


@pytest.mark.parametrize("engine", ["micro_batch", "operator"])
def test_a_replay_on_other_cores_cuts_the_files_as_the_committed_attempt_did(
        spark, kafka_broker, tmp_path, engine):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "rules.json").write_text(json.dumps({"name": "x", "limit": 1}))
    topic = f"file-splits-{engine}"
    kafka_broker.create_topic(topic, partitions=2)
    sink = sinks.kafka(kafka_broker.bootstrap, topic)
    with session_settings(spark, OPEN_COST):
        _write(tmp_path, 0)
        _run(spark, tmp_path, engine, sink)
        second = _write(tmp_path, 1)
        _run(spark, tmp_path, engine, sink)
    as_read = _read_order(spark, second, "2")
    assert as_read != _read_order(spark, second, "4")  # 4 cores would run k's rows otherwise
    assert checkpoint_files.read_json(str(tmp_path / "checkpoint"), RECORD)[
        "spark.sql.files.minPartitionNum"] == 2
    _forget_sparks_commit(tmp_path / "checkpoint", 1)
    _write(tmp_path, 2)
    with session_settings(spark, {**OPEN_COST, CORES: "4"}):
        _run(spark, tmp_path, engine, sink)
    assert spark.conf.get(MIN_PARTITIONS) == "2"  # the recorded cores, pinned on the session

    written = _written(kafka_broker, topic)
    _assert_one_chain(written, [i for batch in BATCHES for rows in batch
                                for i in (r["id"] for r in rows)])
    order = [r["id"] for r in BATCHES[0][0]] + as_read + [r["id"] for r in BATCHES[2][0]]
    h = KeyedBroadcastHarness(Previous(), lambda v: v["k"], [RULES], output_schema=OUTPUT)
    h.open()
    h.process_broadcast_element(Row(name="x", limit=1))
    for i in order:
        h.process_element(Row(k="k", id=i))
    assert sorted(written, key=str) == sorted(map(tuple, h.output()), key=str)


def test_a_replay_with_other_kafka_min_partitions_runs_a_keys_rows_in_the_same_order(
        spark, kafka_broker, tmp_path):
    """Key ``k``'s rows in both partitions of the source topic. Spark numbers a replayed batch's
    ranges in the offset log's order, not the broker's (partitions 0, 1 where the first
    attempt had 1, 0), and here splits each partition's offsets into more ranges
    (``minPartitions``); ranked by topic, partition and offset, the replay runs them in the
    first attempt's order. Without the ranks the chain broke (``1-37`` twice), with
    ``minPartitions`` changed or not."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "rules.json").write_text(json.dumps({"name": "x", "limit": 1}))
    source, topic = "file-splits-kafka-in", "file-splits-kafka-out"
    for name in (source, topic):
        kafka_broker.create_topic(name, partitions=2)
    sink = sinks.kafka(kafka_broker.bootstrap, topic)
    ids: list[str] = []

    def run(batch: int, options: dict[str, str] | None = None) -> None:
        rows = [(f"x{i}", {"k": "k", "id": f"{batch}-{i:02d}"}) for i in range(40)]
        kafka_broker.produce(source, rows)
        ids.extend(value["id"] for _, value in rows)
        events = kafka_topic(spark, kafka_broker.bootstrap, source, EVENTS, options=options)
        _run(spark, tmp_path, "micro_batch", sink, events)

    run(0)
    run(1)
    _forget_sparks_commit(tmp_path / "checkpoint", 1)
    run(2, {"minPartitions": "6"})
    partitions = {r.partition for r in kafka_broker.read(source)}
    assert partitions == {0, 1}  # the key's rows are in both source partitions
    _assert_one_chain(_written(kafka_broker, topic), ids)


class Drawn(KeyedBroadcastProcessFunction):
    """Each row with a number drawn for it and the one its key drew before: two runs of one
    micro-batch never draw the same."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_state(LAST)

    def process_element(self, value: Any, ctx: Any) -> Any:
        drawn = uuid.uuid4().hex
        yield value["k"], value["id"], drawn, self.last.value()
        self.last.update(drawn)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put(value["name"], value["limit"])


def test_a_replay_whose_kafka_parts_are_in_keeps_the_state_of_the_attempt_kafka_holds(
        spark, kafka_broker, tmp_path):
    """A function that draws a random number: the replay of batch 1 (Spark's commit of it
    removed after Kafka committed its parts) draws other numbers, but the state it leaves is
    the first attempt's, whose outputs Kafka holds (the marker names it, the replay publishes
    its staged keyed state): batch 2's rows continue the chain the committed outputs drew."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "rules.json").write_text(json.dumps({"name": "x", "limit": 1}))
    topic = "drawn-out"
    kafka_broker.create_topic(topic, partitions=2)
    sink = sinks.kafka(kafka_broker.bootstrap, topic)
    rows = [[{"k": k, "id": f"{batch}-{k}-{i}"} for k in "kl" for i in range(count)]
            for batch, count in enumerate([3, 5, 2])]
    def run(*batches: int) -> None:  # a micro-batch per file
        for batch in batches:
            write_batch_file(tmp_path / "events", batch, rows[batch])
        events = (spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1)
                  .json(str(tmp_path / "events")))
        _run(spark, tmp_path, "micro_batch", sink, events, function=Drawn(),
             output="k string, id string, drawn string, previous string")

    run(0, 1)
    _forget_sparks_commit(tmp_path / "checkpoint", 1)
    run(2)
    written = [json.loads(r.value) for r in kafka_broker.read(topic)]
    assert sorted(w["id"] for w in written) == sorted(r["id"] for b in rows for r in b)
    for key in "kl":
        drawn = [w["drawn"] for w in written if w["k"] == key]
        previous = [w.get("previous") for w in written if w["k"] == key]
        # one unbroken chain: each row's previous is a number a committed row drew
        assert previous.count(None) == 1 and len(set(previous)) == len(previous)
        assert set(previous) - {None} <= set(drawn), (key, previous, drawn)


def _written(broker: Any, topic: str) -> list[tuple[str, str, str | None]]:
    return [(v["k"], v["id"], v.get("previous"))  # to_json leaves out a null
            for v in (json.loads(r.value) for r in broker.read(topic))]


def _assert_one_chain(written: list[tuple[str, str, str | None]], ids: list[str]) -> None:
    """Each id written once, and the previous ids one unbroken chain: each id the previous of
    at most one row, one row without; so the state after each batch was its outputs' state."""
    assert sorted(i for _, i, _ in written) == sorted(ids)
    previous = [p for _, _, p in written]
    assert None in previous and len(set(previous)) == len(previous) == len(ids), sorted(
        (p for p in previous if previous.count(p) > 1), key=str)


def test_a_changed_split_setting_is_refused_and_a_query_without_files_records_none(
        spark, tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "rules.json").write_text(json.dumps({"name": "x", "limit": 1}))
    _write(tmp_path, 0)
    _run(spark, tmp_path, "auto")
    with session_settings(spark, {"spark.sql.files.maxPartitionBytes": "1k"}), \
            pytest.raises(IncompatibleCheckpointError,
                          match=r"(?s)set spark.sql.files.maxPartitionBytes back.*"
                                r"maxPartitionBytes: the checkpoint has 134217728, this session "
                                r"1024"):
        _run(spark, tmp_path, "auto")
    with session_settings(spark, {MIN_PARTITIONS: "3"}), \
            pytest.raises(IncompatibleCheckpointError, match="minPartitionNum: the checkpoint "
                                                             "has 2, this session 3"):
        _run(spark, tmp_path, "auto")
    # a running query needs 2 cores: a checkpoint that recorded 3 waits for it to stop
    frame = spark.readStream.schema(EVENTS).json(str(tmp_path / "events"))
    holds = fix_splits(frame, str(tmp_path / "noop"))
    other = tmp_path / "other"
    checkpoint_files.write_json(str(other), RECORD, {
        **checkpoint_files.read_json(str(tmp_path / "checkpoint"), RECORD), MIN_PARTITIONS: 3})
    query = (frame.writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "noop")).start())
    holds(query)
    try:
        with pytest.raises(IncompatibleCheckpointError, match=r"(?s)a session of its own.*"
                           r"minPartitionNum: the checkpoint has 3, this session 2 \(pinned"):
            fix_splits(spark.readStream.schema(EVENTS).json(str(tmp_path / "events")), str(other))
    finally:
        query.stop()
    fix_splits(spark.readStream.schema(EVENTS).json(str(tmp_path / "events")), str(other))
    assert spark.conf.get(MIN_PARTITIONS) == "3"  # re-pinned once the other query stopped
    fix_splits(spark.readStream.format("rate").load(), str(tmp_path / "none"))
    assert checkpoint_files.read_json(str(tmp_path / "none"), RECORD) is None
