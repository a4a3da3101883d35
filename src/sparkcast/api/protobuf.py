"""``Protobuf``: Kafka record values as Protobuf messages, plain or in Confluent's wire format.

``Protobuf("shop.Rule", "rules.desc")`` names a top-level message by its full name and the
descriptor set that defines it (``protoc --include_imports --descriptor_set_out=rules.desc
rules.proto``: a path, or the set's bytes), read once, here, on the driver. Both sides run in
the Python workers, by Google's protobuf runtime (``spark/outputs/protobuf_codec.py``: message
classes built from the set, no generated module imported), so no JVM package is needed:

>>> rules = kafka_topic(spark, "broker:9092", "rules", Protobuf("shop.Rule", "rules.desc"))
>>> alerts = sinks.kafka("broker:9092", "alerts", schema=Protobuf(
...     "shop.Alert", "alerts.desc", confluent=True, registry="https://registry:8081"))

Confluent's wire format puts the magic byte ``0``, the schema's registry id (4 bytes,
big-endian) and the message indexes (which message of the schema's file: ``[0]``, the first, is
the single byte 0) before the body. Reading it, the ids come from one of:

- ``schema_id``: the id every record must carry (another id is a dead letter);
- ``registry`` (a ``SchemaRegistry`` or its URL): every version of ``subject`` (default
  ``<topic>-value``), fetched once when the query is planned, in the registry's ``serialized``
  format with its references (an id registered later is looked up by id in the Python
  workers, once per id); without ``descriptors`` the latest version is the reader's;
- neither: any id.

Every record is decoded with the reader's message: Protobuf's own evolution (fields it does not
know skipped, fields the writer lacked unset), so the columns are one set for every version.
The indexes must name the message in the version the id names; a version without the message
is refused when the query is planned (its records are dead letters).

Writing it, the id is ``schema_id``, or with ``registry`` the id the registry gives the
message's file under ``subject`` (registered if new, its imports first under their file names,
as Confluent's serializer registers them), or without ``descriptors`` the subject's latest.

``options`` are two of Spark's ``from_protobuf`` options, read the same way:
``emit.default.values`` (``true`` unless given: a proto3 zero reads as 0, as Protobuf's own
libraries read it; ``false``: as null) and ``enums.as.ints`` (an enum as its number, not its
name; ``false`` unless given). Any other is refused. A body that does not parse is a dead
letter with the runtime's reason, never a failed query.

Like Flink's ``protobuf`` format and, for the framing and the registry, Confluent's
``KafkaProtobufDeserializer``/``KafkaProtobufSerializer``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sparkcast.api.formats import check_id, confluent_header
from sparkcast.api.protobuf_descriptors import (
    DescriptorSet,
    built_in,
    from_registry,
    serialized,
)
from sparkcast.api.registry import SchemaRegistry
from sparkcast.errors import PipelineError, warn

#: the options, each with its value unless given (see the module's docstring)
OPTIONS = {"emit.default.values": "true", "enums.as.ints": "false"}


@dataclass(frozen=True)
class Protobuf:
    """Record values as Protobuf messages of ``message`` (full name, package included) from
    ``descriptors`` (a descriptor set file or its bytes); ``confluent``: in Confluent's wire
    format, with the id ``schema_id`` or the versions a ``registry`` holds under ``subject``
    (default ``<topic>-value``); see the module's docstring."""

    message: str
    descriptors: str | os.PathLike[str] | bytes | None = field(default=None, repr=False)
    confluent: bool = False
    schema_id: int | None = None
    registry: SchemaRegistry | str | None = field(default=None, repr=False)
    subject: str | None = None
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.message, str) or not self.message:
            raise PipelineError("Protobuf(message): the message's full name, such as 'shop.Rule'")
        if isinstance(self.registry, str):
            object.__setattr__(self, "registry", SchemaRegistry(self.registry))
        if not self.confluent and (self.schema_id is not None or self.registry is not None
                                   or self.subject is not None):
            raise PipelineError("schema_id, registry and subject are about the Confluent wire "
                                "format's header: pass confluent=True with them, or leave them "
                                "out for plain Protobuf")
        if self.schema_id is not None:
            check_id(self.schema_id, "schema_id")
            if self.registry is not None:
                raise PipelineError("schema_id is the one id every record carries; with a "
                                    "registry each id names its own version: give one or the "
                                    "other")
        _check_options(self.options)
        if self.descriptors is None:
            if self.registry is None:
                raise PipelineError("Protobuf needs the message's descriptors: a descriptor set "
                                    "(protoc --include_imports --descriptor_set_out) or a "
                                    "registry that holds its schema")
            return
        found = DescriptorSet.read(self.descriptors)
        found.fields(self.message)  # refuses a message the set does not define
        object.__setattr__(self, "descriptors", found.data)

    @property
    def emit_defaults(self) -> bool:
        """Whether an unset field without presence reads as its zero (else null)."""
        return self._option("emit.default.values")

    @property
    def enums_as_ints(self) -> bool:
        """Whether an enum reads (and is written) as its number, not its name."""
        return self._option("enums.as.ints")

    def _option(self, name: str) -> bool:
        return str(self.options.get(name, OPTIONS[name])).lower() == "true"

    def subject_of(self, topic: str) -> str:
        """The registry subject of ``topic``'s values: ``subject``, or Confluent's default
        (``TopicNameStrategy``)."""
        return self.subject if self.subject is not None else f"{topic}-value"

    def descriptor_set(self) -> DescriptorSet:
        """The descriptors given, completed with the well-known files."""
        if not isinstance(self.descriptors, bytes):
            raise PipelineError(f"{self.describe()}: no descriptors; plan it with a registry "
                                "(kafka_topic, sinks.kafka do)")
        return DescriptorSet(self.descriptors).completed()

    def header(self) -> bytes:
        """What the sink writes before each body: magic byte, schema id, message indexes."""
        if not self.confluent or self.schema_id is None:
            raise PipelineError("writing the Confluent wire format needs the schema's registry "
                                "id: Protobuf(..., confluent=True, schema_id=<id>), or "
                                "registry=<url> to have it registered")
        return confluent_header(self.schema_id) + self.descriptor_set().indexes(self.message)

    def describe(self) -> str:
        """The message and its framing, for messages and dead letters (never credentials)."""
        if not self.confluent:
            return f"Protobuf message {self.message}"
        which = (f"schema id {self.schema_id}" if self.schema_id is not None else
                 "each record by its schema id" if self.registry is not None else "any schema id")
        return f"Confluent-framed Protobuf message {self.message} ({which})"

    def planned(self, topic: str) -> ProtobufPlan:
        """What reading ``topic`` needs, the registry asked once (see the module's docstring)."""
        if not isinstance(self.registry, SchemaRegistry):
            return ProtobufPlan(self.message, self.descriptor_set(), None, {}, "")
        subject = self.subject_of(topic)
        source = f"subject {subject!r} of the registry at {self.registry.describe()}"
        versions = _versions(self.registry, subject, source)
        expected, refused = {}, {}
        for schema_id, found in versions.items():
            if isinstance(found, DescriptorSet) and self.message in found.messages():
                expected[schema_id] = found.indexes(self.message)
                continue
            refused[schema_id] = (f"schema id {schema_id}: {found}" if isinstance(found, str)
                                  else f"schema id {schema_id} has no message {self.message}")
            warn(f"kafka_topic {topic!r}: {refused[schema_id]}; its records become dead letters")
        readers = [versions[i] for i in expected]
        if isinstance(self.descriptors, bytes):
            reader = self.descriptor_set()
        elif readers and isinstance(readers[-1], DescriptorSet):
            reader = readers[-1]  # the latest version with the message
        else:
            raise PipelineError(f"{source} holds no Protobuf schema with message "
                                f"{self.message}: register one, or give the descriptors")
        return ProtobufPlan(self.message, reader, expected, refused, source)

    def written(self, topic: str) -> Protobuf:
        """This format as a sink writes it to ``topic``: with its id and descriptors, the
        registry asked once (see the module's docstring)."""
        if not self.confluent or not isinstance(self.registry, SchemaRegistry):
            return self
        subject = self.subject_of(topic)
        if isinstance(self.descriptors, bytes):
            schema_id = _register(self.registry, subject, DescriptorSet(self.descriptors),
                                  self.message)
            return replace(self, schema_id=schema_id, registry=None)
        source = f"subject {subject!r} of the registry at {self.registry.describe()}"
        versions = _versions(self.registry, subject, source)
        latest = [(i, s) for i, s in versions.items()
                  if isinstance(s, DescriptorSet) and self.message in s.messages()][-1:]
        if not latest:
            raise PipelineError(f"{source} holds no Protobuf schema with message "
                                f"{self.message}: register one, or give the descriptors")
        (schema_id, found), = latest
        return replace(self, schema_id=schema_id, registry=None, descriptors=found.data)


def _check_options(options: Mapping[str, str]) -> None:
    unknown = sorted(k for k in options if k not in OPTIONS)
    if unknown:
        raise PipelineError(f"options {unknown}: Protobuf values take {' and '.join(OPTIONS)} "
                            "(each 'true' or 'false'); leave the others out")
    wrong = sorted(k for k, v in options.items() if str(v).lower() not in ("true", "false"))
    if wrong:
        raise PipelineError(f"options {wrong}: give 'true' or 'false'")


@dataclass(frozen=True)
class ProtobufPlan:
    """What ``kafka_topic`` reads a topic's Protobuf values with: the reader's descriptors, the
    message indexes each known id must carry (``None``: any id, the reader's), the ids refused
    with the reason, and where the ids came from."""

    message: str
    reader: DescriptorSet = field(repr=False)
    expected: dict[int, bytes] | None
    refused: dict[int, str]
    source: str

    @property
    def indexes(self) -> bytes:
        """The reader's message indexes."""
        return self.reader.indexes(self.message)


def _versions(registry: SchemaRegistry, subject: str, source: str
              ) -> dict[int, DescriptorSet | str]:
    """Every Protobuf version of ``subject`` as a descriptor set, in version order; one whose
    descriptors do not make a set (an import missing, not the serialized format) as why not."""
    found: dict[int, DescriptorSet | str] = {}
    for schema_id, schema in registry.schemas(subject, "PROTOBUF").items():
        try:
            found[schema_id] = from_registry(schema, registry.referenced, f"the schema of "
                                             f"{source}")
        except PipelineError as error:
            found[schema_id] = str(error)
    return found


def _register(registry: SchemaRegistry, subject: str, descriptors: DescriptorSet,
              message: str) -> int:
    """The id of the file defining ``message`` under ``subject``, registered if new with its
    imports as references, each under its file name (Confluent's ``reference.subject.name.
    strategy`` default); the well-known ones are never registered."""

    def reference(name: str) -> tuple[str, str, int]:
        file = descriptors.file_named(name)
        refs = [reference(d) for d in file.dependency if not built_in(d)]
        registry.register(name, serialized(file), "PROTOBUF", refs)
        return name, name, registry.version_of(name, serialized(file), "PROTOBUF", refs)

    file = descriptors.file_of(message)
    refs = [reference(d) for d in file.dependency if not built_in(d)]
    return registry.register(subject, serialized(file), "PROTOBUF", refs)
