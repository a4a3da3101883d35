"""State interfaces, as PyFlink's ``pyflink.datastream.state``; the engine implements them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
IN = TypeVar("IN")
OUT = TypeVar("OUT")


class State(ABC):
    """Base of every state handle; Flink's ``State``. A keyed handle reads and writes the
    current key's value, so one handle obtained in ``open`` serves every key."""

    @abstractmethod
    def clear(self) -> None:
        """Remove the value (for keyed state, the current key's value)."""


class ValueState(State, Generic[T]):
    """One value per key; Flink's ``ValueState``."""

    @abstractmethod
    def value(self) -> T | None:
        """The current key's value, or ``None`` when there is none (never set, cleared, or
        expired by TTL)."""

    @abstractmethod
    def update(self, value: T) -> None:
        """Set the current key's value; ``update(None)`` clears it, as in Flink. A value that
        does not match the descriptor's type raises ``StateTypeError``."""


class AppendingState(State, Generic[IN, OUT]):
    """State that values are added to; Flink's ``AppendingState``, the base of list,
    reducing and aggregating state."""

    @abstractmethod
    def get(self) -> OUT:
        """The current key's result: the list, the reduced value or the aggregate (``None``
        for reducing and aggregating state with nothing added, an empty list for list
        state)."""

    @abstractmethod
    def add(self, value: IN) -> None:
        """Add a value for the current key: appended to a list, reduced into the value, or
        added to the accumulator."""


class ReducingState(AppendingState[T, T]):
    """A value per key that each ``add`` combines with its descriptor's reduce function;
    Flink's ``ReducingState``."""


class AggregatingState(AppendingState[IN, OUT]):
    """An accumulator per key that each ``add`` feeds through its descriptor's
    ``AggregateFunction``; ``get`` returns the function's result. Flink's
    ``AggregatingState``."""


class ListState(AppendingState[T, Iterable[T]]):
    """A list per key; Flink's ``ListState``. Iterating the handle iterates ``get()``."""

    @abstractmethod
    def update(self, values: list[T]) -> None:
        """Replace the current key's list with ``values`` (an empty list clears it)."""

    @abstractmethod
    def add_all(self, values: list[T]) -> None:
        """Append every value, in order; ``None`` is refused with ``StateTypeError``."""

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())


class ReadableMap(ABC, Generic[K, V]):
    """The read methods shared by map state and broadcast state."""

    @abstractmethod
    def get(self, key: K) -> V | None:
        """The value under ``key``, or ``None`` when there is none (``state[key]`` raises
        ``MissingKeyError`` instead)."""

    @abstractmethod
    def contains(self, key: K) -> bool:
        """Whether ``key`` has a value (also ``key in state``)."""

    @abstractmethod
    def items(self) -> Iterable[tuple[K, V]]:
        """The ``(key, value)`` pairs."""

    @abstractmethod
    def keys(self) -> Iterable[K]:
        """The keys (also ``iter(state)``)."""

    @abstractmethod
    def values(self) -> Iterable[V]:
        """The values."""

    @abstractmethod
    def is_empty(self) -> bool:
        """Whether there are no entries."""

    def __getitem__(self, key: K) -> V | None:
        """``get(key)``: None for a missing key, as PyFlink's ``MapState.__getitem__``."""
        return self.get(key)

    def __contains__(self, key: object) -> bool:
        return self.contains(key)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())


class WritableMap(ReadableMap[K, V]):
    """The write methods shared by map state and read-write broadcast state."""

    @abstractmethod
    def put(self, key: K, value: V) -> None:
        """Set the value under ``key`` (also ``state[key] = value``)."""

    @abstractmethod
    def put_all(self, dict_value: dict[K, V]) -> None:
        """Set every entry of ``dict_value``."""

    @abstractmethod
    def remove(self, key: K) -> None:
        """Remove ``key``'s entry if there is one (``del state[key]`` too)."""

    def __setitem__(self, key: K, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: K) -> None:
        self.remove(key)


class ReadOnlyBroadcastState(State, ReadableMap[K, V]):
    """What the main side sees of broadcast state; Flink's ``ReadOnlyBroadcastState``."""


class BroadcastState(ReadOnlyBroadcastState[K, V], WritableMap[K, V]):
    """Read-write broadcast state, on the broadcast side only; Flink's ``BroadcastState``."""


class MapState(State, WritableMap[K, V]):
    """Keyed map state of the current key; Flink's ``MapState``."""
