"""``kafka_topic``: a Kafka topic as a streaming DataFrame of its JSON, Avro or Protobuf values,
by Spark's own Kafka source (PyFlink: ``KafkaSource`` with a JSON, Avro or Protobuf
deserialization schema).

The value of each record is parsed into the schema's columns in the JVM (``from_json`` for
JSON, ``from_avro`` for an ``Avro``, permissive, no Python on the hot path; a record whose
writer schema id was registered after the query started is looked up and re-encoded in the
Python workers), or for a ``Protobuf`` by Google's protobuf runtime in the Python workers
(``kafka_protobuf.py``); see ``kafka_values.py``. A record that does not fit never reaches
the function and never stops the stream: it keeps its place as a ``_corrupt_record`` row
holding JSON with its topic, partition, offset, reason, key and raw value, which sparkcast's
malformed-input route (``spark/planning/corrupt.py``) turns into a dead letter, on either
side.

Spark's Kafka connector (and spark-avro for an ``Avro``) must be in the session: a session
``session()`` started gets them here, at their first use (``spark/launch/connectors.py``), and
one Spark cannot resolve is refused here with one line; a session without them that sparkcast
may not extend (``spark-submit``, ``SPARKCAST_PACKAGES=off``, a Connect server's) is refused
with the connector's coordinates. Protobuf needs no connector.

Records of aborted transactions are never read (``read_committed``, as Kafka Streams reads
with exactly-once on). A new checkpoint starts from ``earliest`` (as Flink's ``KafkaSource``
and Kafka Streams' ``GlobalKTable`` do): a broadcast side reads the whole topic, every current
rule, in its first micro-batch, and with ``hold_until_ready`` no event is decided before them.
A tombstone (a null value: the key was deleted, what a compacted topic keeps) becomes a row
with only the key and the ``tombstone`` column set, so the function can remove the key.
docs/sources.md says how. ``metadata=["headers"]`` reads the record's headers (Spark's
``includeHeaders``) as a ``map<string, string>`` column ``kafka_headers`` (``_headers`` says
why a map); ``commit_offsets=True`` commits each committed micro-batch's end offsets to a
consumer group, for Kafka's tools (``kafka_offsets.py``).

A broadcast topic is quiet (a rule now and then): the executor's cached consumer of its
partition leaves a fetch at the log end in flight, which the broker holds for
``fetch.max.wait.ms`` when no record comes, and the next micro-batch's read of the partition
waits for it. Kafka's default (500 ms) made the driver's read of one rule record take ~0.5 s
of every micro-batch; ``kafka.fetch.max.wait.ms=50`` is the default here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sparkcast.api.formats import Avro
from sparkcast.api.protobuf import Protobuf
from sparkcast.errors import MissingDependencyError, PipelineError
from sparkcast.sources.kafka_offsets import commit_to_group
from sparkcast.sources.kafka_values import ValueReader, value_reader
from sparkcast.spark.launch.connectors import require
from sparkcast.spark.launch.packages import coordinates, scala_version
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN

#: the record's metadata ``metadata=`` can add, each as column ``kafka_<name>`` (``headers``:
#: Spark's ``headers`` column, read with ``includeHeaders``, as a map: ``_headers``)
METADATA = {"topic": "topic", "partition": "partition", "offset": "offset",
            "timestamp": "timestamp", "timestamp_type": "timestampType",
            "headers": "headers"}
#: options that choose the topic: ``topic`` does that, one way
_TOPIC_OPTIONS = ("subscribe", "subscribePattern", "assign")
#: a new checkpoint reads the whole topic; an aborted transaction's records are never read; a
#: quiet topic's read waits 50 ms, not Kafka's 500, for the fetch its consumer left in flight
_DEFAULTS = {"startingOffsets": "earliest", "kafka.isolation.level": "read_committed",
             "kafka.fetch.max.wait.ms": "50"}


def kafka_topic(spark: Any, bootstrap_servers: str, topic: str,
                schema: str | StructType | Avro | Protobuf, *, key: str | None = None,
                tombstone: str | None = None, metadata: Iterable[str] = (),
                options: Mapping[str, str] | None = None, commit_offsets: bool = False,
                group_id: str | None = None) -> DataFrame:
    """The records of ``topic`` as a stream of ``schema``'s columns: parsed from JSON values
    (``schema`` a DDL string or ``StructType``), or decoded from Avro ones (``schema`` an
    ``Avro``: its record's fields are the columns; plain or Confluent-framed; with a registry
    or writer schemas, each record by the writer schema its id names, whose versions are
    fetched here, once; an id registered later is looked up by the workers, once per id), or
    from Protobuf ones (``schema`` a ``Protobuf``: its message's fields are the columns; plain
    or Confluent-framed, the ids from a registry fetched here, once, and later ones by the
    workers).

    ``key`` names a string column that holds the record's key (UTF-8); a schema field of that
    name is filled from the key, which identifies the record in Kafka (compaction keeps the
    latest value per key). ``tombstone`` names a boolean column, true for a record whose value
    is null (its fields null, the key set): the function removes the key. Without it a
    tombstone is a dead letter. ``metadata`` adds any of ``topic``, ``partition``, ``offset``,
    ``timestamp`` (the record's, e.g. the ``event_time``), ``timestamp_type``, ``headers`` as
    columns ``kafka_<name>``; order a broadcast side with ``broadcast(..., order_by=
    "kafka_offset")`` so one key's updates apply in the topic's order. ``kafka_headers`` is a
    ``map<string, string>`` (a key given twice keeps its last value, as Kafka's
    ``lastHeader`` reads it; ``sinks.kafka(headers=...)`` writes such a map back).

    ``commit_offsets=True`` commits each committed micro-batch's end offsets to the consumer
    group ``group_id`` (default ``sparkcast-<query name>``), for Kafka's tools to show the
    job's lag (Flink's ``commit.offsets.on.checkpoint``); the checkpoint stays the truth, a
    failed commit is one WARNING, never a failed query (``kafka_offsets.py``).

    Every entry of ``options`` goes to Spark's reader unchanged (``kafka.security.protocol``,
    ``kafka.sasl.jaas.config``, ``maxOffsetsPerTrigger``, ``startingOffsets``, ...); they win
    over the defaults ``startingOffsets=earliest``, ``kafka.isolation.level=read_committed``
    (a topic ``sinks.kafka`` wrote is read exactly once) and ``kafka.fetch.max.wait.ms=50``.
    No message shows them."""
    metadata = list(metadata)
    _check_options(metadata, options or {})
    if group_id is not None and not commit_offsets:
        raise PipelineError("group_id names the group commit_offsets=True commits to: pass "
                            "commit_offsets=True, or leave group_id out")
    values = value_reader(schema if isinstance(schema, (Avro, Protobuf)) else _struct(schema),
                          topic)
    require(spark, ("kafka", "avro") if isinstance(schema, Avro) else ("kafka",))
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers",
                                                     bootstrap_servers)
    settings = {**_DEFAULTS, **dict(options or {}), "subscribe": topic}
    if "headers" in metadata:
        settings["includeHeaders"] = "true"
    try:
        raw = reader.options(**settings).load()
    except Exception as error:  # Spark names the missing connector in its own words for kafka
        if "Failed to find data source: kafka" in str(error):
            raise _no_connector() from error
        raise
    frame = raw.select(F.col("key").cast("string").alias("_k"),
                       values.value(F.col("value")).alias("_v"),
                       *[F.col(c) for m, c in METADATA.items() if m != "headers"],
                       *([_headers(F.col("headers")).alias("headers")]
                         if "headers" in metadata else []))
    frame = values.prepared(frame).select("*", values.parsed().alias("_p"))
    struct = values.struct(frame)
    _check(struct, key, tombstone, metadata)
    if commit_offsets:
        commit_to_group(spark, topic, bootstrap_servers, options or {}, group_id)
    return _parsed(frame, values, struct, key, tombstone, metadata)


def _no_connector() -> MissingDependencyError:
    """The session has no Kafka connector and sparkcast may not add it: a session of its own,
    ``SPARKCAST_PACKAGES=off`` or ``spark-submit`` without ``--packages``; the error names its
    coordinates."""
    import pyspark

    (connector,) = coordinates(("kafka",), pyspark.__version__, scala_version())
    return MissingDependencyError(
        f"this Spark session has no Kafka connector: start it with sparkcast.spark.session(), "
        f"which adds {connector} at its first use (unless SPARKCAST_PACKAGES leaves kafka "
        f"out), or give "
        f"spark.jars.packages={connector} (spark-submit: --packages {connector})")


def _struct(schema: str | StructType) -> StructType:
    from pyspark.sql.types import _parse_datatype_string

    struct = _parse_datatype_string(schema) if isinstance(schema, str) else schema
    if not isinstance(struct, StructType):
        raise PipelineError(f"schema must be a struct (DDL or StructType), an Avro or a "
                            f"Protobuf, not {schema!r}")
    return struct


def _check_options(metadata: Iterable[str], options: Mapping[str, str]) -> None:
    """Refuse what would go wrong later, naming the fix (never an option's value)."""
    chosen = [o for o in options if o in _TOPIC_OPTIONS]
    if chosen:
        raise PipelineError(f"options {chosen} choose the topic, which the topic argument "
                            "does: leave them out (one query reads one topic per kafka_topic)")
    unknown = [m for m in metadata if m not in METADATA]
    if unknown:
        raise PipelineError(f"metadata {unknown}: choose from {', '.join(METADATA)}")


def _headers(headers: Column) -> Column:
    """Spark's ``array<struct<key, value: binary>>`` as ``map<string, string>``: a key given
    twice keeps its last value (Kafka's ``Headers.lastHeader``), a value is UTF-8 text (bytes
    that are not become U+FFFD), a record without headers has an empty map. The map, because
    the headers shops set are text looked up by name (``traceparent``, a correlation id,
    ``content-type``): ``row.kafka_headers["traceparent"]``, and ``sinks.kafka(headers=...)``
    writes the same map back."""
    last = F.filter(headers, lambda h, i: ~F.exists(
        F.slice(headers, i + 2, F.size(headers)), lambda later: later["key"] == h["key"]))
    text = F.transform(last, lambda h: F.struct(
        h["key"].alias("key"), F.make_valid_utf8(h["value"].cast("string")).alias("value")))
    return F.coalesce(F.map_from_entries(text), F.create_map().cast("map<string,string>"))


def _check(struct: StructType, key: str | None, tombstone: str | None,
           metadata: Iterable[str]) -> None:
    """Refuse columns that would clash or cannot be filled, naming the fix."""
    names = struct.fieldNames()
    if CORRUPT_COLUMN in names:
        raise PipelineError(f"{CORRUPT_COLUMN} is added by kafka_topic; leave it out of schema")
    if key is not None and key in names and struct[key].dataType != StringType():
        raise PipelineError(f"key column {key!r} is {struct[key].dataType.simpleString()} in "
                            "the schema; a record key is read as a string: make it string")
    if tombstone is not None and key is None:
        raise PipelineError("a tombstone deletes its key: pass key='<column>' with tombstone")
    key_column = key if key is not None and key not in names else None
    added = [c for c in [key_column, tombstone, *[f"kafka_{m}" for m in metadata]]
             if c is not None]
    clash = [c for c in added if c in names or added.count(c) > 1]
    if clash:
        raise PipelineError(f"columns {sorted(set(clash))} are named twice among the schema "
                            "and the columns kafka_topic adds (key, tombstone, metadata); "
                            "rename one")


def _parsed(frame: DataFrame, values: ValueReader, struct: StructType, key: str | None,
            tombstone: str | None, metadata: list[str]) -> DataFrame:
    # the reason once per row: the condition and the dead letter's text both read it
    frame = frame.select("*", _reason(values, struct, tombstone is not None, key).alias("_why"))
    reason = F.col("_why")
    columns = [_field(f, key) for f in struct.fields]
    if key is not None and key not in struct.fieldNames():
        columns.append(F.col("_k").alias(key))
    if tombstone is not None:
        columns.append(F.col("_v").isNull().alias(tombstone))
    columns += [F.col(METADATA[m]).alias(f"kafka_{m}") for m in metadata]
    corrupt = F.when(reason.isNotNull(), _letter(reason, values))
    return frame.select(*columns, corrupt.alias(CORRUPT_COLUMN))


def _field(field: StructField, key: str | None) -> Column:
    if field.name == key:
        return F.col("_k").alias(field.name)
    return F.col("_p").getField(field.name).alias(field.name)


def _reason(values: ValueReader, struct: StructType, tombstones: bool, key: str | None
            ) -> Column:
    """Why a record does not fit (null when it does): the first reason that applies."""
    if tombstones:
        null_value = F.when(F.col("_k").isNull(), F.lit("a tombstone (null value) without a key"))
    else:
        null_value = F.lit("a tombstone (null value), and kafka_topic was given no tombstone "
                           "column to carry it")
    checks = [(F.col("_v").isNull(), null_value), *values.reasons()]
    for field in struct.fields:
        if not field.nullable:
            present = F.col("_k") if field.name == key else F.col("_p").getField(field.name)
            checks.append((present.isNull(),
                           F.lit(f"field {field.name} is missing or null, and the schema says "
                                 "NOT NULL")))
    chain = F.when(checks[0][0], checks[0][1])
    for condition, why in checks[1:]:
        chain = chain.when(condition, why)
    return chain


def _letter(reason: Column, values: ValueReader) -> Column:
    """The dead letter's value: where the record is, why it was refused, what it held."""
    return F.to_json(F.struct(F.col("topic").alias("topic"), F.col("partition").alias("partition"),
                              F.col("offset").alias("offset"), reason.alias("reason"),
                              F.col("_k").alias("key"), values.raw_value()))
