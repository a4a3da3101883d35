"""``Avro``: Kafka record values in Avro's binary encoding, plain or in Confluent's wire format.

JSON is the default on both sides (a Spark schema for ``kafka_topic``, the output's columns for
``sinks.kafka``); an ``Avro`` where the value's schema goes chooses Avro instead, and both
sides run it in the JVM (spark-avro's ``from_avro``/``to_avro``):

>>> RULE = '''{"type": "record", "name": "Rule", "fields": [
...     {"name": "name", "type": "string"}, {"name": "limit", "type": "double"}]}'''
>>> rules = kafka_topic(spark, "broker:9092", "rules", Avro(RULE))          # plain Avro
>>> alerts = sinks.kafka("broker:9092", "alerts", schema=Avro(ALERT, confluent=True,
...                                                          schema_id=7))  # Confluent framing
>>> evolved = kafka_topic(spark, "broker:9092", "rules", Avro(RULE, confluent=True,
...                       registry="https://registry:8081"))  # each record by its writer's id

Confluent's wire format puts a magic byte ``0`` and the schema's registry id (4 bytes,
big-endian) before the Avro body. Reading it, ``schema`` is the reader schema and the writer
schemas come from one of:

- ``schema_id``: the id every record must carry (another id is a dead letter);
- ``writer_schemas`` (``{id: schema}``) and/or ``registry`` (a ``SchemaRegistry`` or its URL):
  each record is decoded with the writer schema its id names and resolved to ``schema`` by
  Avro's rules (defaults filled, removed fields dropped, ``int`` → ``long``); the registry's
  versions of ``subject`` (default ``<topic>-value``) are fetched once, when the query is
  planned, and decoded in the JVM; a record of an id registered later is looked up by id in
  the Python workers, once per id (``lookup_new_ids=False``: a dead letter until a restart,
  and no Python in the query);
- none of them: any id, every body decoded with ``schema``.

Writing it, the header's id is ``schema_id``, or with ``registry`` the id the registry gives
``schema`` under ``subject`` (registered if new, when the sink is made).

Like PyFlink's ``AvroRowDeserializationSchema``/``AvroRowSerializationSchema`` and, for the
framing and the registry, Flink's ``ConfluentRegistryAvro(De)SerializationSchema``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sparkcast.api.registry import SchemaRegistry
from sparkcast.errors import MissingDependencyError, PipelineError

#: Confluent's wire format: this byte, then the schema id in 4 bytes big-endian, then the body
MAGIC_BYTE = 0
HEADER_SIZE = 5


@dataclass(frozen=True)
class Avro:
    """Record values in Avro's binary encoding under ``schema`` (an Avro schema as JSON text,
    a record: its fields are the columns). ``confluent``: in Confluent's wire format, with
    the writer schemas ``schema_id``, ``writer_schemas`` (``{id: schema JSON}``) or
    ``registry`` name (a ``SchemaRegistry`` or its URL; ``subject``: where it holds them,
    default ``<topic>-value``; ``lookup_new_ids``: whether an id registered after the query
    started is looked up by the workers, true unless given); see the module's docstring."""

    schema: str = field(repr=False)
    confluent: bool = False
    schema_id: int | None = None
    writer_schemas: Mapping[int, str] | None = field(default=None, repr=False, hash=False)
    registry: SchemaRegistry | str | None = field(default=None, repr=False)
    subject: str | None = None
    lookup_new_ids: bool = True

    def __post_init__(self) -> None:
        record = self.parsed
        if isinstance(self.registry, str):
            object.__setattr__(self, "registry", SchemaRegistry(self.registry))
        if not self.lookup_new_ids and self.registry is None:
            raise PipelineError("lookup_new_ids is about the ids a registry holds that the "
                                "query's plan did not know: give registry= with it, or leave "
                                "it out")
        if not self.confluent and (self.schema_id is not None or self.writer_schemas
                                   or self.registry is not None or self.subject is not None):
            raise PipelineError("schema_id, writer_schemas, registry and subject are about the "
                                "Confluent wire format's header: pass confluent=True with "
                                "them, or leave them out for plain Avro")
        if self.schema_id is not None:
            check_id(self.schema_id, "schema_id")
            if self.writer_schemas or self.registry is not None:
                raise PipelineError("schema_id is the one id every record carries; with "
                                    "writer_schemas or a registry each id names its own "
                                    "schema: give one or the other")
        for schema_id, writer in (self.writer_schemas or {}).items():
            check_id(schema_id, "a writer_schemas id")
            if not isinstance(writer, str):
                raise PipelineError(f"writer_schemas[{schema_id}]: the schema as JSON text, "
                                    f"not {type(writer).__name__} (json.dumps a dict)")
            try:
                json.loads(writer)
            except json.JSONDecodeError as error:
                raise PipelineError(f"writer_schemas[{schema_id}] is not JSON ({error})"
                                    ) from error
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

    @property
    def resolves(self) -> bool:
        """Whether records are decoded with the writer schema their id names."""
        return bool(self.writer_schemas) or self.registry is not None

    def subject_of(self, topic: str) -> str:
        """The registry subject of ``topic``'s values: ``subject``, or Confluent's default
        (``TopicNameStrategy``)."""
        return self.subject if self.subject is not None else f"{topic}-value"

    def with_schema_id(self, schema_id: int) -> Avro:
        """This schema with the id a registry gave it, to write (no writer schemas: one id)."""
        return replace(self, schema_id=schema_id, writer_schemas=None, registry=None)

    def header(self) -> bytes:
        """The Confluent header the sink writes before each body: magic byte and schema id."""
        if not self.confluent or self.schema_id is None:
            raise PipelineError("writing the Confluent wire format needs the schema's registry "
                                "id: Avro(schema, confluent=True, schema_id=<id>), or "
                                "registry=<url> to have it registered")
        return confluent_header(self.schema_id)

    def describe(self) -> str:
        """The record and its framing, for messages and dead letters (never credentials)."""
        name = self.parsed["name"]
        if not self.confluent:
            return f"Avro record {name}"
        if self.schema_id is not None:
            which = f"schema id {self.schema_id}"
        elif self.resolves:
            which = "each record by its writer schema's id"
        else:
            which = "any schema id"
        return f"Confluent-framed Avro record {name} ({which})"


def confluent_header(schema_id: int) -> bytes:
    """Confluent's header for ``schema_id``: the magic byte, then the id in 4 bytes big-endian
    (Protobuf's message indexes follow it, ``api/protobuf.py``)."""
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")


def check_id(schema_id: Any, what: str) -> None:
    """Refuse what is not a registry id, naming ``what`` was given."""
    if (isinstance(schema_id, bool) or not isinstance(schema_id, int)
            or not 0 <= schema_id < 2 ** 31):
        raise PipelineError(f"{what} must be a registry id (an int from 0 to 2**31 - 1), not "
                            f"{schema_id!r}")


def spark_avro_missing(error: TypeError) -> MissingDependencyError:
    """PySpark's error for an absent spark-avro jar, as the fix."""
    return MissingDependencyError(
        "Avro values need Spark's spark-avro jar: `make install` puts it in .jars/spark (with "
        "sparkcast.spark.launch.jars.with_spark_jars); on a cluster, --packages "
        f"org.apache.spark:spark-avro_2.13:<Spark's version> ({error})")
