"""Read-only containers for broadcast state handed to the main side.

Flink gets read-only broadcast state from Java types and serializer copies; copying every value
for every event would cost more than the work itself. Values are frozen once, when the broadcast
side puts them, and then shared by every reader: mutation raises instead of corrupting the state.
"""

from __future__ import annotations

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
    return value


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
    return value
