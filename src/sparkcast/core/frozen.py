"""Read-only containers for broadcast state handed to the main side.

Flink gets read-only broadcast state from Java types and serializer copies; copying every value
for every event would cost more than the work itself. Values are frozen once, when the broadcast
side puts them, and then shared by every reader: mutation raises instead of corrupting the state.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any, NoReturn

import numpy as np

from sparkcast.api.row import Row, TupleRow, new_row, row_type
from sparkcast.errors import ReadOnlyStateError

_MESSAGE = (
    "broadcast state values are read-only here (Flink's rule: the main side must not modify "
    "broadcast state); copy the value (copy.deepcopy) to change it, or update the state in "
    "process_broadcast_element with put()"
)


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise ReadOnlyStateError(_MESSAGE)


_NOT_PLAIN = (Row, enum.Enum, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
              types.MethodType, types.GeneratorType, types.CoroutineType)


def is_plain_object(value: Any) -> bool:
    """An instance of a user class whose state is its ``__dict__``/``__slots__``."""
    kind = type(value)
    return (kind.__module__ != "builtins" and not isinstance(value, _NOT_PLAIN)
            and (hasattr(value, "__dict__") or bool(_slot_names(kind))))


def plain_state(value: Any) -> dict[str, Any]:
    """An object's attributes: its ``__dict__`` and its set ``__slots__`` (sparkcast's own
    markers left out)."""
    state = {k: v for k, v in getattr(value, "__dict__", {}).items()
             if not k.startswith("__sparkcast")}
    for name in _slot_names(type(value)):
        if name not in state and hasattr(value, name):
            state[name] = getattr(value, name)
    return state


def _slot_names(kind: type) -> list[str]:
    names: list[str] = []
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in [slots] if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__") or name.startswith("__sparkcast"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{cls.__name__.lstrip('_')}{name}"
            names.append(name)
    return names


class FrozenDict(dict):
    """A ``dict`` that refuses mutation; still ``isinstance(x, dict)`` and JSON-friendly."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list):
    """A ``list`` that refuses mutation."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = reverse = sort = clear = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> Any:
        return (list, (list(self),))


_VIEWS: dict[type, type] = {}


def _view_class(cls: type) -> type:
    """A subclass of a dataclass whose instances made by ``freeze`` refuse ``setattr``; still
    ``isinstance(view, cls)``, equal to the original, and copied (``copy.deepcopy``) or pickled
    as a plain, mutable ``cls``."""
    view: type | None = _VIEWS.get(cls)
    if view is None:
        def __setattr__(self: Any, name: str, value: Any) -> None:
            if self.__dict__.get("__sparkcast_sealed__"):
                _refuse()
            object.__setattr__(self, name, value)

        def __eq__(self: Any, other: object) -> bool:
            if isinstance(other, cls):
                return _fields_of(self) == _fields_of(other)
            return NotImplemented

        def __reduce_ex__(self: Any, protocol: Any) -> Any:
            return (plain_dataclass, (cls, {f.name: thaw(getattr(self, f.name))
                                            for f in dataclasses.fields(self)}))

        namespace = {"__setattr__": __setattr__, "__delattr__": _refuse, "__eq__": __eq__,
                     "__hash__": cls.__hash__, "__reduce_ex__": __reduce_ex__,
                     "__sparkcast_type__": cls.__qualname__, "__module__": cls.__module__,
                     "__qualname__": cls.__qualname__}
        view = _VIEWS[cls] = type(cls.__name__, (cls,), namespace)
    return view


def _fields_of(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, f.name) for f in dataclasses.fields(value))


def freeze(value: Any) -> Any:
    """A read-only deep view of ``value`` (containers copied once, scalars shared)."""
    kind = type(value)
    if kind in (str, int, float, bool, bytes, type(None), FrozenDict, FrozenList, frozenset):
        return value
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    if isinstance(value, set):
        return frozenset(value)
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, np.ndarray):
        view = value.copy()
        view.flags.writeable = False
        return view
    if type(value) is Row:  # PyFlink's mutable Row: read-only as an input row is
        return (row_type(value.__fields__) if value.__fields__ else TupleRow)._make(
            freeze(v) for v in value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(freeze(v) for v in value)
    if hasattr(value, "_fields"):  # Row and namedtuples
        return value._make(freeze(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _frozen_dataclass(value)
    if is_plain_object(value):
        return _frozen_object(value)
    return value


def _frozen_object(value: Any) -> Any:
    """A read-only view of an object of a plain class: its class's methods, ``isinstance``,
    attribute reads; a method that sets an attribute raises ``ReadOnlyStateError``."""
    cls = type(value)
    if cls in _OBJECT_VIEWS.values():
        return value
    view_class = _object_view_class(cls)
    view: Any = object.__new__(view_class)
    for name, item in plain_state(value).items():
        object.__setattr__(view, name, freeze(item))
    object.__setattr__(view, "__sparkcast_sealed__", True)
    return view


_OBJECT_VIEWS: dict[type, type] = {}


def _object_view_class(cls: type) -> type:
    view: type | None = _OBJECT_VIEWS.get(cls)
    if view is None:
        def __setattr__(self: Any, name: str, value: Any) -> None:
            if getattr(self, "__sparkcast_sealed__", False):
                _refuse()
            object.__setattr__(self, name, value)

        def __delattr__(self: Any, name: str) -> None:
            if getattr(self, "__sparkcast_sealed__", False):
                _refuse()
            object.__delattr__(self, name)

        def __reduce_ex__(self: Any, protocol: Any) -> Any:
            return (plain_object, (cls, {k: thaw(v) for k, v in plain_state(self).items()}))

        namespace: dict[str, Any] = {
            "__setattr__": __setattr__, "__delattr__": __delattr__,
            "__reduce_ex__": __reduce_ex__, "__sparkcast_type__": cls.__qualname__,
            "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        if not cls.__dictoffset__:  # a slotted class: the seal needs a slot of its own
            namespace["__slots__"] = ("__sparkcast_sealed__",)
        view = _OBJECT_VIEWS[cls] = type(cls.__name__, (cls,), namespace)
    return view


def plain_object(cls: type, attributes: dict[str, Any]) -> Any:
    """An instance of ``cls`` holding ``attributes``, without running ``__init__`` (a copy)."""
    value: Any = object.__new__(cls)
    for name, item in attributes.items():
        object.__setattr__(value, name, item)
    return value


def _frozen_dataclass(value: Any) -> Any:
    cls = type(value)
    if cls in _VIEWS.values() and value.__dict__.get("__sparkcast_sealed__"):
        return value
    base = cls.__mro__[1] if cls in _VIEWS.values() else cls
    view: Any = object.__new__(_view_class(base))
    for f in dataclasses.fields(value):
        object.__setattr__(view, f.name, freeze(getattr(value, f.name)))
    view.__dict__["__sparkcast_sealed__"] = True
    return view


def thaw(value: Any) -> Any:
    """A mutable deep copy of a frozen value, for the read-write broadcast side."""
    kind = type(value)
    if kind in (str, int, float, bool, bytes, type(None)):
        return value
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    if isinstance(value, frozenset):
        return set(value)
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (TupleRow, Row)):  # a mutable Row, as PyFlink's are
        return new_row(value.__fields__ or None, [thaw(v) for v in value])
    if hasattr(value, "_fields"):
        return value._make(thaw(v) for v in value)
    if isinstance(value, tuple):
        return tuple(thaw(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        base = cls.__mro__[1] if cls in _VIEWS.values() else cls
        return plain_dataclass(base, {f.name: thaw(getattr(value, f.name))
                                      for f in dataclasses.fields(value)})
    if type(value) in _OBJECT_VIEWS.values():
        return plain_object(type(value).__mro__[1],
                            {k: thaw(v) for k, v in plain_state(value).items()})
    return value


def plain_dataclass(cls: type, fields: dict[str, Any]) -> Any:
    """An instance of ``cls`` holding ``fields``, without running ``__init__`` (a copy)."""
    value: Any = object.__new__(cls)
    for name, field_value in fields.items():
        object.__setattr__(value, name, field_value)
    return value
