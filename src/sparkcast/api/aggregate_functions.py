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
    def reduce(self, value1: IN, value2: IN) -> IN: ...


class AggregateFunction(ABC, Generic[IN, ACC, OUT]):
    """Incremental aggregation into an accumulator; Flink's ``AggregateFunction``."""

    @abstractmethod
    def create_accumulator(self) -> ACC: ...

    @abstractmethod
    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    @abstractmethod
    def get_result(self, accumulator: ACC) -> OUT: ...

    def merge(self, acc_a: ACC, acc_b: ACC) -> ACC:
        raise UndefinedMethodError("merge is not needed by keyed aggregating state")
