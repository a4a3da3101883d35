"""Where ``result.write_stream(checkpoint_location=..., sinks={...})`` writes each output.

>>> from sparkcast import sinks
>>> result.write_stream(checkpoint_location="ckpt", sinks={
...     "main": sinks.jdbc("jdbc:postgresql://db/app", "alerts", properties={"user": "app"}),
...     REVIEW: sinks.table("reviews", format="parquet"),
...     "dead_letters": sinks.files("out/dead")})

Every output needs a sink except the dead letters, which default to ``files`` beside the
checkpoint. The guarantee of each sink is in docs/sinks.md: ``files``, ``jdbc``, ``kafka`` (for
``read_committed`` consumers) and ``delta`` exactly once, ``table`` at-least-once with a stable
row id, a user's own sink (any object with ``write(frame, output, batch_id)``, optionally
``check(output, schema, spark)``) at-least-once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcast.api.formats import Avro
from sparkcast.api.protobuf import Protobuf
from sparkcast.spark.outputs.files import FilesSink
from sparkcast.spark.outputs.jdbc import JdbcSink
from sparkcast.spark.outputs.kafka import KafkaSink
from sparkcast.spark.outputs.kafka_values import registered
from sparkcast.spark.outputs.tables import DeltaSink, Sink, TableSink

__all__ = ["DeltaSink", "FilesSink", "JdbcSink", "KafkaSink", "Sink", "TableSink", "delta",
           "files", "jdbc", "kafka", "table"]


def files(path: str, format: str = "parquet") -> FilesSink:
    """sparkcast's own layout under ``path`` (``_output=<name>/``), read by ``read_output``;
    exactly once by the commit log. Outputs given the same ``files`` share its folder."""
    return FilesSink(path, format)


def table(name: str | None = None, format: str | None = None,
          options: Mapping[str, Any] | None = None, *, row_id: bool = True
          ) -> TableSink | DeltaSink:
    """Append to a catalog table ``name`` or, with ``options={"path": ...}`` and no name, to any
    Spark batch format (``format``: ``"parquet"``, ``"orc"``, ...). At-least-once: each row
    carries ``_sparkcast_batch`` and ``_sparkcast_row`` (stable across a replay) to deduplicate
    on (``row_id=False`` leaves them out). ``format="delta"`` is ``delta(...)``: exactly once."""
    texts = {k: str(v) for k, v in (options or {}).items()}
    if format == "delta":
        path = texts.pop("path", None)
        return DeltaSink(path=None if name else path, table=name, options=texts)
    return TableSink(name, format, texts, row_id)


def delta(path: str | None = None, *, table: str | None = None,
          options: Mapping[str, Any] | None = None) -> DeltaSink:
    """Append to the Delta table at ``path`` (or the catalog ``table``) exactly once, by Delta's
    idempotent writes: every micro-batch's commit records ``txnAppId`` (the query and output)
    and ``txnVersion`` (the batch), and Delta skips a replayed one. Needs Delta's jars and its
    two session settings (docs/sinks.md)."""
    return DeltaSink(path, table, {k: str(v) for k, v in (options or {}).items()})


def kafka(bootstrap_servers: str, topic: str, *, key: str | None = None,
          options: Mapping[str, Any] | None = None, parallelism: int | None = None,
          marker_topic: str | None = None,
          transactional_id_prefix: str | None = None,
          schema: Avro | Protobuf | None = None,
          headers: str | None = None) -> KafkaSink:
    """Produce each row to ``topic`` as a JSON object of its columns, or with
    ``schema=Avro(...)`` as an Avro record of them, or with ``schema=Protobuf(...)`` as a
    Protobuf message of them, plain or in Confluent's wire format
    (``key``: the column whose text is the record key), exactly once for consumers with
    ``isolation.level=read_committed``:
    every micro-batch is written in ``parallelism`` Kafka transactions (default 4; one per
    part, rows split by key; where the pattern's own tasks write the outputs, one per subtask,
    and a ``parallelism`` given is logged as not applying), each with a marker on
    ``marker_topic`` that makes a replay skip what was committed (by default the query's own,
    ``_sparkcast_markers-<query id>``, so no other query's open transaction holds up its
    start; a keyed record goes to the partition a Java producer puts its key in).
    ``options`` are librdkafka settings (``security.protocol``, ``sasl.*``, ...; Spark's
    ``kafka.`` prefix accepted), never shown in a message. The topic must exist; the marker
    topic is created (compacted) at the first batch if it does not, and recorded in the
    checkpoint. ``parallelism`` cannot change for a checkpoint. ``headers`` names a
    ``map<string,string>`` (or ``map<string,binary>``) column whose entries become the record's
    headers, e.g. the ``kafka_headers`` of the input record passed on; it is left out of the
    value. Another type is refused before the query starts.

    ``schema=Avro(..., confluent=True, registry=...)`` registers the schema under the topic's
    subject here, on the driver, and writes the id the registry gives it; so does a
    ``Protobuf`` with descriptors (its file, imports first), and one without takes the
    subject's latest version.

    Like Flink's ``KafkaSink`` with ``DeliveryGuarantee.EXACTLY_ONCE``; readers that do not ask
    for ``read_committed`` also see aborted attempts."""
    return KafkaSink(bootstrap_servers, topic, key,
                     {k: str(v) for k, v in (options or {}).items()}, parallelism, marker_topic,
                     transactional_id_prefix, registered(schema, topic), headers)


def jdbc(url: str, table: str, properties: Mapping[str, Any] | None = None, *,
         ledger: str = "sparkcast_ledger", create_table: bool = False) -> JdbcSink:
    """Insert into ``table`` of the database at ``url``, exactly once: rows are staged in
    ``<table>_sparkcast_staging`` and each micro-batch is moved, for every JDBC output of that
    database, in one transaction that records it in the ``ledger`` table (created when
    missing). A missing ``table`` is refused before the query starts, unless ``create_table``:
    then it is created with the output's columns, typed by Spark's JDBC mapping for the
    database (as ``df.write.jdbc`` creates one). Off by default, so a mistyped name is an
    error rather than a new table no one reads. The driver's jar must be in ``spark.jars``."""
    return JdbcSink(url, table, {k: str(v) for k, v in (properties or {}).items()}, ledger,
                    create_table)
