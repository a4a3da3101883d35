"""The engine: runs one subtask of a broadcast process function, Flink's operator in Python.

The same engine runs in the test harness (dict state, one call at a time) and inside Spark (one
micro-batch per call, Spark state). It owns the semantics: what a context may do, when timers
fire, how outputs are routed, what happens to errors, how held elements are released.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterable, Sequence
from types import GeneratorType
from typing import Any

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import (
    BaseBroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    defines,
)
from sparkcast.api.metrics import MetricGroup
from sparkcast.api.options import HOLD_OVERFLOW, ProcessOptions
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.row import Row
from sparkcast.api.state import State
from sparkcast.api.timers import MIN_WATERMARK, TimeDomain
from sparkcast.core import codec
from sparkcast.core.backend import StateBackend
from sparkcast.core.broadcast_state import BroadcastStateView, ReadOnlyBroadcastStateView
from sparkcast.core.contexts import (
    Context,
    KeyedContext,
    KeyedOnTimerContext,
    KeyedReadOnlyContext,
    ReadOnlyContext,
)
from sparkcast.core.hold import HoldBuffer
from sparkcast.core.keyed_state import NO_KEY, STATE_CLASSES, has_live_value
from sparkcast.core.records import DEAD_LETTERS, BroadcastElement, DeadLetter, OutputRecord
from sparkcast.core.runtime_context import EngineRuntimeContext
from sparkcast.core.timers import KeyedTimerService, TimerQueue
from sparkcast.errors import (
    KeyedStateError,
    OutputTypeError,
    PipelineError,
    SparkcastError,
    UnknownStateError,
    UserFunctionError,
)


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
        validate_function(function)
        self.function = function
        self.function_name = type(function).__name__
        self.keyed = isinstance(function, KeyedBroadcastProcessFunction)
        self.vectorized = defines(function, "process_batch")
        self.options = options or ProcessOptions()
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self.strict_contexts = strict_contexts
        self.broadcast_descriptors = {d.name: d for d in check_broadcast(broadcast_descriptors)}
        self.metrics = MetricGroup()
        self.outputs: list[tuple[OutputTag | None, Any, int | None, bool]] = []
        self.current_key: Any = NO_KEY
        self.failed_key: Any = NO_KEY  # (error, key) where apply_to_keyed_state failed, if it did
        self.processing_time = 0
        self.main_watermark = MIN_WATERMARK
        self.broadcast_watermark = MIN_WATERMARK
        self.timer_service = KeyedTimerService(self)
        self.timers = {domain: TimerQueue() for domain in TimeDomain}
        self.hold = HoldBuffer(self.options.hold_until_ready, self.options.hold_capacity)
        self.broadcast_version = ""
        self._keyed_descriptors: dict[str, StateDescriptor] = {}
        self._keyed_states: dict[str, Any] = {}
        self.keyed_tables: dict[str, Any] = {}
        self._broadcast_tables: dict[str, Any] = {}
        self._read_only_views = {
            name: ReadOnlyBroadcastStateView(d, {})
            for name, d in self.broadcast_descriptors.items()
        }
        self._read_write_views = {
            name: BroadcastStateView(d, {}, self._broadcast_changed)
            for name, d in self.broadcast_descriptors.items()
        }
        self._shared_contexts = self._make_shared_contexts()
        self.bind(backend)

    # ---------------------------------------------------------------- lifecycle and state binding

    def bind(self, backend: StateBackend) -> None:
        """Attach the state of this subtask (Spark: the handles of the current micro-batch)."""
        self.backend = backend
        self._broadcast_tables = {n: backend.broadcast_table(n) for n in self.broadcast_descriptors}
        for name, table in self._broadcast_tables.items():
            self._read_only_views[name].rebind(table)
            self._read_write_views[name].rebind(table)
        self.keyed_tables = {n: backend.keyed_table(n) for n in self._keyed_descriptors}
        for domain, queue in self.timers.items():
            queue.restore(backend.load(f"timers.{domain.name}", []))
        self.hold.restore(backend.load("held", []))
        self.broadcast_version = backend.load("broadcast_version", "")
        self.hold.refresh(self._broadcast_tables)

    def open(self) -> None:
        self._call_plain("open", self.function.open, EngineRuntimeContext(self))

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
        self._sweep_expired()
        backend.flush()

    def _sweep_expired(self) -> None:
        """Let tables that can (Spark's) drop keys whose TTL state has all expired, so keys never
        touched again do not stay stored forever (Flink's incremental cleanup)."""
        for name, descriptor in self._keyed_descriptors.items():
            sweep = getattr(self.keyed_tables[name], "sweep", None)
            if descriptor.ttl_config is None or sweep is None:
                continue
            state = self._keyed_states[name]
            sweep(lambda stored, state=state: not has_live_value(state, stored),
                  self.processing_time)

    def take_outputs(self) -> list[OutputRecord]:
        """The outputs since the last call, as ``(tag, value, timestamp, batch)`` tuples (the
        layout of ``OutputRecord``; plain tuples because building one per event costs)."""
        outputs, self.outputs = self.outputs, []
        return outputs  # type: ignore[return-value]

    # ---------------------------------------------------------------------------- state access

    def read_only_view(self, descriptor: MapStateDescriptor) -> ReadOnlyBroadcastStateView:
        try:
            return self._read_only_views[descriptor.name]
        except (KeyError, AttributeError):
            raise self._unknown(descriptor) from None

    def read_write_view(self, descriptor: MapStateDescriptor) -> BroadcastStateView:
        try:
            return self._read_write_views[descriptor.name]
        except (KeyError, AttributeError):
            raise self._unknown(descriptor) from None

    def _unknown(self, descriptor: Any) -> UnknownStateError:
        return UnknownStateError(
            f"{descriptor!r} is not a broadcast state of this stream; broadcast states: "
            f"{sorted(self.broadcast_descriptors)} (pass it to broadcast(...))"
        )

    def keyed_state(self, descriptor: StateDescriptor) -> Any:
        """The state handle for a keyed descriptor (one per name, created on first request)."""
        if not self.keyed:
            raise KeyedStateError(
                f"keyed state {descriptor.name!r} needs a keyed stream: key_by(...) and a "
                "KeyedBroadcastProcessFunction (Flink: 'Keyed state can only be used on a "
                "keyed stream')"
            )
        name = descriptor.name
        known = self._keyed_descriptors.get(name)
        if known is not None and known.kind != descriptor.kind:
            raise PipelineError(f"state name {name!r} is used for both {known.kind} and "
                                f"{descriptor.kind} state: give each state its own name")
        if name in self.broadcast_descriptors:
            raise PipelineError(f"state name {name!r} is already a broadcast state")
        if known is None:
            self._keyed_descriptors[name] = descriptor
            self.keyed_tables[name] = self.backend.keyed_table(name)
            self._keyed_states[name] = STATE_CLASSES[descriptor.kind](self, descriptor)
        return self._keyed_states[name]

    def apply_to_keyed_state(
        self, descriptor: StateDescriptor, function: Callable[[Any, State], None]
    ) -> None:
        state = self.keyed_state(descriptor)
        table = self.keyed_tables[descriptor.name]
        try:
            for key in list(table.keys()):
                stored = table.get(key)
                if stored is not None and has_live_value(state, stored):
                    self.current_key = key
                    function(key, state)
        except Exception as exc:
            # keyed state differs by subtask: the dead letter names the key it failed on, and
            # on Spark each subtask where this happens reports it (processor.py)
            self.failed_key = (exc, self.current_key)
            raise
        finally:
            self.current_key = NO_KEY

    def _broadcast_changed(self) -> None:
        self.hold.stale = True

    @property
    def current_watermark(self) -> int:
        return min(self.main_watermark, self.broadcast_watermark)

    # ---------------------------------------------------------------------------------- inputs

    def process_broadcast_element(self, value: Any, timestamp: int | None = None,
                                  fingerprint: str | None = None) -> None:
        """Apply one broadcast element, then release held elements that became processable.
        ``fingerprint`` is the value's ``codec.fingerprint`` when the caller has it already."""
        self.current_key = self.failed_key = NO_KEY
        ctx = self._context("broadcast", timestamp)
        content = fingerprint or codec.fingerprint(value)
        chain = f"{self.broadcast_version}|{content}|{timestamp}".encode()
        self.broadcast_version = hashlib.blake2b(chain, digest_size=12).hexdigest()
        self._invoke("process_broadcast_element", self.function.process_broadcast_element,
                     value, ctx, timestamp, None)
        self.failed_key = NO_KEY  # the function may have caught it
        if self.hold.stale:
            self.hold.refresh(self._broadcast_tables)
            if self.hold.ready and self.hold.items:
                self._release_held()

    def process_element(self, value: Any, timestamp: int | None = None, key: Any = NO_KEY) -> None:
        """Process one main-side element (held instead while the broadcast state is not ready)."""
        if self.keyed and not self.vectorized and (key is NO_KEY or key is None):
            self._dead_letter("process_element", KeyedStateError("the element has no key"),
                              value, None, timestamp)
            return
        if not self.hold.ready:
            self._hold(value, timestamp, key)
            return
        if self.vectorized:
            from sparkcast.core.vectorized import process_records

            process_records(self, [value])
            return
        self.current_key = key
        ctx = self._context("main", timestamp)
        self._invoke("process_element", self.function.process_element, value, ctx, timestamp, key)

    def process_elements(
        self, values: Iterable[Any], timestamps: Iterable[int | None], keys: Iterable[Any]
    ) -> None:
        """Many main-side elements in order: the micro-batch hot path (one context, one loop)."""
        if self.vectorized or not self.hold.ready or self.strict_contexts:
            for value, timestamp, key in zip(values, timestamps, keys, strict=False):
                self.process_element(value, timestamp, key)
            return
        ctx = self._shared_contexts["main"]
        fn = self.function.process_element
        keyed = self.keyed
        for value, timestamp, key in zip(values, timestamps, keys, strict=False):
            if keyed and (key is None or key is NO_KEY):
                self.process_element(value, timestamp, key)
                continue
            self.current_key = key
            ctx._timestamp = timestamp
            self._invoke("process_element", fn, value, ctx, timestamp, key)

    def advance_watermark(self, main: int | None = None, broadcast: int | None = None) -> None:
        """Raise the per-input watermarks; event-time timers up to their minimum fire."""
        if main is not None and main > self.main_watermark:
            self.main_watermark = main
        if broadcast is not None and broadcast > self.broadcast_watermark:
            self.broadcast_watermark = broadcast
        self._fire(TimeDomain.EVENT_TIME, self.current_watermark)

    def advance_processing_time(self, time: int) -> None:
        """Move the processing clock forward; processing-time timers up to it fire."""
        if time > self.processing_time:
            self.processing_time = time
        self._fire(TimeDomain.PROCESSING_TIME, self.processing_time)

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
            self._run_event_aligned(ordered, main_values, timestamps, keys)
            return
        for element, content in ordered:
            self.process_broadcast_element(element.value, element.timestamp, content)
        if self.vectorized:
            from sparkcast.core.vectorized import process_frame

            process_frame(self, main_values)
        else:
            self.process_elements(main_values, timestamps, keys)

    def _run_event_aligned(self, ordered: list[tuple[BroadcastElement, str]], values: Sequence[Any],
                           timestamps: Sequence[int | None], keys: Sequence[Any]) -> None:
        if self.vectorized:
            from sparkcast.core.vectorized import frame_rows

            values = frame_rows(values)
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

    # ------------------------------------------------------------------------- timers and hold

    def _fire(self, domain: TimeDomain, upto: int) -> None:
        if not self.keyed:
            return
        queue = self.timers[domain]
        on_timer = self.function.on_timer  # type: ignore[attr-defined]
        while True:
            due = queue.pop_due(upto)
            if due is None:
                return
            timestamp, key = due
            self.current_key = key
            ctx = KeyedOnTimerContext(self, timestamp, domain)
            output_ts = timestamp if domain is TimeDomain.EVENT_TIME else None
            self._invoke("on_timer", on_timer, timestamp, ctx, output_ts, key)
            self.current_key = NO_KEY

    def _hold(self, value: Any, timestamp: int | None, key: Any) -> None:
        if not self.hold.add(value, timestamp, key):
            self.outputs.append((HOLD_OVERFLOW, value, timestamp, False))

    def _release_held(self) -> None:
        held = self.hold.take()
        if self.vectorized:
            from sparkcast.core.vectorized import process_records

            process_records(self, [value for value, _, _ in held])
            return
        for value, timestamp, key in held:
            self.process_element(value, timestamp, key)

    # ------------------------------------------------------------------ calling user functions

    def _make_shared_contexts(self) -> dict[str, Any]:
        if self.keyed:
            return {"main": KeyedReadOnlyContext(self), "broadcast": KeyedContext(self)}
        return {"main": ReadOnlyContext(self), "broadcast": Context(self)}

    def _context(self, side: str, timestamp: int | None) -> Any:
        if self.strict_contexts:
            return type(self._shared_contexts[side])(self, timestamp)
        ctx = self._shared_contexts[side]
        ctx._timestamp = timestamp
        return ctx

    def _invoke(self, callback: str, method: Callable[..., Any], arg: Any, ctx: Any,
                timestamp: int | None, key: Any) -> None:
        mark = len(self.outputs)
        try:
            result = method(arg, ctx)
            if result is not None:
                self._route(result, timestamp, callback)
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
            del self.outputs[mark:]
            self._dead_letter(callback, exc, arg, key, timestamp)
        finally:
            if self.strict_contexts:
                ctx._valid = False

    def _route(self, result: Any, timestamp: int | None, callback: str) -> None:
        if type(result) is not GeneratorType and (
            isinstance(result, (dict, str, bytes, Row)) or not hasattr(result, "__iter__")
        ):
            raise OutputTypeError(f"{callback} must yield its outputs (or return an iterable of "
                                  f"them), not return a {type(result).__name__}")
        append = self.outputs.append
        for item in result:
            if type(item) is tuple and len(item) == 2 and type(item[0]) is OutputTag:
                append((item[0], item[1], timestamp, False))
            else:
                append((None, item, timestamp, False))

    def emit(self, tag: OutputTag | None, value: Any, timestamp: int | None) -> None:
        self.outputs.append((tag, value, timestamp, False))

    def emit_batch(self, tag: OutputTag | None, frame: Any) -> None:
        """A DataFrame output of ``process_batch`` (a side output may also be a list of values)."""
        self.outputs.append((tag, frame, None, True))

    def _dead_letter(self, callback: str, exc: Exception, value: Any, key: Any,
                     timestamp: int | None) -> None:
        if key is None and self.failed_key is not NO_KEY:
            key = _key_of_failure(exc, *self.failed_key)
            self.failed_key = NO_KEY
        key = None if key is NO_KEY else key  # a non-keyed function's errors name no key
        if self.options.on_error == "fail":
            if isinstance(exc, SparkcastError):
                raise exc
            raise UserFunctionError(self.function_name, callback, key, exc) from exc
        error = f"{type(exc).__name__}: {exc}"
        letter = DeadLetter(callback, error, value, key, timestamp)
        self.outputs.append((DEAD_LETTERS, letter, timestamp, False))

    def _call_plain(self, callback: str, method: Callable[..., Any], *args: Any) -> None:
        try:
            method(*args)
        except SparkcastError:
            raise
        except Exception as exc:
            raise UserFunctionError(self.function_name, callback, None, exc) from exc


def _key_of_failure(exc: BaseException, failed: BaseException, key: Any) -> Any:
    """``key`` when ``exc`` is (or was raised from) the failure inside apply_to_keyed_state."""
    seen: BaseException | None = exc
    while seen is not None:
        if seen is failed:
            return key
        seen = seen.__cause__ or seen.__context__
    return None


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
    return descriptors


def fresh_function(template: BaseBroadcastProcessFunction) -> BaseBroadcastProcessFunction:
    """Each subtask gets its own instance, as each Flink parallel instance does."""
    return copy.deepcopy(template)
