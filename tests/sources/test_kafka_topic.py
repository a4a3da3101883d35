"""``kafka_topic`` on a REAL Kafka broker (``kafka_broker``) and real local Spark: both sides
from topics equal to the harness (keyed and not), a new checkpoint on a compacted broadcast topic
with tombstones, malformed records as dead letters that say where they are, options passed
through with secrets kept out of sight, and the broker stopped and restarted mid-run."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections import Counter

import pytest
from pyspark.errors import StreamingQueryException

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    ValueStateDescriptor,
    sinks,
)
from sparkcast.errors import PipelineError
from sparkcast.sources import kafka_topic
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.corpus import ENRICH, FRAUD, Program
from tests.spark.differential import (
    harness_outputs,
    split_outputs,
    tagged_union,
)
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark

#: each corpus program's broadcast key, the record key of its rules topic
RULE_KEYS = {"fraud": "id", "enrich": "code"}


def topic_name(what: str) -> str:
    """A topic of this test's own (the broker is the session's)."""
    return f"{what}-{uuid.uuid4().hex[:8]}"


def _program_topics(broker, program: Program) -> tuple[str, str]:
    events, rules = topic_name(f"{program.name}-events"), topic_name(f"{program.name}-rules")
    broker.create_topic(events, partitions=3)
    broker.create_topic(rules, partitions=2)
    return events, rules


def test_both_sides_from_topics_equal_the_harness(spark, kafka_broker, tmp_path):
    """Micro-batch i of each program is produced, then read by an ``availableNow`` run from the
    same checkpoint: Spark's batches are the harness's, restarts included."""
    programs = [FRAUD, ENRICH]  # keyed and not
    topics = {p.name: _program_topics(kafka_broker, p) for p in programs}
    inputs = {p.name: (kafka_topic(spark, kafka_broker.bootstrap, topics[p.name][0],
                                   p.main_schema),
                       kafka_topic(spark, kafka_broker.bootstrap, topics[p.name][1],
                                   p.broadcast_schema)) for p in programs}
    union = tagged_union(programs, inputs, parallelism=3)
    out = str(tmp_path / "out")
    for index in range(max(len(p.batches) for p in programs)):
        for program in programs:
            if index >= len(program.batches):
                continue
            events, rules = topics[program.name]
            bcast, main = program.batches[index]
            kafka_broker.produce(rules, [(r[RULE_KEYS[program.name]], r) for r in bcast])
            kafka_broker.produce(events, [(r.get(program.key or ""), r) for r in main])
        union.writeStream.format("parquet").option("path", out).option(
            "checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(
            ).awaitTermination()
    found = split_outputs(programs, spark.read.parquet(out).collect())
    for program in programs:
        assert found[program.name] == harness_outputs(program), program.name
        assert sum(found[program.name]["main"].values()) > 0


RULES = MapStateDescriptor("rules", str, float)


class StateSnapshot(BroadcastProcessFunction):
    """Puts a rule per key, removes a key on its tombstone; each event sees the whole state."""

    def process_broadcast_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES)
        if value.deleted:
            rules.remove(value.name)
        else:
            rules.put(value.name, value.limit)

    def process_element(self, value, ctx):
        yield value.id, json.dumps(dict(sorted(ctx.get_broadcast_state(RULES).items())))


def _compacted_topic(broker) -> str:
    topic = topic_name("rules-compacted")
    broker.create_topic(topic, partitions=2, config={
        "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "3600000"})
    return topic


def _rule_rounds() -> list[list[tuple[str, dict | None]]]:
    """Four versions of six rules; r1 and r3 deleted in round 2, r3 put back in round 3."""
    rounds = []
    for version in range(4):
        records: list[tuple[str, dict | None]] = []
        for i in range(6):
            deleted = (version == 2 and i in (1, 3)) or (version == 3 and i == 1)
            records.append((f"r{i}", None if deleted else {"limit": 10.0 * version + i}))
        rounds.append(records)
    return rounds


def _latest(records) -> dict[str, float]:
    state: dict[str, float] = {}
    for key, value in records:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value["limit"]
    return dict(sorted(state.items()))


def _wait_compacted(broker, topic: str, produced: int, timeout: float = 60.0) -> list:
    """The topic once the log cleaner has removed older versions (each round is a segment of
    its own: ``segment.ms`` rolls it when the next round arrives)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = broker.read(topic)
        if len(records) < produced:
            return records
        time.sleep(0.5)
    raise AssertionError(f"{topic} was not compacted in {timeout:.0f} s")


def test_a_new_checkpoint_on_a_compacted_topic_holds_the_latest_value_per_key(
        spark, kafka_broker, tmp_path):
    rules, events = _compacted_topic(kafka_broker), topic_name("events")
    kafka_broker.create_topic(events, partitions=2)
    produced = []
    for records in _rule_rounds():
        kafka_broker.produce(rules, records)
        produced += records
        time.sleep(0.3)  # the next round opens a new segment; the cleaner compacts the closed
    kept = _wait_compacted(kafka_broker, rules, len(produced))
    assert any(r.value is None for r in kept)  # tombstones stay (delete.retention.ms)
    assert len(kept) < len(produced)  # the cleaner removed older versions: offsets have gaps
    expected = _latest(produced)
    assert expected == _latest([(r.key, r.value and json.loads(r.value)) for r in kept])
    kafka_broker.produce(events, [(None, {"id": 1})])

    rules_df = kafka_topic(spark, kafka_broker.bootstrap, rules, "name string, limit double",
                           key="name", tombstone="deleted", metadata=["offset"])
    events_df = kafka_topic(spark, kafka_broker.bootstrap, events, "id long")
    result = Stream(events_df).connect(
        Stream(rules_df).broadcast(RULES, order_by="kafka_offset")).process(
        StateSnapshot(), "id long, rules string", hold_until_ready=[RULES])
    out = str(tmp_path / "out")
    result.write_stream(out, str(tmp_path / "ckpt"), trigger={"availableNow": True}
                        ).awaitTermination()
    (row,) = read_output(spark, out).collect()
    assert json.loads(row.rules) == expected
    assert read_output(spark, out, "dead_letters").count() == 0


class Totals(KeyedBroadcastProcessFunction):
    """Counts each user's events; scales the amount by the broadcast factor."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        factor = ctx.get_broadcast_state(RULES).get("factor") or 1.0
        yield value.user, n, value.amount * factor


class Scaled(BroadcastProcessFunction):
    """Scales each amount by the broadcast factor (non-keyed: the streamed path)."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)

    def process_element(self, value, ctx):
        yield value.user, value.amount * (ctx.get_broadcast_state(RULES).get("factor") or 1.0)


def _totals(spark, broker, events: str, rules: str, **options):
    events_df = kafka_topic(spark, broker.bootstrap, events, "user string, amount double",
                            metadata=["partition", "offset"], **options)
    rules_df = kafka_topic(spark, broker.bootstrap, rules, "limit double", key="name")
    return Stream(events_df).key_by("user").connect(Stream(rules_df).broadcast(RULES)).process(
        Totals(), "user string, n long, scaled double")


def test_malformed_records_become_dead_letters_naming_topic_partition_offset(
        spark, kafka_broker, tmp_path):
    events, rules = topic_name("events"), topic_name("rules")
    kafka_broker.create_topic(events, partitions=2)
    kafka_broker.create_topic(rules)
    kafka_broker.produce(rules, [("factor", {"limit": 2.0}), ("bad", "{not json")])
    kafka_broker.produce(events, [
        ("u1", {"user": "u1", "amount": 1.0}), ("u1", "garbage"),
        ("u1", {"user": "u1", "amount": "lots"}), ("u1", None), ("u1", "[1, 2]"),
        ("u1", {"user": "u1", "amount": 3.0})])
    out = str(tmp_path / "out")
    _totals(spark, kafka_broker, events, rules).write_stream(
        out, str(tmp_path / "ckpt"), trigger={"availableNow": True}).awaitTermination()

    assert sorted(tuple(r) for r in read_output(spark, out).collect()) == [
        ("u1", 1, 2.0), ("u1", 2, 6.0)]  # the records after the bad ones still count
    letters = [json.loads(r.value) for r in read_output(spark, out, "dead_letters").collect()
               if r.callback == "input"]
    by_offset = {(d["topic"], d["offset"]): d for d in letters}
    partition = {d["partition"] for d in letters if d["topic"] == events}
    assert len(partition) == 1  # one key: one partition, its offsets in produce order
    assert set(by_offset) == {(rules, 1), *[(events, o) for o in (1, 2, 3, 4)]}
    assert by_offset[(events, 1)]["reason"] == "the value is not a JSON object"
    assert by_offset[(events, 2)]["reason"] == "does not fit the schema: amount (double)"
    assert by_offset[(events, 2)]["value"] == '{"user": "u1", "amount": "lots"}'
    assert "tombstone" in by_offset[(events, 3)]["reason"]
    assert by_offset[(events, 4)]["reason"] == "the value is not a JSON object"
    assert by_offset[(rules, 1)]["key"] == "bad"


def _events_and_a_factor(broker, events: str, rules: str, users: list[str]) -> None:
    """Topic ``events`` (2 partitions) with one record per user, keyed by it, its amount the
    record's index; topic ``rules`` with one factor."""
    broker.create_topic(events, partitions=2)
    broker.create_topic(rules)
    broker.produce(rules, [("factor", {"limit": 2.0})])
    broker.produce(events, [(user, {"user": user, "amount": float(i)})
                            for i, user in enumerate(users)])


def test_options_pass_through_and_secrets_stay_out_of_sight(spark, kafka_broker, tmp_path):
    events, rules = topic_name("events"), topic_name("rules")
    _events_and_a_factor(kafka_broker, events, rules, [f"u{i % 4}" for i in range(12)])
    secret = "s3cr3t-pa55word"
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required ' \
           f'username="app" password="{secret}";'
    events_df = kafka_topic(spark, kafka_broker.bootstrap, events, "user string, amount double",
                            options={"maxOffsetsPerTrigger": "4", "kafka.sasl.jaas.config": jaas})
    rules_df = kafka_topic(spark, kafka_broker.bootstrap, rules, "limit double", key="name")
    result = Stream(events_df).connect(Stream(rules_df).broadcast(RULES)).process(
        Scaled(), "user string, scaled double")
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "ckpt"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert kind_of(result) == "streamed"  # non-keyed: one foreachBatch over both topics
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) >= 3  # 12 events, at most 4 a micro-batch
    assert sorted(r.scaled for r in read_output(spark, str(tmp_path / "out")).collect()) == [
        2.0 * i for i in range(12)]
    plan = kafka_topic(spark, kafka_broker.bootstrap, events, "user string", options={
        "kafka.sasl.jaas.config": jaas})._jdf.queryExecution().toString()
    assert "kafka.sasl.jaas.config" in plan and secret not in plan  # Spark redacts it
    assert secret not in json.dumps([p.json for p in query.recentProgress])
    with pytest.raises(PipelineError, match="choose the topic") as refused:
        kafka_topic(spark, kafka_broker.bootstrap, events, "user string",
                    options={"subscribe": "other", "kafka.sasl.jaas.config": jaas})
    assert secret not in str(refused.value)


def _reader_options(frame) -> str:
    """The options Spark's Kafka source was given, as the plan prints them."""
    plan = frame._jdf.queryExecution().logical().toString()
    return next(line for line in plan.splitlines() if "StreamingRelationV2" in line)


def test_the_defaults_read_from_the_start_committed_and_without_a_long_fetch_wait(spark):
    defaults = _reader_options(kafka_topic(spark, "127.0.0.1:1", "t", "a int"))
    for option in ("startingOffsets=earliest", "kafka.isolation.level=read_committed",
                   "kafka.fetch.max.wait.ms=50"):
        assert option in defaults
    chosen = _reader_options(kafka_topic(spark, "127.0.0.1:1", "t", "a int", options={
        "kafka.fetch.max.wait.ms": "500", "startingOffsets": "latest"}))
    assert "kafka.fetch.max.wait.ms=500" in chosen and "startingOffsets=latest" in chosen
    assert "kafka.fetch.max.wait.ms=50," not in chosen
    assert "includeHeaders" not in defaults  # Spark reads headers only when asked
    assert "includeHeaders=true" in _reader_options(kafka_topic(spark, "127.0.0.1:1", "t",
                                                                "a int", metadata=["headers"]))


def test_checks_name_the_fix(spark):
    for kwargs, message in [
        ({"tombstone": "deleted"}, "pass key="),
        ({"metadata": ["leader_epoch"]}, "choose from"),
        ({"group_id": "shop"}, "pass commit_offsets=True"),
        ({"metadata": ["headers"], "schema": "kafka_headers string"}, "rename one"),
        ({"key": "amount"}, "make it string"),
        ({"metadata": ["offset"], "schema": "kafka_offset long"}, "rename one"),
        ({"key": "deleted", "tombstone": "deleted"}, "rename one"),
        ({"options": {"assign": '{"t": [0]}'}}, "choose the topic"),
    ]:
        schema = kwargs.pop("schema", "user string, amount double")
        with pytest.raises(PipelineError, match=message):
            kafka_topic(spark, "127.0.0.1:1", "t", schema, **kwargs)


def test_a_broker_restarted_mid_run_loses_nothing_and_repeats_nothing(
        spark, kafka_broker, tmp_path):
    """The broker goes away between two rounds of events: the running query either rides it out
    or fails with Kafka's error; a restart from its checkpoint completes, and every event is
    counted exactly once (each user's counts run 1..n, from the written files)."""
    events, rules = topic_name("events"), topic_name("rules")
    kafka_broker.create_topic(events, partitions=3)
    kafka_broker.create_topic(rules)
    kafka_broker.produce(rules, [("factor", {"limit": 1.0})])
    first = [(f"u{i % 5}", {"user": f"u{i % 5}", "amount": float(i)}) for i in range(20)]
    kafka_broker.produce(events, first)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    result = _totals(spark, kafka_broker, events, rules)
    query = result.write_stream(out, ckpt, trigger={"processingTime": "500 milliseconds"})
    try:
        query.processAllAvailable()
        kafka_broker.stop()
        _wait_getting_offsets(query)  # a trigger finds no broker
        kafka_broker.start()
        kafka_broker.produce(events, [(f"u{i % 5}", {"user": f"u{i % 5}", "amount": float(i)})
                                      for i in range(20, 45)])
        with contextlib.suppress(StreamingQueryException):
            query.processAllAvailable()
    finally:
        kafka_broker.start()  # the session's broker stays up for the other tests
        failure = query.exception()
        query.stop()
    if failure is not None:  # it failed while the broker was away: with Kafka's reason
        assert "kafka" in str(failure).lower() or "timeout" in str(failure).lower(), failure
    restarted = result.write_stream(out, ckpt, trigger={"availableNow": True})
    restarted.awaitTermination()
    rows = [tuple(r) for r in read_output(spark, out).collect()]
    counts = Counter(user for user, _, _ in rows)
    assert counts == Counter({f"u{i}": 9 for i in range(5)})
    for user in counts:
        assert sorted(n for u, n, _ in rows if u == user) == list(range(1, 10))
    assert sorted(s for _, _, s in rows) == [float(i) for i in range(45)]


def _wait_getting_offsets(query, seconds: float = 2.0, timeout: float = 60.0) -> None:
    """Until a trigger has been asking the (stopped) broker for offsets for ``seconds``, or the
    query has failed."""
    deadline, since = time.monotonic() + timeout, None
    while query.isActive and time.monotonic() < deadline:
        if not query.status["message"].startswith("Getting offsets"):
            since = None
        elif since is None:
            since = time.monotonic()
        elif time.monotonic() - since >= seconds:
            return
        time.sleep(0.1)
    assert not query.isActive, f"no trigger asked for offsets in {timeout:.0f} s"


def _collect(spark, frame, tmp_path, name: str) -> list:
    query = (frame.writeStream.format("memory").queryName(name).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / name)).start())
    query.awaitTermination()
    rows = spark.table(name).collect()
    spark.catalog.dropTempView(name)
    return rows


def test_a_transactional_topic_is_read_committed_unless_told_otherwise(
        spark, kafka_broker, tmp_path):
    """A topic written in transactions (as ``sinks.kafka`` writes): by default an aborted
    transaction's records are not read, and the offsets its markers take are no gap Spark
    complains about; ``kafka.isolation.level=read_uncommitted`` passed through reads them."""
    from confluent_kafka import Producer

    topic = topic_name("transactional")
    kafka_broker.create_topic(topic, partitions=2)
    producer = Producer(kafka_broker.client_config(**{"transactional.id": topic}))
    producer.init_transactions(30)
    for ids, commit in [((1, 2), True), ((3, 4), False), ((5,), True)]:
        producer.begin_transaction()
        for i in ids:
            producer.produce(topic, key=f"k{i}", value=json.dumps({"id": i}))
        producer.flush(30)  # in the log before the abort (abort purges what is queued)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    assert sorted(json.loads(r.value)["id"] for r in kafka_broker.read(topic, committed=False)
                  ) == [1, 2, 3, 4, 5]
    rows = _collect(spark, kafka_topic(spark, kafka_broker.bootstrap, topic, "id long"),
                    tmp_path, f"committed_{uuid.uuid4().hex[:6]}")
    assert sorted(r.id for r in rows) == [1, 2, 5]  # read_committed, the default
    assert all(r._corrupt_record is None for r in rows)
    everything = _collect(spark, kafka_topic(spark, kafka_broker.bootstrap, topic, "id long",
                                             options={"kafka.isolation.level":
                                                      "read_uncommitted"}),
                          tmp_path, f"uncommitted_{uuid.uuid4().hex[:6]}")
    assert sorted(r.id for r in everything) == [1, 2, 3, 4, 5]  # the option wins


class OffsetOrder(KeyedBroadcastProcessFunction):
    """Per user: the offset of the record before this one, and a state machine of the user's
    steps; both show the order the user's records ran in."""

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last", int))
        self.state = runtime_context.get_state(ValueStateDescriptor("state", str))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("factor", value["limit"])

    def process_element(self, value, ctx):
        previous, state = self.last.value(), self.state.value()
        valid = _NEXT_STEP[state] == value["step"]
        self.last.update(value["kafka_offset"])
        if valid:
            self.state.update(value["step"])
        yield value["user"], value["kafka_offset"], previous, valid


_NEXT_STEP = {None: "opened", "opened": "paid", "paid": "shipped", "shipped": "opened"}


def _user_records(round_: int, users: int = 40, per_user: int = 6) -> list[tuple[str, dict]]:
    """Each user's steps in order, users interleaved, event times out of produce order."""
    records = []
    for i in range(users * per_user):
        user, n = f"u{i % users}", round_ * per_user + i // users
        records.append((user, {"user": user, "step": ("opened", "paid", "shipped")[n % 3],
                               "ts": 1_000_000 + (i * 7919) % 5_000}))
    return records


@pytest.mark.parametrize(("engine", "event_time"), [("micro_batch", "ts"), ("operator", None)])
def test_each_keys_records_run_in_offset_order_as_on_the_harness(
        spark, kafka_broker, tmp_path, engine, event_time):
    """A topic keyed by user over three partitions, read in two micro-batches: every user's
    records reach the function in offset order (Flink's promise), whatever their event times,
    and the outputs equal the harness fed the records in produce order."""
    events, rules = topic_name("steps"), topic_name("factor")
    kafka_broker.create_topic(events, partitions=3)
    kafka_broker.create_topic(rules)
    kafka_broker.produce(rules, [("factor", {"limit": 2.0, "ts": 0})])
    events_df = kafka_topic(spark, kafka_broker.bootstrap, events,
                            "user string, step string, ts long", metadata=["offset"])
    rules_df = kafka_topic(spark, kafka_broker.bootstrap, rules, "limit double, ts long",
                           key="name")
    result = Stream(events_df).key_by("user").connect(Stream(rules_df).broadcast(RULES)).process(
        OffsetOrder(), "user string, offset long, previous long, valid boolean",
        parallelism=2, event_time=event_time, engine=engine)
    out = str(tmp_path / "out")
    produced = []
    for round_ in range(2):
        records = _user_records(round_)
        kafka_broker.produce(events, records)
        produced += records
        result.write_stream(out, str(tmp_path / "ckpt"),
                            trigger={"availableNow": True}).awaitTermination()
    rows = sorted(tuple(r) for r in read_output(spark, out).collect())
    assert len(rows) == len(produced)
    assert all(valid for *_, valid in rows)  # every user's steps in order
    assert all(previous is None or previous < offset for _, offset, previous, _ in rows)

    offsets: dict[str, list[int]] = {}  # one user, one partition: offsets in produce order
    for record in kafka_broker.read(events):
        offsets.setdefault(record.key, []).append(record.offset)
    fed, seen = [], Counter()
    for user, value in produced:
        fed.append({**value, "kafka_offset": offsets[user][seen[user]]})
        seen[user] += 1
    harness = KeyedBroadcastHarness(OffsetOrder(), lambda v: v["user"], [RULES])
    harness.open()
    harness.process_micro_batch(broadcast=[{"limit": 2.0, "ts": 0}])
    harness.process_micro_batch(main=fed)
    assert rows == sorted(harness.output())


def _decide(tx, ctx):
    """The decision, with the input record's headers passed on (and one of its own); a record
    marked ``bad`` gets a header value of the wrong type, which the output check refuses."""
    limit = ctx.get_broadcast_state(RULES).get("limit")
    headers = {**tx.kafka_headers, "decided-by": "traced"}
    yield tx.user, tx.amount > limit, {"trace": 5} if "bad" in tx.kafka_headers else headers


class KeyedTraced(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)

    def process_element(self, value, ctx):
        yield from _decide(value, ctx)


class Traced(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)

    def process_element(self, value, ctx):
        yield from _decide(value, ctx)


class Letters:
    """A sink of the user's (at-least-once), which only the driver writes: the rows it got."""

    def __init__(self):
        self.rows = []

    def write(self, frame, output, batch_id):
        self.rows += frame.collect()


#: events with headers: a trace each, a header given twice (the last wins), bytes that are not
#: UTF-8, none at all, one the function answers with a header of the wrong type
_TRACED = [("u1", {"user": "u1", "amount": 5.0}, [("traceparent", b"00-aaa-01")]),
           ("u1", {"user": "u1", "amount": 50.0}, [("traceparent", b"00-old-01"),
                                                   ("traceparent", b"00-bbb-01")]),
           ("u2", {"user": "u2", "amount": 7.0}, [("traceparent", b"00-ccc-01"),
                                                  ("raw", b"\xff\xfe")]),
           ("u2", {"user": "u2", "amount": 80.0}),
           ("u3", {"user": "u3", "amount": 1.0}, [("bad", b"1")])]


def test_a_trace_header_passes_from_the_input_record_to_the_decision_it_produced(
        spark, kafka_broker, tmp_path):
    """``metadata=["headers"]`` to ``sinks.kafka(headers=...)``, on both writer paths: the
    pattern's own tasks (keyed, the other sink ``files``: markers by subtask) and the driver's
    split by key (non-keyed, the dead letters into a sink of the user's, which only the driver
    writes: markers by key). Each decision carries its input's trace (the last of a repeated
    header), the value holds no headers, and a header of the wrong type is a dead letter with
    the reason: five records in, four decisions and one dead letter out."""
    events, rules = topic_name("traced"), topic_name("limit")
    kafka_broker.create_topic(events, partitions=2)
    kafka_broker.create_topic(rules)
    kafka_broker.produce(rules, [("limit", {"limit": 10.0})])
    kafka_broker.produce(events, _TRACED)
    events_df = kafka_topic(spark, kafka_broker.bootstrap, events, "user string, amount double",
                            metadata=["headers"])
    assert events_df.schema["kafka_headers"].dataType.simpleString() == "map<string,string>"
    rules_df = kafka_topic(spark, kafka_broker.bootstrap, rules, "limit double", key="name")
    output = "user string, flagged boolean, headers map<string,string>"
    for path, by in [("keyed", "subtask"), ("non-keyed", "key")]:
        stream = Stream(events_df).key_by("user") if path == "keyed" else Stream(events_df)
        result = stream.connect(Stream(rules_df).broadcast(RULES)).process(
            KeyedTraced() if path == "keyed" else Traced(), output, hold_until_ready=[RULES],
            **({"parallelism": 2} if path == "keyed" else {}))
        decisions = topic_name(f"decisions-{path}")
        kafka_broker.create_topic(decisions, partitions=2)
        ckpt, letters = tmp_path / path / "ckpt", Letters()
        result.write_stream(checkpoint_location=str(ckpt), trigger={"availableNow": True},
                            sinks={"main": sinks.kafka(kafka_broker.bootstrap, decisions,
                                                       key="user", headers="headers",
                                                       parallelism=2),  # 2 parts to fence
                                   "dead_letters": sinks.files(str(tmp_path / path))
                                   if path == "keyed" else letters}).awaitTermination()
        found = {r: dict(r.headers) for r in kafka_broker.read(decisions)}
        assert all(set(json.loads(r.value)) == {"user", "flagged"} for r in found), path
        traced = {h.get("traceparent"): (json.loads(r.value)["flagged"], h.get("decided-by"))
                  for r, h in found.items()}
        assert traced == {b"00-aaa-01": (False, b"traced"), b"00-bbb-01": (True, b"traced"),
                          b"00-ccc-01": (False, b"traced"), None: (True, b"traced")}, path
        assert [h["raw"] for h in found.values() if "raw" in h] == ["\ufffd\ufffd".encode()]
        (letter,) = (read_output(spark, str(tmp_path / path), "dead_letters").collect()
                     if path == "keyed" else letters.rows)
        assert letter.callback == "output" and "field 'headers'" in letter.error, letter.error
        markers = json.loads((ckpt / "sparkcast" / "kafka-markers.json").read_text())
        assert {json.loads(r.value)["by"] for r in kafka_broker.read(markers["main"])} == {by}


def _wait_for(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"not so after {timeout:.0f} s")


def test_committed_micro_batches_show_in_kafkas_consumer_groups_tool(
        spark, kafka_broker, tmp_path, caplog):
    """``commit_offsets=True``: after the first micro-batch, Kafka's own
    ``kafka-consumer-groups`` shows the query's group (named for the query) with the batch's
    end offsets, and the lag of records produced since, while the query runs; the broadcast
    topic, not asked for, is not committed. A commit that cannot be made (a JKS truststore,
    which librdkafka does not read) is one WARNING naming the fix and never the password, and
    the query reads every record."""
    events, rules = topic_name("watched"), topic_name("factor")
    _events_and_a_factor(kafka_broker, events, rules, [f"u{i}" for i in range(20)])
    name = f"watched_{uuid.uuid4().hex[:6]}"
    group = f"sparkcast-{name}"
    events_df = kafka_topic(spark, kafka_broker.bootstrap, events, "user string, amount double",
                            commit_offsets=True)
    rules_df = kafka_topic(spark, kafka_broker.bootstrap, rules, "limit double", key="name")
    result = Stream(events_df).connect(Stream(rules_df).broadcast(RULES)).process(
        Scaled(), "user string, scaled double")
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "ckpt"),
                                trigger={"processingTime": "1 hour"}, query_name=name)
    try:  # the first micro-batch runs at once, the next at the hour
        committed = _wait_for(lambda: (found := kafka_broker.committed(group))
                              and sum(found.values()) == 20 and found)
        kafka_broker.produce(events, [(f"u{i}", {"user": f"u{i}", "amount": float(i)})
                                      for i in range(20, 26)])
        described = kafka_broker.consumer_groups("--describe", "--group", group)
        running, batches = query.isActive, len(query.recentProgress)
    finally:
        query.stop()
    assert {topic for topic, _ in committed} == {events} and running
    rows = [line.split() for line in described.splitlines() if line.startswith(f"{group} ")]
    assert sorted((r[1], int(r[2])) for r in rows) == [(events, 0), (events, 1)], described
    current, end, lag = (sum(int(r[i]) for r in rows) for i in (3, 4, 5))
    if batches == 1:  # no trigger came between (one does at the turn of the hour)
        assert (current, end, lag) == (20, 26, 6), described
    assert all(int(r[4]) - int(r[3]) == int(r[5]) for r in rows) and end == 26

    secret = "tru5tst0re-pa55"
    unwatched = topic_name("unwatched")
    kafka_broker.create_topic(unwatched)
    kafka_broker.produce(unwatched, [(None, {"id": i}) for i in range(3)])
    with caplog.at_level("WARNING", logger="sparkcast"):
        read = _collect(spark, kafka_topic(spark, kafka_broker.bootstrap, unwatched, "id long",
                                           commit_offsets=True, group_id="shop-monitor",
                                           options={"maxOffsetsPerTrigger": "1",
                                                    "kafka.ssl.truststore.location": "/no.jks",
                                                    "kafka.ssl.truststore.password": secret}),
                        tmp_path, f"unwatched_{uuid.uuid4().hex[:6]}")
        _wait_for(lambda: "shop-monitor" in caplog.text, timeout=30)
        time.sleep(1)  # the later batches' commits fail too, without a word
    assert sorted(r.id for r in read) == [0, 1, 2]
    warned = [r.getMessage() for r in caplog.records if "shop-monitor" in r.getMessage()]
    assert len(warned) == 1 and "ssl.ca.location" in warned[0], warned
    assert secret not in caplog.text
