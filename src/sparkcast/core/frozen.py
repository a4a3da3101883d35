"""Read-only containers for broadcast state handed to the main side.

Flink gets read-only broadcast state from Java types and serializer copies; copying every value
for every event would cost more than the work itself. Values are frozen once, when the broadcast
side puts them, and then shared by every reader: mutation raises instead of corrupting the state.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

import numpy as np

from sparkcast.errors import ReadOnlyStateError

_MESSAGE = (
    "broadcast state values are read-only here; copy the value (copy.deepcopy) to change it, "
    "or update the state in process_broadcast_element with put()"
)


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise ReadOnlyStateError(_MESSAGE)


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
                     "__sparkcast_type__": cls.__name__, "__module__": cls.__module__,
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
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(freeze(v) for v in value)
    if hasattr(value, "_fields"):  # Row and namedtuples
        return value._make(freeze(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _frozen_dataclass(value)
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
    if hasattr(value, "_fields"):
        return value._make(thaw(v) for v in value)
    if isinstance(value, tuple):
        return tuple(thaw(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        base = cls.__mro__[1] if cls in _VIEWS.values() else cls
        return plain_dataclass(base, {f.name: thaw(getattr(value, f.name))
                                      for f in dataclasses.fields(value)})
    return value


def plain_dataclass(cls: type, fields: dict[str, Any]) -> Any:
    """An instance of ``cls`` holding ``fields``, without running ``__init__`` (a copy)."""
    value: Any = object.__new__(cls)
    for name, field_value in fields.items():
        object.__setattr__(value, name, field_value)
    return value
