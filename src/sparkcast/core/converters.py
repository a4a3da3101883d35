"""Typed values read back from state: rebuilt from the descriptor's declared type, only.

The codec stores a dataclass as its type name and fields, an enum member as its value, a
NamedTuple as its fields (``core/codec.py``), and decodes them generically. A backend that
decodes state (Spark's) passes each value through the converter of its descriptor, built once
here from the declared types: nothing in the data picks a class, so reading a checkpoint never
imports or runs code it names.

Schema evolution, at read time: a field the class gained with a default takes its default, a
field the class lost is ignored, anything else raises ``StateSerializationError`` naming the fix
(``api/declared_types.compatible_change`` states the same rule on type records, for restart checks).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable
from typing import Any

from sparkcast.api.declared_types import is_record_type, record_fields
from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.core.codec import Record, hashable
from sparkcast.core.frozen import freeze
from sparkcast.errors import StateSerializationError

Convert = Callable[[Any], Any]


def converter(declared: Any) -> Convert | None:
    """A function turning a generically decoded value into the declared type, or None when
    decoded values are already right (scalars, plain containers, any): the common case costs
    nothing."""
    return _converter(declared, {})


def _converter(declared: Any, building: dict[type, Convert | None]) -> Convert | None:
    origin = typing.get_origin(declared)
    if origin is not None:
        return _generic(declared, origin, building)
    if not isinstance(declared, type):
        return None
    if issubclass(declared, enum.Enum):
        return _enum(declared)
    if is_record_type(declared):
        if declared in building:  # a recursive type: resolved when called
            return lambda value: building[declared](value)  # type: ignore[misc]
        building[declared] = None
        made = _record(declared, building)
        building[declared] = made
        return made
    return None


def _enum(cls: type[enum.Enum]) -> Convert:
    def convert(value: Any) -> Any:
        if value is None or isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise StateSerializationError(
                f"state holds {value!r}, which is not a member of {cls.__name__} any more: "
                "keep the member (or its value), or migrate the state") from None
    return convert


def _record(cls: type, building: dict[type, Convert | None]) -> Convert:
    fields = [(name, _converter(hint, building), has_default)
              for name, hint, has_default in record_fields(cls)]

    def convert(value: Any) -> Any:
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple, decoded
            value = dict(zip(value._fields, value, strict=True))
        elif getattr(value, "__fields__", None):  # a NamedTuple decoded as a Row
            value = dict(zip(value.__fields__, value, strict=True))
        if not isinstance(value, dict):
            raise StateSerializationError(
                f"state holds a {type(value).__name__} where {cls.__name__} is declared: the "
                "descriptor's type changed; declare the stored type, or migrate the state")
        stored_name = getattr(value, "type_name", cls.__name__)
        if isinstance(value, Record) and stored_name not in (cls.__name__, cls.__qualname__):
            raise StateSerializationError(
                f"state holds a {stored_name} where {cls.__name__} is declared: a renamed class "
                "cannot read old state; keep the name, or migrate the state")
        arguments = {}
        for name, field_convert, has_default in fields:
            if name in value:
                item = value[name]
                arguments[name] = item if field_convert is None else field_convert(item)
            elif not has_default:
                raise StateSerializationError(
                    f"state holds a {cls.__name__} without the field {name!r}, which has no "
                    "default: give the new field a default so old state can be read")
        return cls(**arguments)
    return convert


def _generic(declared: Any, origin: Any, building: dict[type, Convert | None]) -> Convert | None:
    args = typing.get_args(declared)
    if origin is typing.Union or type(declared).__name__ == "UnionType":
        parts = [c for c in (_converter(a, building) for a in args if a is not type(None)) if c]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else _first_that_fits(parts)
    if origin in (dict,) or "Mapping" in getattr(origin, "__name__", ""):
        key, value = (args + (object, object))[:2]
        k, v = _converter(key, building), _converter(value, building)
        if k is None and v is None:
            return None
        return lambda d: None if d is None else {
            (hashable(x) if k is None else k(x)): (y if v is None else v(y)) for x, y in d.items()}
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        return _tuple(args, building)
    item = _converter(args[0], building) if args else None
    if item is None:
        return None
    if origin in (set, frozenset):
        return lambda s: None if s is None else origin(item(x) for x in s)
    make = tuple if origin is tuple else list
    return lambda xs: None if xs is None else make(item(x) for x in xs)


def _tuple(args: tuple[Any, ...], building: dict[type, Convert | None]) -> Convert | None:
    items = [_converter(a, building) for a in args]
    if not any(items):
        return None
    return lambda t: None if t is None else tuple(
        x if c is None else c(x) for x, c in zip(t, items, strict=False))


def _first_that_fits(parts: list[Convert]) -> Convert:
    def convert(value: Any) -> Any:
        for part in parts:
            try:
                return part(value)
            except (StateSerializationError, TypeError):
                continue
        raise StateSerializationError(f"state value {value!r} fits no type of the declared union")
    return convert


def stored_converter(descriptor: StateDescriptor) -> Convert | None:
    """The converter of one keyed descriptor's stored records, which hold its values as the
    state kind lays them out (value, list, map; with TTL, ``[value, expires_at]``)."""
    ttl = descriptor.ttl_config is not None
    if isinstance(descriptor, MapStateDescriptor):
        key, value = converter(descriptor.key_type_info), converter(descriptor.value_type_info)
        if key is None and value is None:
            return None
        one = _ttl(value) if ttl else value
        return lambda entries: {(x if key is None else key(x)): (y if one is None else one(y))
                                for x, y in entries.items()}
    item = converter(descriptor.type_info)
    if item is None:
        return None
    each: Convert = _ttl(item) if ttl else item  # type: ignore[assignment]  # item is set
    if descriptor.kind == "list":
        return lambda stored: [each(x) for x in stored]
    return each


def _ttl(convert: Convert | None) -> Convert | None:
    """A TTL-wrapped record is ``[value, expires_at]``."""
    if convert is None:
        return None
    return lambda stored: [convert(stored[0]), stored[1]]


def broadcast_converter(descriptor: MapStateDescriptor) -> Convert | None:
    """The converter of a broadcast descriptor's whole table ({key: value}), values frozen
    again (broadcast values are read-only on the main side)."""
    key, value = converter(descriptor.key_type_info), converter(descriptor.value_type_info)
    if key is None and value is None:
        return None
    return lambda entries: {(k if key is None else key(k)): freeze(v if value is None else value(v))
                            for k, v in entries.items()}
