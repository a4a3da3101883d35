"""How ``kafka_topic`` turns a record's value into columns: JSON (a Spark schema) or Avro
(``sparkcast.Avro``), chosen once per topic, both in the JVM.

Each reader gives the value column as read (``_v``: text for JSON, bytes for Avro), the parsed
struct (``_p``), the columns it yields, the reasons a present value does not fit (checked in
order, the first that applies is the dead letter's reason) and the raw value a dead letter
carries (JSON: ``value``, the text; Avro: ``value_base64``, the bytes in base64).

Avro: Spark's ``from_avro`` in ``PERMISSIVE`` mode gives a malformed body a struct of nulls,
which nothing could tell from a record of null fields. So the body is read with a reader schema
that adds a field the writer never has, with a default (``_sparkcast_decoded``, true): Avro's
schema resolution fills it in every record it decodes, and it is null exactly when decoding
failed. Avro's binary encoding carries no length or checksum: bytes that happen to decode
under the schema are read as a record (bytes left over after a whole record are ignored, as
Avro's own decoders do).
"""

from __future__ import annotations

import json
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sparkcast.api.formats import HEADER_SIZE, MAGIC_BYTE, Avro, spark_avro_missing
from sparkcast.errors import PipelineError
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN

#: the field the Avro reader schema adds, true in every record that decoded
DECODED = "_sparkcast_decoded"


class ValueReader(Protocol):
    """One way of reading values (see the module's docstring)."""

    def value(self, raw: Column) -> Column: ...
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


class AvroValues:
    """An Avro body per value (after Confluent's header when ``avro.confluent``), decoded by
    ``from_avro`` with the schema; a failed decode or a header that does not fit is refused."""

    def __init__(self, avro: Avro) -> None:
        self._avro = avro
        record = avro.parsed
        if any(f.get("name") == DECODED for f in record.get("fields", [])):
            raise PipelineError(f"{DECODED} is added by kafka_topic; leave it out of the Avro "
                                "schema")
        marked = {**record, "fields": [*record.get("fields", []),
                                       {"name": DECODED, "type": "boolean", "default": True}]}
        self._reader = json.dumps(marked)

    def value(self, raw: Column) -> Column:
        return raw

    def parsed(self) -> Column:
        from pyspark.sql.avro.functions import from_avro

        value = F.col("_v")
        body = value.substr(F.lit(HEADER_SIZE + 1), F.length(value)) if self._avro.confluent \
            else value
        try:
            return from_avro(body, self._avro.schema,
                             {"mode": "PERMISSIVE", "avroSchema": self._reader})
        except TypeError as error:
            if "JavaPackage" in str(error):
                raise spark_avro_missing(error) from error
            raise

    def struct(self, frame: DataFrame) -> StructType:
        decoded = frame.schema["_p"].dataType
        assert isinstance(decoded, StructType)
        return StructType([f for f in decoded.fields if f.name != DECODED])

    def reasons(self) -> list[tuple[Column, Column]]:
        value = F.col("_v")
        found: list[tuple[Column, Column]] = []
        if self._avro.confluent:
            magic = F.hex(F.substring(value, 1, 1))
            schema_id = F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long")
            found += [
                (F.length(value) < HEADER_SIZE,
                 F.concat(F.lit("the value has "), F.length(value).cast("string"),
                          F.lit(f" bytes, fewer than the Confluent wire format's {HEADER_SIZE}-"
                                "byte header"))),
                (magic != F.lit(f"{MAGIC_BYTE:02X}"),
                 F.concat(F.lit("the first byte is 0x"), magic,
                          F.lit(f", not the Confluent wire format's magic byte "
                                f"0x{MAGIC_BYTE:02X}")))]
            if self._avro.schema_id is not None:
                found.append((schema_id != F.lit(self._avro.schema_id),
                              F.concat(F.lit("schema id "), schema_id.cast("string"),
                                       F.lit(f", expected {self._avro.schema_id}"))))
        found.append((F.col("_p").getField(DECODED).isNull(),
                      F.lit(f"the value does not decode as the {self._avro.describe()}")))
        return found

    def raw_value(self) -> Column:
        return F.base64(F.col("_v")).alias("value_base64")


def value_reader(schema: StructType | Avro) -> ValueReader:
    """The reader for ``schema``: Avro for an ``Avro``, JSON for a Spark struct."""
    return AvroValues(schema) if isinstance(schema, Avro) else JsonValues(schema)
