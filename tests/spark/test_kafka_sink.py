"""``sinks.kafka`` on a REAL Kafka broker (``sparkcast.testing.kafka``): every output of the sink
pipelines (keyed and not) reaches its topic exactly once for a ``read_committed`` consumer, equal
to the harness, across a replayed batch that Kafka had committed, beside an aborted transaction a
killed writer left open, and mixed with the other sinks in one query. Keys land in the partitions
a Java producer gives them; a query's markers are in a topic of its own, untouched by other
queries' open transactions, and an old checkpoint's markers are still found in the shared topic.
The SIGKILL tests are in ``test_kafka_faults.py``; ``sinks.delta`` is tested here too.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from sparkcast import sinks
from sparkcast.errors import SinkError
from sparkcast.spark import read_output
from tests.spark import sink_pipeline as pipeline
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark


def _topics(broker, name):
    """One topic per output (3 partitions each), named for the test."""
    topics = {output: f"{name}-{output}" for output in pipeline.TABLES}
    for topic in topics.values():
        broker.create_topic(topic, partitions=3)
    return topics


def _kafka_sinks(broker, topics, parallelism=3, **extra):
    return {output: sinks.kafka(broker.bootstrap, topic, parallelism=parallelism, **extra)
            for output, topic in topics.items()}


def _rows(broker, topics, committed=True):
    """``{output: Counter(rows)}`` as ``pipeline.expected`` counts them."""
    found = {}
    for output, topic in topics.items():
        values = [json.loads(r.value) for r in broker.read(topic, committed)]
        found[output] = Counter(pipeline.letter_key(v) if output == "dead_letters"
                                else (v["id"], v["scaled"]) for v in values)
    return found


def _forget_last_commit(base: Path) -> int:
    """Drop Spark's commit of the last batch: the restart replays a batch Kafka committed, as
    after a kill between the two commits."""
    commits = base / "checkpoint" / "commits"
    last = max(int(n.name) for n in commits.iterdir() if n.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_a_rolled_back_checkpoint_writes_no_part_twice_and_says_it_was_rolled_back(
        spark, tmp_path, kafka_broker, caplog):
    """A backup of the checkpoint taken after batch 1 and restored after batch 3: the restored
    query runs batches 2 and 3 again, finds Kafka's markers of both (the abandoned run's), writes
    neither again, and says in a WARNING that the checkpoint was rolled back and which batches'
    records stay the abandoned run's."""
    caplog.set_level(logging.WARNING, logger="sparkcast")
    topics = _topics(kafka_broker, "rollback")
    chosen = _kafka_sinks(kafka_broker, topics)
    checkpoint, backup = tmp_path / "checkpoint", tmp_path / "backup"
    pipeline.write_inputs(tmp_path, [0, 1])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    shutil.copytree(checkpoint, backup)
    pipeline.write_inputs(tmp_path, [2, 3])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    assert not [r for r in caplog.records if "rolled back" in r.getMessage()]
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    assert query.exception() is None
    assert [p["batchId"] for p in query.recentProgress if p["numInputRows"]] == [2, 3]
    assert _rows(kafka_broker, topics) == pipeline.expected("partitioned")
    said = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
    assert any(line.startswith("output 'main'") for line in said)
    assert all("parts up to batch 3" in line and "batches up to 1 only" in line
               and "batches 2 to 3" in line for line in said)  # read before the query starts


@pytest.mark.parametrize("kind", ["streamed", "partitioned"])
def test_every_output_once_across_a_replay_of_a_committed_batch(spark, tmp_path, kafka_broker,
                                                                 kind):
    topics = _topics(kafka_broker, f"replay-{kind}")
    chosen = _kafka_sinks(kafka_broker, topics)
    pipeline.write_inputs(tmp_path, [0, 1])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, kind), tmp_path, chosen)
    assert _rows(kafka_broker, topics) == pipeline.expected(kind, 2)

    replayed = _forget_last_commit(tmp_path)
    pipeline.write_inputs(tmp_path, [2, 3])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, kind), tmp_path, chosen)
    assert query.exception() is None
    assert replayed == 1
    assert _rows(kafka_broker, topics) == pipeline.expected(kind)


def test_one_keys_records_keep_their_order_in_the_partition_java_gives_it(spark, tmp_path,
                                                                          kafka_broker):
    """Rows are split into parts by key: a key's records, across micro-batches, arrive in one
    Kafka partition in the order they were emitted (a per-key counter that grows by one), and
    the whole equals the harness. Each key's partition is the one a Java producer (Spark's own
    Kafka sink, kafka-clients' default partitioner: murmur2) puts the same key in."""
    from sparkcast.spark import Stream
    from tests.spark import fault_pipeline as counter

    kafka_broker.create_topic("ordered", partitions=3)
    for index in range(counter.EVENT_FILES):
        write_batch_file(tmp_path / "events", index, counter.events(index))
        write_batch_file(tmp_path / "rules", index,
                         counter.rules(index) if index < counter.RULE_FILES else [])
    main = read_stream(spark, counter.EVENTS_SCHEMA, tmp_path / "events")
    rules = read_stream(spark, counter.RULES_SCHEMA, tmp_path / "rules")
    result = Stream(main).key_by("k").connect(Stream(rules).broadcast(counter.RULES)).process(
        counter.Ledger(), counter.OUTPUT, parallelism=3, event_time="ts")
    chosen = {"main": sinks.kafka(kafka_broker.bootstrap, "ordered", key="k", parallelism=3),
              "dead_letters": sinks.files(str(tmp_path / "letters"))}
    pipeline.run_to_end(result, tmp_path, chosen)
    records = kafka_broker.read("ordered")
    counts: dict[str, list[int]] = {}
    partitions: dict[str, set[int]] = {}
    for record in records:
        counts.setdefault(record.key, []).append(json.loads(record.value)["n"])
        partitions.setdefault(record.key, set()).add(record.partition)
    assert len(counts) == 9 and all(len(p) == 1 for p in partitions.values())
    assert all(n == list(range(1, len(n) + 1)) for n in counts.values())
    want, _ = counter.expected("partitioned")
    fields = [f.split()[0] for f in counter.OUTPUT.split(", ")]
    got = Counter(tuple(json.loads(r.value)[f] for f in fields) for r in records)
    assert got == want
    assert {key: p.pop() for key, p in partitions.items()} == _java_partitions(
        spark, kafka_broker, "ordered-java", sorted(counts), partitions=3)


def _java_partitions(spark, broker, topic, keys, partitions):
    """``{key: partition}`` as a Java producer places the keys: Spark's Kafka sink writes one
    record per key to a new topic of ``partitions`` partitions, read back."""
    broker.create_topic(topic, partitions=partitions)
    (spark.createDataFrame([(k, k) for k in keys], "key string, value string").write
     .format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", topic).save())
    return {r.key: r.partition for r in broker.read(topic)}


def test_an_open_transaction_of_a_killed_writer_is_aborted_and_invisible(spark, tmp_path,
                                                                         kafka_broker):
    """A writer of part 0 died inside its transaction (rows produced, never committed): the
    next run fences its id, so a ``read_committed`` consumer never sees those rows and is not
    held back by them; an uncommitted read shows they were there."""
    topics = _topics(kafka_broker, "aborted")
    chosen = _kafka_sinks(kafka_broker, topics, transactional_id_prefix="aborted-test")
    zombie = Producer(kafka_broker.client_config(**{"transactional.id": "aborted-test-main-0"}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(5):
        zombie.produce(topics["main"], value=json.dumps({"id": -i, "scaled": -1.0}))
    zombie.flush(30)
    pipeline.write_inputs(tmp_path)
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    assert query.exception() is None
    assert _rows(kafka_broker, topics) == pipeline.expected("partitioned")
    everything = [json.loads(r.value)["id"] for r in kafka_broker.read(topics["main"], False)]
    assert sorted(i for i in everything if i <= 0 and i != 0) == [-4, -3, -2, -1]


def _open_transaction(broker, topic, transactional_id):
    """A producer inside a transaction on ``topic`` with a marker produced, as a query killed
    mid-batch leaves it; its transaction timeout (10 min) keeps it open for the test."""
    zombie = Producer(broker.client_config(**{"transactional.id": transactional_id,
                                               "transaction.timeout.ms": 600_000}))
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, key=f"{transactional_id}/main/0",
                   value=json.dumps({"batch": 7, "parts": 1}))
    zombie.flush(30)
    return zombie


def test_a_killed_querys_open_transaction_does_not_touch_another_querys_markers(
        spark, tmp_path, kafka_broker):
    """Transactions left open (10 min timeout) on the old shared marker topic and on another
    query's own marker topic: a ``read_committed`` reader of those topics does not see what is
    committed behind them (librdkafka ends the read at the first open transaction). A query
    beside them keeps its markers in its own topic: its restart replays a batch Kafka
    committed and writes it once, and the restart's first batch is not held up."""
    from sparkcast.spark.outputs import kafka_markers

    other = kafka_markers.own_topic("0f0f0f0f-another-query")
    zombies = []
    for topic in (kafka_markers.SHARED_TOPIC, other):
        if topic not in kafka_broker.admin().list_topics(timeout=30).topics:
            kafka_broker.create_topic(topic, config={"cleanup.policy": "compact"})
        zombies.append(_open_transaction(kafka_broker, topic, f"zombie-{len(zombies)}"))
    try:
        behind = _open_transaction(kafka_broker, other, "committed-behind")
        behind.commit_transaction(30)
        assert kafka_broker.read(other) == []  # held back by the zombie's open transaction
        kafka_broker.create_topic("beside-zombies", partitions=3)
        chosen = {"main": sinks.kafka(kafka_broker.bootstrap, "beside-zombies", parallelism=3),
                  "big": sinks.files(str(tmp_path / "out")),
                  "dead_letters": sinks.files(str(tmp_path / "out"))}
        pipeline.write_inputs(tmp_path, [0, 1])
        first = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path,
                                    chosen)
        assert _forget_last_commit(tmp_path) == 1
        pipeline.write_inputs(tmp_path, [2])
        query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path,
                                    chosen)
        assert query.exception() is None
        assert query.recentProgress[0]["batchId"] == 1  # the replay
        assert query.recentProgress[0]["durationMs"]["addBatch"] < 60_000  # not 600,000
        assert _rows(kafka_broker, {"main": "beside-zombies"})["main"] == pipeline.expected(
            "streamed", 3)["main"]
        recorded = json.loads((tmp_path / "checkpoint" / "sparkcast" /
                               "kafka-markers.json").read_text())
        assert query.id == first.id
        assert recorded == {"main": kafka_markers.own_topic(str(query.id))}
    finally:
        for zombie in zombies:
            zombie.abort_transaction(30)


def test_a_checkpoint_whose_markers_are_in_the_shared_topic_keeps_reading_them(
        spark, tmp_path, kafka_broker):
    """A checkpoint written before per-query marker topics (markers in ``_sparkcast_markers``,
    no record in the checkpoint) restarts with a replay of a batch Kafka committed: the sink
    finds its markers in the shared topic and writes the batch once."""
    from sparkcast.spark.outputs import kafka_markers

    kafka_broker.create_topic("legacy-main", partitions=3)
    files = {"big": sinks.files(str(tmp_path / "out")),
             "dead_letters": sinks.files(str(tmp_path / "out"))}
    pipeline.write_inputs(tmp_path, [0, 1])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, {
        **files, "main": sinks.kafka(kafka_broker.bootstrap, "legacy-main", parallelism=3,
                                     marker_topic=kafka_markers.SHARED_TOPIC)})
    record = tmp_path / "checkpoint" / "sparkcast" / "kafka-markers.json"
    record.unlink()  # as the releases before per-query topics left it
    assert _forget_last_commit(tmp_path) == 1
    pipeline.write_inputs(tmp_path, [2])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, {
        **files, "main": sinks.kafka(kafka_broker.bootstrap, "legacy-main", parallelism=3)})
    assert query.exception() is None
    assert json.loads(record.read_text()) == {"main": kafka_markers.SHARED_TOPIC}
    assert _rows(kafka_broker, {"main": "legacy-main"})["main"] == pipeline.expected(
        "streamed", 3)["main"]


def test_a_part_whose_cached_producer_another_worker_fenced_is_written_once(kafka_broker,
                                                                           caplog):
    """Part 0 of batch 1 runs on one Python worker, of batch 2 on another (which initialises
    the id and fences the first worker's cached producer), of batch 3 on the first again: its
    producer is fatal, so the part is written by a fresh one; every record once."""
    import pyarrow as pa

    from sparkcast.spark.outputs import kafka_client
    from sparkcast.spark.outputs import kafka_transactions as tx

    topic, markers = "fenced-cache", "fenced-cache-markers"
    kafka_broker.create_topic(topic)
    kafka_broker.create_topic(markers, config={"cleanup.policy": "compact"})
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap})

    def part(batch_id, values):
        writer = tx.PartWriter(settings, topic, markers, "fenced", "main", batch_id, 1,
                               frozenset())
        rows = pa.RecordBatch.from_pydict({"key": [None] * len(values), "value": values})
        return writer([rows])

    list(part(1, ["a", "b"]))
    other_worker = Producer(kafka_broker.client_config(**{"transactional.id": "fenced-main-0"}))
    other_worker.init_transactions(30)
    other_worker.begin_transaction()
    other_worker.produce(topic, value="c")
    other_worker.commit_transaction(30)
    later = [str(i) for i in range(50_000)]  # long enough for the fencing to reach produce()
    list(part(3, later))
    assert [r.value for r in kafka_broker.read(topic)] == ["a", "b", "c", *later]
    # the fencing is handled: librdkafka's fatal lines about it are not warnings here
    assert not [r for r in caplog.records if r.name == kafka_client.LOG.name
                and r.levelno >= logging.WARNING and "fenced" in r.getMessage()]


def test_a_part_whose_cached_producer_was_left_inside_a_transaction_is_written_once(
        kafka_broker):
    """A worker's cached producer of part 0 was left inside a transaction it never ended (a
    commit that timed out under load leaves it so): the next batch's part cannot begin on it
    (librdkafka's ``_STATE``), so a fresh producer aborts the open transaction and writes the
    part; a ``read_committed`` reader sees the part once and nothing of the stuck one."""
    import pyarrow as pa

    from sparkcast.spark.outputs import kafka_client, kafka_marker_reads
    from sparkcast.spark.outputs import kafka_transactions as tx

    topic, markers = "stuck-cache", "stuck-cache-markers"
    kafka_broker.create_topic(topic)
    kafka_broker.create_topic(markers, config={"cleanup.policy": "compact"})
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap})
    writer = tx.PartWriter(settings, topic, markers, "stuck", "main", 3, 1, frozenset())
    first = pa.RecordBatch.from_pydict({"key": [None], "value": ["x"]})
    assert writer.write_once(0, [first]) == 1
    stuck = tx.kept("stuck-main-0").producer
    stuck.begin_transaction()
    stuck.produce(topic, value="never")
    stuck.flush(30)
    writer = tx.PartWriter(settings, topic, markers, "stuck", "main", 4, 1, frozenset())
    rows = pa.RecordBatch.from_pydict({"key": [None, None], "value": ["a", "b"]})
    assert writer.write_once(0, [rows]) == 2
    assert [r.value for r in kafka_broker.read(topic)] == ["x", "a", "b"]
    assert kafka_marker_reads.read_markers(settings, markers)["stuck/main/0"]["batch"] == 4


def test_a_marker_read_after_its_broker_restarted_still_finds_the_markers():
    """A process keeps one admin client for its marker reads' offsets (its connections are up);
    one that outlived its partitions' leaders (the broker restarted, a rolling restart moves
    them) answered every offsets request with FENCED_LEADER_EPOCH from then on, so each
    marker read of that process failed: the read now asks a new client, which finds them."""
    from sparkcast.spark.outputs import kafka_client, kafka_marker_reads
    from sparkcast.testing.kafka import KafkaBroker

    with KafkaBroker() as broker:
        markers = "restarted-markers"
        broker.create_topic(markers, config={"cleanup.policy": "compact"})
        broker.produce(markers, [("restarted/main/0", {"batch": 3, "parts": 1})])
        settings = kafka_client.librdkafka_settings({"bootstrap.servers": broker.bootstrap})
        try:
            assert kafka_marker_reads.read_markers(settings, markers)[
                "restarted/main/0"]["batch"] == 3
            stale = kafka_client.admin(settings)
            broker.stop(kill=True)
            broker.start()
            assert kafka_marker_reads.read_markers(settings, markers)[
                "restarted/main/0"]["batch"] == 3
            assert kafka_client.admin(settings) is not stale
        finally:
            # no client left to reach a stopped broker
            kafka_client.forget_admin(settings, kafka_client.admin(settings))


def test_a_part_larger_than_the_producers_queue_is_written_whole_and_in_order(kafka_broker):
    """The part writer produces in chunks (``produce_batch``); a local queue of 1,000 records
    refuses most of each 10,000-record chunk, and the refused records go again once
    deliveries drain it: every record once, each key's records in order."""
    import pyarrow as pa

    from sparkcast.spark.outputs import kafka_client
    from sparkcast.spark.outputs import kafka_transactions as tx

    topic, markers = "small-queue", "small-queue-markers"
    kafka_broker.create_topic(topic, partitions=3)
    kafka_broker.create_topic(markers, config={"cleanup.policy": "compact"})
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap,
                                       "queue.buffering.max.messages": "1000"})
    writer = tx.PartWriter(settings, topic, markers, "small", "main", 0, 1, frozenset())
    keys = [f"k{i % 7}" for i in range(25_000)]
    rows = pa.RecordBatch.from_pydict({"key": keys, "value": [str(i) for i in range(25_000)]})
    assert writer.write_once(0, [rows]) == 25_000
    by_key: dict[str, list[int]] = {}
    for record in kafka_broker.read(topic):
        by_key.setdefault(record.key, []).append(int(record.value))
    assert sorted(n for values in by_key.values() for n in values) == list(range(25_000))
    assert all(values == sorted(values) for values in by_key.values())


def test_a_partitioner_in_the_options_wins(kafka_broker):
    """``partitioner`` in the sink's options replaces its murmur2 default: the part writer then
    puts keys where a librdkafka producer with that setting does, and not where the default
    does (no Spark: the writer the tasks run, on the broker)."""
    import pyarrow as pa

    from sparkcast.spark.outputs import kafka_client
    from sparkcast.spark.outputs import kafka_transactions as tx

    keys = [f"user-{i}" for i in range(12)]

    def placed(topic, settings, writer=True):
        kafka_broker.create_topic(topic, partitions=3)
        if writer:
            rows = pa.RecordBatch.from_pydict({"key": keys, "value": keys})
            list(tx.PartWriter(settings, topic, f"{topic}-markers", topic, "main", 0, 1,
                               frozenset())([rows]))
        else:
            plain = Producer({**settings, "logger": kafka_client.LOG})
            for key in keys:
                plain.produce(topic, key=key, value=key)
            plain.flush(30)
        return {r.key: r.partition for r in kafka_broker.read(topic)}

    for topic in ("chosen-crc-markers", "chosen-default-markers"):
        kafka_broker.create_topic(topic, config={"cleanup.policy": "compact"})
    chosen = sinks.kafka(kafka_broker.bootstrap, "t",
                         options={"kafka.partitioner": "consistent_random"})
    crc = placed("chosen-crc", chosen.settings)
    default = placed("chosen-default", sinks.kafka(kafka_broker.bootstrap, "t").settings)
    assert crc == placed("plain-crc", {"bootstrap.servers": kafka_broker.bootstrap,
                                       "partitioner": "consistent_random"}, writer=False)
    assert default == placed("plain-murmur2", {"bootstrap.servers": kafka_broker.bootstrap,
                                               "partitioner": "murmur2_random"}, writer=False)
    assert crc != default


def test_librdkafkas_lines_about_a_handled_fencing_go_to_debug(caplog):
    from sparkcast.spark.outputs import kafka_client

    fenced = ("FATAL [rdkafka#producer-4] [thrd:main]: Fatal error: Local: This instance has "
              "been fenced by a newer instance: Failed to add partitions to transaction")
    kafka_client.LOG.critical(fenced)
    kafka_client.LOG.error("TXNERR [rdkafka#producer-1] [thrd:main]: broker down")
    assert [(r.levelname, r.getMessage()[:6]) for r in caplog.records] == [("ERROR", "TXNERR")]
    with caplog.at_level(logging.DEBUG, logger=kafka_client.LOG.name):
        kafka_client.LOG.critical(fenced)
    assert caplog.records[-1].levelname == "DEBUG"


def test_kafka_delta_files_and_a_users_sink_in_one_query(spark, tmp_path, kafka_broker):
    """Kafka and Delta beside ``files`` and a user's sink: each exactly once (the user's
    at-least-once) across a replay of the last batch."""
    topics = _topics(kafka_broker, "mixed")
    seen: list[int] = []

    class Counting:
        def write(self, frame, output, batch_id):
            seen.append(batch_id)

    chosen = {"main": sinks.kafka(kafka_broker.bootstrap, topics["main"]),
              "big": sinks.delta(str(tmp_path / "big-delta")),
              "dead_letters": sinks.files(str(tmp_path / "letters"))}
    pipeline.write_inputs(tmp_path, [0, 1, 2])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, chosen)
    _forget_last_commit(tmp_path)
    pipeline.write_inputs(tmp_path, [3])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path,
                 {**chosen, "dead_letters": Counting()})
    assert query.exception() is None
    want = pipeline.expected("streamed")
    assert _rows(kafka_broker, {"main": topics["main"]})["main"] == want["main"]
    delta = spark.read.format("delta").load(str(tmp_path / "big-delta"))
    assert Counter(tuple(r) for r in delta.collect()) == want["big"]
    assert seen == [2, 3]  # the replayed batch 2 reached the at-least-once sink again
    letters = read_output(spark, str(tmp_path / "letters"), "dead_letters").collect()
    assert len(letters) > 0


def test_delta_skips_a_replayed_batch_it_committed(spark, tmp_path):
    """Delta's own idempotent writes: the replayed batch's commit carries the same
    ``txnAppId``/``txnVersion``, and Delta writes it once."""
    pipeline.write_inputs(tmp_path, [0, 1])
    chosen = {name: sinks.delta(str(tmp_path / f"delta-{name}")) for name in pipeline.TABLES}
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    _forget_last_commit(tmp_path)
    pipeline.write_inputs(tmp_path, [2])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path, chosen)
    want = pipeline.expected("partitioned", 3)
    main = spark.read.format("delta").load(str(tmp_path / "delta-main")).collect()
    assert Counter(tuple(r) for r in main) == want["main"]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'delta-main'}`").collect()
    assert len(history) == 3  # batches 0, 1, 2: the replay of 1 added no version


def test_sinks_are_checked_before_the_query_starts(spark, tmp_path, kafka_broker):
    result = pipeline.build(spark, tmp_path, "streamed")
    letters = {"dead_letters": sinks.files(str(tmp_path / "letters")),
               "big": sinks.files(str(tmp_path / "letters"))}
    with pytest.raises(SinkError, match="topic 'no-such-topic' does not exist"):
        result.write_stream(checkpoint_location=str(tmp_path / "c1"), sinks={
            **letters, "main": sinks.kafka(kafka_broker.bootstrap, "no-such-topic")})
    kafka_broker.create_topic("checked")
    with pytest.raises(SinkError, match="key column 'user' is not a column"):
        result.write_stream(checkpoint_location=str(tmp_path / "c2"), sinks={
            **letters, "main": sinks.kafka(kafka_broker.bootstrap, "checked", key="user")})
    for headers, key, message in [
            ("trace", None, "headers column 'trace' is not a column"),
            ("scaled", None, "headers column 'scaled' is double; a record's headers are a "
                             "map<string,string>"),
            ("id", "id", "headers column 'id' is bigint")]:
        with pytest.raises(SinkError, match=message):
            result.write_stream(checkpoint_location=str(tmp_path / "c3"), sinks={
                **letters, "main": sinks.kafka(kafka_broker.bootstrap, "checked", key=key,
                                               headers=headers)})


def test_a_secret_in_the_options_never_shows_in_an_error(spark, tmp_path, kafka_broker):
    """SASL settings pass through to the producers; a failure names the sink, never them."""
    kafka_broker.create_topic("secret")
    result = pipeline.build(spark, tmp_path, "streamed")
    secret = "hunter2-s3cr3t"
    sink = sinks.kafka(kafka_broker.bootstrap, "secret", options={
        "kafka.security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "app", "sasl.password": secret, "socket.timeout.ms": "3000",
        "message.timeout.ms": "5000"})
    assert secret not in repr(sink) and secret not in sink.describe()
    with pytest.raises(SinkError) as refused:
        result.write_stream(checkpoint_location=str(tmp_path / "c"), sinks={
            "main": sink, "big": sinks.files(str(tmp_path / "o")),
            "dead_letters": sinks.files(str(tmp_path / "o"))})
    assert secret not in str(refused.value)


def test_a_checkpoint_keeps_its_parallelism(spark, tmp_path, kafka_broker):
    topics = _topics(kafka_broker, "parts")
    pipeline.write_inputs(tmp_path, [0])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path,
         _kafka_sinks(kafka_broker, topics))
    pipeline.write_inputs(tmp_path, [1])
    with pytest.raises(SinkError, match="keep the parallelism the checkpoint started with"):
        pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, {
            output: sinks.kafka(kafka_broker.bootstrap, topic, parallelism=2)
            for output, topic in topics.items()})  # refused before the query starts
    shutil.rmtree(tmp_path / "checkpoint")


def _markers(broker, checkpoint: Path) -> dict[str, dict]:
    """The query's markers (``key → record``, the newest of each key) from its marker topic."""
    [topic] = set(json.loads((checkpoint / "sparkcast" / "kafka-markers.json")
                             .read_text()).values())
    return {record.key: json.loads(record.value) for record in broker.read(topic)}


def _phases(spark, query) -> Counter:
    """The Spark jobs of the query's run, by the phase their description names
    (``execution/phases.py``)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    found = [jobs.apply(i) for i in range(jobs.size())]
    return Counter(job.description().get().rpartition("sparkcast: ")[2] for job in found
                   if job.jobGroup().isDefined() and job.jobGroup().get() == str(query.runId)
                   and job.description().isDefined())


def test_a_keyed_querys_own_tasks_write_its_kafka_and_files_outputs_in_one_job(
        spark, tmp_path, kafka_broker, caplog):
    """On the micro-batch engine by subtask, with Kafka and files sinks only, the pattern's
    tasks write the outputs: one Spark job a batch besides the broadcast rows' (no sink job,
    no count over a persisted frame), each subtask's rows of an output in one transaction
    (markers by subtask, one part per subtask), the dead letters of malformed lines in one more
    part. Every output equals the harness, the batch's counts reach the progress, a sink's
    parallelism (which the subtasks replace) is logged as not applying, and a replay of a batch
    Kafka committed writes nothing twice."""
    topics = _topics(kafka_broker, "in-tasks")
    del topics["big"]
    chosen = {**_kafka_sinks(kafka_broker, topics, parallelism=5),
              "big": sinks.files(str(tmp_path / "big"))}
    pipeline.write_inputs(tmp_path, [0, 1])
    warned = "micro-batch 1: 2 dead letter(s) (input 1, process_element 1)"
    with caplog.at_level("WARNING", logger="sparkcast"):
        query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path,
                                    chosen)
        deadline = time.monotonic() + 30  # the listener bus is asynchronous
        while warned not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.1)
    assert query.exception() is None
    assert warned in caplog.text  # the counts the tasks took reached the listener
    assert ("output 'main', sink kafka(" in caplog.text
            and "parallelism=5 does not apply: the pattern's 3 subtasks" in caplog.text)
    assert set(_phases(spark, query)) == {"the pattern, its outputs written by its tasks",
                                          "broadcast rows"}
    markers = _markers(kafka_broker, tmp_path / "checkpoint")
    assert {(m["by"], m["parts"]) for m in markers.values()} == {("subtask", 3)}
    assert any(key.endswith("/dead_letters/3") for key in markers)  # the malformed lines
    _forget_last_commit(tmp_path)
    pipeline.write_inputs(tmp_path, [2, 3])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path,
                                chosen)
    assert query.exception() is None
    want = pipeline.expected("partitioned")
    assert _rows(kafka_broker, topics) == {output: want[output] for output in topics}
    big = read_output(spark, str(tmp_path / "big"), "big").collect()
    assert Counter((r["id"], r["scaled"]) for r in big) == want["big"]


def test_a_checkpoint_the_driver_wrote_kafka_for_keeps_the_drivers_parts(spark, tmp_path,
                                                                         kafka_broker):
    """A checkpoint whose Kafka parts the driver split by key (a user's sink beside Kafka, as
    every checkpoint before the tasks wrote) replays its batch the same way when the user's
    sink goes: exactly once. A checkpoint the tasks wrote is refused a sink only the driver
    writes, with the reason."""
    topics = _topics(kafka_broker, "by-key")
    del topics["big"]

    class Ignoring:
        def write(self, frame, output, batch_id):
            pass

    pipeline.write_inputs(tmp_path, [0, 1])
    pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path,
                        {**_kafka_sinks(kafka_broker, topics), "big": Ignoring()})
    _forget_last_commit(tmp_path)
    pipeline.write_inputs(tmp_path, [2])
    chosen = {**_kafka_sinks(kafka_broker, topics), "big": sinks.files(str(tmp_path / "big"))}
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "partitioned"), tmp_path,
                                chosen)
    assert query.exception() is None
    want = pipeline.expected("partitioned", 3)
    assert _rows(kafka_broker, topics) == {output: want[output] for output in topics}
    assert {m["by"] for m in _markers(kafka_broker, tmp_path / "checkpoint").values()} == {
        "key"}

    other = tmp_path / "tasks"
    pipeline.write_inputs(other, [0])
    topics = _topics(kafka_broker, "by-subtask")
    del topics["big"]
    pipeline.run_to_end(pipeline.build(spark, other, "partitioned"), other,
                        {**_kafka_sinks(kafka_broker, topics),
                         "big": sinks.files(str(other / "big"))})
    pipeline.write_inputs(other, [1])
    with pytest.raises(SinkError, match="written by the pattern's tasks, one per subtask"):
        pipeline.run_to_end(pipeline.build(spark, other, "partitioned"), other,
                            {**_kafka_sinks(kafka_broker, topics), "big": Ignoring()})


def test_a_copy_of_a_checkpoint_writes_kafka_as_a_job_of_its_own(spark, tmp_path, kafka_broker):
    """``state copy`` beside the original: the copy's markers go to a marker topic of its own
    (it wrote into the original's before), its replay of a batch after a kill writes every row
    once; a copy whose sink names the original's ``transactional_id_prefix`` is refused with
    the fix (it read the original's markers as its own and skipped a batch before)."""
    from sparkcast.cli import main
    from sparkcast.spark.outputs import kafka_markers
    from sparkcast.spark.state import checkpoint_files

    for topic in ("original-main", "copy-main"):
        kafka_broker.create_topic(topic, partitions=3)
    files = {"big": sinks.files(str(tmp_path / "out")),
             "dead_letters": sinks.files(str(tmp_path / "out"))}
    shared = {"main": sinks.kafka(kafka_broker.bootstrap, "original-main", parallelism=3,
                                  transactional_id_prefix="shop"), **files}
    pipeline.write_inputs(tmp_path, [0, 1])
    original = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, shared)
    copy = tmp_path / "copy"
    assert main(["state", "copy", str(tmp_path / "checkpoint"), str(copy / "checkpoint")]) == 0
    files = {"big": sinks.files(str(copy / "out")),
             "dead_letters": sinks.files(str(copy / "out"))}

    def run_copy(chosen):  # the same inputs, the copy's checkpoint and file outputs
        return pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), copy, chosen)

    pipeline.write_inputs(tmp_path, [2])
    with pytest.raises(SinkError, match="a copy of another.*give the copy's sink a "
                                        "transactional_id_prefix of its own"):
        run_copy({**files, "main": sinks.kafka(kafka_broker.bootstrap, "copy-main",
                                               parallelism=3, transactional_id_prefix="shop")})
    own = {**files, "main": sinks.kafka(kafka_broker.bootstrap, "copy-main", parallelism=3)}
    first = run_copy(own)
    assert first.exception() is None
    assert _forget_last_commit(copy) == 2
    pipeline.write_inputs(tmp_path, [3])
    replay = run_copy(own)
    assert replay.exception() is None and replay.recentProgress[0]["batchId"] == 2
    recorded = checkpoint_files.read_json(str(copy / "checkpoint"),
                                          checkpoint_files.KAFKA_MARKERS_FILE)
    assert recorded == {"main": kafka_markers.own_topic(str(replay.id))}
    assert replay.id != original.id
    want = pipeline.expected("streamed")["main"] - pipeline.expected("streamed", 2)["main"]
    assert _rows(kafka_broker, {"main": "copy-main"})["main"] == want
    assert _rows(kafka_broker, {"main": "original-main"})["main"] == pipeline.expected(
        "streamed", 2)["main"]
