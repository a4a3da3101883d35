"""``BroadcastHarness``, ``KeyedBroadcastHarness``, and for the keyed functions
``KeyedProcessHarness`` and ``KeyedCoProcessHarness``: drive a function by hand, inspect
everything. Method names follow Flink's ``TwoInputStreamOperatorTestHarness`` (snake_case): the
main side is Flink's input 1, the broadcast side input 2.

Examples:
    >>> h = KeyedBroadcastHarness(MatchRules(), key_selector=lambda v: v["color"],
    ...                           broadcast_descriptors=[RULES])
    >>> h.open()
    >>> h.process_broadcast_element({"name": "r1", "first": "square", "second": "circle"})
    >>> h.process_element({"color": "red", "shape": "square"}, timestamp=13)
    >>> h.output()
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import pandas as pd

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction, KeyedBroadcastProcessFunction
from sparkcast.api.keyed_functions import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.api.options import OnError, ProcessOptions, TimeAlignment, ready_conditions
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.pyflink_types import output_ddl
from sparkcast.api.row import Row
from sparkcast.core.backend import DictBackend, StateBackend
from sparkcast.core.ddl import parse_ddl
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.frozen import thaw
from sparkcast.core.inferred_schema import infer_ddl
from sparkcast.core.keyed_process import CoElement, KeyedAdapter, merged_by_time
from sparkcast.core.output_check import OutputChecker
from sparkcast.core.output_values import object_fields
from sparkcast.core.records import DEAD_LETTERS, BroadcastElement, DeadLetter, OutputRecord
from sparkcast.core.scope import NO_KEY
from sparkcast.core.seed import apply_seed, initial_seed
from sparkcast.errors import HarnessError, PipelineError


class KeySelector(Protocol):
    """PyFlink's ``KeySelector``: an object with ``get_key(value)``; a plain callable also works."""

    def get_key(self, value: Any) -> Any: ...


class BroadcastHarness:
    """Runs a ``BroadcastProcessFunction`` (or, through the subclass, a keyed one) in-process."""

    def __init__(
        self,
        function: BaseBroadcastProcessFunction,
        broadcast_descriptors: Sequence[MapStateDescriptor],
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        hold_until_ready: Iterable[Any] | None = None,
        hold_capacity: int = 100_000,
        time_alignment: TimeAlignment = "batch",
        on_error: OnError = "dead_letter",
        job_parameters: dict[str, Any] | None = None,
        state_backend: Callable[[], StateBackend] | None = None,
        output_schema: Any = None,
        check_outputs: bool = True,
        side_outputs: Sequence[OutputTag] = (),
        initial_state: dict[Any, Iterable[tuple[Any, Any]]] | None = None,
    ) -> None:
        """``state_backend``: a factory of backends over one store, for testing a backend; the
        harness binds a fresh one after every call, as Spark binds one per micro-batch, so only
        what was flushed survives (default: one in-memory ``DictBackend``).
        ``initial_state``: ``{descriptor or name: [(key, value), ...]}`` written at ``open``, as
        ``process(initial_state=...)`` does on Spark (broadcast entries; keyed (key, value))."""
        options = ProcessOptions(
            hold_until_ready=ready_conditions(hold_until_ready, broadcast_descriptors),
            hold_capacity=hold_capacity,
            time_alignment=time_alignment,
            on_error=on_error,
            job_parameters=dict(job_parameters or {}),
        )
        self._check_kind(function)
        self._new_backend = state_backend
        self.backend = DictBackend() if state_backend is None else state_backend()
        self.engine = SubtaskEngine(function, broadcast_descriptors, self.backend, options=options,
                                    subtask_index=subtask_index, parallelism=parallelism,
                                    strict_contexts=True)
        self._records: list[OutputRecord] = []
        self._opened = False
        #: the main output's schema: as given (a PyFlink type as its DDL), else inferred from
        #: the first outputs
        self.output_schema, self._codec_main = main_schema(output_schema)
        self._infer = output_schema is None and check_outputs
        self._side_outputs = tuple(side_outputs)
        self._fail = on_error == "fail"
        self._checker = _checker(self.output_schema, side_outputs, self._infer, fail=self._fail,
                                 codec_main=self._codec_main)
        self._initial_state = dict(initial_state or {})

    def _check_kind(self, function: BaseBroadcastProcessFunction) -> None:
        if isinstance(function, KeyedBroadcastProcessFunction):
            raise PipelineError("a KeyedBroadcastProcessFunction needs a KeyedBroadcastHarness")

    # ------------------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Open the function (its ``open`` creates state handles) and write ``initial_state``;
        every input needs it first, as in Flink (``with harness:`` opens and closes)."""
        engine = self.engine
        engine.open()
        if self._initial_state:
            apply_seed(engine, initial_seed(engine.broadcast.descriptors.values(),
                                            engine.keyed_descriptors(), self._initial_state))
        self._opened = True
        self._collect()

    def close(self) -> None:
        """Close the function (its ``close`` runs)."""
        self.engine.close()
        self._opened = False

    def __enter__(self) -> BroadcastHarness:
        self.open()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --------------------------------------------------------------------------------- inputs

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """A main-side element (Flink's ``processElement1``)."""
        self._ensure_open()
        self.engine.process_element(value, timestamp, self._key(value))
        self._collect()

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """A broadcast element (Flink's ``processElement2``)."""
        self._ensure_open()
        self.engine.process_broadcast_element(value, timestamp)
        self._collect()

    def process_watermark(self, watermark: int) -> None:
        """The same watermark on both inputs."""
        self._advance(main=watermark, broadcast=watermark)

    def process_main_watermark(self, watermark: int) -> None:
        """A watermark on the main input only; the function's watermark is the lower of the
        two inputs', as in Flink, so event-time timers wait for the broadcast side too."""
        self._advance(main=watermark)

    def process_broadcast_watermark(self, watermark: int) -> None:
        """A watermark on the broadcast input only."""
        self._advance(broadcast=watermark)

    def set_processing_time(self, time: int) -> None:
        """Move the processing clock; due processing-time timers fire, TTL uses this clock."""
        self._ensure_open()
        self.engine.advance_processing_time(time)
        self._collect()

    def process_micro_batch(
        self,
        main: Sequence[Any] = (),
        broadcast: Sequence[Any] = (),
        *,
        main_timestamps: Sequence[int | None] | None = None,
        broadcast_timestamps: Sequence[int | None] | None = None,
        watermark: int | None = None,
        processing_time: int | None = None,
    ) -> None:
        """One Spark micro-batch as the runtime runs it: broadcast elements in their deterministic
        order, then main elements (merged by event time with ``time_alignment="event"``).
        ``main`` may be a pandas DataFrame for a function with ``process_batch``."""
        self._ensure_open()
        b_times = broadcast_timestamps or [None] * len(broadcast)
        elements = [BroadcastElement(v, t) for v, t in zip(broadcast, b_times, strict=True)]
        frame = hasattr(main, "iloc")  # a pandas DataFrame, for process_batch: kept whole
        values = main if frame else list(main)
        keyed = isinstance(self, KeyedBroadcastHarness) and not frame
        keys = [self._key(v) for v in values] if keyed else None
        self.engine.run_micro_batch(elements, values, main_timestamps, keys,
                                    watermark=watermark, processing_time=processing_time)
        self._collect()

    # ------------------------------------------------------------------------------- outputs

    def output(self) -> list[Any]:
        """Main-output values, in order (rows of ``process_batch`` frames as dicts)."""
        return [value for value, _ in self.output_records()]

    def output_records(self) -> list[tuple[Any, int | None]]:
        """Main-output ``(value, timestamp)`` pairs."""
        return self._expand(None)

    def side_output(self, tag: OutputTag) -> list[Any]:
        """The values emitted to ``tag``, in order."""
        return [value for value, _ in self._expand(tag)]

    def dead_letters(self) -> list[DeadLetter]:
        """Inputs the function raised on (with ``on_error="dead_letter"``)."""
        return [value for value, _ in self._expand(DEAD_LETTERS)]

    def clear_output(self) -> None:
        """Forget the outputs collected so far (main, side outputs, dead letters)."""
        self._records.clear()

    def broadcast_state(self, descriptor: MapStateDescriptor) -> dict[Any, Any]:
        """A mutable copy of one broadcast state."""
        return thaw(dict(self.engine.read_only_view(descriptor).items()))

    def held(self) -> list[Any]:
        """Main elements held until the broadcast state is ready."""
        return [value for value, _, _ in self.engine.hold.items]

    def metrics(self) -> dict[str, Any]:
        """The function's user metrics by name (``MetricGroup.snapshot``)."""
        return self.engine.metrics.snapshot()

    # ------------------------------------------------------------------------------ internals

    def _key(self, value: Any) -> Any:
        return NO_KEY

    def _ensure_open(self) -> None:
        if not self._opened:
            raise HarnessError("call open() on the harness first (as with Flink's harnesses)")

    def _advance(self, main: int | None = None, broadcast: int | None = None) -> None:
        self._ensure_open()
        self.engine.advance_watermark(main, broadcast)
        self._collect()

    def _collect(self) -> None:
        self.engine.flush()
        records = list(map(OutputRecord._make, self.engine.take_outputs()))
        if self._infer and records:
            self._infer_schema(records)
        if self._checker is not None and records:
            checked = self._checker.check(records, keep=True)
            records = checked.accepted_records() + [
                OutputRecord(DEAD_LETTERS, letter, ts) for letter, ts in checked.letters]
        self._records.extend(records)
        if self._new_backend is not None:
            self.backend = self._new_backend()
            self.engine.bind(self.backend)

    def _infer_schema(self, records: list[OutputRecord]) -> None:
        """Spark checks every output against ``process(..., output_schema)``: without one, the
        harness infers it from the first main outputs (each field from its first non-null
        value), says so, and checks the same way."""
        values = [r.value for r in records if r.tag is None and not r.batch]
        if not values:
            return
        first = values[0]
        if isinstance(first, (tuple, list, Row)) and not (
                isinstance(first, Row) and first.__fields__) and object_fields(first) is None:
            width = len(first)
            same = [v for v in values if isinstance(v, (tuple, list, Row)) and len(v) == width]
            first = tuple(next((v[i] for v in same if v[i] is not None), None)
                          for i in range(width))
        self.output_schema = infer_ddl(first)
        self._infer = False
        self._checker = _checker(self.output_schema, self._side_outputs, fail=self._fail)
        warnings.warn(
            f"{type(self).__name__}: no output_schema given; inferred {self.output_schema!r} "
            "from the first outputs and checking every output against it, as Spark checks "
            "process(..., output_schema); pass output_schema= (the one the job uses) to check "
            "against that", stacklevel=4)

    def _expand(self, tag: OutputTag | None) -> list[tuple[Any, int | None]]:
        pairs: list[tuple[Any, int | None]] = []
        for record in self._records:
            if record.tag != tag:
                continue
            if record.batch and isinstance(record.value, pd.DataFrame):
                pairs.extend((row, None) for row in record.value.to_dict("records"))
            elif record.batch:
                pairs.extend((row, None) for row in record.value)
            else:
                pairs.append((record.value, record.timestamp))
        return pairs


def main_schema(output_schema: Any) -> tuple[str | None, bool]:
    """``output_schema`` as DDL (a PyFlink type converted as ``process`` converts it), and
    whether the main values are stored as codec text (``Types.PICKLED_BYTE_ARRAY()``)."""
    if output_schema is None or isinstance(output_schema, str):
        return output_schema, False
    return output_ddl(output_schema, "output_schema")


def _checker(output_schema: str | None, side_outputs: Sequence[OutputTag], checked: bool = True,
             *, fail: bool = False, codec_main: bool = False) -> OutputChecker | None:
    """Outputs checked as on Spark (the same ``OutputChecker``): a bad output is a dead letter
    (with ``fail``, ``on_error="fail"``, an ``OutputTypeError``), not a value in ``output()``;
    a side output not in ``side_outputs`` too. Without a schema, side outputs or ``checked``,
    nothing is checked."""
    if output_schema is None and not side_outputs and not checked:
        return None
    sides = {t.tag_id: None if t.schema is None else parse_ddl(t.schema) for t in side_outputs}
    encoded = {t.tag_id for t in side_outputs if t.codec} | ({"main"} if codec_main else set())
    return OutputChecker(None if output_schema is None else parse_ddl(output_schema), sides,
                         encoded=encoded, fail=fail)


class KeyedBroadcastHarness(BroadcastHarness):
    """Runs a ``KeyedBroadcastProcessFunction``; ``key_selector`` plays ``key_by``."""

    def __init__(
        self,
        function: KeyedBroadcastProcessFunction,
        key_selector: KeySelector | Callable[[Any], Any],
        broadcast_descriptors: Sequence[MapStateDescriptor],
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        hold_until_ready: Iterable[Any] | None = None,
        hold_capacity: int = 100_000,
        time_alignment: TimeAlignment = "batch",
        on_error: OnError = "dead_letter",
        job_parameters: dict[str, Any] | None = None,
        state_backend: Callable[[], StateBackend] | None = None,
        output_schema: Any = None,
        check_outputs: bool = True,
        side_outputs: Sequence[OutputTag] = (),
        initial_state: dict[Any, Iterable[tuple[Any, Any]]] | None = None,
    ) -> None:
        """Options as ``BroadcastHarness``'s (and ``process(...)``'s)."""
        get_key = getattr(key_selector, "get_key", key_selector)
        if not callable(get_key):
            raise PipelineError("key_selector must be a callable or have get_key(value)")
        self._get_key: Callable[[Any], Any] = get_key
        super().__init__(
            function, broadcast_descriptors, parallelism=parallelism,
            subtask_index=subtask_index, hold_until_ready=hold_until_ready,
            hold_capacity=hold_capacity, time_alignment=time_alignment, on_error=on_error,
            job_parameters=job_parameters, state_backend=state_backend,
            output_schema=output_schema, check_outputs=check_outputs, side_outputs=side_outputs,
            initial_state=initial_state)

    def _check_kind(self, function: BaseBroadcastProcessFunction) -> None:
        if not isinstance(function, KeyedBroadcastProcessFunction):
            raise PipelineError("a KeyedBroadcastHarness runs a KeyedBroadcastProcessFunction; "
                                "use BroadcastHarness for a BroadcastProcessFunction")

    def _key(self, value: Any) -> Any:
        return self._get_key(value)

    def keyed_state(self, descriptor: StateDescriptor, key: Any) -> Any:
        """The value of one keyed state for one key, as the function would read it now: a value,
        a list, a dict (map state), or an aggregate result; None when empty or expired."""
        return self.engine.keyed_states.peek(descriptor, key)

    def timers(self) -> dict[str, list[tuple[int, Any]]]:
        """Registered timers by domain: ``{"EVENT_TIME": [(ts, key)], "PROCESSING_TIME": ...}``."""
        return {domain.name: [(ts, key) for ts, key in queue.snapshot()]
                for domain, queue in self.engine.timers.items()}


class KeyedProcessHarness(KeyedBroadcastHarness):
    """Runs a ``KeyedProcessFunction`` (Flink's ``KeyedOneInputStreamOperatorTestHarness``):
    ``process_element``, watermarks, processing time, outputs, keyed state and timers as on
    ``KeyedBroadcastHarness``; there is no broadcast side."""

    def __init__(
        self,
        function: KeyedProcessFunction,
        key_selector: KeySelector | Callable[[Any], Any],
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        on_error: OnError = "dead_letter",
        job_parameters: dict[str, Any] | None = None,
        state_backend: Callable[[], StateBackend] | None = None,
        output_schema: Any = None,
        check_outputs: bool = True,
        side_outputs: Sequence[OutputTag] = (),
        initial_state: dict[Any, Iterable[tuple[Any, Any]]] | None = None,
    ) -> None:
        """Options as ``KeyedStream.process(...)``'s (no broadcast side)."""
        if not isinstance(function, KeyedProcessFunction):
            raise PipelineError("a KeyedProcessHarness runs a KeyedProcessFunction")
        super().__init__(
            KeyedAdapter(function), key_selector, [], parallelism=parallelism,
            subtask_index=subtask_index, on_error=on_error,
            job_parameters=job_parameters, state_backend=state_backend,
            output_schema=output_schema, check_outputs=check_outputs, side_outputs=side_outputs,
            initial_state=initial_state)

    def _check_kind(self, function: BaseBroadcastProcessFunction) -> None:
        pass

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """Refused with ``PipelineError``: a ``KeyedProcessFunction`` has no broadcast side."""
        raise PipelineError("a KeyedProcessFunction has no broadcast side")


class KeyedCoProcessHarness(KeyedBroadcastHarness):
    """Runs a ``KeyedCoProcessFunction`` (Flink's ``KeyedTwoInputStreamOperatorTestHarness``):
    ``process_element1`` / ``process_element2``, each input keyed by its own selector."""

    def __init__(
        self,
        function: KeyedCoProcessFunction,
        key_selector1: KeySelector | Callable[[Any], Any],
        key_selector2: KeySelector | Callable[[Any], Any],
        *,
        parallelism: int = 1,
        subtask_index: int = 0,
        on_error: OnError = "dead_letter",
        job_parameters: dict[str, Any] | None = None,
        state_backend: Callable[[], StateBackend] | None = None,
        output_schema: Any = None,
        check_outputs: bool = True,
        side_outputs: Sequence[OutputTag] = (),
        initial_state: dict[Any, Iterable[tuple[Any, Any]]] | None = None,
    ) -> None:
        """Options as ``ConnectedKeyedStreams.process(...)``'s."""
        if not isinstance(function, KeyedCoProcessFunction):
            raise PipelineError("a KeyedCoProcessHarness runs a KeyedCoProcessFunction")
        get_key2 = getattr(key_selector2, "get_key", key_selector2)
        if not callable(get_key2):
            raise PipelineError("key_selector2 must be a callable or have get_key(value)")
        self._get_key2: Callable[[Any], Any] = get_key2
        super().__init__(
            KeyedAdapter(function), key_selector1, [], parallelism=parallelism,
            subtask_index=subtask_index, on_error=on_error,
            job_parameters=job_parameters, state_backend=state_backend,
            output_schema=output_schema, check_outputs=check_outputs, side_outputs=side_outputs,
            initial_state=initial_state)

    def _check_kind(self, function: BaseBroadcastProcessFunction) -> None:
        pass

    def _key(self, value: Any) -> Any:
        element: CoElement = value
        return (self._get_key(element.value) if element.input == 1
                else self._get_key2(element.value))

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """An element of input 1 (Flink's ``processElement1``)."""
        self.process_element(CoElement(1, value), timestamp)

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """An element of input 2 (Flink's ``processElement2``)."""
        self.process_element(CoElement(2, value), timestamp)

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        """Refused with ``PipelineError``: input 2 is keyed; use ``process_element2``."""
        raise PipelineError("a KeyedCoProcessFunction has no broadcast side: input 2 is keyed "
                            "(process_element2)")

    def process_co_micro_batch(self, input1: Sequence[tuple[Any, int | None]] = (),
                               input2: Sequence[tuple[Any, int | None]] = (), *,
                               watermark: int | None = None,
                               processing_time: int | None = None) -> None:
        """One Spark micro-batch of ``(value, timestamp)`` pairs of both inputs, each in its
        source order, merged by timestamp as the runtime merges them (``merged_by_time``)."""
        merged = list(merged_by_time([[(t, CoElement(1, v)) for v, t in input1],
                                      [(t, CoElement(2, v)) for v, t in input2]]))
        self.process_micro_batch([e for _, e in merged],
                                 main_timestamps=[t for t, _ in merged],
                                 watermark=watermark, processing_time=processing_time)
