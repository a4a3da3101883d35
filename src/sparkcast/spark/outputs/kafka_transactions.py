"""The task side of the exactly-once Kafka sink: one Kafka transaction per part of a micro-batch.

A part's rows and its marker record go to Kafka in ONE transaction of a producer whose
``transactional.id`` belongs to the part (``<prefix>-<output>-<part>``), so the rows become
visible to ``read_committed`` consumers together with the marker that says "part p of batch N
is in" (and, written by the pattern's tasks, which task attempt's keyed state produced it:
``task_sinks.StagedState``), or neither does. Whether a part is in is decided by one protocol,
``PartWriter.write_once``, whatever attempt asks (a task's first attempt or its retry, a stage
re-attempt whose tasks start at attempt number 0 again, a speculative copy, a zombie whose
executor was declared lost) and on any worker:

* **an exact answer.** Initialising a producer of the part's id (``init_transactions``) fences
  every older producer of it, on any host: the broker completes or aborts what it left open.
  The attempt then reads the part's marker with ``read_committed`` to the high watermark taken
  after the fencing (``read_markers``): not to the end a sibling part's open transaction would
  put before it. New marker topics have a partition per part, so nothing but the part's own
  (fenced) transactions can hold that read back; on a one-partition topic of an older
  checkpoint it waits for its siblings' transactions to end;
* **a kept producer knows what it did.** A Python worker keeps its initialised producer of a
  part between micro-batches (in its one cache, ``state/worker_cache.py``: a producer evicted
  under its bound is initialised again, the exact path below), with the newest batch of the
  part that it read or committed.
  While no other producer initialised the id, every commit of the part since was this one's,
  so that batch is exact too: a stage re-attempt on the same worker skips the part it
  committed. Once another producer initialised the id, the kept one is fenced, and its next
  transaction fails without writing: the attempt then takes the exact path above (another
  worker took the part in a later batch, the usual case, or another attempt of this batch).
  A kept producer not used in the batch before is not tried at all: Spark gives a batch's
  tasks whichever workers are idle, so such a part has almost surely moved and been fenced;
* **made ready while the pattern runs.** A task that writes parts starts the exact path for
  each of them in a thread as it starts (``PartWriter.prepare``), when its worker keeps no
  current producer of the part, so the initialisation and the marker read (~0.15 s on a
  local broker) overlap the pattern instead of following it. Only the parts this task
  holds are prepared (``task_sinks``: the partition's subtasks), as initialising fences;
* **a superseded attempt gives way.** An attempt fenced after it initialised its own producer
  (a prepared one included: initialised for this batch) has been superseded by a newer
  attempt of the same part: it fails (``SinkError``, and a
  WARNING naming output, part and batch), never initialising again, so two attempts of one
  part never both commit; the newer one decides by the exact read.

The driver fences every part once per run and reads all markers the same way (``kafka.py``;
the reads: ``kafka_marker_reads.py``; the client library: ``kafka_client.py``).
Records with headers (``sinks.kafka(headers=...)``) are produced one call each
(``_produce_with_headers``): confluent-kafka's ``produce_batch`` takes no headers.
This module is what the tasks unpickle: it imports confluent-kafka and pyarrow only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pyarrow as pa

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.kafka_client import LOG, client
from sparkcast.spark.outputs.kafka_marker_reads import PARTS_BY_KEY, marker_key, read_markers
from sparkcast.spark.state.worker_cache import WORKER

#: the producers' defaults (the user's options win): a keyed record goes to the partition a Java
#: client, Kafka Streams, Flink or Spark's Kafka sink puts its key in (murmur2 of the key;
#: librdkafka's own default, ``consistent_random``, hashes with CRC32 and puts most keys
#: elsewhere); a part's transaction may stay open a minute
PRODUCER_DEFAULTS = {"linger.ms": 5, "transaction.timeout.ms": 60000,
                     "partitioner": "murmur2_random"}
#: records per ``produce_batch`` call
PRODUCE_CHUNK = 10_000


@dataclass
class KeptProducer:
    """A worker's initialised producer of one part's id, and the newest batch of the part it
    knows is in: read right after it was initialised, raised by each commit it made since."""

    producer: Any
    newest: int
    #: the batch this worker last initialised it for or committed with it
    used_for: int = -1
    #: the task attempt that ``newest``'s marker names (None: a marker without one)
    attempt: str | None = None

    def current(self, batch_id: int) -> bool:
        """Whether it may still hold the part's id at ``batch_id``: initialised for that batch
        or used in the one before. Older, another worker has almost surely taken the part in
        between (Spark gives a batch's tasks whichever workers are idle), so the kept producer
        is fenced and a transaction through it would only fail."""
        return self.used_for >= batch_id - 1


#: transactional id -> this worker's producer of it, in the worker's cache
#: (``state/worker_cache.py``): an evicted one is initialised again, as on a new worker
_KEPT = WORKER.section("kept producers", "taken while its transactional id was not "
                       "initialised again and its last write did not fail (either drops it)")


def kept(transactional_id: str) -> KeptProducer | None:
    """This worker's producer of ``transactional_id``, if it keeps one."""
    return _KEPT.get(transactional_id)


#: transactional id -> a producer being made ready (``PartWriter.prepare``), not yet kept
_PREPARING: dict[str, Future[KeptProducer]] = {}


@cache
def _background() -> ThreadPoolExecutor:
    """The worker's threads that make producers ready (one per part a task may write)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="sparkcast-kafka")


def _settle(transactional_id: str) -> None:
    """Keep the producer being made ready for ``transactional_id``, once it is (a failure to
    make it is the write's to meet again: the exact path initialises afresh)."""
    preparing = _PREPARING.pop(transactional_id, None)
    if preparing is None:
        return
    try:
        _KEPT.put(transactional_id, preparing.result())
    except Exception as error:  # noqa: BLE001  (met again, and raised, by the write)
        LOG.debug(f"making producer {transactional_id!r} ready failed: {error}")


def initialised(settings: dict[str, Any], transactional_id: str, topic: str) -> Any:
    """A new producer of ``transactional_id``, initialised: every older producer of the id, on
    any host, is fenced, and what it left open is completed or aborted by the broker.

    ``topic``'s metadata (a topic that exists) is asked for twice first. librdkafka looks for
    the transaction coordinator as soon as ``init_transactions`` is called, and when no broker
    connection is up it looks again on a fixed 500 ms timer. A new producer's first request
    goes to its bootstrap address, which librdkafka drops once the answer names the brokers,
    before it connects to them: so one new producer in four or five waited half a second. The
    second request connects to a named broker (36 of 36 inits in ~0.06 s, against 8 of 36
    taking 0.5 s, on a local broker)."""
    made = client().Producer({**PRODUCER_DEFAULTS, **settings,
                              "transactional.id": transactional_id})
    for _ in range(2):
        made.list_topics(topic, timeout=30)
    made.init_transactions(60)
    return made


def fence(settings: dict[str, Any], transactional_id: str, topic: str) -> None:
    """Fence every producer of the id (the driver, before it reads the markers of a run);
    ``topic``: as for :func:`initialised`."""
    _KEPT.pop(transactional_id)
    initialised(settings, transactional_id, topic)


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
    #: the parts the driver read as committed at the start of the run
    committed: frozenset[int]
    #: how rows were given their part: by the record key's hash (the driver's shuffle), or
    #: by the pattern's subtask (written by its tasks); recorded in every marker
    by: str = PARTS_BY_KEY
    #: the marker topic's partitions: part p's marker goes to partition p modulo these
    marker_partitions: int = 1
    #: the query (Spark's id of the checkpoint) that writes: recorded in every marker, so
    #: another job's markers under the same prefix are told apart (``kafka.py``)
    query: str | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = context.partitionId() if context is not None else 0
        self.prepare(part)
        rows = [b for b in batches if b.num_rows]
        written = (self.write_once(part, rows) or 0) if rows else 0  # no state to name
        yield pa.RecordBatch.from_pydict({"part": [part], "records": [written]},
                                         schema=pa.schema([("part", pa.int32()),
                                                           ("records", pa.int64())]))

    def prepare(self, part: int) -> None:
        """Start making ``part``'s producer ready, in a thread, while the task's rows are still
        coming (the pattern runs meanwhile): when this worker keeps no current producer of the
        part, initialising one and reading its marker (~0.15 s) is otherwise paid after the
        rows arrived. Only for a part this task writes: initialising fences the id."""
        if part in self.committed:
            return
        transactional_id = self.transactional_id(part)
        _settle(transactional_id)
        mine = kept(transactional_id)
        if mine is None or not mine.current(self.batch_id):
            _KEPT.pop(transactional_id)
            _PREPARING[transactional_id] = _background().submit(self._initialise, part)

    def write_once(self, part: int, batches: list[pa.RecordBatch], attempt: str | None = None
                   ) -> int | None:
        """Write the part's rows in one transaction with its marker, which names the task
        ``attempt`` whose keyed state produced them, unless the part is in (None then); the
        records written otherwise. The module's docstring says why no attempt, on any worker,
        writes a part that is in, and why two never both commit."""
        if part in self.committed:
            return None
        transactional_id = self.transactional_id(part)
        _settle(transactional_id)
        mine = kept(transactional_id)
        if mine is not None and mine.used_for == self.batch_id - 1:
            try:  # the producer of the batch before: fenced if the part moved since
                return self._write_with(mine, part, batches, attempt)
            except client().KafkaException as error:
                _KEPT.pop(transactional_id)
                if not _fenced(error) and not _stuck(error):
                    raise self._failed(part, error) from error
            mine = None
        if mine is None or mine.used_for < self.batch_id:
            mine = _KEPT.put(transactional_id, self._initialise(part))
        try:  # initialised for this batch: fenced only by a newer attempt of the part
            return self._write_with(mine, part, batches, attempt)
        except client().KafkaException as error:
            _KEPT.pop(transactional_id)
            raise (self._superseded(part) if _fenced(error)
                   else self._failed(part, error)) from error

    def _initialise(self, part: int) -> KeptProducer:
        """A new producer of the part's id (every older one fenced) and the part's marker."""
        made = initialised(self.settings, self.transactional_id(part), self.marker_topic)
        marker = self.committed_marker(part)
        return KeptProducer(made, marker.get("batch", -1), self.batch_id, marker.get("attempt"))

    def committed_marker(self, part: int) -> dict[str, Any]:
        """The newest marker of ``part`` in Kafka (empty: none), read exactly: call it after the
        part's id was initialised, so no transaction of the part is left open."""
        partition = part % self.marker_partitions
        markers = read_markers(self.settings, self.marker_topic, partitions=[partition])
        return markers.get(marker_key(self.prefix, self.output, part), {})

    def named_attempt(self, part: int) -> str | None:
        """The task attempt that the part's marker of this batch names, as this worker read or
        committed it (None: not known here, or a marker without one). A part this task had no
        rows for is known too where the task made its producer ready (``prepare``: the exact
        read), so a retry whose run gave the part no rows still keeps the committed state."""
        transactional_id = self.transactional_id(part)
        _settle(transactional_id)
        mine = kept(transactional_id)
        return mine.attempt if mine is not None and mine.newest == self.batch_id else None

    def transactional_id(self, part: int) -> str:
        return f"{self.prefix}-{self.output}-{part}"

    def _write_with(self, mine: KeptProducer, part: int, batches: list[pa.RecordBatch],
                    attempt: str | None) -> int | None:
        """The part through ``mine``, unless it knows the part is in (None then)."""
        if mine.newest >= self.batch_id:
            return None
        count = self._transaction(mine.producer, part, batches, attempt)
        mine.newest = mine.used_for = self.batch_id
        mine.attempt = attempt
        return count

    def _superseded(self, part: int) -> SinkError:
        message = (f"output {self.output!r}, Kafka topic {self.topic!r}: part {part} of "
                   f"micro-batch {self.batch_id} was fenced by a newer attempt of the same "
                   "part (a speculative copy, a retry beside a zombie, a re-attempted stage); "
                   "this attempt gives way, the newer one writes the part once")
        LOG.warning(message)
        return SinkError(message)

    def _failed(self, part: int, error: Any) -> SinkError:
        return SinkError(f"output {self.output!r}, Kafka topic {self.topic!r}: writing part "
                         f"{part} of micro-batch {self.batch_id} failed "
                         f"({error.args[0].str()}); its transaction was aborted")

    def _transaction(self, kafka_producer: Any, part: int, batches: list[pa.RecordBatch],
                     attempt: str | None) -> int:
        kafka_producer.begin_transaction()
        try:
            count = 0
            for batch in batches:
                keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
                if "headers" in batch.schema.names:
                    _produce_with_headers(kafka_producer, self.topic, keys, values,
                                          batch.column("headers").to_pylist())
                else:
                    _produce_in_order(kafka_producer, self.topic, keys, values)
                count += batch.num_rows
            marker = json.dumps({"batch": self.batch_id, "parts": self.parts, "by": self.by,
                                 "query": self.query, "attempt": attempt})
            _produce(kafka_producer, self.marker_topic, marker_key(self.prefix, self.output,
                                                                   part), marker,
                     part % self.marker_partitions)
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


def _produce_with_headers(kafka_producer: Any, topic: str, keys: list[Any], values: list[Any],
                          headers: list[list[tuple[str, bytes | None]] | None]) -> None:
    """The records in order, with their headers (``(name, bytes)`` pairs, as Arrow gives a
    ``map<string, binary>``), one ``produce`` call each: ``produce_batch`` takes no headers."""
    for key, value, pairs in zip(keys, values, headers, strict=True):
        while True:
            try:
                kafka_producer.produce(topic, value=value, key=key, headers=pairs or None)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                kafka_producer.poll(0.05)


def _message(key: Any, value: Any) -> dict[str, Any]:
    return {"value": value} if key is None else {"key": key, "value": value}


def _produce(kafka_producer: Any, topic: str, key: str | None, value: str | None,
             partition: int) -> None:
    while True:
        try:
            kafka_producer.produce(topic, value=value, key=key, partition=partition)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            kafka_producer.poll(0.05)


def _abort(kafka_producer: Any) -> None:
    try:
        kafka_producer.abort_transaction(60)
    except Exception:  # a fenced or fatal producer cannot abort; fencing aborts for it
        pass


def _stuck(error: Any) -> bool:
    """A kept producer left where it cannot begin this part's transaction: an earlier
    transaction that needs an abort, or one whose commit or abort never completed (librdkafka's
    local ``_STATE``, "Operation not valid in state ..."). A new producer of the id aborts what
    it left open (``init_transactions``), reads the marker and writes the part if it is not in."""
    kafka_error = error.args[0] if error.args else None
    return bool(kafka_error is not None and (
        kafka_error.txn_requires_abort() or kafka_error.code() == client().KafkaError._STATE))


def _fenced(error: Any) -> bool:
    """A producer fenced or made fatal by a newer producer of its id: for a kept producer most
    often another Python worker's in a later micro-batch (tasks of a part land on any worker).
    librdkafka reports it from ``produce`` as the local ``_FATAL`` code."""
    kafka_error = error.args[0] if error.args else None
    kafka = client().KafkaError
    return bool(kafka_error is not None and (kafka_error.fatal() or kafka_error.code() in (
        kafka._FATAL, kafka._FENCED, kafka.PRODUCER_FENCED, kafka.INVALID_PRODUCER_EPOCH)))
