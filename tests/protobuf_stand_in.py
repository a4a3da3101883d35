"""A stand-in for spark-protobuf's ``from_protobuf``/``to_protobuf``, for a test session whose
classpath lacks the jar because Maven did not serve it (this project's build machines' Maven
did not, 2026-12: ``make install`` says so, jvm/protobuf/pom.xml). With the jar, the tests run
Spark's own functions and this module does nothing.

The two functions take the same arguments and give the same columns as Spark's, for what the
tests use: scalars, enums as names, repeated fields, nested messages; a body that does not
parse gives a struct of nulls, as Spark's ``PERMISSIVE`` mode does; ``emit.default.values``
renders unset fields without presence as their zero value, as Spark does. They run in pandas
UDFs over Python's protobuf runtime (message classes built from the descriptor set, never a
module imported), so they test sparkcast's framing, dead letters and registry use on a real
broker, and not Spark's own decoder.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pandas as pd
import pyspark.sql.protobuf.functions as spark_protobuf
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor
from pyspark import cloudpickle
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcast.spark.launch.connectors import has_connector

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: T.DoubleType(), FieldDescriptor.TYPE_FLOAT: T.FloatType(),
    FieldDescriptor.TYPE_BOOL: T.BooleanType(), FieldDescriptor.TYPE_STRING: T.StringType(),
    FieldDescriptor.TYPE_BYTES: T.BinaryType(), FieldDescriptor.TYPE_ENUM: T.StringType(),
    **{t: T.LongType() for t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64,
                                 FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_UINT64,
                                 FieldDescriptor.TYPE_FIXED64)},
    **{t: T.IntegerType() for t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32,
                                    FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_UINT32,
                                    FieldDescriptor.TYPE_FIXED32)}}


_CLASSES: dict[tuple[str, bytes], Any] = {}


def install_unless_served(spark: Any) -> bool:
    """Put the stand-ins in place of Spark's functions when the session lacks spark-protobuf;
    whether it did."""
    if has_connector(spark, "protobuf"):
        return False
    # the workers need not find this module (it is not on their path): its code goes with
    # the UDFs
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark_protobuf.from_protobuf = from_protobuf
    spark_protobuf.to_protobuf = to_protobuf
    return True


def _message(name: str, descriptors: bytes) -> Any:
    """The message class of ``name`` in the set, once per worker (the driver builds its own:
    a class does not pickle, and this module's globals go to the workers by value)."""
    key = (name, descriptors)
    if key not in _CLASSES:
        _CLASSES[key] = _built(name, descriptors)
    return _CLASSES[key]


def _built(name: str, descriptors: bytes) -> Any:
    pool = descriptor_pool.DescriptorPool()
    pending = list(descriptor_pb2.FileDescriptorSet.FromString(descriptors).file)
    while pending:  # a file after the files it imports
        file = next(f for f in pending if all(_has(pool, d) for d in f.dependency))
        pool.Add(file)
        pending.remove(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _has(pool: Any, name: str) -> bool:
    try:
        pool.FindFileByName(name)
    except KeyError:
        return False
    return True


def _spark_type(field: Any) -> T.DataType:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields
        return T.MapType(_spark_type(key), _spark_type(value))
    if field.message_type is not None:
        kind: T.DataType = T.StructType([T.StructField(f.name, _spark_type(f))
                                         for f in field.message_type.fields])
    else:
        kind = _SCALARS[field.type]
    return T.ArrayType(kind) if _repeated(field) else kind


def _repeated(field: Any) -> bool:
    return bool(field.is_repeated)


def _value(field: Any, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.message_type is not None:
        return _row(value, True)
    return value


def _row(message: Any, emit: bool) -> dict[str, Any]:
    """Spark's rule: repeated fields always, others when present, else their zero value with
    ``emit`` for a field without presence, else null."""
    row = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            row[field.name] = {k: _value(field.message_type.fields[1], v) for k, v in value.items()}
        elif _repeated(field):
            row[field.name] = [_value(field, v) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            row[field.name] = None
        elif field.has_presence or value != field.default_value or emit:
            row[field.name] = _value(field, value)
        else:
            row[field.name] = None
    return row


def from_protobuf(data: Column, messageName: str, descFilePath: str | None = None,  # noqa: N803
                  options: dict[str, str] | None = None,
                  binaryDescriptorSet: bytes | None = None) -> Column:  # noqa: N803
    """Spark's ``from_protobuf`` with a descriptor set (see the module's docstring)."""
    assert binaryDescriptorSet is not None and descFilePath is None
    struct = T.StructType([T.StructField(f.name, _spark_type(f)) for f in
                           _built(messageName, binaryDescriptorSet).DESCRIPTOR.fields])
    emit = (options or {}).get("emit.default.values", "false").lower() == "true"
    nulls = dict.fromkeys(struct.fieldNames())

    def parsed(value: Any) -> dict[str, Any]:
        try:
            cls = _message(messageName, binaryDescriptorSet)
            return _row(cls.FromString(bytes(value)), emit)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError and its kin: PERMISSIVE
            return nulls

    @F.pandas_udf(struct)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        return pd.DataFrame([parsed(v) if v is not None else nulls for v in values],
                            columns=struct.fieldNames())

    return decode(data)


def to_protobuf(data: Column, messageName: str, descFilePath: str | None = None,  # noqa: N803
                options: dict[str, str] | None = None,
                binaryDescriptorSet: bytes | None = None) -> Column:  # noqa: N803
    """Spark's ``to_protobuf`` with a descriptor set: a column of the struct's name is written
    to the field of that name, a null one left unset."""
    assert binaryDescriptorSet is not None and descFilePath is None
    _built(messageName, binaryDescriptorSet)  # refuses a message the set lacks, as Spark's

    def message(row: dict[str, Any]) -> bytes:
        cls = _message(messageName, binaryDescriptorSet)
        built = cls()
        for name, value in row.items():
            if value is None or (not isinstance(value, (list, dict, np.ndarray))
                                 and pd.isna(value)):
                continue
            field = cls.DESCRIPTOR.fields_by_name[name]
            if field.type == FieldDescriptor.TYPE_ENUM:
                value = field.enum_type.values_by_name[value].number
            elif field.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64):
                value = int(value)
            if _repeated(field):
                getattr(built, name).extend(list(value))
            else:
                setattr(built, name, value)
        return bytes(built.SerializeToString())

    @F.pandas_udf(T.BinaryType())  # type: ignore[call-overload]
    def encode(rows: pd.DataFrame) -> pd.Series:
        return pd.Series([message(r) for r in rows.to_dict("records")])

    return encode(data)
