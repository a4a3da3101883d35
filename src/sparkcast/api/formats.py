"""``Avro``: Kafka record values in Avro's binary encoding, plain or in Confluent's wire format.

JSON is the default on both sides (a Spark schema for ``kafka_topic``, the output's columns for
``sinks.kafka``); an ``Avro`` where the value's schema goes chooses Avro instead, and both
sides run it in the JVM (spark-avro's ``from_avro``/``to_avro``):

>>> RULE = '''{"type": "record", "name": "Rule", "fields": [
...     {"name": "name", "type": "string"}, {"name": "limit", "type": "double"}]}'''
>>> rules = kafka_topic(spark, "broker:9092", "rules", Avro(RULE))          # plain Avro
>>> alerts = sinks.kafka("broker:9092", "alerts", schema=Avro(ALERT, confluent=True,
...                                                          schema_id=7))  # Confluent framing

Confluent's wire format puts a magic byte ``0`` and the schema's registry id (4 bytes,
big-endian) before the Avro body. Reading it, ``schema_id`` is the id every record must carry
(another id is a dead letter), or None to take any id and decode every body with ``schema``;
writing it, ``schema_id`` is required. The schema itself is given (from a file, or fetched
from a schema registry by the user: docs/sources.md); sparkcast holds no registry client.

Like PyFlink's ``AvroRowDeserializationSchema``/``AvroRowSerializationSchema`` and, for the
framing, Flink's ``ConfluentRegistryAvro(De)SerializationSchema`` without the registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sparkcast.errors import MissingDependencyError, PipelineError

#: Confluent's wire format: this byte, then the schema id in 4 bytes big-endian, then the body
MAGIC_BYTE = 0
HEADER_SIZE = 5


@dataclass(frozen=True)
class Avro:
    """Record values in Avro's binary encoding under ``schema`` (an Avro schema as JSON text,
    a record: its fields are the columns). ``confluent``: in Confluent's wire format;
    ``schema_id``: the registry id of ``schema`` there (see the module's docstring)."""

    schema: str = field(repr=False)
    confluent: bool = False
    schema_id: int | None = None

    def __post_init__(self) -> None:
        record = self.parsed
        if self.schema_id is not None:
            if not self.confluent:
                raise PipelineError("schema_id is the Confluent wire format's header: pass "
                                    "confluent=True with it, or leave it out for plain Avro")
            if (isinstance(self.schema_id, bool) or not isinstance(self.schema_id, int)
                    or not 0 <= self.schema_id < 2 ** 31):
                raise PipelineError(f"schema_id must be a registry id (an int from 0 to "
                                    f"2**31 - 1), not {self.schema_id!r}")
        if not isinstance(record.get("name"), str):
            raise PipelineError("the Avro schema's record needs a name")

    @property
    def parsed(self) -> dict[str, Any]:
        """The schema as a dict, a record; refused with the fix otherwise."""
        if not isinstance(self.schema, str):
            raise PipelineError(f"Avro(schema): the schema as JSON text, not "
                                f"{type(self.schema).__name__} (json.dumps a dict)")
        try:
            record = json.loads(self.schema)
        except json.JSONDecodeError as error:
            raise PipelineError(f"the Avro schema is not JSON ({error})") from error
        if not isinstance(record, dict) or record.get("type") != "record":
            raise PipelineError('the Avro schema must be a record ({"type": "record", "name": '
                                '..., "fields": [...]}): its fields are the columns')
        return record

    def header(self) -> bytes:
        """The Confluent header the sink writes before each body: magic byte and schema id."""
        if not self.confluent or self.schema_id is None:
            raise PipelineError("writing the Confluent wire format needs the schema's registry "
                                "id: Avro(schema, confluent=True, schema_id=<id>)")
        return bytes([MAGIC_BYTE]) + self.schema_id.to_bytes(4, "big")

    def describe(self) -> str:
        """The record and its framing, for messages and dead letters."""
        name = self.parsed["name"]
        if not self.confluent:
            return f"Avro record {name}"
        which = "any schema id" if self.schema_id is None else f"schema id {self.schema_id}"
        return f"Confluent-framed Avro record {name} ({which})"


def spark_avro_missing(error: TypeError) -> MissingDependencyError:
    """PySpark's error for an absent spark-avro jar, as the fix."""
    return MissingDependencyError(
        "Avro values need Spark's spark-avro jar: `make install` puts it in .jars/spark (with "
        "sparkcast.spark.launch.jars.with_spark_jars); on a cluster, --packages "
        f"org.apache.spark:spark-avro_2.13:<Spark's version> ({error})")
