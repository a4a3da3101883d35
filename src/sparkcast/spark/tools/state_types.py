"""Spark column types for declared state types, for ``read_state``'s typed columns.

A declared type maps to the Spark type a user would write for it: ``str`` -> string, ``int`` ->
bigint, ``float`` -> double, dataclasses and NamedTuples -> structs of their fields, enums -> the
type of their values, ``list[T]``/``set[T]`` -> arrays, ``dict[K, V]`` -> maps, ``Optional[T]``
-> a nullable ``T``. A type with no single Spark type (undeclared, ``Types.PICKLED_BYTE_ARRAY()``,
a union of unlike types, a bare ``dict``) gives ``None``: that column stays the codec's JSON.
``fit`` turns a value read from state (typed by the descriptor's converter) into what
``createDataFrame`` takes for that type.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import types
import typing
from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sparkcast.api.declared_types import is_record_type, record_fields

_SCALARS: dict[type, DataType] = {
    str: StringType(), int: LongType(), float: DoubleType(), bool: BooleanType(),
    bytes: BinaryType(), decimal.Decimal: DecimalType(38, 18),
    datetime.datetime: TimestampType(), datetime.date: DateType(),
}
_LISTS = (list, set, frozenset)


def spark_type(declared: Any) -> DataType | None:
    """The Spark type of a declared state type, or None when it has no single one."""
    return _spark_type(declared, set())


def _spark_type(declared: Any, seen: set[type]) -> DataType | None:
    origin = typing.get_origin(declared)
    if origin is not None:
        return _generic(declared, origin, seen)
    if not isinstance(declared, type) or declared is object:
        return None
    if declared in _SCALARS:
        return _SCALARS[declared]
    if issubclass(declared, enum.Enum):
        kinds = {_spark_type(type(m.value), seen) for m in declared}
        return kinds.pop() if len(kinds) == 1 else None
    if is_record_type(declared) and declared not in seen:
        fields = [StructField(name, kind, True) for name, hint, _ in record_fields(declared)
                  if (kind := _spark_type(hint, seen | {declared})) is not None]
        return StructType(fields) if len(fields) == len(record_fields(declared)) else None
    return None


def _generic(declared: Any, origin: Any, seen: set[type]) -> DataType | None:
    args = [a for a in typing.get_args(declared) if a is not type(None)]
    if origin in (typing.Union, types.UnionType):
        kinds = {_spark_type(a, seen) for a in args}
        return kinds.pop() if len(kinds) == 1 else None
    found = [_spark_type(a, seen) for a in args if a is not Ellipsis]
    parts = [p for p in found if p is not None]
    if not parts or len(parts) != len(found):
        return None
    if origin in _LISTS or (origin is tuple and Ellipsis in typing.get_args(declared)):
        return ArrayType(parts[0], True)
    if origin is dict or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return MapType(parts[0], parts[1], True) if len(parts) == 2 else None
    if origin is tuple:
        return StructType([StructField(f"_{i + 1}", p, True) for i, p in enumerate(parts)])
    return None


def fit(value: Any, kind: DataType) -> Any:
    """``value`` as ``createDataFrame`` takes it for a column of type ``kind``."""
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(kind, StructType):
        return _struct(value, kind)
    if isinstance(kind, ArrayType):
        items = [fit(item, kind.elementType) for item in value]
        return _sorted(items) if isinstance(value, (set, frozenset)) else items
    if isinstance(kind, MapType):
        return {fit(k, kind.keyType): fit(v, kind.valueType) for k, v in value.items()}
    if isinstance(kind, DoubleType):
        return float(value)
    return value


def _sorted(items: list[Any]) -> list[Any]:
    """A set's members in a stable order (by value; by text when they do not compare)."""
    try:
        return sorted(items)
    except TypeError:
        return sorted(items, key=repr)


def _struct(value: Any, kind: StructType) -> tuple[Any, ...]:
    names = kind.fieldNames()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        values = [getattr(value, n) for n in names]
    elif isinstance(value, Mapping):
        values = [value.get(n) for n in names]
    else:  # a NamedTuple, a Row or a plain tuple: by position
        values = list(value)
    return tuple(fit(v, f.dataType) for v, f in zip(values, kind.fields, strict=True))
