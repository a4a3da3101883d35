"""The contexts handed to user callbacks; each subclasses the matching nested PyFlink class.

A context holds the narrow parts it needs (``ContextParts``: the key scope, the output collector,
the broadcast views, the keyed states and the timer service), never the engine. It is valid for
one callback. In the harness a fresh one is made per callback and invalidated afterwards, so code
that keeps a context fails in tests; on Spark the main-side and the broadcast-side context are one
instance each, reused (the hot path; an ``on_timer`` context is made per timer), which is safe
for code the harness accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.state import State
from sparkcast.api.timers import TimeDomain, TimerService
from sparkcast.core.broadcast_state import BroadcastStates
from sparkcast.core.collector import OutputCollector
from sparkcast.core.keyed_process import register_contexts
from sparkcast.core.keyed_state import KeyedStates
from sparkcast.core.scope import KeyScope
from sparkcast.errors import ContextError, OutputTypeError, TimerError


@dataclass(frozen=True, slots=True)
class ContextParts:
    """What contexts may reach: the engine's collaborators, not the engine."""

    scope: KeyScope
    collector: OutputCollector
    broadcast: BroadcastStates
    keyed: KeyedStates
    timer_service: TimerService


class ContextBase:
    """Clocks, timestamp and side outputs; validity for one callback."""

    def __init__(self, parts: ContextParts) -> None:
        self._parts = parts
        self._scope = parts.scope
        self._views = parts.broadcast.read_only
        self._valid = True

    def invalidate(self) -> None:
        """The callback returned: using this context from now on raises ``ContextError``."""
        self._valid = False

    def _check(self) -> None:
        if not self._valid:
            raise ContextError("this context belongs to a callback that has returned; "
                               "do not keep contexts (Flink: 'the context is only valid during "
                               "the invocation of this method')")

    def timestamp(self) -> int | None:
        self._check()
        return self._scope.timestamp

    def current_processing_time(self) -> int:
        self._check()
        return self._scope.processing_time

    def current_watermark(self) -> int:
        self._check()
        return self._scope.watermark

    def output(self, output_tag: OutputTag, value: Any) -> None:
        self._check()
        if not isinstance(output_tag, OutputTag):
            raise OutputTypeError(f"output() takes an OutputTag, not {type(output_tag).__name__}")
        self._parts.collector.emit(output_tag, value, self._output_timestamp())

    def _output_timestamp(self) -> int | None:
        return self._scope.timestamp


class ReadOnlyBroadcastContext(ContextBase):
    """Main side: broadcast state read-only (shared frozen values)."""

    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        if self._valid and type(state_descriptor) is MapStateDescriptor:  # the per-event path
            view = self._views.get(state_descriptor.name)
            if view is not None:
                return view
        self._check()
        return self._parts.broadcast.read_only_view(state_descriptor)


class _ReadWriteBroadcast(ContextBase):
    def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> Any:
        self._check()
        return self._parts.broadcast.read_write_view(state_descriptor)

    def timer_service(self) -> NoReturn:
        raise TimerError("timers cannot be registered in process_broadcast_element (as in "
                         "Flink): register them in process_element or on_timer")


class _NoTimers:
    def timer_service(self) -> NoReturn:
        raise TimerError("timers need a keyed stream: key_by(...) and a "
                         "KeyedBroadcastProcessFunction")


class ReadOnlyContext(_NoTimers, ReadOnlyBroadcastContext,
                      BroadcastProcessFunction.ReadOnlyContext):
    pass


class Context(_ReadWriteBroadcast, BroadcastProcessFunction.Context):
    pass


class KeyedReadOnlyContext(ReadOnlyBroadcastContext,
                           KeyedBroadcastProcessFunction.ReadOnlyContext):
    def timer_service(self) -> TimerService:
        self._check()
        return self._parts.timer_service

    def get_current_key(self) -> Any:
        self._check()
        return self._scope.key


class KeyedOnTimerContext(KeyedReadOnlyContext, KeyedBroadcastProcessFunction.OnTimerContext):
    def __init__(self, parts: ContextParts, domain: TimeDomain) -> None:
        super().__init__(parts)
        self._domain = domain

    def time_domain(self) -> TimeDomain:
        self._check()
        return self._domain

    def _output_timestamp(self) -> int | None:
        # As for ``yield tag, value`` in on_timer: the timer's time for event time, none for
        # processing time (a wall-clock instant is not an event time; Flink's collector erases it).
        return self._scope.timestamp if self._domain is TimeDomain.EVENT_TIME else None


register_contexts(KeyedReadOnlyContext, KeyedOnTimerContext)


class KeyedContext(_ReadWriteBroadcast, KeyedBroadcastProcessFunction.Context):
    def apply_to_keyed_state(
        self, state_descriptor: StateDescriptor, function: Callable[[Any, State], None]
    ) -> None:
        self._check()
        self._parts.keyed.apply(state_descriptor, function)


class Contexts:
    """The contexts of one subtask: one shared instance per side on the hot path, or (strict,
    in the harness) a fresh one per callback, invalidated by ``done``."""

    def __init__(self, parts: ContextParts, keyed: bool, strict: bool) -> None:
        self.parts = parts
        self.strict = strict
        main, broadcast = (KeyedReadOnlyContext, KeyedContext) if keyed else (ReadOnlyContext,
                                                                              Context)
        self._kinds: dict[str, type[ContextBase]] = {"main": main, "broadcast": broadcast}
        self.shared = {side: kind(parts) for side, kind in self._kinds.items()}

    def get(self, side: str) -> Any:
        return self._kinds[side](self.parts) if self.strict else self.shared[side]

    def on_timer(self, domain: TimeDomain) -> KeyedOnTimerContext:
        return KeyedOnTimerContext(self.parts, domain)

    def done(self, ctx: ContextBase) -> None:
        if self.strict:
            ctx.invalidate()
