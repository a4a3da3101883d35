"""``ReduceFunction`` and ``AggregateFunction``, PyFlink's names: how reducing and aggregating
state combine the values added to them (``ReducingStateDescriptor``,
``AggregatingStateDescriptor``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from sparkcast.errors import UndefinedMethodError

IN = TypeVar("IN")
ACC = TypeVar("ACC")
OUT = TypeVar("OUT")


class ReduceFunction(ABC, Generic[IN]):
    """Combines two values into one; Flink's ``ReduceFunction``."""

    @abstractmethod
    def reduce(self, value1: IN, value2: IN) -> IN:
        """Combine the value so far (``value1``) with the value added (``value2``)."""


class AggregateFunction(ABC, Generic[IN, ACC, OUT]):
    """Incremental aggregation into an accumulator; Flink's ``AggregateFunction``."""

    @abstractmethod
    def create_accumulator(self) -> ACC:
        """A new, empty accumulator, made when a key gets its first value."""

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC:
        """Fold ``value`` into ``accumulator`` and return the accumulator (it is what the state
        stores, so it must be a value the descriptor's type allows)."""

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT:
        """The aggregate that ``AggregatingState.get`` returns for ``accumulator``."""

    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC:
        """Combine two accumulators. Keyed state never merges (there are no session windows),
        so sparkcast never calls it and the default raises ``UndefinedMethodError``."""
        raise UndefinedMethodError("merge is not needed by keyed aggregating state")
