"""Broadcast state views over one descriptor's table: read-only for the main side, read-write
for the broadcast side. Values are frozen when put, so the main side reads them without copies,
and checked when put (declared types, storable by the state codec), so a bad value fails the
broadcast element that put it, not the flush."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any, NoReturn

from sparkcast.api.declared_types import accepts, type_label
from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.state import BroadcastState, ReadOnlyBroadcastState
from sparkcast.core.codec import Resolver, check_storable, roundtrip
from sparkcast.core.converters import broadcast_converter
from sparkcast.core.frozen import freeze, thaw
from sparkcast.errors import (
    ReadOnlyStateError,
    StateTypeError,
    UnknownStateError,
)

_PLAIN = frozenset({str, int, float, bool})

_READ_ONLY = (
    "broadcast state {name!r} is read-only in {where}: update it in process_broadcast_element "
    "(Flink's ReadOnlyBroadcastState)"
)


class ReadOnlyBroadcastStateView(ReadOnlyBroadcastState):
    """Main side and ``on_timer``: shared frozen values, writes raise ``ReadOnlyStateError``."""

    def __init__(self, descriptor: MapStateDescriptor, table: MutableMapping) -> None:
        self._descriptor = descriptor
        self._entries = table

    def rebind(self, table: MutableMapping) -> None:
        self._entries = table

    def get(self, key: Any) -> Any:
        return self._entries.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterable[tuple[Any, Any]]:
        return self._entries.items()

    def keys(self) -> Iterable[Any]:
        return self._entries.keys()

    def values(self) -> Iterable[Any]:
        return self._entries.values()

    def is_empty(self) -> bool:
        return not self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, key: Any) -> Any:
        return self._entries.get(key)  # PyFlink: state[key] is get(key), None when missing

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Any]:
        return iter(self._entries)

    def _refuse(self, *_: Any) -> NoReturn:
        raise ReadOnlyStateError(_READ_ONLY.format(name=self._descriptor.name,
                                                   where="process_element and on_timer"))

    put = put_all = remove = clear = __setitem__ = __delitem__ = _refuse


class BroadcastStateView(BroadcastState):
    """Broadcast side: reads return mutable copies, puts freeze and type-check the value."""

    def __init__(self, descriptor: MapStateDescriptor, table: MutableMapping,
                 on_change: Callable[[], None]) -> None:
        self._descriptor = descriptor
        self._entries = table
        self._on_change = on_change
        self._typed = broadcast_converter(descriptor) is not None
        #: the job's classes, which undeclared objects are stored as (``core/type_registry.py``)
        self.types: Resolver | None = None

    def rebind(self, table: MutableMapping) -> None:
        self._entries = table

    def _table(self) -> MutableMapping:
        return self._entries

    def get(self, key: Any) -> Any:
        return thaw(self._table().get(key))

    def contains(self, key: Any) -> bool:
        return key in self._table()

    def items(self) -> Iterable[tuple[Any, Any]]:
        return [(k, thaw(v)) for k, v in self._table().items()]

    def keys(self) -> Iterable[Any]:
        return list(self._table().keys())

    def values(self) -> Iterable[Any]:
        return [thaw(v) for v in self._table().values()]

    def is_empty(self) -> bool:
        return not self._table()

    def __len__(self) -> int:
        return len(self._table())

    def put(self, key: Any, value: Any) -> None:
        self._table()[key] = freeze(self._check(key, value))
        self._on_change()

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        # all or nothing: check every entry first
        checked = {key: self._check(key, value) for key, value in dict_value.items()}
        table = self._table()
        for key, value in checked.items():
            table[key] = freeze(value)
        if dict_value:
            self._on_change()

    def remove(self, key: Any) -> None:
        table = self._table()
        if key in table:
            del table[key]
            self._on_change()

    def clear(self) -> None:
        table = self._table()
        if table:
            table.clear()
            self._on_change()

    def _check(self, key: Any, value: Any) -> Any:
        """The value to store (generic if its typed parts are not declared), or raise."""
        d = self._descriptor
        if key is None:
            raise StateTypeError(f"broadcast state {d.name!r}: keys cannot be None")
        if not accepts(d.key_type_info, key):
            raise StateTypeError(f"broadcast state {d.name!r}: key {key!r} is not a "
                             f"{type_label(d.key_type_info)}")
        if not accepts(d.value_type_info, value):
            raise StateTypeError(f"broadcast state {d.name!r}: value of type "
                                 f"{type(value).__name__} is not a {type_label(d.value_type_info)}")
        if type(key) not in _PLAIN:
            check_storable(key, f"broadcast state {d.name!r} key")
        if type(value) not in _PLAIN and check_storable(value, f"broadcast state {d.name!r}"):
            return value if self._typed else roundtrip(value, self.types)
        return value


class BroadcastStates:
    """The broadcast state of one subtask: a read-only and a read-write view per descriptor,
    rebound to the backend's tables; ``on_change`` runs when the broadcast side writes."""

    def __init__(self, descriptors: Mapping[str, MapStateDescriptor],
                 on_change: Callable[[], None]) -> None:
        self.descriptors = dict(descriptors)
        #: name -> view; contexts look views up here on every event
        self.read_only = {name: ReadOnlyBroadcastStateView(d, {})
                          for name, d in self.descriptors.items()}
        self._read_write = {name: BroadcastStateView(d, {}, on_change)
                            for name, d in self.descriptors.items()}
        self.tables: dict[str, MutableMapping[Any, Any]] = {}
        self._decoders = {name: broadcast_converter(d) for name, d in self.descriptors.items()}

    def use_types(self, types: Resolver) -> None:
        """Store undeclared objects as the job's classes read them back."""
        for view in self._read_write.values():
            view.types = types

    def bind(self, tables: Callable[..., MutableMapping[Any, Any]]) -> None:
        """``tables(name, decode)``: the backend's table of one descriptor."""
        self.tables = {name: tables(name, self._decoders[name]) for name in self.descriptors}
        for name, table in self.tables.items():
            self.read_only[name].rebind(table)
            self._read_write[name].rebind(table)

    def read_only_view(self, descriptor: Any) -> ReadOnlyBroadcastStateView:
        try:
            return self.read_only[descriptor.name]
        except (KeyError, AttributeError):
            raise self._unknown(descriptor) from None

    def read_write_view(self, descriptor: Any) -> BroadcastStateView:
        try:
            return self._read_write[descriptor.name]
        except (KeyError, AttributeError):
            raise self._unknown(descriptor) from None

    def _unknown(self, descriptor: Any) -> UnknownStateError:
        return UnknownStateError(
            f"{descriptor!r} is not a broadcast state of this stream; broadcast states: "
            f"{sorted(self.descriptors)} (pass it to broadcast(...))"
        )
