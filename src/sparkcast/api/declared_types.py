"""Declared state types: what a descriptor may declare, whether a value fits it (``accepts``),
its JSON record, and which changes of it keep old state readable.

A descriptor's type is how typed values come back from state: the codec stores a dataclass as
its field names and values, never a class path, and the state layer rebuilds it from the type
the descriptor declares (``core/converters.py``). So the declared type is checked when the
descriptor is made, and its record (``describe_type``) is what a checkpoint can keep to refuse
an incompatible change at restart (``compatible_change``).

>>> describe_type(list[int])
{'kind': 'list', 'item': {'kind': 'scalar', 'name': 'int'}}
>>> compatible_change(describe_type(int), describe_type(str))
'the value: int became str'
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import types
import typing
from typing import Any

from sparkcast.api.row import Row
from sparkcast.errors import PipelineError

#: types the codec stores as they are (numpy arrays too; a Row or tuple is a ``tuple``)
SCALARS: dict[type, str] = {
    str: "str", int: "int", float: "float", bool: "bool", bytes: "bytes",
    decimal.Decimal: "Decimal", datetime.datetime: "datetime", datetime.date: "date",
    datetime.time: "time",
}
_CONTAINERS = {list: "list", tuple: "tuple", dict: "map", set: "set", frozenset: "set",
               Row: "tuple"}
_ANY = {"kind": "any"}

TypeRecord = dict[str, Any]


def accepts(declared: Any, value: Any) -> bool:
    """Whether ``value`` may be stored under a declared type (object, Any or None: anything)."""
    if declared is None or declared is object or declared is Any or value is None:
        return True  # typing.Any is a class since Python 3.11, but isinstance() refuses it
    if not isinstance(declared, type):  # list[str], Optional[Rule], ...: the outer type
        origin = typing.get_origin(declared)
        if origin in (typing.Union, types.UnionType):
            return any(accepts(member, value) for member in typing.get_args(declared))
        return not isinstance(origin, type) or isinstance(value, origin)
    if declared is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if declared is tuple:  # PyFlink's Row is not a tuple, and goes where tuples go
        return isinstance(value, (tuple, Row))
    return isinstance(value, declared)


def type_label(declared: Any) -> str:
    """A declared type as error messages name it (``list[str]`` has no plain ``__name__``)."""
    return declared.__name__ if isinstance(declared, type) else str(declared)


def is_record_type(declared: Any) -> bool:
    """A dataclass or a NamedTuple class: stored as its fields, rebuilt from the declaration."""
    return isinstance(declared, type) and (
        dataclasses.is_dataclass(declared) or (issubclass(declared, tuple)
                                               and hasattr(declared, "_fields")))


def record_fields(declared: type) -> list[tuple[str, Any, bool]]:
    """``(name, declared type, has a default)`` of a record type's constructor fields."""
    hints = _hints(declared)
    if dataclasses.is_dataclass(declared):
        return [(f.name, hints.get(f.name, f.type), f.default is not dataclasses.MISSING
                 or f.default_factory is not dataclasses.MISSING)
                for f in dataclasses.fields(declared) if f.init]
    defaults = getattr(declared, "_field_defaults", {})
    return [(name, hints.get(name), name in defaults) for name in declared._fields]  # type: ignore[attr-defined]


def _hints(declared: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(declared)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fields stay generic
        return {k: v for k, v in getattr(declared, "__annotations__", {}).items()
                if not isinstance(v, str)}


def describe_type(declared: Any, where: str = "state") -> TypeRecord:
    """A JSON-able record of a declared type; ``PipelineError`` naming the fix if the codec
    cannot store it."""
    return _describe(declared, where, set())


def _describe(declared: Any, where: str, seen: set[type]) -> TypeRecord:
    if declared is None or declared is object or declared is Any:
        return dict(_ANY)
    if isinstance(declared, str):
        raise PipelineError(f"{where}: the type {declared!r} is a string; pass the type itself "
                            f"(e.g. {declared.strip(chr(39))} without quotes, or "
                            "Types.PICKLED_BYTE_ARRAY() for any value)")
    origin = typing.get_origin(declared)
    if origin is not None:
        return _describe_generic(declared, origin, where, seen)
    if not isinstance(declared, type):
        raise PipelineError(f"{where}: {declared!r} is not a type")
    if declared in SCALARS:
        return {"kind": "scalar", "name": SCALARS[declared]}
    if issubclass(declared, enum.Enum):
        return {"kind": "enum", "name": declared.__name__,
                "values": sorted((repr(m.value) for m in declared), key=str)}
    if is_record_type(declared):
        if declared in seen:
            return {"kind": "ref", "name": declared.__name__}
        inner = seen | {declared}
        return {"kind": "record", "name": declared.__name__,
                "fields": {name: {"type": _describe(hint, where, inner), "default": default}
                           for name, hint, default in record_fields(declared)}}
    if declared in _CONTAINERS:
        return {"kind": _CONTAINERS[declared]}
    if declared.__module__ == "numpy" and declared.__name__ == "ndarray":
        return {"kind": "scalar", "name": "ndarray"}
    raise PipelineError(
        f"{where}: cannot store values of type {declared.__name__}: declare a dataclass, "
        "NamedTuple, Enum, a JSON-like type (str, int, float, bool, bytes, list, dict, tuple, "
        "set, datetime, Decimal) or a container of them, or Types.PICKLED_BYTE_ARRAY() for any "
        "of these (sparkcast never pickles state)")


def _describe_generic(declared: Any, origin: Any, where: str, seen: set[type]) -> TypeRecord:
    args = typing.get_args(declared)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return {"kind": "optional", "item": _describe(members[0], where, seen)}
        return {"kind": "union", "items": [_describe(a, where, seen) for a in members]}
    if origin is typing.Literal:
        return {"kind": "scalar", "name": type(args[0]).__name__}
    name = _CONTAINERS.get(origin)
    if name is None and origin.__module__ == "collections.abc":  # Sequence, Mapping, ...
        name = "map" if "Mapping" in origin.__name__ else "list"
    if name is None:
        raise PipelineError(f"{where}: cannot store values of type {declared!r}")
    if name == "map":
        key, value = (args + (object, object))[:2]
        return {"kind": "map", "key": _describe(key, where, seen),
                "value": _describe(value, where, seen)}
    if name == "tuple" and not (len(args) == 2 and args[1] is Ellipsis):
        return {"kind": "tuple", "items": [_describe(a, where, seen) for a in args]}
    return {"kind": name, "item": _describe(args[0] if args else object, where, seen)}


def compatible_change(old: TypeRecord, new: TypeRecord, path: str = "") -> str | None:
    """Why state written under the declared type ``old`` cannot be read as ``new``, or None.

    The rule: a record may gain fields that have defaults and lose fields; an enum may gain
    members; ``int`` may widen to ``float``; anything may become ``any``; containers compare
    their items. Every other change (a renamed record, a changed scalar, a new field without a
    default) is refused."""
    here = path or "the value"
    if new == old or new.get("kind") == "any":
        return None
    kind = old.get("kind")
    if kind != new.get("kind"):
        if kind == "scalar" and new.get("kind") == "optional":
            return compatible_change(old, new["item"], path)
        return f"{here}: {_name(old)} became {_name(new)}"
    if kind == "scalar":
        if (old["name"], new["name"]) == ("int", "float"):
            return None
        return f"{here}: {old['name']} became {new['name']}"
    if kind in ("record", "enum", "ref") and old.get("name") != new.get("name"):
        return f"{here}: {old['name']} became {new['name']} (a renamed type)"
    if kind == "enum":
        lost = sorted(set(old["values"]) - set(new["values"]))
        return f"{here}: enum {new['name']} lost members {lost}" if lost else None
    if kind == "record":
        return _record_change(old, new, here)
    return _container_change(old, new, here)


def _record_change(old: TypeRecord, new: TypeRecord, here: str) -> str | None:
    for name, field in new["fields"].items():
        before = old["fields"].get(name)
        if before is None:
            if not field["default"]:
                return (f"{here}: new field {new['name']}.{name} has no default; give it one "
                        "so old state can be read")
            continue
        reason = compatible_change(before["type"], field["type"], f"{new['name']}.{name}")
        if reason:
            return reason
    return None


def _container_change(old: TypeRecord, new: TypeRecord, here: str) -> str | None:
    for part in ("item", "key", "value"):
        if part in old and part in new:
            reason = compatible_change(old[part], new[part], f"{here} ({part})")
            if reason:
                return reason
    olds, news = old.get("items", []), new.get("items", [])
    if len(olds) != len(news):
        return f"{here}: {len(olds)} items became {len(news)}"
    for a, b in zip(olds, news, strict=True):
        reason = compatible_change(a, b, here)
        if reason:
            return reason
    return None


def record_label(record: TypeRecord) -> str:
    """A type record as messages name it: ``Rule``, ``list[Item]``, ``map[str, any]``."""
    kind = record.get("kind")
    if "name" in record:
        return str(record["name"])
    if kind == "map" and "key" in record:
        return f"map[{record_label(record['key'])}, {record_label(record['value'])}]"
    if "item" in record:
        return f"{kind}[{record_label(record['item'])}]"
    if "items" in record:
        return f"{kind}[{', '.join(record_label(r) for r in record['items'])}]"
    return str(kind)


def _name(record: TypeRecord) -> str:
    return str(record.get("name", record.get("kind")))
