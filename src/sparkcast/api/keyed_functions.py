"""The keyed functions next to the broadcast ones: PyFlink's ``KeyedProcessFunction`` and
``KeyedCoProcessFunction``, same names and contexts.

Ported pipelines keep the steps around their broadcast step: per-key timers (an inactivity
alert) and two keyed streams joined by key (per-key reference data, where a broadcast would
copy everything to every subtask). They run on the same engine as the broadcast functions: a
keyed function with no broadcast side (``core/keyed_process.py``):

    class Inactivity(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 60_000)
        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), timestamp
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from sparkcast.api.functions import Function
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.timers import TimeDomain, TimerService

KEY = TypeVar("KEY")
IN = TypeVar("IN")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
OUT = TypeVar("OUT")


class KeyedContext(ABC):
    """The context of a keyed function's callbacks; valid only during the callback."""

    @abstractmethod
    def timestamp(self) -> int | None:
        """The element's event timestamp (epoch ms), or None when it has none."""

    @abstractmethod
    def timer_service(self) -> TimerService:
        """The timers of the current key."""

    @abstractmethod
    def get_current_key(self) -> Any:
        """The key of the element (or timer) being processed."""

    @abstractmethod
    def output(self, output_tag: OutputTag, value: Any) -> None:
        """Emit to a side output; the same as ``yield output_tag, value``."""


class KeyedOnTimerContext(KeyedContext, ABC):
    """The context of ``on_timer``: a keyed context plus the timer's domain."""

    @abstractmethod
    def time_domain(self) -> TimeDomain:
        """Whether the firing timer is an event-time or a processing-time timer."""


class KeyedProcessFunction(Function, Generic[KEY, IN, OUT]):
    """Processes a keyed stream with keyed state and timers; Flink's ``KeyedProcessFunction``."""

    class Context(KeyedContext, ABC):
        """The context of ``process_element``: the current key, timers, side outputs."""

    class OnTimerContext(KeyedOnTimerContext, ABC):
        """The context of ``on_timer``: that of ``process_element`` plus the timer's domain."""

    @abstractmethod
    def process_element(self, value: IN, ctx: Context) -> Iterable[Any] | None:
        """Called for each element with its key's state and timers; yield the outputs
        (``yield tag, value`` for a side output)."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """Called when a timer registered through ``ctx.timer_service()`` fires."""
        return None


class KeyedCoProcessFunction(Function, Generic[KEY, IN1, IN2, OUT]):
    """Two keyed streams, connected by key, with shared keyed state and timers; Flink's
    ``KeyedCoProcessFunction``. Neither input is broadcast: an element of either reaches only
    the subtask of its key."""

    class Context(KeyedContext, ABC):
        """The context of ``process_element1``/``2``: the current key, timers, side
        outputs."""

    class OnTimerContext(KeyedOnTimerContext, ABC):
        """The context of ``on_timer``: that of the element callbacks plus the timer's
        domain."""

    @abstractmethod
    def process_element1(self, value: IN1, ctx: Context) -> Iterable[Any] | None:
        """Called for each element of the first input, with its key's state and timers."""

    @abstractmethod
    def process_element2(self, value: IN2, ctx: Context) -> Iterable[Any] | None:
        """Called for each element of the second input, with its key's state and timers."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """Called when a timer registered through ``ctx.timer_service()`` fires."""
        return None

