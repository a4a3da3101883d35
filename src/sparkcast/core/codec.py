"""A stable, self-describing codec for state values: tagged JSON, never pickle.

State outlives code: a restart with a changed program must still read it, and nothing read from
a checkpoint may execute code. JSON covers the common values; the rest are tagged objects:

======================  ===================================
value                   encoded as
======================  ===================================
tuple / Row             ``{"$t": [...]}`` / ``{"$r": [names], "v": [...]}``
bytes                   ``{"$b": "<base64>"}``
dict, non-str keys      ``{"$m": [[k, v], ...]}``
set / frozenset         ``{"$s": [...]}``
datetime / date / time  ``{"$dt": iso}`` / ``{"$d": iso}`` / ``{"$tm": iso}``
Decimal, nan/inf        ``{"$dec": str}``, ``{"$f": "nan"}``
numpy array             ``{"$nd": dtype, "shape": [...], "b": base64}``
dataclass               ``{"$o": "Qual.Name", "v": {field: value, ...}}``
plain object            ``{"$c": "Qual.Name", "v": {attribute: value, ...}}``
Enum member             ``{"$e": "Qual.Name", "v": value}``
NamedTuple              ``{"$n": "Qual.Name", "f": [names], "v": [...]}``
======================  ===================================

Typed values carry their fields and their class's qualified name, never a module path. Given a
job's ``TypeRegistry`` (``core/type_registry.py``), ``decode`` gives them back as instances of
the class of that name among the classes the job knows, and raises ``UnknownTypeError`` for a
name it does not know; it never imports a module and never runs ``__reduce__``. Without one
(the state tools) it gives them back generically: a dataclass or object as a ``Record`` (a dict
that knows its type name), an enum as its value, a NamedTuple as a ``Row``.

``fingerprint`` hashes the canonical form (sorted dict keys), so equal values hash equally in
every process: the engine orders broadcast elements by it when nothing else orders them.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import math
from typing import Any, Protocol

import numpy as np

from sparkcast.api.row import Row, new_row, row_type
from sparkcast.core.frozen import freeze, is_plain_object, plain_state
from sparkcast.core.scope import NAN_KEY
from sparkcast.errors import StateSerializationError

_SCALARS = (str, int, bool, type(None))


class Resolver(Protocol):
    """Turns a stored type name and its fields back into an instance (``TypeRegistry``)."""

    def record(self, name: str, fields: dict[str, Any]) -> Any: ...

    def plain(self, name: str, attributes: dict[str, Any]) -> Any: ...

    def enum(self, name: str, value: Any) -> Any: ...


def _to_json(value: Any, canonical: bool) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, Row):
        return {"$r": list(value.__fields__), "v": [_to_json(v, canonical) for v in value]}
    if isinstance(value, dict):
        if isinstance(value, Record):
            return {value.tag: value.type_name, "v": _dict_to_json(value, canonical)}
        return _dict_to_json(value, canonical)
    if isinstance(value, list):
        return [_to_json(v, canonical) for v in value]
    if isinstance(value, tuple):
        if hasattr(value, "_fields"):  # a NamedTuple (Rows are handled above)
            return {"$n": type_name(value), "f": list(value._fields),
                    "v": [_to_json(v, canonical) for v in value]}
        return {"$t": [_to_json(v, canonical) for v in value]}
    if isinstance(value, enum.Enum):
        return {"$e": type_name(value), "v": _to_json(value.value, canonical)}
    if dataclasses.is_dataclass(value):
        return {"$o": type_name(value),
                "v": {f.name: _to_json(getattr(value, f.name), canonical)
                      for f in dataclasses.fields(value)}}
    return _special_to_json(value, canonical)


def type_name(value: Any) -> str:
    """The name a typed value is stored under, its class's qualified name (a frozen view
    reports its class's)."""
    return getattr(value, "__sparkcast_type__", None) or type(value).__qualname__


class Record(dict):
    """A dataclass (``$o``) or object (``$c``) decoded without a registry: its fields, and the
    type's name; encoded again as it was stored."""

    __slots__ = ("tag", "type_name")

    def __init__(self, type_name: str, fields: dict[str, Any], tag: str = "$o") -> None:
        super().__init__(fields)
        self.type_name = type_name
        self.tag = tag


class EnumRecord:
    """An enum member (``$e``) decoded by :data:`KEEP_NAMES`: its value and its class's name;
    encoded again as it was stored."""

    __slots__ = ("type_name", "value")

    def __init__(self, type_name: str, value: Any) -> None:
        self.type_name = type_name
        self.value = value

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, EnumRecord) and other.type_name == self.type_name
                and other.value == self.value)

    def __hash__(self) -> int:
        return hash((self.type_name, hashable(self.value)))

    def __repr__(self) -> str:
        return f"<{self.type_name}: {self.value!r}>"


class _KeepNames:
    """A resolver that rebuilds no class but keeps every class name, so that what it decodes
    encodes back byte-for-byte in meaning: the state tools that rewrite state without the job
    (``rescale``) decode with it. A NamedTuple comes back as a ``$o`` record, which the job's
    registry builds into the same NamedTuple."""

    def record(self, name: str, fields: dict[str, Any]) -> Any:
        return Record(name, fields, "$o")

    def plain(self, name: str, attributes: dict[str, Any]) -> Any:
        return Record(name, attributes, "$c")

    def enum(self, name: str, value: Any) -> Any:
        return EnumRecord(name, value)


#: decode without the job's classes and lose no class name (see ``_KeepNames``)
KEEP_NAMES: Resolver = _KeepNames()


def _dict_to_json(value: dict, canonical: bool) -> Any:
    if all(type(k) is str and not k.startswith("$") for k in value):
        items = sorted(value.items()) if canonical else value.items()
        return {k: _to_json(v, canonical) for k, v in items}
    pairs = [[_to_json(k, canonical), _to_json(v, canonical)] for k, v in value.items()]
    if canonical:
        pairs.sort(key=lambda kv: json.dumps(kv[0], sort_keys=True))
    return {"$m": pairs}


def _special_to_json(value: Any, canonical: bool) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        items = [_to_json(v, canonical) for v in value]
        return {"$s": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, datetime.datetime):
        return {"$dt": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"$d": value.isoformat()}
    if isinstance(value, datetime.time):
        return {"$tm": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"$dec": str(value)}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return {"$nd": "object", "v": [_to_json(v, canonical) for v in value.tolist()]}
        data = np.ascontiguousarray(value)
        return {"$nd": data.dtype.str, "shape": list(data.shape),
                "b": base64.b64encode(data.tobytes()).decode("ascii")}
    if isinstance(value, np.generic):
        return _to_json(value.item(), canonical)
    if isinstance(value, EnumRecord):
        return {"$e": value.type_name, "v": _to_json(value.value, canonical)}
    if is_plain_object(value):
        return {"$c": type_name(value),
                "v": {k: _to_json(v, canonical) for k, v in plain_state(value).items()}}
    raise StateSerializationError(
        f"cannot store a {type(value).__name__} in state: use JSON-like values (str, int, float, "
        "bool, None, list, dict, tuple, Row, bytes, set, datetime, time, Decimal, numpy "
        "arrays), dataclasses, Enum, NamedTuple or objects of your classes"
    )


def _from_json(data: Any, types: Resolver | None = None) -> Any:
    kind = type(data)
    if kind is list:
        return [_from_json(v, types) for v in data]
    if kind is not dict:
        return data
    if len(data) <= 3 and data and next(iter(data)).startswith("$"):
        return _tagged_from_json(data, types)
    return {k: _from_json(v, types) for k, v in data.items()}


def _tagged_from_json(data: dict, types: Resolver | None) -> Any:
    tag = next(iter(data))
    body = data[tag]
    if tag in ("$o", "$c", "$e", "$n"):
        return _typed_from_json(tag, body, data, types)
    return _plain_tagged(tag, body, data, types)


def _typed_from_json(tag: str, name: str, data: dict, types: Resolver | None) -> Any:
    if tag == "$e":
        value = _from_json(data["v"], types)
        return value if types is None else types.enum(name, value)
    if tag == "$n":
        values = [_from_json(v, types) for v in data["v"]]
        if types is None:
            return row_type(tuple(data["f"]))._make(values)
        return types.record(name, dict(zip(data["f"], values, strict=True)))
    fields = {k: _from_json(v, types) for k, v in data["v"].items()}
    if types is None:
        return Record(name, fields, tag)
    return types.record(name, fields) if tag == "$o" else types.plain(name, fields)


def _plain_tagged(tag: str, body: Any, data: dict, types: Resolver | None) -> Any:
    if tag == "$t":
        return tuple(_from_json(v, types) for v in body)
    if tag == "$r":  # PyFlink's Row: mutable, as a Row read from PyFlink's state is
        return new_row(tuple(body), [_from_json(v, types) for v in data["v"]])
    if tag == "$m":
        return {hashable(_from_json(k, types)): _from_json(v, types) for k, v in body}
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$s":
        return {hashable(_from_json(v, types)) for v in body}
    if tag == "$dt":
        return datetime.datetime.fromisoformat(body)
    if tag == "$d":
        return datetime.date.fromisoformat(body)
    if tag == "$tm":
        return datetime.time.fromisoformat(body)
    if tag == "$dec":
        return decimal.Decimal(body)
    if tag == "$f":
        return float(body)
    if tag == "$nd":
        if body == "object":
            return np.array([_from_json(v, types) for v in data["v"]], dtype=object)
        raw = base64.b64decode(data["b"])
        return np.frombuffer(raw, dtype=np.dtype(body)).reshape(data["shape"]).copy()
    raise StateSerializationError(f"unknown codec tag {tag!r}: state written by a newer sparkcast?")


def hashable(value: Any) -> Any:
    """Lists decoded from JSON as tuples, so decoded keys can key dicts and sets again (NaN as
    the one ``NAN_KEY``, so a decoded NaN key finds its state)."""
    # Dict keys and set members must hash: a frozenset (or a tuple holding one) decodes as a set.
    if isinstance(value, list) or type(value) is tuple:
        return tuple(hashable(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    if type(value) is float and value != value:
        return NAN_KEY
    return value


_LEAVES = frozenset({str, int, float, bool, type(None), bytes, bytearray, memoryview,
                     datetime.datetime, datetime.date, datetime.time, decimal.Decimal})

_SUBCLASSED_LEAVES = (np.generic, bytes, bytearray, memoryview, datetime.date, datetime.time,
                      decimal.Decimal)


def check_storable(value: Any, where: str = "state") -> bool:
    """Raise ``StateSerializationError`` unless ``encode`` can store ``value``: a walk over the
    types ``_to_json`` accepts, without encoding (state writes are checked on every event).
    True when the value holds typed values (dataclass, Enum, NamedTuple)."""
    kind = type(value)
    if kind in _LEAVES:
        return False
    typed = False
    if isinstance(value, Row):  # both kinds: PyFlink's (not a tuple) and input rows
        for v in value:
            typed = check_storable(v, where) | typed
    elif isinstance(value, dict):
        typed = isinstance(value, Record)
        for k, v in value.items():
            typed = check_storable(k, where) | check_storable(v, where) | typed
    elif isinstance(value, (list, tuple, set, frozenset)):
        typed = isinstance(value, tuple) and hasattr(value, "_fields") and not isinstance(
            value, Row)
        for v in value:
            typed = check_storable(v, where) | typed
    elif isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            for v in value.tolist():
                typed = check_storable(v, where) | typed
    elif isinstance(value, enum.Enum):
        check_storable(value.value, where)
        return True
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            check_storable(getattr(value, f.name), where)
        return True
    elif is_plain_object(value) and not isinstance(value, _SUBCLASSED_LEAVES + (np.ndarray,)):
        for name, v in plain_state(value).items():
            check_storable(v, f"{where} ({type_name(value)}.{name})")
        return True
    elif not isinstance(value, _SUBCLASSED_LEAVES):  # as _special_to_json: not str/int/float
        raise StateSerializationError(
            f"{where}: cannot store a {kind.__name__} ({_short(value)}): use JSON-like values "
            "(str, int, float, bool, None, list, dict, tuple, Row, bytes, set, datetime, "
            "Decimal, numpy arrays, dataclasses, Enum, NamedTuple, objects of your classes)"
        )
    return typed


def untyped(value: Any) -> Any:
    """The value as it reads back without a declared type (dataclasses as ``Record`` dicts,
    enums as their values, NamedTuples as ``Row``): stored that way under an undeclared type,
    so the harness and Spark give back the same thing."""
    return _from_json(_to_json(value, False))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def encode(value: Any) -> bytes:
    """Encode a state value; raises ``StateSerializationError`` for unsupported types."""
    try:
        return json.dumps(_to_json(value, False), separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StateSerializationError(f"cannot encode state value: {exc}") from exc


def decode(data: bytes | str, types: Resolver | None = None) -> Any:
    """Decode what ``encode`` wrote; typed values as instances of the classes ``types``
    resolves their names to (generically without it)."""
    try:
        return _from_json(json.loads(data), types)
    except StateSerializationError:
        raise
    except (TypeError, ValueError) as exc:
        raise StateSerializationError(f"corrupt state value: {exc}") from exc


def canonical(value: Any) -> bytes:
    """An encoding that equal values share, whatever their dict order."""
    return json.dumps(_to_json(value, True), separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode("utf-8")


def fingerprint(value: Any) -> str:
    """A short content hash, equal in every process for equal values."""
    return hashlib.blake2b(canonical(value), digest_size=12).hexdigest()


def frozen_decode(data: bytes | str, types: Resolver | None = None) -> Any:
    """Decode straight into read-only containers, for broadcast state shared between readers."""
    return freeze(decode(data, types))


def roundtrip(value: Any, types: Resolver | None) -> Any:
    """The value as it reads back from state: a copy, typed values as their classes (as
    ``untyped`` without a registry)."""
    return untyped(value) if types is None else _from_json(_to_json(value, False), types)
