"""Protobuf values in Spark: ``decoded`` and ``encoded`` are pandas UDFs over Google's protobuf
runtime (``protobuf_rows.py``), the one codec of ``kafka_topic`` and ``sinks.kafka``; the
columns' Spark types come from the message's descriptor, here, on the driver.

Spark's own ``from_protobuf``/``to_protobuf`` (spark-protobuf) are not used: Maven does not
serve spark-protobuf everywhere (this project's build machines got none, any version), a jar
must match the running Spark exactly, and its ``PERMISSIVE`` mode gives a body that does not
parse a row of nulls, where the runtime says why. The types are the ones Spark's functions
give (with ``upcast.unsigned.ints``: no unsigned value wraps):

``double``, ``float``, ``bool``, ``string``, ``bytes`` → ``double``, ``float``, ``boolean``,
``string``, ``binary``; ``int32``, ``sint32``, ``sfixed32`` → ``int``; ``int64``, ``sint64``,
``sfixed64``, ``uint32``, ``fixed32`` → ``bigint``; ``uint64``, ``fixed64`` → ``decimal(20,0)``;
an enum → ``string``, its value's name (``enums.as.ints``: ``int``); a message → ``struct``,
``repeated`` → ``array``, ``map<k, v>`` → ``map``; ``google.protobuf.Timestamp`` →
``timestamp``, ``google.protobuf.Duration`` → ``interval day to second``.

A recursive message has no Spark type and is refused when the query is planned.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcast.errors import PipelineError
from sparkcast.spark.outputs.protobuf_late import LateProtobuf
from sparkcast.spark.outputs.protobuf_rows import (
    DURATION,
    TIMESTAMP,
    Decoder,
    Encoder,
    fields_of,
    map_entry,
)

#: the field of a decoded struct that holds the runtime's error (null: the body parsed); no
#: Protobuf field can be named so (a field's name is an identifier)
ERROR = "sparkcast:error"
#: the field that holds why a value of an id the plan did not know has no body (``decoded``)
LATE = "sparkcast:late"

_C = FieldDescriptor
_SCALARS: dict[int, T.DataType] = {
    _C.TYPE_DOUBLE: T.DoubleType(), _C.TYPE_FLOAT: T.FloatType(), _C.TYPE_BOOL: T.BooleanType(),
    _C.TYPE_STRING: T.StringType(), _C.TYPE_BYTES: T.BinaryType(), _C.TYPE_ENUM: T.StringType(),
    **dict.fromkeys((_C.TYPE_INT32, _C.TYPE_SINT32, _C.TYPE_SFIXED32), T.IntegerType()),
    **dict.fromkeys((_C.TYPE_INT64, _C.TYPE_SINT64, _C.TYPE_SFIXED64, _C.TYPE_UINT32,
                     _C.TYPE_FIXED32), T.LongType()),
    **dict.fromkeys((_C.TYPE_UINT64, _C.TYPE_FIXED64), T.DecimalType(20, 0))}
_WELL_KNOWN: dict[str, T.DataType] = {TIMESTAMP: T.TimestampType(),
                                      DURATION: T.DayTimeIntervalType()}


def message_struct(message: str, descriptors: bytes, enums_as_ints: bool = False
                   ) -> T.StructType:
    """The columns of ``message``'s fields, as ``decoded`` gives them (see the table above)."""
    return T.StructType([T.StructField(f.name, _field_type(f, enums_as_ints, (message,)))
                         for f in fields_of(descriptors, message)])


def _field_type(field: Any, ints: bool, seen: tuple[str, ...]) -> T.DataType:
    if map_entry(field):
        key, value = field.message_type.fields
        return T.MapType(_value_type(key, ints, seen), _value_type(value, ints, seen))
    kind = _value_type(field, ints, seen)
    return T.ArrayType(kind) if field.is_repeated else kind


def _value_type(field: Any, ints: bool, seen: tuple[str, ...]) -> T.DataType:
    if field.message_type is None:
        return T.IntegerType() if ints and field.type == _C.TYPE_ENUM else _SCALARS[field.type]
    name = field.message_type.full_name
    if name in _WELL_KNOWN:
        return _WELL_KNOWN[name]
    if name in seen:
        raise PipelineError(f"message {seen[0]} is recursive ({' → '.join((*seen, name))}); a "
                            "row's type is fixed, so kafka_topic and sinks.kafka read and write "
                            "messages without recursion only")
    return T.StructType([T.StructField(f.name, _field_type(f, ints, (*seen, name)))
                         for f in field.message_type.fields])


def decoded(body: Column, message: str, descriptors: bytes, emit: bool, enums_as_ints: bool,
            late: tuple[Column, LateProtobuf] | None = None) -> Column:
    """``body`` (binary) parsed as ``message``: a struct of its fields, then ``ERROR``, the
    runtime's error where it did not parse (its fields then null). With ``late`` (a column of
    whole values, null but where the plan did not know the id, and their ``LateProtobuf``),
    such a value's body is found by looking its id up (``protobuf_late.py``), and ``LATE``
    follows, the reason where there is none."""
    fields = message_struct(message, descriptors, enums_as_ints).fields
    if late is None:
        struct = T.StructType([*fields, T.StructField(ERROR, T.StringType())])
        names = struct.fieldNames()

        @F.pandas_udf(struct)  # type: ignore[call-overload]
        def decode(bodies: pd.Series) -> pd.DataFrame:
            row = Decoder(message, descriptors, emit, enums_as_ints).row
            return pd.DataFrame.from_records([row(b) for b in bodies], columns=names)

        return decode(body)
    values, lookup = late
    struct = T.StructType([*fields, T.StructField(ERROR, T.StringType()),
                           T.StructField(LATE, T.StringType())])
    names = struct.fieldNames()

    @F.pandas_udf(struct)  # type: ignore[call-overload]
    def decode_late(bodies: pd.Series, whole: pd.Series) -> pd.DataFrame:
        row = Decoder(message, descriptors, emit, enums_as_ints).row
        found = [(b, None) if v is None else lookup.body(v) for b, v in zip(bodies, whole,
                                                                         strict=True)]
        return pd.DataFrame.from_records(
            [(*row(b), None) if why is None else (*row(None), why) for b, why in found],
            columns=names)

    return decode_late(body, values)


def encoded(row: Column, message: str, descriptors: bytes) -> Column:
    """``row`` (a struct of columns named as ``message``'s fields) as the message's bytes."""
    fields_of(descriptors, message)  # a set without the message is refused here, not in a task
    zone = SparkSession.active().conf.get("spark.sql.session.timeZone") or "UTC"

    @F.pandas_udf(T.BinaryType())  # type: ignore[call-overload]
    def encode(rows: pd.DataFrame) -> pd.Series:
        body = Encoder(message, descriptors, zone).body
        return pd.Series([body(r) for r in rows.to_dict("records")], dtype=object)

    return encode(row)


def misfits(columns: T.StructType, message: str, descriptors: bytes) -> list[str]:
    """The columns (nested ones by their path) ``encoded`` cannot write to ``message``'s field
    of their name, each with its type and the field's; a column the message has no field for
    is named too. Integers go to any integer or floating field, a decimal of scale 0 to an
    integer one, text or an integer to an enum (its name or number), a timestamp to
    ``google.protobuf.Timestamp``; a value out of the field's range fails its task."""
    return _struct_misfits(columns, list(fields_of(descriptors, message)), "")


def _struct_misfits(columns: T.StructType, fields: list[Any], path: str) -> list[str]:
    by_name = {f.name: f for f in fields}
    found = []
    for column in columns.fields:
        where = f"{path}{column.name}"
        field = by_name.get(column.name)
        if field is None:
            found.append(f"{where} (no such field)")
        else:
            found += _misfits(column.dataType, field, where)
    return found


def _misfits(kind: T.DataType, field: Any, where: str) -> list[str]:
    if map_entry(field):
        key, value = field.message_type.fields
        if not isinstance(kind, T.MapType):
            return [f"{where} ({kind.simpleString()}, for a map)"]
        return [*_value_misfits(kind.keyType, key, f"{where} key"),
                *_value_misfits(kind.valueType, value, f"{where} value")]
    if field.is_repeated:
        if not isinstance(kind, T.ArrayType):
            return [f"{where} ({kind.simpleString()}, for a repeated field)"]
        return _value_misfits(kind.elementType, field, f"{where} element")
    return _value_misfits(kind, field, where)


_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def _value_misfits(kind: T.DataType, field: Any, where: str) -> list[str]:
    message = field.message_type
    if message is not None and message.full_name not in _WELL_KNOWN:
        if isinstance(kind, T.StructType):
            return _struct_misfits(kind, list(message.fields), f"{where}.")
    elif _fits(kind, field):
        return []
    return [f"{where} ({kind.simpleString()}, for {_described(field)})"]


def _fits(kind: T.DataType, field: Any) -> bool:
    """Whether a value of ``kind`` is written to a (scalar or well-known) ``field``."""
    integral = isinstance(kind, _INTEGRAL) or (isinstance(kind, T.DecimalType) and kind.scale == 0)
    if field.message_type is not None:
        wanted = (T.TimestampType, T.TimestampNTZType) if field.message_type.full_name == \
            TIMESTAMP else (T.DayTimeIntervalType,)
        return isinstance(kind, wanted)
    if field.type == _C.TYPE_ENUM:
        return integral or isinstance(kind, T.StringType)
    if field.type in (_C.TYPE_DOUBLE, _C.TYPE_FLOAT):
        return integral or isinstance(kind, (T.FloatType, T.DoubleType))
    if field.type in (_C.TYPE_BOOL, _C.TYPE_STRING, _C.TYPE_BYTES):
        return kind == _SCALARS[field.type]
    return integral


def _described(field: Any) -> str:
    if field.message_type is not None:
        return f"message {field.message_type.full_name}"
    if field.enum_type is not None:
        return f"enum {field.enum_type.full_name}"
    return descriptor_pb2.FieldDescriptorProto.Type.Name(field.type)[5:].lower()
