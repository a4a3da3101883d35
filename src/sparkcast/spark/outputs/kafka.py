"""``sinks.kafka``: an output into a Kafka topic, exactly once for ``read_committed`` consumers.

Spark's own Kafka sink is at least once (a replayed micro-batch writes its rows again). This
one writes each micro-batch N of an output in ``parallelism`` parts, each in one Kafka
transaction together with a marker record ``(query, output, part) → N`` on a compacted marker
topic (``kafka_transactions.py``). Why it holds, whatever fails:

* a part's rows are chosen by the hash of the record key (of the value when there is no key),
  never by where Spark happened to put a row: a replay computes the same rows for the same
  part on any host, and one key's records stay in one part, in the order they were emitted;
* the driver, on the first micro-batch of a run (the only one Spark may replay), fences every
  part's ``transactional.id`` (aborting what a killed attempt left open, which would also hold
  back ``read_committed`` readers) and reads the markers: the parts of N that were committed
  are skipped, the others are written;
* a retried task reads the markers itself; a zombie attempt is fenced by the newer producer;
* Kafka commits before the exactly-once sinks of the driver (JDBC, files) and before Spark's
  commit: a kill between them replays N, and the markers make the Kafka part of it a no-op.

The parts cannot change for a checkpoint (the markers record them); a change is refused.
Settings in ``options`` (librdkafka's names; Spark's ``kafka.`` prefix accepted) pass through
to the producers, secrets included; no message of this sink ever shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast.api.formats import Avro
from sparkcast.errors import SinkError
from sparkcast.spark.outputs.kafka_transactions import (
    PartWriter,
    client,
    fence,
    librdkafka_settings,
    marker_key,
    read_markers,
)
from sparkcast.spark.outputs.kafka_values import check_avro, encoded

MARKER_TOPIC = "_sparkcast_markers"
#: the frame each part writer reads: the record key and value, the emission order
_ORDER = "_sparkcast_order"


@dataclass(frozen=True)
class KafkaSink:
    """``kafka(bootstrap_servers, topic, key=..., options=...)``: each output row a JSON object
    of its columns, or with ``schema=Avro(...)`` an Avro record (``key``: a column whose text is
    the record key); exactly once for ``read_committed`` consumers."""

    bootstrap_servers: str
    topic: str
    key: str | None = None
    options: dict[str, str] = field(default_factory=dict, hash=False, repr=False)
    parallelism: int = 4
    marker_topic: str = MARKER_TOPIC
    transactional_id_prefix: str | None = None
    schema: Avro | None = None

    def describe(self) -> str:  # never the options: they may hold credentials
        return f"kafka({self.bootstrap_servers!r}, {self.topic!r})"

    @property
    def settings(self) -> dict[str, Any]:
        return {**librdkafka_settings(self.options), "bootstrap.servers": self.bootstrap_servers}

    def check(self, output: str, schema: StructType, spark: Any) -> None:
        """The key column exists, an Avro schema takes the output's columns, the topic exists,
        the marker topic exists (made compacted)."""
        where = f"output {output!r}, sink {self.describe()}"
        if self.key is not None and self.key not in schema.fieldNames():
            raise SinkError(f"{where}: key column {self.key!r} is not a column of the output "
                            f"({schema.simpleString()})")
        if self.parallelism < 1:
            raise SinkError(f"{where}: parallelism must be at least 1")
        if self.schema is not None:
            check_avro(where, self.schema, schema, spark)
        topics = self._topics(where)
        if self.topic not in topics:
            raise SinkError(f"{where}: topic {self.topic!r} does not exist; create it (e.g. "
                            "kafka-topics.sh --create) before the query starts")
        if self.marker_topic not in topics:
            self._create_marker_topic(where)

    def _topics(self, where: str) -> set[str]:
        admin = client().admin.AdminClient(self.settings)
        try:
            return set(admin.list_topics(timeout=_metadata_timeout(self.settings)).topics)
        except Exception as error:
            raise SinkError(f"{where}: cannot reach the Kafka cluster ({_reason(error)}); start "
                            "it, or correct bootstrap_servers and the options") from error

    def _create_marker_topic(self, where: str) -> None:
        kafka = client()
        admin = kafka.admin.AdminClient(self.settings)
        topic = kafka.admin.NewTopic(self.marker_topic, 1, -1,
                                     config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([topic])[self.marker_topic].result(timeout=60)
        except kafka.KafkaException as error:
            if error.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                raise SinkError(f"{where}: cannot create the marker topic "
                                f"{self.marker_topic!r} ({_reason(error)}); create it "
                                "(compacted, one partition) or allow topic creation") from error


class KafkaWriter:
    """The driver side of one query's Kafka sinks: markers read once per run, parts per batch."""

    def __init__(self, query_id: str) -> None:
        self.query_id = query_id
        self._markers: dict[tuple[str, str], dict[str, int]] = {}  # marker key → batch

    def write(self, sink: KafkaSink, output: str, frame: DataFrame, batch_id: int,
              empty: bool) -> None:
        """Write the parts of the batch that Kafka does not have; ``empty``: the batch has no
        rows for ``output`` (its parts' transactions are left out, a replay writes none
        either; the first batch of a run still fences and reads the markers)."""
        prefix = sink.transactional_id_prefix or f"sparkcast-{self.query_id}"
        markers = self._run_markers(sink, output, prefix)
        if empty:
            return
        committed = frozenset(p for p in range(sink.parallelism)
                              if markers.get(marker_key(prefix, output, p), -1) >= batch_id)
        if len(committed) == sink.parallelism:
            return  # a replay of a batch Kafka has in full
        writer = PartWriter(sink.settings, sink.topic, sink.marker_topic, prefix, output,
                            batch_id, sink.parallelism, committed)
        written = (_records(frame, sink.key, sink.schema).repartition(sink.parallelism, "part_by")
                   .sortWithinPartitions(_ORDER).select("key", "value")
                   .mapInArrow(writer, "part int, records long").collect())
        for row in written:
            markers[marker_key(prefix, output, row["part"])] = batch_id

    def _run_markers(self, sink: KafkaSink, output: str, prefix: str) -> dict[str, int]:
        """Fence every part, then read the committed markers (once per run and output)."""
        cached = self._markers.get((sink.marker_topic, output))
        if cached is not None:
            return cached
        for part in range(sink.parallelism):
            fence(sink.settings, f"{prefix}-{output}-{part}")
        records = read_markers(sink.settings, sink.marker_topic)
        _refuse_other_parts(sink, output, prefix, records)
        markers = {key: record["batch"] for key, record in records.items()}
        self._markers[(sink.marker_topic, output)] = markers
        return markers


def _records(frame: DataFrame, key: str | None, schema: Avro | None) -> DataFrame:
    """Key as text, value as JSON text or Avro bytes, the part's hash input, and the order the
    rows were emitted in."""
    value = encoded(F.struct(*[F.col(f"`{n}`") for n in frame.columns]), schema)
    key_text = F.col(f"`{key}`").cast("string") if key is not None else F.lit(None).cast("string")
    return frame.select(key_text.alias("key"), value.alias("value"),
                        F.monotonically_increasing_id().alias(_ORDER)).withColumn(
        "part_by", F.coalesce(F.col("key"), F.col("value")))


def _refuse_other_parts(sink: KafkaSink, output: str, prefix: str,
                        markers: dict[str, dict[str, int]]) -> None:
    """A checkpoint keeps the parallelism its Kafka parts were written with."""
    recorded = {record["parts"] for key, record in markers.items()
                if key.startswith(f"{prefix}/{output}/")}
    if recorded - {sink.parallelism}:
        raise SinkError(f"output {output!r}, sink {sink.describe()}: this checkpoint wrote "
                        f"Kafka in {max(recorded)} parts, the sink now asks "
                        f"parallelism={sink.parallelism}; a replay would split rows "
                        "differently: keep the parallelism the checkpoint started with")


def _reason(error: BaseException) -> str:
    first = error.args[0] if error.args else error
    text = first.str() if hasattr(first, "str") else str(first)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _metadata_timeout(settings: dict[str, Any]) -> float:
    """Seconds to wait for the cluster's topics at start: the client's own request timeout
    (``socket.timeout.ms``) when the options set one, else 30 s."""
    return min(30.0, int(settings.get("socket.timeout.ms", 30_000)) / 1000)
