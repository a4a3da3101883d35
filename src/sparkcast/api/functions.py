"""The functions users subclass: PyFlink's broadcast process functions, same names and shapes.

A PyFlink program ports by changing imports and the stream-construction lines only:

    class MatchRules(KeyedBroadcastProcessFunction):
        def process_element(self, value, ctx):
            for name, rule in ctx.get_broadcast_state(RULES).items():
                yield name, value                    # main output
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(RULES).put(value["name"], value)

Outputs are yielded (PyFlink's ``Collector``); ``yield tag, value`` or ``ctx.output(tag, value)``
writes a side output. Beyond Flink, a function may define ``process_batch(batch, ctx)`` that takes
a pandas DataFrame of main-side rows and returns (or yields) DataFrames: it is then never called
per element, which is how Python reaches pandas speed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.state import BroadcastState, ReadOnlyBroadcastState, State
from sparkcast.api.timers import TimeDomain, TimerService
from sparkcast.errors import UndefinedMethodError

if TYPE_CHECKING:
    from sparkcast.api.runtime_context import RuntimeContext

KEY = TypeVar("KEY")
IN1 = TypeVar("IN1")
IN2 = TypeVar("IN2")
OUT = TypeVar("OUT")


class Function(ABC):  # noqa: B024 - a base with optional hooks, as in PyFlink
    """Lifecycle hooks; Flink's ``RichFunction``. ``open`` is where state handles are created."""

    def open(self, runtime_context: RuntimeContext) -> None:  # noqa: B027 - optional hook
        """Called before a copy of the function sees its first element: create state handles
        here (``runtime_context.get_state(...)``) and read job parameters. On Spark each Python
        worker opens its own copy once per subtask (not per micro-batch), and the driver opens
        copies while planning, so keep it free of outside effects. Does nothing by default."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Called when a copy of the function is closed (the harness's ``close``), to release
        what ``open`` acquired. Spark's Python workers keep their copies for as long as they
        live, so do not rely on it there to emit or flush anything. Does nothing by default."""


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share; PyFlink's ``BaseBroadcastProcessFunction``."""

    class BaseContext(ABC):
        """Valid only during the callback it is passed to; do not keep it."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The element's event timestamp (epoch ms), or None when it has none."""

        @abstractmethod
        def current_processing_time(self) -> int:
            """The processing time (epoch ms) of the current micro-batch."""

        @abstractmethod
        def current_watermark(self) -> int:
            """The current event-time watermark (epoch ms); ``MIN_WATERMARK`` before the
            first one."""

        @abstractmethod
        def output(self, output_tag: OutputTag, value: Any) -> None:
            """Emit to a side output; the same as ``yield output_tag, value``."""

    class Context(BaseContext):
        """The broadcast side's context: read-write broadcast state."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: MapStateDescriptor) -> BroadcastState:
            """The broadcast state named by ``state_descriptor``, read-write; a descriptor not
            passed to ``broadcast(...)`` raises ``UnknownStateError``."""

    class ReadOnlyContext(BaseContext):
        """The main side's context: read-only broadcast state."""

        @abstractmethod
        def get_broadcast_state(
            self, state_descriptor: MapStateDescriptor
        ) -> ReadOnlyBroadcastState:
            """The broadcast state named by ``state_descriptor``, read-only (a write raises
            ``ReadOnlyStateError``)."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        """Called for each main-side element, unless the function defines ``process_batch``."""
        raise UndefinedMethodError(
            f"{type(self).__name__} must define process_element (or process_batch)"
        )

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        """Called for each broadcast element, in the same order wherever broadcast state is
        kept: on every subtask (the operator engine), or once on the driver where the
        micro-batch engine's driver works per micro-batch (every subtask then reads that one
        state)."""
        raise UndefinedMethodError(f"{type(self).__name__} must define process_broadcast_element")


class BroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[IN1, IN2, OUT]):
    """A non-keyed main stream connected to a broadcast stream; Flink's
    ``BroadcastProcessFunction``."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """The broadcast side's context: read-write broadcast state."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """The main side's context: read-only broadcast state."""

    def process_element(self, value: IN1, ctx: ReadOnlyContext) -> Iterable[Any] | None:
        """Called for each main-side element with read-only broadcast state; yield the
        outputs (``yield tag, value`` for a side output)."""
        return super().process_element(value, ctx)

    def process_broadcast_element(self, value: IN2, ctx: Context) -> Iterable[Any] | None:
        """Called for each broadcast element with read-write broadcast state; where the
        micro-batch engine's driver works per micro-batch it runs once, on the driver."""
        return super().process_broadcast_element(value, ctx)


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction, Generic[KEY, IN1, IN2, OUT]):
    """A keyed main stream connected to a broadcast stream, with keyed state and timers; Flink's
    ``KeyedBroadcastProcessFunction``."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """The broadcast side's context: read-write broadcast state, and every key's keyed
        state through ``apply_to_keyed_state``."""

        @abstractmethod
        def apply_to_keyed_state(
            self, state_descriptor: StateDescriptor, function: Callable[[Any, State], None]
        ) -> None:
            """Call ``function(key, state)`` for every key of this subtask with that state."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """The main side's context: read-only broadcast state, the current key and timers."""

        @abstractmethod
        def timer_service(self) -> TimerService:
            """The timers of the current key."""

        @abstractmethod
        def get_current_key(self) -> Any:
            """The key of the element (or timer) being processed."""

    class OnTimerContext(ReadOnlyContext, ABC):
        """The context of ``on_timer``: that of the main side, plus the timer's domain."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Whether the firing timer is an event-time or a processing-time timer."""

    def process_element(self, value: IN1, ctx: ReadOnlyContext) -> Iterable[Any] | None:
        """Called for each main-side element with its key's state, timers and read-only
        broadcast state; yield the outputs (``yield tag, value`` for a side output)."""
        return super().process_element(value, ctx)

    def process_broadcast_element(self, value: IN2, ctx: Context) -> Iterable[Any] | None:
        """Called for each broadcast element, on every subtask, with read-write broadcast
        state; there is no current key (use ``ctx.apply_to_keyed_state``)."""
        return super().process_broadcast_element(value, ctx)

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """Called when a timer registered through ``ctx.timer_service()`` fires."""
        return None


def defines(function: object, method: str) -> bool:
    """Whether the user's class overrides a method of the base classes."""
    owner = next((c for c in type(function).__mro__ if method in c.__dict__), None)
    return owner is not None and not owner.__module__.startswith("sparkcast.api.")
