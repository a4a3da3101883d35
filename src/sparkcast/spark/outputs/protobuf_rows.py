"""Protobuf messages as rows and rows as messages, by Google's protobuf runtime: the codec that
``kafka_topic`` decodes and ``sinks.kafka`` encodes Protobuf values with, in the Python workers
(``protobuf_codec.py`` wraps it in pandas UDFs).

A message class is built from the descriptor set's bytes (``descriptor_pool``,
``message_factory``), once per process and set: no generated module is imported, and nothing a
descriptor says chooses a module. The converters are compiled once per batch, one function per
field, so a record costs the runtime's parse plus one call per field.

Reading follows Spark's ``from_protobuf`` with ``emit.default.values``: a repeated field is a
list (empty when absent), a map a dict, a field with presence (a message, ``optional``) None
when unset, any other field its value, its zero when unset unless ``emit`` is off (then None).
An enum is its value's name (``enums_as_ints``: its number; a number the enum lacks, as open
proto3 enums allow, reads as its number in text); ``google.protobuf.Timestamp`` is a UTC
``datetime``, ``google.protobuf.Duration`` a ``timedelta``, uint64 and fixed64 a ``Decimal``
(``decimal(20,0)``). Writing is the reverse: each column to the field of its name, a null or
missing column unset (a NaN too: pandas gives a null float as NaN); a value the field cannot
hold is a ``SinkError`` naming the field.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from sparkcast.errors import SinkError

#: the well-known messages read as one value, not as a struct of their fields
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
_UTC = datetime.UTC
#: a scalar column's value as the runtime takes it, by the field's C++ type (text: ``str``)
_SCALAR_WRITES: dict[int, Callable[[Any], Any]] = {
    **dict.fromkeys((FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
                     FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64), int),
    FieldDescriptor.CPPTYPE_DOUBLE: float, FieldDescriptor.CPPTYPE_FLOAT: float,
    FieldDescriptor.CPPTYPE_BOOL: bool}

Reader = Callable[[Any], Any]
Writer = Callable[[Any, Any], None]

_CLASSES: dict[tuple[str, bytes], Any] = {}


def message_class(name: str, descriptors: bytes) -> Any:
    """The class of message ``name`` in the set ``descriptors`` (every file it imports included),
    built once per process: a class does not pickle, so each worker builds its own."""
    key = (name, descriptors)
    if key not in _CLASSES:
        pool = descriptor_pool.DescriptorPool()
        pending = list(descriptor_pb2.FileDescriptorSet.FromString(descriptors).file)
        while pending:  # a file after the files it imports
            file = next(f for f in pending if all(_has(pool, d) for d in f.dependency))
            pool.Add(file)
            pending.remove(file)
        _CLASSES[key] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return _CLASSES[key]


def _has(pool: Any, name: str) -> bool:
    try:
        pool.FindFileByName(name)
    except KeyError:
        return False
    return True


def map_entry(field: FieldDescriptor) -> bool:
    """Whether ``field`` is a ``map<k, v>`` (a repeated message of the generated entry type)."""
    return field.message_type is not None and field.message_type.GetOptions().map_entry


class Decoder:
    """Bodies of one message as rows: ``row`` gives the fields' values in the message's field
    order, then None; a body that does not parse gives Nones, then the runtime's error; a null
    value (a tombstone) Nones only."""

    def __init__(self, name: str, descriptors: bytes, emit: bool = True,
                 enums_as_ints: bool = False) -> None:
        made = message_class(name, descriptors)
        self._parse, fields = made.FromString, made.DESCRIPTOR.fields
        self._readers = [_field_reader(f, emit, enums_as_ints) for f in fields]
        self._failed = (None,) * len(fields)

    def row(self, body: bytes | None) -> tuple[Any, ...]:
        if body is None:
            return (*self._failed, None)
        try:
            message = self._parse(body)
            return (*[read(message) for read in self._readers], None)
        except Exception as error:  # noqa: BLE001 - DecodeError, and a value out of range
            return (*self._failed, f"{type(error).__name__}: {error}")


def _struct_reader(descriptor: Descriptor, emit: bool, ints: bool) -> Reader:
    readers = [(f.name, _field_reader(f, emit, ints)) for f in descriptor.fields]
    return lambda message: {name: read(message) for name, read in readers}


def _field_reader(field: FieldDescriptor, emit: bool, ints: bool) -> Reader:
    name = field.name
    if map_entry(field):
        key, value = (_value_reader(f, emit, ints) for f in field.message_type.fields)
        return lambda m: {key(k): value(v) for k, v in getattr(m, name).items()}
    value = _value_reader(field, emit, ints)
    if field.is_repeated:
        return lambda m: [value(v) for v in getattr(m, name)]
    if field.has_presence:
        return lambda m: value(getattr(m, name)) if m.HasField(name) else None
    if emit:
        return lambda m: value(getattr(m, name))
    zero = field.default_value
    return lambda m: None if (found := getattr(m, name)) == zero else value(found)


def _value_reader(field: FieldDescriptor, emit: bool, ints: bool) -> Reader:
    """One value of ``field`` (an element, if repeated) as the row holds it."""
    if field.message_type is not None:
        full = field.message_type.full_name
        if full == TIMESTAMP:
            return lambda m: m.ToDatetime(tzinfo=_UTC)
        if full == DURATION:
            return lambda m: m.ToTimedelta()
        return _struct_reader(field.message_type, emit, ints)
    if field.type == FieldDescriptor.TYPE_ENUM and not ints:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda v: names.get(v) or str(v)
    if field.cpp_type == FieldDescriptor.CPPTYPE_UINT64:
        return Decimal  # decimal(20,0): every uint64
    return _same


def _same(value: Any) -> Any:
    return value


class Encoder:
    """Rows (mappings of column to value) as bodies of one message."""

    def __init__(self, name: str, descriptors: bytes, timezone: str = "UTC") -> None:
        self._class = message_class(name, descriptors)
        self._write = _struct_writer(self._class.DESCRIPTOR, _zone(timezone))

    def body(self, row: Mapping[str, Any]) -> bytes:
        built = self._class()
        self._write(built, row)
        return bytes(built.SerializeToString())


def _zone(name: str) -> datetime.tzinfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _missing(value: Any) -> bool:
    """A null column: None, or pandas' NaN/NaT for a null in a numeric or time column."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or (
        type(value).__name__ == "NaTType")


def _struct_writer(descriptor: Descriptor, zone: datetime.tzinfo) -> Writer:
    writers = {f.name: _field_writer(f, zone) for f in descriptor.fields}

    def write(message: Any, row: Mapping[str, Any]) -> None:
        for column, value in row.items():
            if _missing(value):
                continue
            try:
                writers[column](message, value)
            except (ValueError, TypeError) as error:  # the runtime's: out of range, wrong type
                raise SinkError(f"field {descriptor.full_name}.{column}: {error}") from error
    return write


def _field_writer(field: FieldDescriptor, zone: datetime.tzinfo) -> Writer:
    name = field.name
    if map_entry(field):
        key_field, value_field = field.message_type.fields
        key, value = _value_writer(key_field, zone), _value_writer(value_field, zone)

        def write_map(message: Any, items: Any) -> None:
            target = getattr(message, name)
            for k, v in (items.items() if isinstance(items, Mapping) else items):
                _store(target, k, v, key, value, value_field)
        return write_map
    convert = _value_writer(field, zone)
    if field.is_repeated:
        return lambda m, values: _extend(getattr(m, name), values, convert, field)
    if field.message_type is not None:
        return lambda m, value: convert(getattr(m, name), value)
    return lambda m, value: setattr(m, name, convert(None, value))


def _extend(target: Any, values: Iterable[Any], convert: Callable[[Any, Any], Any],
            field: FieldDescriptor) -> None:
    if field.message_type is None:
        target.extend(convert(None, v) for v in values)
        return
    for value in values:
        convert(target.add(), value)


def _store(target: Any, key: Any, value: Any, key_of: Callable[[Any, Any], Any],
           value_of: Callable[[Any, Any], Any], value_field: FieldDescriptor) -> None:
    if value_field.message_type is not None:
        value_of(target[key_of(None, key)], value)
    elif not _missing(value):
        target[key_of(None, key)] = value_of(None, value)


def _value_writer(field: FieldDescriptor, zone: datetime.tzinfo) -> Callable[[Any, Any], Any]:
    """A value of ``field`` (an element, if repeated): a message's is written into the message
    given, a scalar's returned converted."""
    if field.message_type is not None:
        full = field.message_type.full_name
        if full == TIMESTAMP:
            return lambda m, v: m.FromDatetime(_aware(v, zone))
        if full == DURATION:
            return lambda m, v: m.FromTimedelta(v)
        write = _struct_writer(field.message_type, zone)
        return lambda m, v: write(m, v if isinstance(v, Mapping) else v.asDict())
    if field.type == FieldDescriptor.TYPE_ENUM:
        numbers = {v.name: v.number for v in field.enum_type.values}
        return lambda _, v: int(v) if not isinstance(v, str) else _enum_number(numbers, v, field)
    convert = _SCALAR_WRITES.get(field.cpp_type, str)
    if field.type == FieldDescriptor.TYPE_BYTES:
        convert = bytes
    return lambda _, v: convert(v)  # numpy's scalars and decimals as Python's


def _enum_number(numbers: Mapping[str, int], name: str, field: FieldDescriptor) -> int:
    if name not in numbers:
        raise SinkError(f"field {field.full_name}: not a name of enum "
                         f"{field.enum_type.full_name} (its names: {', '.join(numbers)})")
    return numbers[name]


def _aware(value: datetime.datetime, zone: datetime.tzinfo) -> datetime.datetime:
    """A timestamp as an instant: PySpark gives the workers the session's local time, naive."""
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    return value if value.tzinfo is not None else value.replace(tzinfo=zone)


def fields_of(descriptors: bytes, name: str) -> Iterable[FieldDescriptor]:
    """``name``'s fields, in the message's order."""
    return message_class(name, descriptors).DESCRIPTOR.fields
