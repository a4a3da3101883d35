"""Every attempt of a Kafka part finds out exactly whether the part is in before it writes, and
of two live attempts of one part only one commits: the sink's own ``PartWriter`` on a REAL
broker, each attempt in a process of its own (``kafka_attempt.py``: another Python worker), read
back with ``read_committed``. Before this protocol each of these wrote the part twice:

* a retried task read the markers only up to a sibling part's open transaction;
* an attempt fenced by a newer one made a fresh producer and wrote the part again;
* a re-attempted stage's tasks start at attempt number 0, which skipped the marker check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from sparkcast.errors import SinkError
from sparkcast.spark.outputs import kafka_client
from sparkcast.spark.outputs import kafka_transactions as tx

ROOT = Path(__file__).resolve().parents[2]


def _topics(broker, name, marker_partitions=1):
    broker.create_topic(name)
    broker.create_topic(f"{name}-markers", partitions=marker_partitions,
                        config={"cleanup.policy": "compact"})
    return name, f"{name}-markers"


def _attempt(broker, topic, part, batch, rows=100, marker_partitions=1, hold=None, parts=2):
    args = {"bootstrap": broker.bootstrap, "topic": topic, "markers": f"{topic}-markers",
            "prefix": topic, "part": part, "batch": batch, "rows": rows, "parts": parts,
            "marker_partitions": marker_partitions, "hold": str(hold) if hold else None}
    command = [sys.executable, "-m", "tests.spark.kafka_attempt", json.dumps(args)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _outcome(process, timeout=180):
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1]), err


def _open_sibling(broker, topic, part, partition=0):
    """Part ``part``'s producer in the middle of its commit: its marker is on the broker, its
    transaction open."""
    sibling = Producer(broker.client_config(**{"transactional.id": f"{topic}-main-{part}"}))
    sibling.init_transactions(30)
    sibling.begin_transaction()
    sibling.produce(f"{topic}-markers", key=f"{topic}/main/{part}", partition=partition,
                    value=json.dumps({"batch": 9, "parts": 2, "by": "key"}))
    sibling.flush(30)
    return sibling


def _values(broker, topic):
    return [r.value for r in broker.read(topic)]


def test_a_retry_finds_its_committed_part_behind_a_siblings_open_transaction(kafka_broker):
    """One marker partition (an older checkpoint's topic): part 1 of batch 5 is committed
    behind part 0's open transaction; part 1's retry on another worker waits for that
    transaction to end (here it commits 3 s later) instead of answering "not in" at it."""
    topic, _ = _topics(kafka_broker, "behind-sibling")
    first, _ = _outcome(_attempt(kafka_broker, topic, part=1, batch=5))
    assert first == {"written": 100}
    sibling = _open_sibling(kafka_broker, topic, part=0)
    threading.Timer(3.0, lambda: sibling.commit_transaction(30)).start()
    started = time.monotonic()
    retry, _ = _outcome(_attempt(kafka_broker, topic, part=1, batch=5))
    assert retry == {"written": None}
    assert time.monotonic() - started >= 2.5  # it waited for the sibling, it did not guess
    assert sorted(_values(kafka_broker, topic)) == sorted(f"5-{i}" for i in range(100))


def test_with_a_marker_partition_per_part_a_retry_waits_on_no_sibling(kafka_broker):
    """A query's own marker topic has a partition per part: part 0's open transaction (never
    ended here) does not hold back part 1's answer."""
    topic, _ = _topics(kafka_broker, "own-partition", marker_partitions=2)
    first, _ = _outcome(_attempt(kafka_broker, topic, part=1, batch=5, marker_partitions=2))
    assert first == {"written": 100}
    sibling = _open_sibling(kafka_broker, topic, part=0, partition=0)
    try:
        retry, _ = _outcome(_attempt(kafka_broker, topic, part=1, batch=5, marker_partitions=2),
                            timeout=60)
        assert retry == {"written": None}
    finally:
        sibling.abort_transaction(30)
    assert sorted(_values(kafka_broker, topic)) == sorted(f"5-{i}" for i in range(100))


def test_of_two_live_attempts_of_one_part_one_commits_and_the_other_gives_way(kafka_broker,
                                                                              tmp_path):
    """Attempt A has produced its rows and is held before its marker; attempt B of the same
    part (a speculative copy) fences it, finds the part not in and commits it; A, let go, is
    fenced: it fails naming the fight, and never writes the part again."""
    topic, _ = _topics(kafka_broker, "two-attempts")
    holder = _attempt(kafka_broker, topic, part=0, batch=3, hold=tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / "held").exists():
        assert holder.poll() is None and time.monotonic() < deadline, holder.stderr.read()
        time.sleep(0.05)
    newer, _ = _outcome(_attempt(kafka_broker, topic, part=0, batch=3))
    assert newer == {"written": 100}
    (tmp_path / "go").touch()
    older, logged = _outcome(holder)
    assert "fenced by a newer attempt" in older["error"]
    assert "part 0 of micro-batch 3 was fenced by a newer attempt" in logged  # a WARNING
    assert sorted(_values(kafka_broker, topic)) == sorted(f"3-{i}" for i in range(100))


def test_a_re_attempted_stage_at_attempt_number_0_skips_the_part_it_committed(kafka_broker):
    """A stage re-attempt runs its tasks at attempt number 0 again: on the worker that committed
    the part (its kept producer knows) and on another worker (its exact read) the part is
    skipped; the driver-split path (``PartWriter.__call__``) the same."""
    topic, markers = _topics(kafka_broker, "re-attempt")
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap})
    writer = tx.PartWriter(settings, topic, markers, topic, "main", 7, 1, frozenset())
    rows = pa.RecordBatch.from_pydict({"key": [None] * 100,
                                       "value": [f"7-{i}" for i in range(100)]})
    assert writer.write_once(0, [rows]) == 100
    assert writer.write_once(0, [rows]) is None  # the same worker, the stage again
    assert [r["records"] for r in
            pa.Table.from_batches(list(writer([rows]))).to_pylist()] == [0]
    elsewhere, _ = _outcome(_attempt(kafka_broker, topic, part=0, batch=7, parts=1))
    assert elsewhere == {"written": None}
    assert sorted(_values(kafka_broker, topic)) == sorted(f"7-{i}" for i in range(100))


@pytest.mark.parametrize("kept_first", [True, False])
def test_the_next_batch_of_a_part_is_written_after_the_exact_read(kafka_broker, kept_first):
    """The protocol skips only what is in: batch 8 after batch 7 is written, by the worker that
    wrote batch 7 and by another."""
    topic, markers = _topics(kafka_broker, f"next-batch-{kept_first}")
    first, _ = _outcome(_attempt(kafka_broker, topic, part=0, batch=7, rows=5, parts=1))
    assert first == {"written": 5}
    if kept_first:
        settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap})
        writer = tx.PartWriter(settings, topic, markers, topic, "main", 8, 1, frozenset())
        rows = pa.RecordBatch.from_pydict({"key": [None] * 5,
                                           "value": [f"8-{i}" for i in range(5)]})
        assert writer.write_once(0, [rows]) == 5
    else:
        assert _outcome(_attempt(kafka_broker, topic, part=0, batch=8, rows=5,
                                 parts=1))[0] == {"written": 5}
    assert sorted(_values(kafka_broker, topic)) == sorted(
        [f"7-{i}" for i in range(5)] + [f"8-{i}" for i in range(5)])


def test_a_moved_part_is_made_ready_while_the_pattern_runs_and_still_gives_way(kafka_broker):
    """Spark gives a batch's tasks whichever Python workers are idle, so a part often moves to
    a worker whose kept producer another worker has fenced since. ``prepare`` (called as the
    task starts, before its rows arrive) makes a fresh producer ready in the background, and
    that producer is the attempt's own: fenced by a newer attempt of the batch, it gives way."""
    topic, markers = _topics(kafka_broker, "prepared", marker_partitions=2)
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": kafka_broker.bootstrap})
    transactional_id = f"{topic}-main-0"

    def writer(batch):
        return tx.PartWriter(settings, topic, markers, topic, "main", batch, 1, frozenset(),
                             marker_partitions=2)

    def rows(batch):
        return pa.RecordBatch.from_pydict({"key": [None] * 20,
                                           "value": [f"{batch}-{i}" for i in range(20)]})

    def elsewhere(batch):
        return _outcome(_attempt(kafka_broker, topic, part=0, batch=batch, rows=20, parts=1,
                                 marker_partitions=2))[0]

    assert writer(0).write_once(0, [rows(0)]) == 20
    assert elsewhere(1) == {"written": 20}  # the part moved: this worker's producer is fenced
    moved = writer(2)
    moved.prepare(0)
    assert transactional_id in tx._PREPARING  # the kept one is of batch 0: not current
    assert moved.write_once(0, [rows(2)]) == 20
    assert tx.kept(transactional_id).used_for == 2
    again = writer(3)
    again.prepare(0)
    assert transactional_id not in tx._PREPARING  # used in the batch before: kept
    assert again.write_once(0, [rows(3)]) == 20
    assert elsewhere(4) == {"written": 20}
    superseded = writer(5)
    superseded.prepare(0)  # this attempt's own producer, initialised for batch 5
    assert transactional_id in tx._PREPARING
    assert elsewhere(5) == {"written": 20}  # a newer attempt of batch 5 fences it and writes
    with pytest.raises(SinkError, match="fenced by a newer attempt"):
        superseded.write_once(0, [rows(5)])
    assert sorted(_values(kafka_broker, topic)) == sorted(
        f"{batch}-{i}" for batch in range(6) for i in range(20))
