"""Confluent-framed Avro values whose schema id the query's plan did not know (a version
registered while the job runs), read in the Python workers: ``late_avro`` is a pandas UDF that
looks the id up in the registry (``registry_lookup.py``: once per id and process) and gives
each value's body re-encoded under the reader schema, or why not.

fastavro (the library Confluent's ``AvroDeserializer`` decodes with) reads the body with the
writer schema and resolves it to the reader schema by Avro's rules (defaults filled, removed
fields dropped, promotions), then writes the record under the reader schema; spark-avro's
``from_avro`` then decodes those bytes in the JVM exactly as it decodes a known id's, so the
columns are the same Spark types and values whichever way a record came (logical types are
left to ``from_avro``: fastavro sees the schemas without them, so their bytes pass unchanged,
and a union of named types keeps its branch by name). Whether the writer resolves is decided
first by Apache Avro's checker (``resolution_problem``), the check and the words of the plan's
ids. An id the registry does not know, a schema that is not Avro, a writer that does not
resolve and a body that does not decode give a reason instead of bytes (a dead letter).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pandas as pd
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcast.api.registry import SchemaRegistry, resolution_problem
from sparkcast.spark.outputs.registry_lookup import looked_up
from sparkcast.spark.state.worker_cache import WORKER

#: what ``late_avro`` gives per value: the body under the reader schema, or the reason
LATE = T.StructType([T.StructField("body", T.BinaryType()), T.StructField("error", T.StringType())])


class LateAvro:
    """Bodies of ids the plan did not know, as bodies of ``reader`` (the Avro record
    ``record``'s reader schema, JSON text), their writer schemas from ``registry``."""

    def __init__(self, registry: SchemaRegistry, reader: str, record: str) -> None:
        self._registry, self._reader, self._record = registry, reader, record

    def __repr__(self) -> str:
        return f"LateAvro({self._record}, registry {self._registry.describe()})"

    def converted(self, value: bytes | None) -> tuple[bytes | None, str | None]:
        """``value`` (header and body) as a body of the reader schema, or the reason it is
        not one; a null value (a known id's, a tombstone) gives neither."""
        if value is None:
            return None, None
        schema_id = int.from_bytes(value[1:5], "big")
        writer = looked_up(self._registry, schema_id, "AVRO", lambda schema: writer_schema(
            schema, schema_id, self._reader, self._record, self._registry), ("avro", self._reader))
        if isinstance(writer, str):
            return None, writer
        import fastavro

        read = _reader_of(self._reader)
        try:
            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), writer, read,
                                                return_named_type=True)
            body = io.BytesIO()
            fastavro.schemaless_writer(body, read, record)
        except Exception:  # noqa: BLE001 - fastavro's EOF, schema and value errors alike
            return None, (f"the value does not decode with writer schema id {schema_id} (read "
                          f"as the Avro record {self._record})")
        return body.getvalue(), None



def writer_schema(schema: Any | None, schema_id: int, reader: str, record: str,
                  registry: SchemaRegistry) -> Any:
    """Confluent's ``schema`` of ``schema_id`` (None: the registry has no such id) as
    fastavro's parsed writer schema, or the reason its records cannot be read as ``reader``
    (the plan's words for an id that does not resolve)."""
    import fastavro

    if schema is None:
        return f"schema id {schema_id}: the registry at {registry.describe()} has no such id"
    kind = schema.schema_type or "AVRO"
    if kind != "AVRO":
        return f"schema id {schema_id} is a {kind} schema, not Avro"
    problem = resolution_problem(reader, schema.schema_str)
    if problem is not None:
        return f"schema id {schema_id} does not resolve to the reader schema {record}: {problem}"
    return fastavro.parse_schema(_plain(json.loads(schema.schema_str)), named_schemas={})


_READERS = WORKER.section("Avro readers", "taken while its key (the reader schema's JSON) matches")


def _reader_of(reader: str) -> Any:
    """fastavro's parsed reader schema, once per process (while the worker's bound keeps it)."""
    parsed = _READERS.get(reader)
    if parsed is None:
        import fastavro

        parsed = _READERS.put(reader,
                              fastavro.parse_schema(_plain(json.loads(reader)), named_schemas={}))
    return parsed


def _plain(schema: Any) -> Any:
    """``schema`` without logical types: their bytes pass through fastavro unchanged."""
    if isinstance(schema, dict):
        return {k: _plain(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    return schema


def late_avro(value: Column, late: LateAvro) -> Column:
    """``value`` (binary: header and body; null where there is nothing to look up) as
    ``LATE``: the body under the reader schema, or the reason (``LateAvro.converted``)."""

    @F.pandas_udf(LATE)  # type: ignore[call-overload]
    def looked_up_late(values: pd.Series) -> pd.DataFrame:
        bodies = pd.Series(None, index=values.index, dtype=object)
        errors = pd.Series(None, index=values.index, dtype=object)
        present = values[values.notna()]  # a known id's row costs no Python call
        if len(present):
            found = [late.converted(v) for v in present]
            bodies[present.index] = [b for b, _ in found]
            errors[present.index] = [e for _, e in found]
        return pd.DataFrame({"body": bodies, "error": errors})

    return looked_up_late(value)
