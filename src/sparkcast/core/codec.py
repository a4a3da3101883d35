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
datetime / date         ``{"$dt": iso}`` / ``{"$d": iso}``
Decimal, nan/inf        ``{"$dec": str}``, ``{"$f": "nan"}``
numpy array             ``{"$nd": dtype, "shape": [...], "b": base64}``
dataclass               ``{"$o": "TypeName", "v": {field: value, ...}}``
Enum member             ``{"$e": "TypeName", "v": value}``
NamedTuple              ``{"$n": "TypeName", "f": [names], "v": [...]}``
======================  ===================================

Typed values carry their fields and type name, never a class path: ``decode`` gives them back
generically (a dataclass as a ``Record``, a dict that knows its type name; an enum as its value;
a NamedTuple as a ``Row``), and the state layer rebuilds them from the type the descriptor
declares (``core/converters.py``). Nothing in the data chooses a class.

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
from typing import Any

import numpy as np

from sparkcast.api.row import Row, row_type
from sparkcast.core.frozen import freeze
from sparkcast.core.scope import NAN_KEY
from sparkcast.errors import StateSerializationError

_SCALARS = (str, int, bool, type(None))


def _to_json(value: Any, canonical: bool) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, Row):
        return {"$r": list(value.__fields__), "v": [_to_json(v, canonical) for v in value]}
    if isinstance(value, dict):
        return _dict_to_json(value, canonical)
    if isinstance(value, list):
        return [_to_json(v, canonical) for v in value]
    if isinstance(value, tuple):
        if hasattr(value, "_fields"):  # a NamedTuple (Rows are handled above)
            return {"$n": kind.__name__, "f": list(value._fields),
                    "v": [_to_json(v, canonical) for v in value]}
        return {"$t": [_to_json(v, canonical) for v in value]}
    if isinstance(value, enum.Enum):
        return {"$e": type(value).__name__, "v": _to_json(value.value, canonical)}
    if dataclasses.is_dataclass(value):
        return {"$o": type_name(value),
                "v": {f.name: _to_json(getattr(value, f.name), canonical)
                      for f in dataclasses.fields(value)}}
    return _special_to_json(value, canonical)


def type_name(value: Any) -> str:
    """The name a typed value is stored under (a frozen view reports its class's name)."""
    return getattr(value, "__sparkcast_type__", type(value).__name__)


class Record(dict):
    """A dataclass decoded without its declared type: its fields, and the type's name."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str, fields: dict[str, Any]) -> None:
        super().__init__(fields)
        self.type_name = type_name


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
    raise StateSerializationError(
        f"cannot store a {type(value).__name__} in state: use JSON-like values (str, int, float, "
        "bool, None, list, dict, tuple, Row, bytes, set, datetime, Decimal, numpy arrays), "
        "dataclasses, Enum or NamedTuple"
    )


def _from_json(data: Any) -> Any:
    kind = type(data)
    if kind is list:
        return [_from_json(v) for v in data]
    if kind is not dict:
        return data
    if len(data) <= 3 and data and next(iter(data)).startswith("$"):
        return _tagged_from_json(data)
    return {k: _from_json(v) for k, v in data.items()}


def _tagged_from_json(data: dict) -> Any:
    tag = next(iter(data))
    body = data[tag]
    if tag == "$t":
        return tuple(_from_json(v) for v in body)
    if tag == "$r":
        return row_type(tuple(body))._make(_from_json(v) for v in data["v"])
    if tag == "$m":
        return {hashable(_from_json(k)): _from_json(v) for k, v in body}
    if tag == "$b":
        return base64.b64decode(body)
    if tag == "$s":
        return {hashable(_from_json(v)) for v in body}
    if tag == "$dt":
        return datetime.datetime.fromisoformat(body)
    if tag == "$d":
        return datetime.date.fromisoformat(body)
    if tag == "$dec":
        return decimal.Decimal(body)
    if tag == "$f":
        return float(body)
    if tag == "$o":
        return Record(body, {k: _from_json(v) for k, v in data["v"].items()})
    if tag == "$e":
        return _from_json(data["v"])
    if tag == "$n":
        return row_type(tuple(data["f"]))._make(_from_json(v) for v in data["v"])
    if tag == "$nd":
        if body == "object":
            return np.array([_from_json(v) for v in data["v"]], dtype=object)
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
                     datetime.datetime, datetime.date, decimal.Decimal})

_SUBCLASSED_LEAVES = (np.generic, bytes, bytearray, memoryview, datetime.date, decimal.Decimal)


def check_storable(value: Any, where: str = "state") -> bool:
    """Raise ``StateSerializationError`` unless ``encode`` can store ``value``: a walk over the
    types ``_to_json`` accepts, without encoding (state writes are checked on every event).
    True when the value holds typed values (dataclass, Enum, NamedTuple)."""
    kind = type(value)
    if kind in _LEAVES:
        return False
    typed = False
    if isinstance(value, dict):
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
    elif not isinstance(value, _SUBCLASSED_LEAVES):  # as _special_to_json: not str/int/float
        raise StateSerializationError(
            f"{where}: cannot store a {kind.__name__} ({_short(value)}): use JSON-like values "
            "(str, int, float, bool, None, list, dict, tuple, Row, bytes, set, datetime, "
            "Decimal, numpy arrays, dataclasses, Enum, NamedTuple)"
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


def decode(data: bytes | str) -> Any:
    """Decode what ``encode`` wrote."""
    try:
        return _from_json(json.loads(data))
    except (TypeError, ValueError) as exc:
        raise StateSerializationError(f"corrupt state value: {exc}") from exc


def canonical(value: Any) -> bytes:
    """An encoding that equal values share, whatever their dict order."""
    return json.dumps(_to_json(value, True), separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode("utf-8")


def fingerprint(value: Any) -> str:
    """A short content hash, equal in every process for equal values."""
    return hashlib.blake2b(canonical(value), digest_size=12).hexdigest()


def frozen_decode(data: bytes | str) -> Any:
    """Decode straight into read-only containers, for broadcast state shared between readers."""
    return freeze(decode(data))
