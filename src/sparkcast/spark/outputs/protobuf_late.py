"""Confluent-framed Protobuf values whose schema id the query's plan did not know (a version
registered while the job runs), in the Python workers: ``LateProtobuf.body`` looks the id up in
the registry (``registry_lookup.py``: once per id and process), finds the message indexes of
the reader's message in that version (its file and references read as the plan reads them,
``from_registry``) and gives the body after them, which the codec parses with the reader's
message as it parses every other (Protobuf's own evolution). An id the registry does not know,
a schema that is not Protobuf, a version without the message, or indexes that name another
message give the reason instead, in the plan's words.
"""

from __future__ import annotations

from typing import Any

from sparkcast.api.formats import HEADER_SIZE
from sparkcast.api.protobuf_descriptors import from_registry, leading_indexes, shown_indexes
from sparkcast.api.registry import SchemaRegistry
from sparkcast.errors import PipelineError
from sparkcast.spark.outputs.registry_lookup import looked_up, waited


class LateProtobuf:
    """Bodies of ``message`` in values whose id the plan did not know, the ids' versions
    from ``registry``."""

    def __init__(self, registry: SchemaRegistry, message: str) -> None:
        self._registry, self._message = registry, message

    def __repr__(self) -> str:
        return f"LateProtobuf({self._message}, registry {self._registry.describe()})"

    def body(self, value: bytes) -> tuple[bytes | None, str | None]:
        """The body of ``value`` (header, indexes, body), or the reason there is none."""
        schema_id = int.from_bytes(value[1:HEADER_SIZE], "big")
        expected = looked_up(self._registry, schema_id, "PROTOBUF",
                             lambda schema: self._indexes(schema, schema_id),
                             ("protobuf", self._message))
        if isinstance(expected, str):
            return None, expected
        found = leading_indexes(value[HEADER_SIZE:])
        if found != expected:
            shown = ("(none: the value ends before them)" if found is None
                     else shown_indexes(found))
            return None, (f"the message indexes {shown} are not message {self._message}'s "
                          f"({shown_indexes(expected)})")
        return value[HEADER_SIZE + len(expected):], None

    def _indexes(self, schema: Any | None, schema_id: int) -> bytes | str:
        """The message indexes of the message in the version ``schema``, or why there are
        none (the plan's words)."""
        registry = self._registry
        if schema is None:
            return f"schema id {schema_id}: the registry at {registry.describe()} has no such id"
        kind = schema.schema_type or "AVRO"
        if kind != "PROTOBUF":
            return f"schema id {schema_id} is a {kind} schema, not Protobuf"
        try:
            found = from_registry(schema, lambda subject, version: waited(
                lambda: registry.referenced(subject, version)),
                f"the schema of id {schema_id} in the registry at {registry.describe()}")
        except PipelineError as error:
            return f"schema id {schema_id}: {error}"
        if self._message not in found.messages():
            return f"schema id {schema_id} has no message {self._message}"
        return found.indexes(self._message)
