"""How ``kafka_topic`` turns a record's value into columns: JSON (a Spark schema), Avro
(``sparkcast.Avro``) or Protobuf (``sparkcast.Protobuf``, ``kafka_protobuf.py``), chosen once
per topic: JSON and Avro in the JVM, Protobuf by Google's protobuf runtime in the Python
workers.

Each reader gives the value column as read (``_v``: text for JSON, bytes for Avro), the parsed
struct (``_p``), the columns it yields, the reasons a present value does not fit (checked in
order, the first that applies is the dead letter's reason) and the raw value a dead letter
carries (JSON: ``value``, the text; Avro and Protobuf: ``value_base64``, the bytes in base64).
Confluent's header is read by ``confluent_header.py`` for both framed formats.

Avro: Spark's ``from_avro`` in ``PERMISSIVE`` mode gives a malformed body a struct of nulls,
which nothing could tell from a record of null fields. So the body is read with a reader schema
that adds a field the writer never has, with a default (``_sparkcast_decoded``, true): Avro's
schema resolution fills it in every record it decodes, and it is null exactly when decoding
failed. Avro's binary encoding carries no length or checksum: bytes that happen to decode
under the schema are read as a record (bytes left over after a whole record are ignored, as
Avro's own decoders do).

With writer schemas (``Avro(..., writer_schemas=..., registry=...)``) the ids and their schemas
are gathered once, on the driver, when ``kafka_topic`` plans the query (``WriterSchemas``), each
checked against the reader schema by Avro's rules (``api/registry.py``). The body is decoded by
a CASE on the header's id over one ``from_avro(body, writer, {"avroSchema": reader})`` per id
that resolves: spark-avro reads with the writer schema and resolves to the reader's, in the
JVM. Spark fixes a streaming query's expressions when it starts, so an id first registered
later is not among them. With a registry (and ``lookup_new_ids``, the default) the CASE's last
branch reads such a record: ``prepared`` adds ``_late``, a pandas UDF over the values whose id
the plan did not know (null for every other record, so a known id's value never reaches
Python), which looks the id up once per worker process and re-encodes the body under the
reader schema (``spark/outputs/avro_late.py``), and the same ``from_avro`` as the known ids
decodes it: the same Spark types. Its reason, when there is no body (an id the registry lacks,
a writer that does not resolve), is the dead letter's. Without a registry, or with
``lookup_new_ids=False``, a new id's records are dead letters saying so (a restart plans it
in). The ids whose schema does not resolve are dead letters with Avro's reason either way.
"""

from __future__ import annotations

import json
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sparkcast.api.formats import HEADER_SIZE, Avro, spark_avro_missing
from sparkcast.api.protobuf import Protobuf
from sparkcast.api.registry import SchemaRegistry, resolution_problem
from sparkcast.errors import PipelineError, warn
from sparkcast.sources.confluent_header import (
    header_reasons,
    late,
    other_id,
    schema_id,
    unknown_id,
)
from sparkcast.sources.kafka_protobuf import ProtobufValues
from sparkcast.spark.outputs.avro_late import LateAvro, late_avro
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN

#: the field the Avro reader schema adds, true in every record that decoded
DECODED = "_sparkcast_decoded"


class ValueReader(Protocol):
    """One way of reading values (see the module's docstring)."""

    def value(self, raw: Column) -> Column: ...
    def prepared(self, frame: DataFrame) -> DataFrame: ...
    def parsed(self) -> Column: ...
    def struct(self, frame: DataFrame) -> StructType: ...
    def reasons(self) -> list[tuple[Column, Column]]: ...
    def raw_value(self) -> Column: ...


class JsonValues:
    """A JSON object per value, parsed by ``from_json`` into the schema's fields."""

    def __init__(self, struct: StructType) -> None:
        self._struct = struct

    def value(self, raw: Column) -> Column:
        return raw.cast("string")

    def prepared(self, frame: DataFrame) -> DataFrame:
        return frame

    def parsed(self) -> Column:
        with_corrupt = StructType([*[StructField(f.name, f.dataType, True)
                                     for f in self._struct.fields],
                                   StructField(CORRUPT_COLUMN, StringType(), True)])
        return F.from_json(F.col("_v"), with_corrupt,
                           {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN})

    def struct(self, frame: DataFrame) -> StructType:
        return self._struct

    def reasons(self) -> list[tuple[Column, Column]]:
        corrupt = F.col("_p").getField(CORRUPT_COLUMN)
        return [(F.json_object_keys(F.col("_v")).isNull(), F.lit("the value is not a JSON object")),
                (corrupt.isNotNull(), self._misfit())]

    def raw_value(self) -> Column:
        return F.col("_v").alias("value")

    def _misfit(self) -> Column:
        """The fields whose JSON value is present but does not parse as the field's type."""
        names = [F.when(F.get_json_object(F.col("_v"), f"$['{f.name}']").isNotNull()
                        & F.col("_p").getField(f.name).isNull(),
                        F.lit(f"{f.name} ({f.dataType.simpleString()})"))
                 for f in self._struct.fields if "'" not in f.name]
        wrong = F.concat_ws(", ", *names) if names else F.lit("")
        return F.when(wrong != "", F.concat(F.lit("does not fit the schema: "), wrong)).otherwise(
            F.lit("the value does not parse as the schema"))


class WriterSchemas:
    """The writer schemas of a Confluent-framed topic, gathered once when the query is
    planned: those given, then every version of the registry's subject; each either resolves
    to the reader schema or is refused with Avro's reason."""

    def __init__(self, avro: Avro, topic: str) -> None:
        gathered, self._source = _gathered(avro, topic)
        #: id → writer schema, for the ids whose schema resolves; id → Avro's reason otherwise
        self.resolving: dict[int, str] = {}
        self.refused: dict[int, str] = {}
        for known, writer in sorted(gathered.items()):
            problem = resolution_problem(avro.schema, writer)
            if problem is None:
                self.resolving[known] = writer
            else:
                self.refused[known] = problem
                warn(f"kafka_topic {topic!r}: writer schema id {known} does not resolve to "
                     f"the reader schema {avro.parsed['name']} ({problem}); its records "
                     "become dead letters")

    def known(self) -> list[int]:
        """The ids the plan knows, whether their schema resolves or not."""
        return sorted([*self.resolving, *self.refused])

    def reasons(self, record: str, lookup: bool) -> list[tuple[Column, Column]]:
        """Why a record of Avro record ``record`` does not decode, in order: its id's schema
        does not resolve, the id is unknown to the plan (``lookup``: the worker's lookup of it
        says why, ``_late.error``), the body does not decode."""
        found = [(schema_id() == F.lit(refused), F.lit(
            f"schema id {refused} does not resolve to the reader schema {record}: {problem}"))
            for refused, problem in self.refused.items()]
        if lookup:
            error = F.col("_late").getField("error")
            found.append((error.isNotNull(), error))
        else:
            found.append(unknown_id(self.known(), f"writer schemas of {self._source}"))
        found.append((F.col("_p").getField(DECODED).isNull(), F.concat(
            F.lit("the value does not decode with writer schema id "), schema_id().cast("string"),
            F.lit(f" (read as the Avro record {record})"))))
        return found


def _gathered(avro: Avro, topic: str) -> tuple[dict[int, str], str]:
    """The writer schemas by id, and where they came from (for the dead letters' reason)."""
    given = dict(avro.writer_schemas or {})
    if not isinstance(avro.registry, SchemaRegistry):
        return given, "writer_schemas"
    subject = avro.subject_of(topic)
    registered = avro.registry.versions(subject)
    clash = sorted(i for i in given.keys() & registered.keys()
                   if json.loads(given[i]) != json.loads(registered[i]))
    if clash:
        raise PipelineError(f"writer_schemas {clash}: the registry holds another schema under "
                            "these ids; leave them out of writer_schemas")
    source = f"subject {subject!r} of the registry at {avro.registry.describe()}"
    return {**registered, **given}, source + (" and writer_schemas" if given else "")


class AvroValues:
    """An Avro body per value (after Confluent's header when ``avro.confluent``), decoded by
    ``from_avro`` with the schema, or with the writer schema the header's id names
    (``WriterSchemas``); a failed decode or a header that does not fit is refused."""

    def __init__(self, avro: Avro, topic: str) -> None:
        self._avro = avro
        record = avro.parsed
        if any(f.get("name") == DECODED for f in record.get("fields", [])):
            raise PipelineError(f"{DECODED} is added by kafka_topic; leave it out of the Avro "
                                "schema")
        marked = {**record, "fields": [*record.get("fields", []),
                                       {"name": DECODED, "type": "boolean", "default": True}]}
        self._reader = json.dumps(marked)
        self._writers = WriterSchemas(avro, topic) if avro.resolves else None
        self._late = (LateAvro(avro.registry, self._reader, record["name"])
                      if isinstance(avro.registry, SchemaRegistry) and avro.lookup_new_ids
                      else None)

    def value(self, raw: Column) -> Column:
        return raw

    def prepared(self, frame: DataFrame) -> DataFrame:
        """With a registry, ``_late``: the values of ids the plan did not know, looked up in
        the Python workers (``avro_late.py``); every other record gives it a null, so its
        value never reaches Python."""
        if self._late is None or self._writers is None:
            return frame
        return frame.select("*", late_avro(late(self._writers.known()), self._late)
                            .alias("_late"))

    def parsed(self) -> Column:
        value = F.col("_v")
        body = value.substr(F.lit(HEADER_SIZE + 1), F.length(value)) if self._avro.confluent \
            else value
        if self._writers is None:
            return self._decoded(body, self._avro.schema)
        branches = [(schema_id() == F.lit(i), self._decoded(body, w))
                    for i, w in self._writers.resolving.items()]
        if self._late is not None:  # an id the plan did not know: its body, re-encoded
            otherwise = self._decoded(F.col("_late").getField("body"), self._reader)
            if not branches:
                return otherwise
        elif not branches:  # no id resolves: every record is a dead letter (struct of nulls)
            return F.when(F.lit(False), self._decoded(body, self._avro.schema))
        chain = F.when(*branches[0])
        for condition, decoded in branches[1:]:
            chain = chain.when(condition, decoded)
        return chain if self._late is None else chain.otherwise(otherwise)

    def _decoded(self, body: Column, writer: str) -> Column:
        from pyspark.sql.avro.functions import from_avro

        try:
            return from_avro(body, writer, {"mode": "PERMISSIVE", "avroSchema": self._reader})
        except TypeError as error:
            if "JavaPackage" in str(error):
                raise spark_avro_missing(error) from error
            raise

    def struct(self, frame: DataFrame) -> StructType:
        decoded = frame.schema["_p"].dataType
        assert isinstance(decoded, StructType)
        return StructType([f for f in decoded.fields if f.name != DECODED])

    def reasons(self) -> list[tuple[Column, Column]]:
        found = header_reasons() if self._avro.confluent else []
        if self._writers is not None:
            return [*found, *self._writers.reasons(self._avro.parsed["name"],
                                                   self._late is not None)]
        if self._avro.schema_id is not None:
            found.append(other_id(self._avro.schema_id))
        found.append((F.col("_p").getField(DECODED).isNull(),
                      F.lit(f"the value does not decode as the {self._avro.describe()}")))
        return found

    def raw_value(self) -> Column:
        return F.base64(F.col("_v")).alias("value_base64")


def value_reader(schema: StructType | Avro | Protobuf, topic: str) -> ValueReader:
    """The reader for ``schema`` of ``topic``'s values: Avro for an ``Avro``, Protobuf for a
    ``Protobuf`` (``kafka_protobuf.py``), JSON for a Spark struct."""
    if isinstance(schema, Avro):
        return AvroValues(schema, topic)
    if isinstance(schema, Protobuf):
        return ProtobufValues(schema, topic)
    return JsonValues(schema)
