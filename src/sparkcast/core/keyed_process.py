"""``KeyedProcessFunction`` and ``KeyedCoProcessFunction`` on the broadcast engine.

Both are keyed functions without a broadcast side, so the engine runs them through an adapter
that is a ``KeyedBroadcastProcessFunction`` with no broadcast state: keyed state, timers, side
outputs, dead letters, the hold-free micro-batch order and the Spark runtime are the same code.
A co-function's two inputs arrive as one keyed main stream of ``CoElement``s (both inputs go
through the same shuffle to subtask ``hash(key) mod P``), which the adapter routes to
``process_element1`` or ``process_element2``.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, TypeVar

from sparkcast.api.functions import KeyedBroadcastProcessFunction
from sparkcast.api.keyed_functions import (
    KeyedContext,
    KeyedCoProcessFunction,
    KeyedOnTimerContext,
    KeyedProcessFunction,
)
from sparkcast.api.runtime_context import RuntimeContext
from sparkcast.api.timers import MIN_WATERMARK
from sparkcast.errors import PipelineError

T = TypeVar("T")


class CoElement(NamedTuple):
    """An element of a co-function's input 1 or 2."""

    input: int
    value: Any


def merged_by_time(inputs: Iterable[Iterable[tuple[int | None, T]]]
                   ) -> Iterator[tuple[int | None, T]]:
    """A co-function's inputs as one stream: ``(timestamp, element)`` pairs of each input in
    its source order, merged by event time without reordering either input (on equal times,
    and without event time, the earlier input first), as a two-input Flink operator takes each
    input in its order. The harness and both Spark engines merge with this."""
    def time_of(item: tuple[int | None, Any]) -> int:
        return MIN_WATERMARK if item[0] is None else item[0]
    return heapq.merge(*inputs, key=time_of)


class KeyedAdapter(KeyedBroadcastProcessFunction):
    """Runs a keyed function (no broadcast side) on the engine; ``user_function`` is the
    user's object, whose name errors and dead letters report."""

    def __init__(self, user_function: KeyedProcessFunction | KeyedCoProcessFunction) -> None:
        if not isinstance(user_function, (KeyedProcessFunction, KeyedCoProcessFunction)):
            raise PipelineError(f"{type(user_function).__name__} is not a KeyedProcessFunction "
                                "or KeyedCoProcessFunction")
        self.user_function = user_function
        self.co = isinstance(user_function, KeyedCoProcessFunction)

    def open(self, runtime_context: RuntimeContext) -> None:
        self.user_function.open(runtime_context)

    def close(self) -> None:
        self.user_function.close()

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        function = self.user_function
        if not self.co:
            return function.process_element(value, ctx)  # type: ignore[union-attr]
        if value.input == 1:
            return function.process_element1(value.value, ctx)  # type: ignore[union-attr]
        return function.process_element2(value.value, ctx)  # type: ignore[union-attr]

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        raise PipelineError("a keyed function has no broadcast side")

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any] | None:
        return self.user_function.on_timer(timestamp, ctx)


def adapt(function: Any) -> KeyedAdapter:
    return function if isinstance(function, KeyedAdapter) else KeyedAdapter(function)


def register_contexts(main: type, on_timer: type) -> None:
    """The engine's keyed contexts are PyFlink's keyed contexts too (``isinstance`` holds)."""
    for base in (KeyedContext, KeyedProcessFunction.Context, KeyedCoProcessFunction.Context):
        base.register(main)
    for base in (KeyedOnTimerContext, KeyedProcessFunction.OnTimerContext,
                 KeyedCoProcessFunction.OnTimerContext):
        base.register(on_timer)
