"""Keyed state of the current key, over one table per descriptor (user key -> stored value).

With TTL, a stored value is ``[value, expires_at]`` (map state: per entry; list state: per
element, as in Flink). Expiry runs on the engine's processing time, so the harness and Spark
expire the same entries; expired values are dropped when touched.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from sparkcast.api.descriptors import AggregatingStateDescriptor, StateDescriptor
from sparkcast.api.state import AggregatingState, ListState, MapState, ReducingState, ValueState
from sparkcast.api.ttl import StateTtlConfig
from sparkcast.api.types import accepts
from sparkcast.errors import KeyedStateError, StateTypeError

if TYPE_CHECKING:
    from sparkcast.core.engine import SubtaskEngine

_MISSING: Any = object()


class _Sentinel:
    def __repr__(self) -> str:
        return "NO_KEY"


#: The engine's current key outside keyed callbacks (keys themselves may be any value but this).
NO_KEY: Any = _Sentinel()
_NEVER_RETURN = StateTtlConfig.StateVisibility.NeverReturnExpired


class _Ttl:
    """Wraps values with their expiry and reads them back, refreshing on read if configured."""

    def __init__(self, config: StateTtlConfig, engine: SubtaskEngine) -> None:
        self._millis = config.ttl_millis
        self.refresh_on_read = config.refresh_on_read
        self._hide_expired = config.state_visibility is _NEVER_RETURN
        self._engine = engine

    def wrap(self, value: Any) -> list[Any]:
        return [value, self._engine.processing_time + self._millis]

    def read(self, stored: list[Any]) -> tuple[Any, list[Any] | None]:
        """(value or _MISSING if expired and hidden, refreshed record or None)."""
        value, expires_at = stored
        if expires_at <= self._engine.processing_time:
            return (_MISSING if self._hide_expired else value), None
        return value, (self.wrap(value) if self.refresh_on_read else None)

    def expired(self, stored: list[Any]) -> bool:
        return stored[1] <= self._engine.processing_time


class _KeyedState:
    def __init__(self, engine: SubtaskEngine, descriptor: StateDescriptor) -> None:
        self._engine = engine
        self._descriptor = descriptor
        self._name = descriptor.name
        self._ttl = None if descriptor.ttl_config is None else _Ttl(descriptor.ttl_config, engine)

    def _table(self) -> MutableMapping[Any, Any]:
        return self._engine.keyed_tables[self._name]

    def _key(self) -> Any:
        key = self._engine.current_key
        if key is NO_KEY:
            raise KeyedStateError(
                f"keyed state {self._name!r} has no current key here: use it in process_element "
                "or on_timer, or in ctx.apply_to_keyed_state on the broadcast side"
            )
        return key

    def _check(self, value: Any) -> None:
        if not accepts(self._descriptor.type_info, value):
            raise StateTypeError(f"state {self._name!r}: {type(value).__name__} is not a "
                                 f"{self._descriptor.type_info.__name__}")

    def _get(self) -> Any:
        """The current key's value (TTL unwrapped), or _MISSING."""
        key = self._key()
        table = self._table()
        stored = table.get(key, _MISSING)
        if stored is _MISSING or self._ttl is None:
            return stored
        value, refreshed = self._ttl.read(stored)
        if self._ttl.expired(stored):
            del table[key]  # as in Flink: cleared when read, so returned (if visible) at most once
        elif refreshed is not None:
            table[key] = refreshed
        return value

    def _set(self, value: Any) -> None:
        self._table()[self._key()] = value if self._ttl is None else self._ttl.wrap(value)

    def clear(self) -> None:
        self._table().pop(self._key(), None)


class ValueStateImpl(_KeyedState, ValueState):
    def value(self) -> Any:
        value = self._get()
        return None if value is _MISSING else value

    def update(self, value: Any) -> None:
        if value is None:  # Flink: update(null) clears
            self.clear()
            return
        self._check(value)
        self._set(value)


class ReducingStateImpl(_KeyedState, ReducingState):
    def get(self) -> Any:
        value = self._get()
        return None if value is _MISSING else value

    def add(self, value: Any) -> None:
        self._check(value)
        current = self._get()
        reduce = self._descriptor.reduce  # type: ignore[attr-defined]
        self._set(value if current is _MISSING else reduce(current, value))


class AggregatingStateImpl(_KeyedState, AggregatingState):
    def get(self) -> Any:
        accumulator = self._get()
        if accumulator is _MISSING:
            return None
        return self._function().get_result(accumulator)

    def add(self, value: Any) -> None:
        accumulator = self._get()
        function = self._function()
        if accumulator is _MISSING:
            accumulator = function.create_accumulator()
        self._set(function.add(value, accumulator))

    def _function(self) -> Any:
        descriptor = self._descriptor
        assert isinstance(descriptor, AggregatingStateDescriptor)
        return descriptor.agg_function


class ListStateImpl(_KeyedState, ListState):
    """A list per key; with TTL each element carries its own expiry."""

    def get(self) -> Iterable[Any]:
        stored = self._table().get(self._key(), _MISSING)
        if stored is _MISSING:
            return []
        if self._ttl is None:
            return list(stored)
        live = [item for item in stored if not self._ttl.expired(item)]
        if self._ttl.refresh_on_read:  # reading the list reads every element
            live = [self._ttl.wrap(item[0]) for item in live]
        self._store(live)
        return [item[0] for item in live]

    def add(self, value: Any) -> None:
        self.add_all([value])

    def add_all(self, values: list[Any]) -> None:
        for value in values:
            if value is None:
                raise StateTypeError(f"list state {self._name!r}: cannot add None")
            self._check(value)
        key = self._key()
        table = self._table()
        stored = list(table.get(key, ()))
        stored.extend(values if self._ttl is None else map(self._ttl.wrap, values))
        table[key] = stored

    def update(self, values: list[Any]) -> None:
        self.clear()
        if values:
            self.add_all(list(values))

    def _store(self, stored: list[Any]) -> None:
        if stored:
            self._table()[self._key()] = stored
        else:
            self.clear()


class MapStateImpl(_KeyedState, MapState):
    """A dict per key; with TTL each entry carries its own expiry."""

    def _entries(self) -> dict[Any, Any]:
        stored = self._table().get(self._key(), _MISSING)
        if stored is _MISSING:
            return {}
        if self._ttl is None:
            return stored
        live = {k: v for k, v in stored.items() if not self._ttl.expired(v)}
        if len(live) != len(stored):
            self._store(live)
        return live

    def _store(self, entries: dict[Any, Any]) -> None:
        if entries:
            self._table()[self._key()] = entries
        else:
            self.clear()

    def get(self, key: Any) -> Any:
        entries = self._entries()
        if key not in entries:
            return None
        if self._ttl is None:
            return entries[key]
        value, refreshed = self._ttl.read(entries[key])
        if refreshed is not None:
            entries[key] = refreshed
            self._store(entries)
        return value

    def contains(self, key: Any) -> bool:
        return key in self._entries()

    def items(self) -> Iterable[tuple[Any, Any]]:
        entries = self._entries()
        if self._ttl is None:
            return list(entries.items())
        if self._ttl.refresh_on_read and entries:  # iterating the values reads every entry
            entries = {k: self._ttl.wrap(v[0]) for k, v in entries.items()}
            self._store(entries)
        return [(k, v[0]) for k, v in entries.items()]

    def keys(self) -> Iterable[Any]:
        return list(self._entries().keys())

    def values(self) -> Iterable[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self._entries()

    def __len__(self) -> int:
        return len(self._entries())

    def put(self, key: Any, value: Any) -> None:
        self.put_all({key: value})

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        for key, value in dict_value.items():
            self._check_key(key)
            self._check(value)
        entries = self._entries()
        for key, value in dict_value.items():
            entries[key] = value if self._ttl is None else self._ttl.wrap(value)
        self._store(entries)

    def remove(self, key: Any) -> None:
        entries = self._entries()
        if key in entries:
            del entries[key]
            self._store(entries)

    def _check_key(self, key: Any) -> None:
        # The same check broadcast state makes, so a key type declared once is enforced on both.
        declared = self._descriptor.key_type_info  # type: ignore[attr-defined]
        if key is None or not accepts(declared, key):
            raise StateTypeError(f"map state {self._name!r}: key {key!r} is not a "
                                 f"{getattr(declared, '__name__', declared)}")

    def _check(self, value: Any) -> None:
        if not accepts(self._descriptor.value_type_info, value):  # type: ignore[attr-defined]
            raise StateTypeError(f"map state {self._name!r}: {type(value).__name__} is not a "
                                 f"{self._descriptor.value_type_info.__name__}")  # type: ignore


def has_live_value(state: _KeyedState, stored: Any) -> bool:
    """Whether a stored record still holds something unexpired (for apply_to_keyed_state)."""
    ttl = state._ttl
    if ttl is None:
        return True
    if isinstance(state, MapStateImpl):
        return any(not ttl.expired(v) for v in stored.values())
    if isinstance(state, ListStateImpl):
        return any(not ttl.expired(v) for v in stored)
    return not ttl.expired(stored)

STATE_CLASSES: dict[str, type[_KeyedState]] = {
    "value": ValueStateImpl,
    "list": ListStateImpl,
    "map": MapStateImpl,
    "reducing": ReducingStateImpl,
    "aggregating": AggregatingStateImpl,
}
