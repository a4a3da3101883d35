"""The contexts handed to user callbacks; each subclasses the matching nested PyFlink class.

A context is valid for one callback. In the harness the engine makes a fresh one per callback and
invalidates it afterwards, so code that keeps a context fails in tests; on Spark one instance per
kind is reused (the hot path), which is safe for code the harness accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.state import State
from sparkcast.api.timers import TimeDomain, TimerService
from sparkcast.errors import ContextError, OutputTypeError, TimerError

if TYPE_CHECKING:
    from sparkcast.core.engine import SubtaskEngine


class _ContextBase:
    def __init__(self, engine: SubtaskEngine, timestamp: int | None = None) -> None:
        self._engine = engine
        self._timestamp = timestamp
        self._valid = True

    def _check(self) -> None:
        if not self._valid:
            raise ContextError("this context belongs to a callback that has returned; "
                               "do not keep contexts (Flink: 'the context is only valid during "
                               "the invocation of this method')")

    def timestamp(self) -> int | None:
        self._check()
        return self._timestamp

    def current_processing_time(self) -> int:
        self._check()
        return self._engine.processing_time

    def current_watermark(self) -> int:
        self._check()
        return self._engine.current_watermark

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self._check()
        if not isinstance(output_tag, OutputTag):
            raise OutputTypeError(f"output() takes an OutputTag, not {type(output_tag).__name__}")
        self._engine.emit(output_tag, value, self._output_timestamp())

    def _output_timestamp(self) -> int | None:
        return self._timestamp


class _ReadOnlyBroadcast(_ContextBase):
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        if self._valid and type(state_descriptor) is MapStateDescriptor:  # the per-event path
            view = self._engine._read_only_views.get(state_descriptor.name)
            if view is not None:
                return view
        self._check()
        return self._engine.read_only_view(state_descriptor)


class _ReadWriteBroadcast(_ContextBase):
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        self._check()
        return self._engine.read_write_view(state_descriptor)

    def timer_service(self) -> NoReturn:
        raise TimerError("timers cannot be registered in process_broadcast_element (as in "
                         "Flink): register them in process_element or on_timer")


class _NoTimers:
    def timer_service(self) -> NoReturn:
        raise TimerError("timers need a keyed stream: key_by(...) and a "
                         "KeyedBroadcastProcessFunction")


class ReadOnlyContext(_NoTimers, _ReadOnlyBroadcast, BroadcastProcessFunction.ReadOnlyContext):
    pass


class Context(_ReadWriteBroadcast, BroadcastProcessFunction.Context):
    pass


class KeyedReadOnlyContext(_ReadOnlyBroadcast, KeyedBroadcastProcessFunction.ReadOnlyContext):
    def timer_service(self) -> TimerService:
        self._check()
        return self._engine.timer_service

    def get_current_key(self) -> Any:
        self._check()
        return self._engine.current_key


class KeyedOnTimerContext(KeyedReadOnlyContext, KeyedBroadcastProcessFunction.OnTimerContext):
    def __init__(self, engine: SubtaskEngine, timestamp: int | None, domain: TimeDomain) -> None:
        super().__init__(engine, timestamp)
        self._domain = domain

    def time_domain(self) -> TimeDomain:
        self._check()
        return self._domain

    def _output_timestamp(self) -> int | None:
        # As for ``yield tag, value`` in on_timer: the timer's time for event time, none for
        # processing time (a wall-clock instant is not an event time; Flink's collector erases it).
        return self._timestamp if self._domain is TimeDomain.EVENT_TIME else None


class KeyedContext(_ReadWriteBroadcast, KeyedBroadcastProcessFunction.Context):
    def apply_to_keyed_state(
        self, state_descriptor: StateDescriptor, function: Callable[[Any, State], None]
    ) -> None:
        self._check()
        self._engine.apply_to_keyed_state(state_descriptor, function)
