"""Keyed state of the current key, over one table per descriptor (user key -> stored value).

A handle holds its descriptor, the key scope (whose state, what time) and its table, never the
engine: ``KeyedStates.bind`` rebinds the table when the backend changes (on Spark, every
micro-batch). Every write is checked
where it is made, in the user's callback: the declared type, and that the state codec can store
the value, so a bad value becomes that element's dead letter instead of failing the flush.

With TTL, a stored value is ``[value, expires_at]`` (map state: per entry; list state: per
element, as in Flink). Expiry runs on the scope's processing time, so the harness and Spark
expire the same entries; expired values are dropped when touched, and tables that can (Spark's)
also drop keys whose state has all expired at each flush (``KeyedStates.sweep``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

from sparkcast.api.declared_types import accepts, type_label
from sparkcast.api.descriptors import (
    AggregatingStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from sparkcast.api.state import AggregatingState, ListState, MapState, ReducingState, ValueState
from sparkcast.api.ttl import StateTtlConfig
from sparkcast.core.codec import Resolver, check_storable, roundtrip
from sparkcast.core.converters import Convert, stored_converter
from sparkcast.core.scope import NO_KEY, KeyScope
from sparkcast.errors import KeyedStateError, PipelineError, StateTypeError

_MISSING: Any = object()
Tables = Callable[..., MutableMapping[Any, Any]]  # (name, decode) -> the backend's table
_PLAIN = frozenset({str, int, float, bool})  # storable as they are: no walk
_NEVER_RETURN = StateTtlConfig.StateVisibility.NeverReturnExpired


class _Ttl:
    """Wraps values with their expiry and reads them back, refreshing on read if configured."""

    def __init__(self, config: StateTtlConfig, scope: KeyScope) -> None:
        self._millis = config.ttl_millis
        self.refresh_on_read = config.refresh_on_read
        self.hide_expired = config.state_visibility is _NEVER_RETURN
        self._scope = scope

    def wrap(self, value: Any) -> list[Any]:
        return [value, self._scope.processing_time + self._millis]

    def read(self, stored: list[Any]) -> tuple[Any, list[Any] | None]:
        """(value or _MISSING if expired and hidden, refreshed record or None)."""
        value, expires_at = stored
        if expires_at <= self._scope.processing_time:
            return (_MISSING if self.hide_expired else value), None
        return value, (self.wrap(value) if self.refresh_on_read else None)

    def expired(self, stored: list[Any]) -> bool:
        return stored[1] <= self._scope.processing_time


class _KeyedState:
    #: the job's classes, which undeclared objects are stored as (``core/type_registry.py``)
    _types: Resolver | None = None

    def __init__(self, scope: KeyScope, descriptor: StateDescriptor,
                 table: MutableMapping[Any, Any]) -> None:
        self._scope = scope
        self._descriptor = descriptor
        self._name = descriptor.name
        self._ttl = None if descriptor.ttl_config is None else _Ttl(descriptor.ttl_config, scope)
        self._stored = table
        #: whether typed values are declared (else they are stored as they read back: untyped)
        self._typed = stored_converter(descriptor) is not None

    def rebind(self, table: MutableMapping[Any, Any]) -> None:
        self._stored = table

    def is_live(self, stored: Any) -> bool:
        """Whether a stored record still holds something unexpired."""
        return self._ttl is None or not self._ttl.expired(stored)

    def _table(self) -> MutableMapping[Any, Any]:
        return self._stored

    def _key(self) -> Any:
        key = self._scope.key
        if key is NO_KEY:
            raise KeyedStateError(
                f"keyed state {self._name!r} has no current key here: use it in process_element "
                "or on_timer, or in ctx.apply_to_keyed_state on the broadcast side"
            )
        return key

    def _check(self, value: Any) -> Any:
        """The value to store, checked (generic if its typed parts are not declared)."""
        if not accepts(self._descriptor.type_info, value):
            raise StateTypeError(f"state {self._name!r}: {type(value).__name__} is not a "
                                 f"{type_label(self._descriptor.type_info)}")
        if type(value) not in _PLAIN and check_storable(value, f"state {self._name!r}"):
            return value if self._typed else roundtrip(value, self._types)
        return value

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
        self._set(self._check(value))


class ReducingStateImpl(_KeyedState, ReducingState):
    def get(self) -> Any:
        value = self._get()
        return None if value is _MISSING else value

    def add(self, value: Any) -> None:
        if value is None:  # Flink's heap backend: adding null clears
            self.clear()
            return
        value = self._check(value)
        current = self._get()
        descriptor = self._descriptor
        assert isinstance(descriptor, ReducingStateDescriptor)
        if current is _MISSING:
            self._set(value)
            return
        reduced = descriptor.reduce(current, value)
        self._set(self._check(reduced))


class AggregatingStateImpl(_KeyedState, AggregatingState):
    def get(self) -> Any:
        accumulator = self._get()
        if accumulator is _MISSING:
            return None
        return self._function().get_result(accumulator)

    def add(self, value: Any) -> None:
        if value is None:  # Flink's heap backend (HeapAggregatingState.add): null clears
            self.clear()
            return
        accumulator = self._get()
        function = self._function()
        if accumulator is _MISSING:
            accumulator = function.create_accumulator()
        accumulator = function.add(value, accumulator)
        self._set(self._check(accumulator))

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
        # Flink's TtlListState: expired elements are returned with ReturnExpiredIfNotCleanedUp
        # and cleaned up on this access; reading the list reads (refreshes) every live element
        shown = live if self._ttl.hide_expired else stored
        if self._ttl.refresh_on_read:
            live = [self._ttl.wrap(item[0]) for item in live]
        if live != stored:
            self._store(live)
        return [item[0] for item in shown]

    def add(self, value: Any) -> None:
        self.add_all([value])

    def add_all(self, values: list[Any]) -> None:
        if values is None:  # Flink: "List of values to add cannot be null."
            raise StateTypeError(f"list state {self._name!r}: add_all(None); pass a list")
        for value in values:
            if value is None:
                raise StateTypeError(f"list state {self._name!r}: cannot add None")
        values = [self._check(value) for value in values]
        if not values:  # Flink: addAll of an empty list leaves an empty state empty
            return
        key = self._key()
        table = self._table()
        stored = list(table.get(key, ()))
        stored.extend(values if self._ttl is None else map(self._ttl.wrap, values))
        table[key] = stored

    def update(self, values: list[Any]) -> None:
        if values is None:  # Flink: "List of values to update cannot be null."
            raise StateTypeError(f"list state {self._name!r}: update(None); pass a list "
                                 "(update([]) or clear() empties it)")
        values = list(values)
        if any(value is None for value in values):  # checked before anything changes
            raise StateTypeError(f"list state {self._name!r}: cannot add None")
        self.clear()
        if values:
            self.add_all(values)

    def _store(self, stored: list[Any]) -> None:
        if stored:
            self._table()[self._key()] = stored
        else:
            self.clear()


class MapStateImpl(_KeyedState, MapState):
    """A dict per key; with TTL each entry carries its own expiry."""

    def _entries(self) -> dict[Any, Any]:
        """The live entries (TTL-wrapped); expired ones are cleaned up here."""
        return self._read_entries()[0]

    def _read_entries(self) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """(live entries, entries to show): with ReturnExpiredIfNotCleanedUp an access shows the
        expired entries it cleans up, once (Flink's TtlMapState)."""
        stored = self._table().get(self._key(), _MISSING)
        if stored is _MISSING:
            return {}, {}
        if self._ttl is None:
            return stored, stored
        live = {k: v for k, v in stored.items() if not self._ttl.expired(v)}
        if len(live) == len(stored):
            return live, live
        shown = live if self._ttl.hide_expired else dict(stored)
        self._store(live)
        return live, shown

    def _read_all(self) -> dict[Any, Any]:
        """Every entry an iteration returns, refreshed as read when OnReadAndWrite (Flink's
        entries(), keys() and values() all read each entry)."""
        live, shown = self._read_entries()
        if self._ttl is None:
            return shown
        if self._ttl.refresh_on_read and live:
            refreshed = {k: self._ttl.wrap(v[0]) for k, v in live.items()}
            self._store(refreshed)
        return {k: v[0] for k, v in shown.items()}

    def _store(self, entries: dict[Any, Any]) -> None:
        if entries:
            self._table()[self._key()] = entries
        else:
            self.clear()

    def get(self, key: Any) -> Any:
        value = self._read_one(key)
        return None if value is _MISSING else value

    def _read_one(self, key: Any) -> Any:
        """One entry's value or _MISSING, as Flink's TtlMapState reads it: an expired entry is
        removed (and returned once if visible), a live one refreshed when OnReadAndWrite."""
        stored = self._table().get(self._key(), _MISSING)
        if stored is _MISSING or key not in stored:
            return _MISSING
        if self._ttl is None:
            return stored[key]
        value, refreshed = self._ttl.read(stored[key])
        if self._ttl.expired(stored[key]):
            entries = dict(stored)
            del entries[key]
            self._store(entries)
        elif refreshed is not None:
            stored[key] = refreshed
            self._store(stored)
        return value

    def contains(self, key: Any) -> bool:
        return self._read_one(key) is not _MISSING  # a read, as Flink's contains

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._read_all().items())

    def keys(self) -> Iterable[Any]:
        return list(self._read_all().keys())

    def values(self) -> Iterable[Any]:
        return list(self._read_all().values())

    def is_empty(self) -> bool:
        return not self._entries()

    def __len__(self) -> int:
        return len(self._entries())

    def put(self, key: Any, value: Any) -> None:
        self.put_all({key: value})

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        if dict_value is None:  # Flink's TtlMapState.putAll: a null map puts nothing
            return
        checked = {}
        for key, value in dict_value.items():
            self._check_key(key)
            checked[key] = self._check(value)
        entries = self._entries()
        for key, value in checked.items():
            entries[key] = value if self._ttl is None else self._ttl.wrap(value)
        self._store(entries)

    def remove(self, key: Any) -> None:
        entries = self._entries()
        if key in entries:
            del entries[key]
            self._store(entries)

    def _map_descriptor(self) -> MapStateDescriptor:
        descriptor = self._descriptor
        assert isinstance(descriptor, MapStateDescriptor)
        return descriptor

    def _check_key(self, key: Any) -> None:
        # The same check broadcast state makes, so a key type declared once is enforced on both.
        declared = self._map_descriptor().key_type_info
        if key is None or not accepts(declared, key):
            raise StateTypeError(f"map state {self._name!r}: key {key!r} is not a "
                                 f"{type_label(declared)}")
        if type(key) not in _PLAIN:
            check_storable(key, f"map state {self._name!r} key")

    def _check(self, value: Any) -> Any:
        declared = self._map_descriptor().value_type_info
        if not accepts(declared, value):
            raise StateTypeError(f"map state {self._name!r}: {type(value).__name__} is not a "
                                 f"{type_label(declared)}")
        if type(value) not in _PLAIN and check_storable(value, f"map state {self._name!r}"):
            return value if self._typed else roundtrip(value, self._types)
        return value


def has_live_value(state: _KeyedState, stored: Any) -> bool:
    """Whether a stored record still holds something unexpired (for apply_to_keyed_state)."""
    if isinstance(state, MapStateImpl):
        return any(state.is_live(v) for v in stored.values())
    if isinstance(state, ListStateImpl):
        return any(state.is_live(v) for v in stored)
    return state.is_live(stored)


STATE_CLASSES: dict[str, type[_KeyedState]] = {
    "value": ValueStateImpl,
    "list": ListStateImpl,
    "map": MapStateImpl,
    "reducing": ReducingStateImpl,
    "aggregating": AggregatingStateImpl,
}


class KeyedStates:
    """The keyed state handles of one subtask, one per descriptor name, over the backend's
    tables; what ``RuntimeContext.get_state`` and ``apply_to_keyed_state`` reach."""

    def __init__(self, scope: KeyScope, keyed: bool, broadcast_names: Iterable[str]) -> None:
        self._scope = scope
        self._keyed = keyed
        self._broadcast_names = frozenset(broadcast_names)
        self._descriptors: dict[str, StateDescriptor] = {}
        self._handles: dict[str, _KeyedState] = {}
        self._decoders: dict[str, Convert | None] = {}
        self._tables: Tables = lambda name, decode=None: {}
        self._failure: tuple[BaseException, Any] | None = None
        #: whether ``apply`` ran since it was last reset: the micro-batch engine's driver asks, as
        #: its broadcast elements then need every subtask's keyed state
        self.applied = False
        #: the job's ``TypeRegistry``, set by the engine
        self.types: Any = None

    def bind(self, tables: Tables) -> None:
        """Rebind every handle to the table the backend gives for its name."""
        self._tables = tables
        for name, handle in self._handles.items():
            handle.rebind(tables(name, self._decoders[name]))

    def descriptors(self) -> tuple[StateDescriptor, ...]:
        """The descriptors requested so far (by ``open``), in request order."""
        return tuple(self._descriptors.values())

    def table(self, name: str) -> Mapping[Any, Any]:
        """The stored records of one descriptor (TTL-wrapped), for inspection in tests."""
        return self._handles[name]._table()

    def handle(self, descriptor: StateDescriptor) -> Any:
        """The state handle for a keyed descriptor (one per name, created on first request)."""
        if not self._keyed:
            raise KeyedStateError(
                f"keyed state {descriptor.name!r} needs a keyed stream: key_by(...) and a "
                "KeyedBroadcastProcessFunction (Flink: 'Keyed state can only be used on a "
                "keyed stream')"
            )
        name = descriptor.name
        known = self._descriptors.get(name)
        if known is not None and known.kind != descriptor.kind:
            raise PipelineError(f"state name {name!r} is used for both {known.kind} and "
                                f"{descriptor.kind} state: give each state its own name")
        if name in self._broadcast_names:
            raise PipelineError(f"state name {name!r} is already a broadcast state")
        if known is None:
            self._descriptors[name] = descriptor
            decode = self._decoders[name] = stored_converter(descriptor)
            if self.types is not None:
                self.types.add_descriptor(descriptor)
            handle = STATE_CLASSES[descriptor.kind](self._scope, descriptor,
                                                    self._tables(name, decode))
            handle._types = self.types
            self._handles[name] = handle
        return self._handles[name]

    def apply(self, descriptor: StateDescriptor, function: Callable[[Any, Any], None]) -> None:
        """Flink's ``applyToKeyedState``: ``function(key, state)`` for every key with a live
        value, the state scoped to that key."""
        self.applied = True
        state = self.handle(descriptor)
        table = state._table()
        scope = self._scope
        previous = scope.key
        try:
            for key in list(table.keys()):
                stored = table.get(key)
                if stored is not None and has_live_value(state, stored):
                    scope.key = key
                    function(key, state)
        except Exception as exc:
            # keyed state differs by subtask: the dead letter names the key it failed on, and
            # on Spark each subtask where this happens reports it (spark/execution/dead_letters.py)
            self._failure = (exc, scope.key)
            raise
        finally:
            scope.key = previous

    def key_of_failure(self, exc: BaseException) -> Any:
        """The key ``apply`` failed on when ``exc`` is (or was raised from) that failure, else
        None (the callback failed elsewhere, or caught it and failed later)."""
        if self._failure is None:
            return None
        failed, key = self._failure
        seen: BaseException | None = exc
        while seen is not None:
            if seen is failed:
                return key
            seen = seen.__cause__ or seen.__context__
        return None

    def forget_failure(self) -> None:
        self._failure = None

    def peek(self, descriptor: StateDescriptor, key: Any) -> Any:
        """One key's state as the function would read it now (a value, list, dict or aggregate
        result; None when empty or expired), leaving the current key as it was."""
        state = self.handle(descriptor)
        scope = self._scope
        previous, scope.key = scope.key, key
        try:
            if descriptor.kind == "map":
                return dict(state.items()) or None
            if descriptor.kind == "list":
                return list(state.get()) or None
            return state.value() if descriptor.kind == "value" else state.get()
        finally:
            scope.key = previous

    def sweep(self) -> None:
        """Let tables that can (Spark's) drop keys whose TTL state has all expired, so keys never
        touched again do not stay stored forever (Flink's incremental cleanup)."""
        for name, descriptor in self._descriptors.items():
            state = self._handles[name]
            sweep = getattr(state._table(), "sweep", None)
            if descriptor.ttl_config is None or sweep is None:
                continue
            sweep(lambda stored, state=state: not has_live_value(state, stored),
                  self._scope.processing_time)
