"""``sinks.kafka``: an output into a Kafka topic, exactly once for ``read_committed`` consumers.

Spark's own Kafka sink is at least once (a replayed micro-batch writes its rows again). This
one writes each micro-batch N of an output in parts, each in one Kafka transaction together
with a marker record ``(query, output, part) → N`` on a compacted marker topic of the query's
own (``kafka_transactions.py``, ``kafka_marker_reads.py``, ``kafka_markers.py``). Why it holds,
whatever fails:

* a part's rows are never chosen by where Spark happened to put a row: here (``write``) the
  driver splits them into ``parallelism`` parts by the hash of the record key (of the value
  when there is no key); where the pattern's tasks write (``sinks_in_tasks.py``), a part is a
  subtask's rows. A replay computes the same rows for the same part on any host, and one key's
  records stay in one part, in the order they were emitted;
* the driver, once a run and before its query starts (the run's first micro-batch is the only
  one Spark may replay), fences every part of every Kafka output of the query (aborting what
  a killed attempt left open), then reads the markers to the high watermark: the parts of N
  that were committed are skipped, the others are written (markers of batches beyond the
  checkpoint's offsets mean it was rolled back, and a WARNING says whose records those
  batches keep);
* every attempt of a part that is written, first or retried, of any stage attempt, finds out
  exactly whether the part is in before it writes, and an attempt fenced by a newer one gives
  way (``PartWriter.write_once``); a query's marker topic has a partition per part, so that
  read waits on no other part's transaction;
* Kafka commits before the exactly-once sinks of the driver (JDBC, files) and before Spark's
  commit: a kill between them replays N, and the markers make the Kafka part of it a no-op.

The parts cannot change for a checkpoint (the markers record them and how they were split);
a change is refused. A ``headers`` column becomes each record's headers (``kafka_values.py``).
Records go to the topic's partitions as a Java producer puts their keys (murmur2,
``kafka_transactions.PRODUCER_DEFAULTS``). Settings in ``options`` (librdkafka's names;
Spark's ``kafka.`` prefix accepted) pass through to the producers, secrets included; no
message of this sink ever shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.api.formats import Avro
from sparkcast.api.protobuf import Protobuf
from sparkcast.errors import SinkError
from sparkcast.spark.observe.listener import log
from sparkcast.spark.outputs.kafka_client import client, librdkafka_settings
from sparkcast.spark.outputs.kafka_marker_reads import (
    PARTS_BY_KEY,
    PARTS_BY_SUBTASK,
    marker_key,
    marker_prefix,
    read_markers,
)
from sparkcast.spark.outputs.kafka_markers import MarkerTopics, ensure_topic
from sparkcast.spark.outputs.kafka_transactions import PartWriter, fence
from sparkcast.spark.outputs.kafka_values import (
    check_headers,
    check_value,
    encoded,
    header_records,
)
from sparkcast.spark.state import checkpoint_files

#: the frame each part writer reads: the record key and value, the emission order
_ORDER = "_sparkcast_order"
#: the parts a batch's rows are split into by key on the driver, unless the sink says
DEFAULT_PARTS = 4


@dataclass(frozen=True)
class KafkaSink:
    """``kafka(bootstrap_servers, topic, key=..., options=...)``: each output row a JSON object
    of its columns, or with ``schema=Avro(...)``/``Protobuf(...)`` an Avro record or a
    Protobuf message (``key``: a column whose text is
    the record key; ``headers``: a map column that becomes the record's headers); exactly once
    for ``read_committed`` consumers."""

    bootstrap_servers: str
    topic: str
    key: str | None = None
    options: dict[str, str] = field(default_factory=dict, hash=False, repr=False)
    parallelism: int | None = None  # None: DEFAULT_PARTS where the driver splits the rows
    marker_topic: str | None = None  # None: the query's own (kafka_markers.py)
    transactional_id_prefix: str | None = None
    schema: Avro | Protobuf | None = None
    headers: str | None = None  # a map column, left out of the value (kafka_values.py)

    def describe(self) -> str:  # never the options: they may hold credentials
        return f"kafka({self.bootstrap_servers!r}, {self.topic!r})"

    @property
    def settings(self) -> dict[str, Any]:
        return {**librdkafka_settings(self.options), "bootstrap.servers": self.bootstrap_servers}

    @property
    def parts(self) -> int:
        """The parts the driver splits each batch's rows into, by key."""
        return DEFAULT_PARTS if self.parallelism is None else self.parallelism

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        """The key column exists, an Avro or Protobuf schema takes the output's columns, the
        topic exists (the marker topic is made, if missing, when the query starts: a query's
        own is named by its id)."""
        where = f"output {output!r}, sink {self.describe()}"
        if self.key is not None and self.key not in schema.fieldNames():
            raise SinkError(f"{where}: key column {self.key!r} is not a column of the output "
                            f"({schema.simpleString()})")
        if self.parallelism is not None and self.parallelism < 1:
            raise SinkError(f"{where}: parallelism must be at least 1")
        if self.headers is not None:
            check_headers(where, self.headers, schema, self.key)
            schema = StructType([f for f in schema.fields if f.name != self.headers])
        if self.schema is not None:
            check_value(where, self.schema, schema, spark)
        topics = self._topics(where)
        if self.topic not in topics:
            raise SinkError(f"{where}: topic {self.topic!r} does not exist; create it (e.g. "
                            "kafka-topics.sh --create) before the query starts")

    def _topics(self, where: str) -> set[str]:
        admin = client().admin.AdminClient(self.settings)
        try:
            return set(admin.list_topics(timeout=_metadata_timeout(self.settings)).topics)
        except Exception as error:
            raise SinkError(f"{where}: cannot reach the Kafka cluster ({_reason(error)}); start "
                            "it, or correct bootstrap_servers and the options") from error


class RunMarkers(NamedTuple):
    """An output's marker topic, its partitions, its markers (``marker key → batch``) and the
    task attempts they name (``marker key → attempt``, the markers that name one)."""

    topic: str
    partitions: int
    markers: dict[str, int]
    attempts: dict[str, str]


class KafkaWriter:
    """The driver side of one query's Kafka sinks: once a run, before its query starts, every part
    fenced and the markers read; then the parts of each batch that Kafka does not have,
    written here (``write``) or by the pattern's tasks (``sinks_in_tasks.py``, one part per
    subtask: ``subtasks`` says how many there are where the tasks may write)."""

    def __init__(self, query_id: str, checkpoint: str, sinks: list[tuple[str, KafkaSink]],
                 subtasks: int | None = None) -> None:
        self.query_id = query_id
        self.checkpoint = checkpoint
        self.sinks = sinks
        self.subtasks = subtasks
        self._run: dict[str, RunMarkers] | None = None
        self._by = PARTS_BY_KEY

    @property
    def by_subtask(self) -> bool:
        """Whether the pattern's tasks write the parts this run: they may, and no marker of
        the checkpoint says the driver split its rows by key (known once :meth:`run` read
        the markers)."""
        assert self._run is not None, "run() first"
        return self._by == PARTS_BY_SUBTASK

    def run(self) -> dict[str, RunMarkers]:
        """Each output's marker topic and markers, read once a run."""
        if self._run is None:
            self._run = self._start_run()
        return self._run

    def part_writer(self, sink: KafkaSink, output: str, batch_id: int) -> PartWriter | None:
        """The writer of the parts of ``output``'s batch that Kafka does not have (None: it
        has them all)."""
        marker_topic, partitions, markers, _ = self.run()[output]
        if self.by_subtask and self.subtasks is not None:
            recorded, parts = self.subtasks, malformed_part(self.subtasks) + 1
        else:
            recorded = parts = sink.parts
        prefix = self._prefix(sink)
        committed = frozenset(p for p in range(parts)
                              if markers.get(marker_key(prefix, output, p), -1) >= batch_id)
        if len(committed) == parts:
            return None  # a replay of a batch Kafka has in full
        return PartWriter(sink.settings, sink.topic, marker_topic, prefix, output, batch_id,
                          recorded, committed, self._by, partitions, self.query_id)

    def named_attempts(self, batch_id: int) -> dict[int, tuple[str, ...]]:
        """Part → the task attempts that its markers of ``batch_id`` name, over every output,
        as read at the run's start: whose keyed state a replay of the batch adopts
        (``task_sinks.StagedState``)."""
        found: dict[int, tuple[str, ...]] = {}
        for run in self.run().values():
            for key, attempt in run.attempts.items():
                if run.markers.get(key) == batch_id:
                    part = int(key.rsplit("/", 1)[1])
                    found[part] = (*found.get(part, ()), attempt)
        return found

    def written(self, sink: KafkaSink, output: str, batch_id: int, parts: list[int]) -> None:
        """Record the parts of ``output``'s batch that were committed (the attempts the run's
        start read for them are of older batches: dropped)."""
        run = self.run()[output]
        for part in parts:
            key = marker_key(self._prefix(sink), output, part)
            run.markers[key] = batch_id
            run.attempts.pop(key, None)

    def write(self, sink: KafkaSink, output: str, frame: DataFrame, batch_id: int,
              empty: bool) -> None:
        """Write the parts of the batch that Kafka does not have; ``empty``: the batch has no
        rows for ``output`` (its parts' transactions are left out, a replay writes none
        either; the run fenced and read the markers before it started)."""
        self.run()
        if empty:
            return
        writer = self.part_writer(sink, output, batch_id)
        if writer is None:
            return
        records = ["key", "value", *(["headers"] if sink.headers is not None else [])]
        written = (_records(frame, sink).repartition(sink.parts, "part_by")
                   .sortWithinPartitions(_ORDER).select(*records)
                   .mapInArrow(writer, "part int, records long").collect())
        self.written(sink, output, batch_id, [row["part"] for row in written])

    def _prefix(self, sink: KafkaSink) -> str:
        return sink.transactional_id_prefix or f"sparkcast-{self.query_id}"

    def _start_run(self) -> dict[str, RunMarkers]:
        """Each output's marker topic (recorded in the checkpoint, made if missing, with a
        partition per part); then every part of every output fenced, before any marker topic
        is read, so no transaction of this query is left open for the ``read_committed`` read
        to wait on; then the markers, each topic read once."""
        topics = MarkerTopics(self.checkpoint, self.query_id)
        chosen = {output: topics.topic(output, sink.marker_topic, sink.settings,
                                       self._prefix(sink)) for output, sink in self.sinks}
        partitions = {}
        for output, sink in self.sinks:
            may_write = sink.parts if self.subtasks is None else max(
                sink.parts, malformed_part(self.subtasks) + 1)  # either way's parts
            partitions[output] = ensure_topic(sink.settings, chosen[output], may_write,
                                              f"output {output!r}, sink {sink.describe()}")
            try:
                for part in range(may_write):
                    fence(sink.settings, f"{self._prefix(sink)}-{output}-{part}",
                          chosen[output])
            except client().KafkaException as error:
                raise SinkError(f"output {output!r}, sink {sink.describe()}: fencing the "
                                f"producers of its earlier runs failed ({_reason(error)})"
                                ) from error
        read: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for output, sink in self.sinks:
            where = (sink.bootstrap_servers, chosen[output])
            if where not in read:
                read[where] = read_markers(sink.settings, chosen[output])
        ours = {output: _markers_of(read[(sink.bootstrap_servers, chosen[output])],
                                    marker_prefix(self._prefix(sink), output))
                for output, sink in self.sinks}
        by_key = any(m["by"] == PARTS_BY_KEY for found in ours.values() for m in found.values())
        self._by = PARTS_BY_KEY if self.subtasks is None or by_key else PARTS_BY_SUBTASK
        for output, sink in self.sinks:
            topics.refuse_inherited_prefix(output, sink.transactional_id_prefix, sink.settings,
                                           f"output {output!r}, sink {sink.describe()}")
            _refuse_other_query(sink, output, ours[output], self.query_id, chosen[output])
            _refuse_other_parts(sink, output, ours[output], self._by, self.subtasks)
            _warn_rolled_back(sink, output, ours[output], self.checkpoint)
        return {output: RunMarkers(chosen[output], partitions[output],
                                   {key: record["batch"] for key, record in ours[output].items()},
                                   {key: record["attempt"] for key, record in ours[output].items()
                                    if record.get("attempt") is not None})
                for output, _ in self.sinks}


def _records(frame: DataFrame, sink: KafkaSink) -> DataFrame:
    """Key as text, value as JSON text or Avro or Protobuf bytes (of every column but the
    headers), the headers, the part's hash input, and the order the rows were emitted in."""
    value = encoded(F.struct(*[F.col(f"`{n}`") for n in frame.columns if n != sink.headers]),
                    sink.schema)
    key = sink.key
    key_text = F.col(f"`{key}`").cast("string") if key is not None else F.lit(None).cast("string")
    headers = ([header_records(F.col(f"`{sink.headers}`")).alias("headers")]
               if sink.headers is not None else [])
    return frame.select(key_text.alias("key"), value.alias("value"), *headers,
                        F.monotonically_increasing_id().alias(_ORDER)).withColumn(
        "part_by", F.coalesce(F.col("key"), F.col("value")))


def malformed_part(subtasks: int) -> int:
    """By subtask, the part of the dead letters of malformed input rows, which are in no
    subtask: the one after the subtasks' (markers record ``subtasks`` parts, not this one)."""
    return subtasks


def _markers_of(markers: dict[str, dict[str, Any]], prefix: str) -> dict[str, dict[str, Any]]:
    return {key: record for key, record in markers.items() if key.startswith(prefix)}


def _refuse_other_query(sink: KafkaSink, output: str, markers: dict[str, dict[str, Any]],
                        query_id: str, topic: str) -> None:
    """The markers under this query's prefix are its own: another job's (a copy of the
    checkpoint, a rescaled one, an unrelated query given the same ``transactional_id_prefix``)
    would be read as this one's, and the two would fence each other's producers."""
    others = {m["query"] for m in markers.values() if m.get("query") not in (None, query_id)}
    if others:
        raise SinkError(
            f"output {output!r}, sink {sink.describe()}: the marker topic {topic!r} holds "
            f"markers of another query ({', '.join(sorted(others))}) under this query's "
            f"transactional_id_prefix {sink.transactional_id_prefix!r}: two jobs with one "
            "prefix fence each other and would read each other's parts as written; give "
            "this query's sink a transactional_id_prefix of its own")


def _warn_rolled_back(sink: KafkaSink, output: str, markers: dict[str, dict[str, Any]],
                      checkpoint: str) -> None:
    """Markers of batches the checkpoint has not planned: it was rolled back (a backup
    restored, offsets removed) after Kafka committed them. Their parts are not written again,
    so those batches' records in the topic stay the abandoned line's: said, not refused (a
    restore to run the same input again is right to skip them)."""
    planned = checkpoint_files.last_planned(checkpoint)
    ahead = max((int(m["batch"]) for m in markers.values()), default=-1)
    if planned is not None and ahead > planned:
        log.warning(f"output {output!r}, sink {sink.describe()}: Kafka holds this query's "
                    f"parts up to batch {ahead}, but its checkpoint has planned batches up to "
                    f"{planned} only: the checkpoint was rolled back. The parts of batches "
                    f"{planned + 1} to {ahead} that Kafka holds are not written again, so their "
                    "records are the ones the abandoned run wrote; to write the new input's, "
                    "start from a copy (sparkcast state copy: its own transactional ids)")


def _refuse_other_parts(sink: KafkaSink, output: str, markers: dict[str, dict[str, Any]],
                        by: str, subtasks: int | None) -> None:
    """A checkpoint keeps the parts its Kafka rows were split into: the sink's parallelism
    where the driver split them by key, the pattern's subtasks where its tasks wrote them."""
    where = f"output {output!r}, sink {sink.describe()}"
    recorded_by = {record["by"] for record in markers.values()}
    if by == PARTS_BY_KEY and PARTS_BY_SUBTASK in recorded_by:
        raise SinkError(f"{where}: this checkpoint's Kafka parts were written by the "
                        "pattern's tasks, one per subtask; this query would split the rows "
                        "by key on the driver (its sinks or inputs changed to ones only the "
                        "driver writes), so a replay would split them differently: keep the "
                        "query's sinks, or start a new checkpoint")
    recorded = {record["parts"] for record in markers.values()}
    parts = subtasks if by == PARTS_BY_SUBTASK else sink.parts
    if recorded - {parts}:
        asked = (f"the pattern now has {parts} subtasks" if by == PARTS_BY_SUBTASK
                 else f"the sink now asks parallelism={parts}")
        raise SinkError(f"{where}: this checkpoint wrote Kafka in {max(recorded)} parts, "
                        f"{asked}; a replay would split rows differently: keep the "
                        "parallelism the checkpoint started with")


def _reason(error: BaseException) -> str:
    first = error.args[0] if error.args else error
    text = first.str() if hasattr(first, "str") else str(first)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _metadata_timeout(settings: dict[str, Any]) -> float:
    """Seconds to wait for the cluster's topics at start: the client's own request timeout
    (``socket.timeout.ms``) when the options set one, else 30 s."""
    return min(30.0, int(settings.get("socket.timeout.ms", 30_000)) / 1000)
