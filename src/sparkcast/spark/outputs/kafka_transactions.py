"""The task side of the exactly-once Kafka sink: one Kafka transaction per part of a micro-batch.

A part's rows and its marker record go to Kafka in ONE transaction of a producer whose
``transactional.id`` belongs to the part (``<prefix>-<output>-<part>``), so:

* the rows become visible to ``read_committed`` consumers together with the marker that says
  "part p of batch N is in", or neither does;
* a new producer of the same id fences every older one (``init_transactions``): a zombie
  attempt, on any host, can no longer commit, and its open transaction is aborted;
* a retried task (``attemptNumber() > 0``) first reads the markers and skips a part that an
  earlier attempt committed; the driver does the same once per run (``kafka.py``).

Producers are kept per worker process between micro-batches (Python workers are reused), so a
part pays ``init_transactions`` once, not per batch. This module is what the tasks unpickle:
it imports confluent-kafka and pyarrow only.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sparkcast.errors import MissingDependencyError, SinkError

#: seconds a read of the markers may take to reach the end of the marker topic
MARKER_WAIT = 120.0
#: the producers' defaults (the user's options win): a keyed record goes to the partition a Java
#: client, Kafka Streams, Flink or Spark's Kafka sink puts its key in (murmur2 of the key;
#: librdkafka's own default, ``consistent_random``, hashes with CRC32 and puts most keys
#: elsewhere); a part's transaction may stay open a minute
PRODUCER_DEFAULTS = {"linger.ms": 5, "transaction.timeout.ms": 60000,
                     "partitioner": "murmur2_random"}
#: librdkafka's own log lines (a broker that went away, retries) go to Python's logging here,
#: not to the worker's stderr; its errors surface as exceptions where they matter
LOG = logging.getLogger("sparkcast.kafka")
_PRODUCERS: dict[str, Any] = {}
#: records per ``produce_batch`` call
PRODUCE_CHUNK = 10_000
#: a marker's ``by``: the driver split the rows into parts by their key's hash (markers
#: written before ``by`` existed say nothing, and were all written so), or each subtask of the
#: pattern wrote its own rows as its part
PARTS_BY_KEY, PARTS_BY_SUBTASK = "key", "subtask"


class HandledFencing(logging.Filter):
    """librdkafka logs a producer that a newer one of its ``transactional.id`` fenced as a fatal
    error. The part writer handles exactly that (a fresh producer writes the part, or a
    ``SinkError`` names it), and it happens whenever another Python worker took a part in a
    later batch, so these lines go to DEBUG instead of alarming a reader of the logs."""

    SIGNS = ("fenced by a newer instance", "with an old epoch")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and any(s in record.getMessage() for s in self.SIGNS):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return LOG.isEnabledFor(logging.DEBUG)
        return True


LOG.addFilter(HandledFencing())


def client() -> Any:
    """confluent-kafka (its ``admin`` module loaded too), or the error naming the extra."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401  (not loaded by the package itself)
    except ImportError as error:
        raise MissingDependencyError(
            "the Kafka sink needs confluent-kafka: pip install 'sparkcast[kafka]'") from error
    return confluent_kafka


def librdkafka_settings(options: dict[str, str]) -> dict[str, Any]:
    """The user's client settings; Spark's ``kafka.`` prefix (as on Spark's Kafka source) is
    accepted and dropped. librdkafka's log lines go to the ``sparkcast.kafka`` logger."""
    return {"logger": LOG, **{key.removeprefix("kafka."): value for key, value in
                              options.items()}}


def marker_prefix(prefix: str, output: str) -> str:
    """What the marker keys of one output's parts start with."""
    return f"{prefix}/{output}/"


def marker_key(prefix: str, output: str, part: int) -> str:
    return f"{marker_prefix(prefix, output)}{part}"


def read_markers(settings: dict[str, Any], topic: str, committed: bool = True
                 ) -> dict[str, dict[str, int]]:
    """The newest committed marker (``batch``, ``parts``) of every key in ``topic``, read with
    ``read_committed``: the read ends at the first transaction still open in the topic
    (librdkafka's end of a partition is then its last stable offset), so a marker committed
    behind one is not seen; the driver fences its own parts before it reads its own topic
    (``kafka.py``). ``committed=False``: the keys of aborted and open markers too."""
    kafka = client()
    isolation = "read_committed" if committed else "read_uncommitted"
    consumer = kafka.Consumer({**settings, "group.id": f"sparkcast-markers-{uuid.uuid4()}",
                               "isolation.level": isolation,
                               "enable.auto.commit": False, "enable.partition.eof": True,
                               "auto.offset.reset": "earliest"})
    try:
        found = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        consumer.assign([kafka.TopicPartition(topic, p, kafka.OFFSET_BEGINNING) for p in found])
        return _consume_markers(consumer, kafka, set(found))
    finally:
        consumer.close()


def _consume_markers(consumer: Any, kafka: Any, pending: set[int]
                     ) -> dict[str, dict[str, int]]:
    markers: dict[str, dict[str, int]] = {}
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
            if int(record["batch"]) >= markers.get(key, {}).get("batch", -1):
                markers[key] = {"batch": int(record["batch"]), "parts": int(record["parts"]),
                                "by": record.get("by", PARTS_BY_KEY)}
    return markers


def producer(settings: dict[str, Any], transactional_id: str, fresh: bool = False) -> Any:
    """This worker's producer of ``transactional_id``, initialised (which fences older ones),
    with ``PRODUCER_DEFAULTS`` under the user's settings."""
    if not fresh and transactional_id in _PRODUCERS:
        return _PRODUCERS[transactional_id]
    _PRODUCERS.pop(transactional_id, None)
    made = client().Producer({**PRODUCER_DEFAULTS, **settings,
                              "transactional.id": transactional_id})
    made.init_transactions(60)
    _PRODUCERS[transactional_id] = made
    return made


def fence(settings: dict[str, Any], transactional_id: str) -> None:
    """Abort whatever transaction an earlier producer of the id left open (a producer that
    initialises the id does; it is not kept: the tasks make their own)."""
    _PRODUCERS.pop(transactional_id, None)
    client().Producer({**settings, "transactional.id": transactional_id}).init_transactions(60)


@dataclass(frozen=True)
class PartWriter:
    """``mapInArrow``'s function: one part of one output's micro-batch into its topic."""

    settings: dict[str, Any] = field(repr=False)  # secrets: never in a message
    topic: str
    marker_topic: str
    prefix: str
    output: str
    batch_id: int
    parts: int
    committed: frozenset[int]
    #: how rows were given their part: by the record key's hash (the driver's shuffle), or
    #: by the pattern's subtask (written by its tasks); recorded in every marker
    by: str = PARTS_BY_KEY

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        rows = [b for b in batches if b.num_rows]
        written = 0
        if rows and not self.committed_part(part, context):
            written = self.write_part(part, rows)
        yield pa.RecordBatch.from_pydict({"part": [part], "records": [written]},
                                         schema=pa.schema([("part", pa.int32()),
                                                           ("records", pa.int64())]))

    def committed_part(self, part: int, context: Any) -> bool:
        """Whether ``part`` of the batch is in Kafka: known at the start of the run, or read
        by a retried task (``context``: the task's)."""
        if part in self.committed:
            return True
        if context is None or context.attemptNumber() == 0:
            return False
        fence(self.settings, self._transactional_id(part))  # the earlier attempt cannot commit
        markers = read_markers(self.settings, self.marker_topic)
        marker = markers.get(marker_key(self.prefix, self.output, part), {})
        return marker.get("batch", -1) >= self.batch_id

    def _transactional_id(self, part: int) -> str:
        return f"{self.prefix}-{self.output}-{part}"

    def write_part(self, part: int, batches: list[pa.RecordBatch]) -> int:
        """The part's ``key``/``value`` rows in one transaction with its marker; once more with
        a fresh producer if this worker's was fenced or left stuck in an earlier transaction."""
        transactional_id = self._transactional_id(part)
        try:
            return self._transaction(producer(self.settings, transactional_id), part, batches)
        except client().KafkaException as error:
            _PRODUCERS.pop(transactional_id, None)
            if not _fenced(error) and not _stuck(error):
                raise self._failed(part, error) from error
        try:
            return self._transaction(producer(self.settings, transactional_id, fresh=True),
                                     part, batches)
        except client().KafkaException as error:
            _PRODUCERS.pop(transactional_id, None)
            raise self._failed(part, error) from error

    def _failed(self, part: int, error: Any) -> SinkError:
        return SinkError(f"output {self.output!r}, Kafka topic {self.topic!r}: writing part "
                         f"{part} of micro-batch {self.batch_id} failed "
                         f"({error.args[0].str()}); its transaction was aborted")

    def _transaction(self, kafka_producer: Any, part: int, batches: list[pa.RecordBatch]
                     ) -> int:
        kafka_producer.begin_transaction()
        try:
            count = 0
            for batch in batches:
                keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
                _produce_in_order(kafka_producer, self.topic, keys, values)
                count += batch.num_rows
            marker = json.dumps({"batch": self.batch_id, "parts": self.parts, "by": self.by})
            _produce(kafka_producer, self.marker_topic,
                     marker_key(self.prefix, self.output, part), marker)
            kafka_producer.commit_transaction(120)
            return count
        except BaseException:
            _abort(kafka_producer)
            raise


def _produce_in_order(kafka_producer: Any, topic: str, keys: list[Any], values: list[Any]
                      ) -> None:
    """The records in order, ``PRODUCE_CHUNK`` to a ``produce_batch`` call (one call for many
    records: the per-record ``produce`` call was most of a part's Python time). When the local
    queue fills, the records it refused are the chunk's last ones: deliveries drain the queue
    and they go again, still in order."""
    for start in range(0, len(values), PRODUCE_CHUNK):
        pending = [_message(key, value) for key, value in
                   zip(keys[start:start + PRODUCE_CHUNK], values[start:start + PRODUCE_CHUNK],
                       strict=True)]
        while pending:
            kafka_producer.produce_batch(topic, pending)
            refused = [i for i, message in enumerate(pending) if "_error" in message]
            if not refused:
                break
            error = pending[refused[0]]["_error"]
            if refused != list(range(refused[0], len(pending))):
                raise SinkError(f"Kafka topic {topic!r}: the producer refused records out of "
                                "order; the part's transaction is aborted")
            if error.code() != client().KafkaError._QUEUE_FULL:
                raise client().KafkaException(error)
            pending = [_message(m.get("key"), m["value"]) for m in pending[refused[0]:]]
            kafka_producer.poll(0.05)


def _message(key: Any, value: Any) -> dict[str, Any]:
    return {"value": value} if key is None else {"key": key, "value": value}


def _produce(kafka_producer: Any, topic: str, key: str | None, value: str | None) -> None:
    while True:
        try:
            kafka_producer.produce(topic, value=value, key=key)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            kafka_producer.poll(0.05)


def _abort(kafka_producer: Any) -> None:
    try:
        kafka_producer.abort_transaction(60)
    except Exception:  # a fenced or fatal producer cannot abort; fencing aborts for it
        pass


def _stuck(error: Any) -> bool:
    """A cached producer left where it cannot begin this part's transaction: an earlier
    transaction that needs an abort, or one whose commit or abort never completed (librdkafka's
    local ``_STATE``, "Operation not valid in state ..."). A fresh producer of the id aborts
    what it left open (``init_transactions``) and writes the part."""
    kafka_error = error.args[0] if error.args else None
    return bool(kafka_error is not None and (
        kafka_error.txn_requires_abort() or kafka_error.code() == client().KafkaError._STATE))


def _fenced(error: Any) -> bool:
    """A producer fenced or made fatal, most often by another Python worker that initialised
    the same part's id in a later micro-batch (tasks of a part land on any worker): a fresh
    producer goes on. librdkafka reports it from ``produce`` as the local ``_FATAL`` code."""
    kafka_error = error.args[0] if error.args else None
    kafka = client().KafkaError
    return bool(kafka_error is not None and (kafka_error.fatal() or kafka_error.code() in (
        kafka._FATAL, kafka._FENCED, kafka.PRODUCER_FENCED, kafka.INVALID_PRODUCER_EPOCH)))
