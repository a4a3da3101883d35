"""Streaming inputs from outside files: ``postgres_table`` reads a PostgreSQL table as a stream
of its changed rows, ``kafka_topic`` a Kafka topic's JSON, Avro (``sparkcast.Avro``, by their
writer schemas' ids where a registry names them) or Protobuf (``sparkcast.Protobuf``) records,
with their headers if asked, through Spark's own Kafka source (docs/sources.md); either can be
the broadcast side, e.g. rules that change at run time."""

from sparkcast.sources.kafka import kafka_topic
from sparkcast.sources.postgres import postgres_table, version_trigger_sql

__all__ = ["kafka_topic", "postgres_table", "version_trigger_sql"]
