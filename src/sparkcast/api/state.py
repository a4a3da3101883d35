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
    @abstractmethod
    def clear(self) -> None: ...


class ValueState(State, Generic[T]):
    @abstractmethod
    def value(self) -> T | None: ...

    @abstractmethod
    def update(self, value: T) -> None: ...


class AppendingState(State, Generic[IN, OUT]):
    @abstractmethod
    def get(self) -> OUT: ...

    @abstractmethod
    def add(self, value: IN) -> None: ...


class ReducingState(AppendingState[T, T]):
    pass


class AggregatingState(AppendingState[IN, OUT]):
    pass


class ListState(AppendingState[T, Iterable[T]]):
    @abstractmethod
    def update(self, values: list[T]) -> None: ...

    @abstractmethod
    def add_all(self, values: list[T]) -> None: ...

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())


class ReadableMap(ABC, Generic[K, V]):
    """The read methods shared by map state and broadcast state."""

    @abstractmethod
    def get(self, key: K) -> V | None: ...

    @abstractmethod
    def contains(self, key: K) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[K, V]]: ...

    @abstractmethod
    def keys(self) -> Iterable[K]: ...

    @abstractmethod
    def values(self) -> Iterable[V]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

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
    def put(self, key: K, value: V) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: dict[K, V]) -> None: ...

    @abstractmethod
    def remove(self, key: K) -> None: ...

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
