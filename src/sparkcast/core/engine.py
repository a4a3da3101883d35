"""The engine: runs one subtask of a broadcast process function, Flink's operator in Python.

The same engine runs in the test harness (dict state, one call at a time) and inside Spark (one
micro-batch per call, Spark state). ``SubtaskEngine`` is the coordinator: it owns the order of
things (clocks and timers, then broadcast elements, then main elements; hold-until-ready) and the
lifecycle (bind, flush), and hands narrow collaborators to the parts that need them:

* ``KeyScope`` (core/scope.py): the current key, element timestamp and clocks;
* ``OutputCollector`` (core/collector.py): outputs, side outputs, dead letters, user calls;
* ``BroadcastStates`` and ``KeyedStates``: the state views and handles over the backend;
* a ``MainRunner`` (core/runner.py, core/vectorized.py), chosen once: ``process_element`` per
  element or ``process_batch`` per frame.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import (
    BaseBroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    defines,
)
from sparkcast.api.keyed_functions import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.api.metrics import MetricGroup
from sparkcast.api.options import HOLD_OVERFLOW, ProcessOptions
from sparkcast.api.state import State
from sparkcast.api.timers import MIN_WATERMARK, TimeDomain
from sparkcast.core import codec
from sparkcast.core.backend import StateBackend
from sparkcast.core.batch_metrics import SubtaskMeter
from sparkcast.core.broadcast_state import (
    BroadcastStates,
    BroadcastStateView,
    ReadOnlyBroadcastStateView,
)
from sparkcast.core.collector import OutputCollector
from sparkcast.core.contexts import ContextParts, Contexts
from sparkcast.core.hold import HoldBuffer
from sparkcast.core.keyed_process import KeyedAdapter, adapt
from sparkcast.core.keyed_state import KeyedStates
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.core.runner import ElementRunner, MainRunner
from sparkcast.core.runtime_context import EngineRuntimeContext, TaskInfo
from sparkcast.core.scope import NO_KEY, KeyScope
from sparkcast.core.timers import KeyedTimerService, TimerQueue
from sparkcast.core.type_registry import job_types
from sparkcast.core.vectorized import BatchRunner
from sparkcast.errors import PipelineError, UserFunctionError, raised_as_itself


class SubtaskEngine:
    """One parallel instance of a broadcast process function over a ``StateBackend``."""

    def __init__(
        self,
        function: BaseBroadcastProcessFunction,
        broadcast_descriptors: Sequence[MapStateDescriptor],
        backend: StateBackend,
        *,
        options: ProcessOptions | None = None,
        subtask_index: int = 0,
        parallelism: int = 1,
        strict_contexts: bool = False,
    ) -> None:
        if isinstance(function, (KeyedProcessFunction, KeyedCoProcessFunction)):
            function = adapt(function)
        validate_function(function)
        self.function = function
        self.keyed = isinstance(function, KeyedBroadcastProcessFunction)
        self.options = options or ProcessOptions()
        self.task = TaskInfo(type(user_function(function)).__name__, subtask_index, parallelism,
                             self.options.job_parameters)
        self.strict_contexts = strict_contexts
        descriptors = {} if isinstance(function, KeyedAdapter) and not broadcast_descriptors else {
            d.name: d for d in check_broadcast(broadcast_descriptors)}
        self.metrics = MetricGroup()
        #: per-call counts for monitoring (core/batch_metrics.py)
        self.meter = SubtaskMeter(self.metrics)
        self.scope = KeyScope()
        self.collector = OutputCollector(self.task.function_name, self.options.on_error)
        self.timers = {domain: TimerQueue() for domain in TimeDomain}
        self.hold = HoldBuffer(self.options.hold_until_ready, self.options.hold_capacity)
        self.broadcast_version = ""
        self.runtime_context: EngineRuntimeContext | None = None  # set by open()
        self.broadcast = BroadcastStates(descriptors, self._broadcast_changed)
        self.keyed_states = KeyedStates(self.scope, self.keyed, descriptors)
        #: the classes stored objects resolve against (``core/type_registry.py``)
        self.types = job_types(user_function(function), descriptors.values(), self.options.types)
        self.broadcast.use_types(self.types)
        self.keyed_states.types = self.types
        parts = ContextParts(self.scope, self.collector, self.broadcast, self.keyed_states,
                             KeyedTimerService(self.scope, self.timers))
        self.contexts = Contexts(parts, self.keyed, strict_contexts)
        self.runner = self._choose_runner(parts)
        self.bind(backend)

    def _choose_runner(self, parts: ContextParts) -> MainRunner:
        if defines(self.function, "process_batch"):
            return BatchRunner(self.function.process_batch, parts)  # type: ignore[attr-defined]
        return ElementRunner(self.function.process_element,
                             self.scope, self.collector, self.contexts, self.keyed)

    @property
    def vectorized(self) -> bool:
        """Whether main values travel as DataFrames (the function defines ``process_batch``)."""
        return self.runner.takes_frames

    # ---------------------------------------------------------------- lifecycle and state binding

    def bind(self, backend: StateBackend) -> None:
        """Attach the state of this subtask (Spark: the handles of the current micro-batch)."""
        self.backend = backend
        backend.use_types(self.types)
        self.broadcast.bind(backend.broadcast_table)
        self.keyed_states.bind(backend.keyed_table)
        for domain, queue in self.timers.items():
            queue.restore(backend.load(f"timers.{domain.name}", []))
        self.hold.restore(backend.load("held", []))
        self.broadcast_version = backend.load("broadcast_version", "")
        self.hold.refresh(self.broadcast.tables)

    def open(self) -> None:
        context = EngineRuntimeContext(self.keyed_states, self.task, self.metrics)
        self.runtime_context = context
        self._call_plain("open", self.function.open, context)

    @property
    def reads_subtask(self) -> bool:
        """Whether the function has asked which subtask it is (its outputs may differ by
        subtask)."""
        return self.runtime_context is not None and self.runtime_context.read_subtask

    def close(self) -> None:
        self._call_plain("close", self.function.close)

    def flush(self) -> None:
        """Persist the engine's own bookkeeping and make the backend durable."""
        backend = self.backend
        for domain, queue in self.timers.items():
            if queue.changed:
                backend.store(f"timers.{domain.name}", queue.snapshot())
                queue.changed = False
        if self.hold.changed:
            backend.store("held", self.hold.snapshot())
            self.hold.changed = False
        backend.store("broadcast_version", self.broadcast_version)
        self.keyed_states.sweep()
        backend.flush()

    def take_outputs(self) -> list[OutputRecord]:
        """The outputs since the last call, as ``(tag, value, timestamp, batch, key)`` tuples (the
        layout of ``OutputRecord``; plain tuples because building one per event costs)."""
        return self.collector.take()

    # ---------------------------------------------------------------------------- state access

    def read_only_view(self, descriptor: MapStateDescriptor) -> ReadOnlyBroadcastStateView:
        return self.broadcast.read_only_view(descriptor)

    def read_write_view(self, descriptor: MapStateDescriptor) -> BroadcastStateView:
        return self.broadcast.read_write_view(descriptor)

    def keyed_state(self, descriptor: StateDescriptor) -> Any:
        """The state handle for a keyed descriptor (one per name, created on first request)."""
        return self.keyed_states.handle(descriptor)

    def keyed_descriptors(self) -> tuple[StateDescriptor, ...]:
        """The keyed state the function asked for (in ``open``)."""
        return self.keyed_states.descriptors()

    def apply_to_keyed_state(
        self, descriptor: StateDescriptor, function: Callable[[Any, State], None]
    ) -> None:
        self.keyed_states.apply(descriptor, function)

    def _broadcast_changed(self) -> None:
        self.hold.stale = True

    @property
    def current_watermark(self) -> int:
        return self.scope.watermark

    # ---------------------------------------------------------------------------------- inputs

    def process_broadcast_element(self, value: Any, timestamp: int | None = None,
                                  fingerprint: str | None = None) -> None:
        """Apply one broadcast element, then release held elements that became processable.
        ``fingerprint`` is the value's ``codec.fingerprint`` when the caller has it already."""
        self.scope.enter(NO_KEY, timestamp)
        content = fingerprint or codec.fingerprint(value)
        chain = f"{self.broadcast_version}|{content}|{timestamp}".encode()
        self.broadcast_version = hashlib.blake2b(chain, digest_size=12).hexdigest()
        self.meter.broadcast_applied_at(timestamp)
        ctx = self.contexts.get("broadcast")
        try:
            self.collector.invoke("process_broadcast_element",
                                  self.function.process_broadcast_element, value, ctx, timestamp,
                                  None, key_of=self.keyed_states.key_of_failure)
        finally:
            self.contexts.done(ctx)
            self.keyed_states.forget_failure()  # the function may have caught it
        if self.hold.stale:
            self.hold.refresh(self.broadcast.tables)
            if self.hold.ready and self.hold.items:
                self.runner.release(self.hold.take())

    def process_element(self, value: Any, timestamp: int | None = None, key: Any = NO_KEY) -> None:
        """Process one main-side element (held instead while the broadcast state is not ready)."""
        if self.hold.ready or self._lacks_key(key):  # a keyless element is a dead letter now
            self.runner.run_one(value, timestamp, key)
        elif not self.hold.add(value, timestamp, key):
            self.collector.emit(HOLD_OVERFLOW, value, timestamp)

    def _lacks_key(self, key: Any) -> bool:
        return self.keyed and not self.runner.takes_frames and (key is NO_KEY or key is None)

    def advance_watermark(self, main: int | None = None, broadcast: int | None = None) -> None:
        """Raise the per-input watermarks; event-time timers up to their minimum fire."""
        scope = self.scope
        if main is not None and main > scope.main_watermark:
            scope.main_watermark = main
        if broadcast is not None and broadcast > scope.broadcast_watermark:
            scope.broadcast_watermark = broadcast
        self._fire(TimeDomain.EVENT_TIME, scope.watermark)

    def advance_processing_time(self, time: int) -> None:
        """Move the processing clock forward; processing-time timers up to it fire."""
        if time > self.scope.processing_time:
            self.scope.processing_time = time
        self._fire(TimeDomain.PROCESSING_TIME, self.scope.processing_time)

    def run_micro_batch(
        self,
        broadcast: Sequence[BroadcastElement],
        main_values: Sequence[Any],
        main_timestamps: Sequence[int | None] | None = None,
        main_keys: Sequence[Any] | None = None,
        *,
        watermark: int | None = None,
        processing_time: int | None = None,
    ) -> None:
        """One micro-batch of this subtask: clocks first (timers that are due fire, as when a
        watermark reaches a Flink operator), then the broadcast elements in their deterministic
        order, then the main elements; with ``time_alignment="event"`` the two are merged by
        event time instead. ``main_values`` may be a pandas DataFrame for ``process_batch``."""
        if processing_time is not None:
            self.advance_processing_time(processing_time)
        if watermark is not None:
            self.advance_watermark(watermark, watermark)
        ordered = fingerprinted_order(broadcast)
        count = len(main_values)
        timestamps = main_timestamps if main_timestamps is not None else [None] * count
        keys = main_keys if main_keys is not None else [NO_KEY] * count
        if self.options.time_alignment == "event":
            self._run_event_aligned(ordered, self.runner.rows(main_values), timestamps, keys)
            if count:  # merged by event time: the updates took effect during the call
                self.meter.main_started()
            return
        for element, content in ordered:
            self.process_broadcast_element(element.value, element.timestamp, content)
        if count:
            self.meter.main_started()
        if self.hold.ready:
            self.runner.run(main_values, timestamps, keys)
            return
        for value, timestamp, key in zip(self.runner.rows(main_values), timestamps, keys,
                                         strict=False):
            self.process_element(value, timestamp, key)

    def _run_event_aligned(self, ordered: list[tuple[BroadcastElement, str]], values: Sequence[Any],
                           timestamps: Sequence[int | None], keys: Sequence[Any]) -> None:
        order = sorted(range(len(values)), key=lambda i: _time_key(timestamps[i]))
        b = 0
        for i in order:
            while b < len(ordered) and (_time_key(ordered[b][0].timestamp)
                                        <= _time_key(timestamps[i])):
                element, content = ordered[b]
                self.process_broadcast_element(element.value, element.timestamp, content)
                b += 1
            self.process_element(values[i], timestamps[i], keys[i])
        for element, content in ordered[b:]:
            self.process_broadcast_element(element.value, element.timestamp, content)

    # ----------------------------------------------------------------------------------- timers

    def _fire(self, domain: TimeDomain, upto: int) -> None:
        function = self.function
        if not isinstance(function, KeyedBroadcastProcessFunction):
            return  # timers need a keyed stream
        queue = self.timers[domain]
        on_timer = function.on_timer
        scope, contexts, invoke = self.scope, self.contexts, self.collector.invoke
        while True:
            due = queue.pop_due(upto)
            if due is None:
                return
            timestamp, key = due
            self.meter.timers_fired += 1
            scope.enter(key, timestamp)
            ctx = contexts.on_timer(domain)
            output_ts = timestamp if domain is TimeDomain.EVENT_TIME else None
            try:
                invoke("on_timer", on_timer, timestamp, ctx, output_ts, key)
            finally:
                contexts.done(ctx)
                scope.leave()

    def _call_plain(self, callback: str, method: Callable[..., Any], *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:
            if raised_as_itself(exc):
                raise
            raise UserFunctionError(self.task.function_name, callback, None, exc) from exc


def _time_key(timestamp: int | None) -> int:
    return MIN_WATERMARK if timestamp is None else timestamp


def order_broadcast(elements: Sequence[BroadcastElement]) -> list[BroadcastElement]:
    """The order every subtask applies a batch's broadcast elements in: the ``order_by`` value,
    else event time, then the content hash, so arrival order never matters."""
    return [element for element, _ in fingerprinted_order(elements)]


def fingerprinted_order(elements: Sequence[BroadcastElement]) -> list[tuple[BroadcastElement, str]]:
    """``order_broadcast`` with each element's content fingerprint, computed once: the version
    chain needs it too, and for a large broadcast batch hashing dominates."""
    pairs = [(element, codec.fingerprint(element.value)) for element in elements]
    pairs.sort(key=lambda p: (_order_key(p[0].order), _time_key(p[0].timestamp), p[1]))
    return pairs


def _order_key(order: Any) -> tuple[int, Any]:
    return (0, 0) if order is None else (1, order)


def validate_function(function: Any) -> None:
    """Check on the driver that the function is a broadcast function with the needed methods."""
    if not isinstance(function, BaseBroadcastProcessFunction):
        raise PipelineError(f"{type(function).__name__} is not a BroadcastProcessFunction or "
                            "KeyedBroadcastProcessFunction")
    if not (defines(function, "process_element") or defines(function, "process_batch")):
        raise PipelineError(f"{type(function).__name__} defines neither process_element nor "
                            "process_batch")
    if not defines(function, "process_broadcast_element"):
        raise PipelineError(f"{type(function).__name__} must define process_broadcast_element")


def check_broadcast(descriptors: Sequence[MapStateDescriptor]) -> Sequence[MapStateDescriptor]:
    if not descriptors:
        raise PipelineError("a broadcast stream needs at least one MapStateDescriptor")
    names = [d.name for d in descriptors if isinstance(d, MapStateDescriptor)]
    if len(names) != len(descriptors):
        raise PipelineError("broadcast state is always map state: pass MapStateDescriptors")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PipelineError(f"broadcast state names must be unique; repeated: {duplicates}")
    with_ttl = [d.name for d in descriptors if d.ttl_config is not None]
    if with_ttl:  # the descriptor class is shared with keyed map state, so refused here
        raise PipelineError(
            f"broadcast state {with_ttl} has a TTL: Flink supports TTL for keyed state only, and "
            "every subtask must keep the same broadcast state; remove enable_time_to_live, or "
            "remove entries in process_broadcast_element")
    return descriptors


def user_function(function: Any) -> Any:
    """The user's function object (a keyed function runs inside a ``KeyedAdapter``)."""
    return function.user_function if isinstance(function, KeyedAdapter) else function


def fresh_function(template: BaseBroadcastProcessFunction) -> BaseBroadcastProcessFunction:
    """Each subtask gets its own instance, as each Flink parallel instance does."""
    return copy.deepcopy(template)
