"""Output values to Arrow without loss: objects taken apart into fields, and the checks Arrow
does not make (``core/output_check.py`` uses them for every output).

Arrow's conversion from Python truncates a float into an integer column (``120.5`` becomes 120)
and overflows a finite double to infinity in a ``float`` column, without a word; the checks here
refuse both, for top-level columns at C speed and inside structs, lists and maps value by value.

>>> from typing import NamedTuple
>>> class Point(NamedTuple):  # a dataclass, NamedTuple or plain object: its fields by name
...     x: int
...     y: int
>>> object_fields(Point(1, 2))
{'x': 1, 'y': 2}
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sparkcast.api.row import Row
from sparkcast.errors import OutputTypeError

#: values that are never taken apart into fields
_ATOMS = (str, bytes, bytearray, int, float, bool, decimal.Decimal, datetime.date,
          datetime.time, datetime.timedelta, dict, list, tuple, set, frozenset, enum.Enum, Row)

#: what a failed Arrow conversion raises
CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError,
                     ValueError, OverflowError, AttributeError, KeyError)
_NONE = type(None)


def object_fields(value: Any) -> dict[str, Any] | None:
    """An object's fields by name (a dataclass's, a NamedTuple's, a plain object's
    ``__dict__``/``__slots__``), or None for a value that is not such an object."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return dict(zip(value._fields, value, strict=True))
    if isinstance(value, _ATOMS) or value is None or isinstance(value, type):
        return None
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    module = type(value).__module__ or ""
    if module.split(".")[0] in ("builtins", "numpy", "pandas", "pyarrow", "uuid"):
        return None
    found: dict[str, Any] = {}
    for cls in reversed(type(value).__mro__):
        for name in getattr(cls, "__slots__", ()):
            if hasattr(value, name):
                found[name] = getattr(value, name)
    found.update(getattr(value, "__dict__", {}))
    return found if found or hasattr(value, "__dict__") else None


def plain(value: Any, kind: pa.DataType) -> Any:
    """``value`` with the objects in its struct positions as dicts (Arrow takes dicts and
    tuples); a field an object lacks raises ``OutputTypeError`` naming it."""
    if value is None:
        return None
    if pa.types.is_struct(kind):
        fields = _row_fields(value, kind) if isinstance(value, Row) else (
            None if isinstance(value, (dict, tuple, list)) else object_fields(value))
        if fields is None:
            return value
        made = {}
        for child in kind:
            if child.name not in fields:
                raise OutputTypeError(f"{type(value).__name__} has no field {child.name!r}")
            made[child.name] = plain(fields[child.name], child.type)
        return made
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and isinstance(value, (
            list, tuple)):
        return [plain(v, kind.value_type) for v in value]
    if pa.types.is_map(kind) and isinstance(value, dict):
        return {k: plain(v, kind.item_type) for k, v in value.items()}
    return value


def _row_fields(value: Row, kind: pa.DataType) -> dict[str, Any]:
    """A PyFlink ``Row`` (not a tuple, so Arrow cannot take it) in a struct position: its
    fields by name, or by position when it has no names."""
    names = value.__fields__ or [child.name for child in kind][:len(value)]
    return dict(zip(names, value, strict=True))


def has_struct(kind: pa.DataType) -> bool:
    if pa.types.is_struct(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return has_struct(kind.value_type)
    if pa.types.is_map(kind):
        return has_struct(kind.item_type)
    return False


def numeric(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def nested_numbers(kind: pa.DataType) -> bool:
    """A nested type with an integer or float inside (checked value by value)."""
    if pa.types.is_struct(kind):
        return any(numeric(f.type) or nested_numbers(f.type) for f in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return numeric(kind.value_type) or nested_numbers(kind.value_type)
    if pa.types.is_map(kind):
        return numeric(kind.item_type) or nested_numbers(kind.item_type)
    return False


def check_lossless(values: list[Any], array: pa.Array, kind: pa.DataType) -> None:
    """Arrow converted ``values`` into ``array`` of a number type: refuse a truncated
    fraction (``120.5`` into ``bigint``) or a finite value that overflowed to infinity."""
    if pa.types.is_integer(kind):
        if all(k is int or k is _NONE for k in set(map(type, values))):
            return  # the common case, in one C-speed pass: nothing Arrow could have truncated
        try:
            inferred = pa.array(values)  # any float makes doubles, a Decimal decimals
        except CONVERSION_ERRORS:
            inferred = None
        if inferred is not None and not pa.types.is_integer(inferred.type):
            try:
                inferred.cast(kind, safe=True)
            except pa.ArrowInvalid as exc:
                raise OutputTypeError(f"{exc}: not without loss") from None
        return
    if pa.types.is_float32(kind) and array.null_count < len(array):
        if pc.any(pc.is_inf(array)).as_py() and any(
                isinstance(v, float) and math.isfinite(v) and abs(v) > 3.4e38 for v in values):
            raise OutputTypeError("a finite value overflows float to infinity")


def check_deep(value: Any, kind: pa.DataType) -> None:
    """``check_lossless`` for the numbers inside a struct, list or map value."""
    if value is None:
        return
    if pa.types.is_integer(kind):
        if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
            raise OutputTypeError(f"float {value!r} does not fit an integer without loss")
    elif pa.types.is_struct(kind):
        for i, child in enumerate(kind):
            if isinstance(value, dict):
                check_deep(value.get(child.name), child.type)
            elif isinstance(value, (tuple, list)) and i < len(value):
                check_deep(value[i], child.type)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        for item in value:
            check_deep(item, kind.value_type)
    elif pa.types.is_map(kind) and isinstance(value, dict):
        for item in value.values():
            check_deep(item, kind.item_type)


_DDL_NAMES = {pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int",
              pa.int64(): "bigint", pa.float32(): "float", pa.float64(): "double",
              pa.string(): "string", pa.bool_(): "boolean", pa.binary(): "binary",
              pa.date32(): "date"}


def ddl_name(kind: pa.DataType) -> str:
    """An Arrow type as Spark's DDL names it (as the user wrote it in the schema)."""
    if kind in _DDL_NAMES:
        return _DDL_NAMES[kind]
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_timestamp(kind):
        return "timestamp" if kind.tz else "timestamp_ntz"
    if pa.types.is_list(kind):
        return f"array<{ddl_name(kind.value_type)}>"
    if pa.types.is_map(kind):
        return f"map<{ddl_name(kind.key_type)},{ddl_name(kind.item_type)}>"
    if pa.types.is_struct(kind):
        return "struct<" + ",".join(f"{f.name}:{ddl_name(f.type)}" for f in kind) + ">"
    return str(kind)


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
