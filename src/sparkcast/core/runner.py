"""Main-side runners: how a subtask calls the user's function on main elements, chosen once.

A function that defines ``process_batch`` gets a ``BatchRunner`` (``core/vectorized.py``): the
main side as pandas DataFrames, one call per micro-batch. Any other gets the ``ElementRunner``:
``process_element`` per element, on one shared context (the hot path), or on a fresh context per
element in the harness. The engine holds one runner; it never tests its class, only asks
whether main values travel as frames (``takes_frames``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sparkcast.core.collector import OutputCollector
from sparkcast.core.contexts import Contexts
from sparkcast.core.scope import NO_KEY, KeyScope, normal_key
from sparkcast.errors import KeyedStateError

Held = tuple[Any, "int | None", Any]  # (value, timestamp, key)


class MainRunner(Protocol):
    """What the engine asks of a main-side runner."""

    #: whether main values arrive as one DataFrame per micro-batch (``process_batch``)
    takes_frames: bool

    def run(self, values: Any, timestamps: Sequence[int | None], keys: Sequence[Any]) -> None:
        """A micro-batch's main elements, in order (the broadcast state is ready)."""

    def run_one(self, value: Any, timestamp: int | None, key: Any) -> None:
        """One main element (the broadcast state is ready)."""

    def release(self, held: list[Held]) -> None:
        """Elements held until the broadcast state became ready, in arrival order."""

    def rows(self, values: Any) -> Sequence[Any]:
        """The main values one by one (event-time alignment interleaves single elements)."""


class ElementRunner:
    """``process_element`` per element."""

    takes_frames = False

    def __init__(self, method: Callable[..., Any], scope: KeyScope, collector: OutputCollector,
                 contexts: Contexts, keyed: bool) -> None:
        self._method = method
        self._scope = scope
        self._collector = collector
        self._contexts = contexts
        self._keyed = keyed

    def run(self, values: Any, timestamps: Sequence[int | None], keys: Sequence[Any]) -> None:
        if self._contexts.strict:
            for value, timestamp, key in zip(values, timestamps, keys, strict=False):
                self.run_one(value, timestamp, key)
            return
        ctx = self._contexts.shared["main"]
        method, scope, keyed = self._method, self._scope, self._keyed
        invoke = self._collector.invoke
        for value, timestamp, key in zip(values, timestamps, keys, strict=False):
            if keyed:
                kind = type(key)
                if kind is not str and kind is not int:
                    if key is None or key is NO_KEY:
                        self._keyless(value, timestamp)
                        continue
                    key = normal_key(key)
            scope.key = key
            scope.timestamp = timestamp
            invoke("process_element", method, value, ctx, timestamp, key)

    def run_one(self, value: Any, timestamp: int | None, key: Any) -> None:
        if self._keyed and (key is None or key is NO_KEY):
            self._keyless(value, timestamp)
            return
        self._scope.enter(key, timestamp)
        contexts = self._contexts
        ctx = contexts.get("main")
        try:
            self._collector.invoke("process_element", self._method, value, ctx, timestamp,
                                   self._scope.key)
        finally:
            contexts.done(ctx)

    def release(self, held: list[Held]) -> None:
        for value, timestamp, key in held:
            self.run_one(value, timestamp, key)

    def rows(self, values: Any) -> Sequence[Any]:
        return values if isinstance(values, Sequence) else list(values)

    def _keyless(self, value: Any, timestamp: int | None) -> None:
        self._collector.dead_letter("process_element", KeyedStateError("the element has no key"),
                                    value, None, timestamp)

