"""The value ``sinks.kafka`` writes for a row: a JSON object of its columns, an Avro record
(``schema=Avro(...)``) or a Protobuf message (``schema=Protobuf(...)``), encoded before the
part writers get the rows: JSON and Avro in the JVM, Protobuf in the Python workers.

Avro is spark-avro's ``to_avro`` with the given schema, Confluent's header (magic byte, schema
id) concatenated in front when ``confluent``; the part writers produce the bytes as they are.
Spark matches the output's columns to the record's fields by name, and refuses a mismatch only
when it builds the encoder, in the first task: ``check_value`` builds one on the driver before
the query starts, over a row of nulls, so a column the record lacks, a field the output lacks
(unless a ``["null", ...]`` union, written null) or a type that does not convert is refused
with Avro's reason. A null in a field the Avro schema does not allow null is refused per row
by Spark's encoder while the batch is written (Spark's ``AVRO_CANNOT_WRITE_NULL_FIELD``, a
``SinkError`` naming the field): as a JDBC table's ``NOT NULL`` column. The rows are encoded
before the shuffle into parts, so the batch fails before any part's transaction begins, and a
restart after the fix (a ``["null", ...]`` union in the schema, or a value from the function)
writes it once.

With ``Avro(..., confluent=True, registry=...)`` the header's id is the registry's:
``registered`` registers the schema under the topic's subject when the sink is made, on the
driver, once (the registry answers an identical schema with its existing id), and the sink
writes with that id from then on.

Protobuf is Google's protobuf runtime's encoding of the message with the descriptors
(``protobuf_codec.encoded``, a pandas UDF), after Confluent's header and the message's indexes
when ``confluent``; ``check_value`` refuses, on the driver and without a job, a column the
message has no field for by name, and a column whose type the field does not take
(``protobuf_codec.misfits``). A null column is an unset field; a value the field cannot hold (an
enum name it lacks, an integer out of range) fails the batch, as Avro's null does. With
``registry``, ``Protobuf.written`` registers the message's file (its imports first) or takes
the subject's latest version, once, when the sink is made.

Headers (``headers="col"``): a ``map<string, string>`` or ``map<string, binary>`` column of
the output, left out of the value, given to the producers as ``map<string, binary>``
(``header_records``); another type, a missing column, or the key's column is refused before
the query starts (``check_headers``). A map never holds a null key, and a value the function
yields that is not a map of text (an int, a list) is a dead letter of the output check
(``core/output_check.py``) before any sink sees it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from sparkcast.api.formats import Avro, spark_avro_missing
from sparkcast.api.protobuf import Protobuf
from sparkcast.api.registry import SchemaRegistry
from sparkcast.errors import PipelineError, SinkError
from sparkcast.spark.launch.connectors import require
from sparkcast.spark.outputs import protobuf_codec

#: Spark's error for a null in a field the Avro schema does not allow null (the encoder exists)
_NULL_FIELD = "AVRO_CANNOT_WRITE_NULL_FIELD"
#: the values a ``headers=`` map may hold: text (what ``kafka_topic`` reads), or bytes
HEADER_VALUES = (StringType(), BinaryType())


def encoded(row: Column, schema: Avro | Protobuf | None) -> Column:
    """``row`` (a struct of the output's columns) as the record value: JSON text, or Avro or
    Protobuf bytes after Confluent's header when the schema says so."""
    if schema is None:
        return F.to_json(row)
    if isinstance(schema, Protobuf):
        body = protobuf_codec.encoded(row, schema.message, schema.descriptor_set().data)
    else:
        body = _avro_body(row, schema)
    return F.concat(F.lit(schema.header()), body) if schema.confluent else body


def _avro_body(row: Column, schema: Avro) -> Column:
    from pyspark.sql.avro.functions import to_avro

    try:
        return to_avro(row, schema.schema)
    except TypeError as error:
        if "JavaPackage" in str(error):
            raise spark_avro_missing(error) from error
        raise


def registered(schema: Avro | Protobuf | None, topic: str) -> Avro | Protobuf | None:
    """``schema`` with the id its registry gives it under ``topic``'s subject (see the module's
    docstring); any other as it is. A sink writes one schema: writer schemas are refused."""
    if isinstance(schema, Protobuf):
        try:
            return schema.written(topic)
        except PipelineError as error:
            raise SinkError(f"sinks.kafka({topic!r}): {error}") from error
    avro = schema
    if avro is None or not avro.confluent:
        return avro
    if avro.writer_schemas:
        raise SinkError(f"sinks.kafka({topic!r}): writer_schemas are for reading; a sink writes "
                        "one schema: give schema_id, or registry to have it registered")
    if not isinstance(avro.registry, SchemaRegistry):
        return avro
    try:
        schema_id = avro.registry.register(avro.subject_of(topic), avro.schema)
    except PipelineError as error:
        raise SinkError(f"sinks.kafka({topic!r}): {error}") from error
    return avro.with_schema_id(schema_id)


def check_value(where: str, schema: Avro | Protobuf, output: StructType, spark: Any) -> None:
    """Refuse, before the query starts, an Avro or Protobuf schema the output's rows cannot be
    written with (see the module's docstring), or Confluent framing without a schema id."""
    try:
        if schema.confluent:
            schema.header()  # refuses a missing schema id
        if isinstance(schema, Protobuf):
            _check_fields(schema, output)
    except PipelineError as error:
        raise SinkError(f"{where}: {error}") from error
    if isinstance(schema, Avro):
        _check_avro(where, schema, output, spark)


def _check_avro(where: str, avro: Avro, output: StructType, spark: Any) -> None:
    require(spark, ("avro",))  # spark-avro joins a session sparkcast started at its first use
    nulls = F.struct(*[F.lit(None).cast(f.dataType).alias(f.name) for f in output.fields])
    try:
        spark.range(1).select(encoded(nulls, avro).alias("value")).collect()
    except Exception as error:
        if _condition(error) == _NULL_FIELD:
            return  # the encoder was built: every column fits (nulls aside, see above)
        raise SinkError(f"{where}: the output's columns ({output.simpleString()}) cannot be "
                        f"written as the {avro.describe()}: {_avro_reason(error)}; make the "
                        "Avro schema's fields the output's columns, by name and type") from error


def _check_fields(proto: Protobuf, output: StructType) -> None:
    """Refuse output columns the message has no field for, and columns of a type their field
    does not take: each column is written to the field of its name."""
    fields = proto.descriptor_set().fields(proto.message)
    missing = [n for n in output.fieldNames() if n not in fields]
    if missing:
        raise PipelineError(f"columns {missing} are not fields of message {proto.message} "
                            f"(its fields: {', '.join(fields)}): add them to the message, or "
                            "leave them out of the output")
    wrong = protobuf_codec.misfits(output, proto.message, proto.descriptor_set().data)
    if wrong:
        raise PipelineError(f"columns {', '.join(wrong)} cannot be written to message "
                            f"{proto.message}'s fields: make the output's types the fields' "
                            "(docs/sinks.md, Protobuf values)")


def _condition(error: BaseException) -> str | None:
    """Spark's error condition of a captured error (PySpark's exceptions carry it)."""
    condition = getattr(error, "getCondition", None)
    return condition() if callable(condition) else None


def _avro_reason(error: BaseException) -> str:
    """Avro's own line from a failed task's error (Py4J wraps it in Spark's job failure)."""
    text = str(error)
    causes = [line.split("IncompatibleSchemaException:", 1)[1].strip()
              for line in text.splitlines() if "IncompatibleSchemaException:" in line]
    if causes:
        return causes[-1]  # the innermost: the field that does not convert
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def header_records(headers: Column) -> Column:
    """A ``headers=`` column as the producers take it: ``map<string, binary>`` (text as its
    UTF-8 bytes); a null column, no headers."""
    return F.transform_values(headers, lambda _, value: value.cast("binary"))


def check_headers(where: str, name: str, output: StructType, key: str | None) -> None:
    """Refuse, before the query starts, a ``headers=`` column the output lacks, of a type no
    header is made from, or that is also the key."""
    if name not in output.fieldNames():
        raise SinkError(f"{where}: headers column {name!r} is not a column of the output "
                        f"({output.simpleString()})")
    kind = output[name].dataType
    if not (isinstance(kind, MapType) and kind.keyType == StringType()
            and kind.valueType in HEADER_VALUES):
        raise SinkError(f"{where}: headers column {name!r} is {kind.simpleString()}; a record's "
                        "headers are a map<string,string> (what kafka_topic's kafka_headers "
                        "holds) or map<string,binary>: declare the column so in the output "
                        "schema")
    if name == key:
        raise SinkError(f"{where}: {name!r} is both the key and the headers column; a record's "
                        "key is text, its headers a map: use two columns")
