"""Reading the Kafka sink's markers: the newest marker of each part, read exactly.

A marker says "part p of output o's micro-batch N is in": the record ``(query, output, part) →
batch`` that a part's transaction commits with its rows (``kafka_transactions.py``). A read
takes each partition's high watermark and, for committed markers, waits until the partition's
last stable offset has reached it, so a marker committed behind a transaction still open is
waited for, never missed (a ``read_committed`` consumer alone would stop at that transaction).

Imported in the tasks: it imports confluent-kafka only.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.kafka_client import admin, client, forget_admin

#: seconds a read of the markers may wait for the transactions before its end to close (a
#: killed writer's is aborted by the broker after its ``transaction.timeout.ms``, 60 s here)
MARKER_WAIT = 120.0
#: a marker read ends at each partition's end, which librdkafka reports only after a fetch
#: finds nothing more; the broker holds such a fetch for ``fetch.wait.max.ms`` (500 ms by
#: default, so ~0.5 s per read) before it answers: the markers are a few records, so it is 10 ms
MARKER_FETCH_WAIT_MS = 10
#: a marker's ``by``: the driver split the rows into parts by their key's hash (markers
#: written before ``by`` existed say nothing, and were all written so), or each subtask of the
#: pattern wrote its own rows as its part
PARTS_BY_KEY, PARTS_BY_SUBTASK = "key", "subtask"


def marker_prefix(prefix: str, output: str) -> str:
    """What the marker keys of one output's parts start with."""
    return f"{prefix}/{output}/"


def marker_key(prefix: str, output: str, part: int) -> str:
    return f"{marker_prefix(prefix, output)}{part}"


def read_markers(settings: dict[str, Any], topic: str, committed: bool = True,
                 partitions: list[int] | None = None) -> dict[str, dict[str, Any]]:
    """The newest marker (``batch``, ``parts``, ``by``; ``query``, ``attempt``: None in
    markers written before they were recorded) of every key in ``topic``'s
    ``partitions`` (all by default), each read to the high watermark it has when the read
    starts. ``committed``: only committed markers, read with ``read_committed`` once the
    partition's last stable offset has reached that watermark, so a marker committed behind a
    transaction still open is waited for, never missed (``MARKER_WAIT``). ``committed=False``:
    the keys of aborted and open markers too, waiting for nothing."""
    kafka = client()
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = kafka.Consumer({**settings, "group.id": f"sparkcast-markers-{uuid.uuid4()}",
                               "isolation.level": isolation,
                               "enable.auto.commit": False, "enable.partition.eof": True,
                               "fetch.wait.max.ms": MARKER_FETCH_WAIT_MS,
                               "auto.offset.reset": "earliest"})
    try:
        found = sorted(consumer.list_topics(topic, timeout=30).topics[topic].partitions)
        chosen = found if partitions is None else [p for p in partitions if p in found]
        ends = _ends(settings, topic, chosen, committed)
        pending = {p for p in chosen if ends[p] > 0}
        consumer.assign([kafka.TopicPartition(topic, p, kafka.OFFSET_BEGINNING)
                         for p in pending])
        return _consume_markers(consumer, kafka, pending)
    finally:
        consumer.close()


def _ends(settings: dict[str, Any], topic: str, partitions: list[int], committed: bool
          ) -> dict[int, int]:
    """Each partition's high watermark now; for a committed read, once its last stable offset
    has reached it (the transactions before it have ended)."""
    kafka = client()
    deadline = time.monotonic() + MARKER_WAIT

    def latest(isolation: Any) -> dict[int, int]:
        asked = {kafka.TopicPartition(topic, p): kafka.admin.OffsetSpec.latest()
                 for p in partitions}
        while asked:
            asking = admin(settings)  # held until answered: a collected client never answers
            answers = asking.list_offsets(asked, isolation_level=isolation, request_timeout=30)
            try:
                return {tp.partition: future.result().offset for tp, future in answers.items()}
            except kafka.KafkaException as error:
                if not _leaders_moved(kafka, error) or time.monotonic() > deadline:
                    raise
                forget_admin(settings, asking)  # its leaders are stale: a new client asks
                time.sleep(0.2)
        return {}

    high = latest(kafka.IsolationLevel.READ_UNCOMMITTED)
    while committed and high:
        stable = latest(kafka.IsolationLevel.READ_COMMITTED)
        if all(stable[p] >= high[p] for p in high):
            break
        if time.monotonic() > deadline:
            raise SinkError(f"the Kafka sink's markers were not readable to their end in "
                            f"{MARKER_WAIT:.0f} s: a transaction before them stayed open")
        time.sleep(0.1)
    return high


def _leaders_moved(kafka: Any, error: Any) -> bool:
    """An offsets answer from stale leaders (a restarted broker, a topic just made, a leader
    moved), which librdkafka does not mark retriable: asked again, it is answered."""
    moved = {getattr(kafka.KafkaError, name) for name in (
        "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE", "_NOENT")}
    return bool(error.args) and error.args[0].code() in moved


def _consume_markers(consumer: Any, kafka: Any, pending: set[int]
                     ) -> dict[str, dict[str, Any]]:
    """The newest marker of each key, read to the end of every ``pending`` partition."""
    markers: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + MARKER_WAIT
    while pending:
        if time.monotonic() > deadline:
            raise SinkError(f"the Kafka sink's markers were not readable to their end in "
                            f"{MARKER_WAIT:.0f} s")
        message = consumer.poll(1.0)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == kafka.KafkaError._PARTITION_EOF:
                pending.discard(message.partition())
                continue
            raise SinkError(f"reading the Kafka sink's markers failed: {error.str()}")
        if message.key() is not None and message.value() is not None:
            record = json.loads(message.value())
            key = message.key().decode()
            attempt = record.get("attempt")  # the task attempt whose keyed state it holds
            if int(record["batch"]) >= markers.get(key, {}).get("batch", -1):
                markers[key] = {"batch": int(record["batch"]), "parts": int(record["parts"]),
                                "by": record.get("by", PARTS_BY_KEY),
                                "query": record.get("query"),
                                "attempt": attempt if isinstance(attempt, str) else None}
    return markers
