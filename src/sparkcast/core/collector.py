"""The output collector: where a subtask's outputs, side outputs and dead letters gather.

Contexts, the main-side runners and the engine hand their outputs here and call user callbacks
through ``invoke``, which routes what a callback yields and turns what it raises into a dead
letter (with ``on_error="fail"`` it raises instead, as ``errors.raised_as_itself`` decides:
a misuse of sparkcast as itself, anything else as a ``UserFunctionError``), dropping the partial
outputs of the failed call. Outputs are plain ``(tag, value, timestamp, batch, key)`` tuples
in ``OutputRecord``'s layout: building a NamedTuple per event costs 50x more
(docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from types import GeneratorType
from typing import Any

from sparkcast.api.output_tag import OutputTag
from sparkcast.api.row import Row
from sparkcast.core.records import DEAD_LETTERS, DeadLetter, OutputRecord
from sparkcast.core.scope import NO_KEY
from sparkcast.errors import OutputTypeError, UserFunctionError, raised_as_itself

Output = tuple[OutputTag | None, Any, int | None, bool, Any]


class OutputCollector:
    """Outputs of one subtask since the last ``take``."""

    __slots__ = ("_fail", "_function_name", "_key", "records")

    def __init__(self, function_name: str, on_error: str) -> None:
        self.records: list[Output] = []
        self._key: Any = None  # the key of the callback running now (None: no key)
        self._function_name = function_name
        self._fail = on_error == "fail"

    @property
    def fails(self) -> bool:
        """Whether errors raise (``on_error="fail"``) instead of becoming dead letters."""
        return self._fail

    def take(self) -> list[OutputRecord]:
        """The outputs since the last call (``OutputRecord`` layout, as plain tuples)."""
        records, self.records = self.records, []
        return records  # type: ignore[return-value]  # same layout; see the module docstring

    def emit(self, tag: OutputTag | None, value: Any, timestamp: int | None) -> None:
        self.records.append((tag, value, timestamp, False, self._key))

    def emit_batch(self, tag: OutputTag | None, frame: Any) -> None:
        """A DataFrame output of ``process_batch`` (a side output may also be a list of values)."""
        self.records.append((tag, frame, None, True, None))

    def mark(self) -> int:
        return len(self.records)

    def rollback(self, mark: int) -> None:
        """Drop what a failed call emitted: a dead-lettered element has no outputs."""
        del self.records[mark:]

    def invoke(self, callback: str, method: Callable[..., Any], arg: Any, ctx: Any,
               timestamp: int | None, key: Any,
               key_of: Callable[[BaseException], Any] | None = None) -> None:
        """Call a user callback; route its outputs, dead-letter what it raises. ``key_of`` names
        the key a keyless callback failed on, when it can tell (``apply_to_keyed_state``)."""
        mark = len(self.records)
        self._key = None if key is NO_KEY else key
        try:
            result = method(arg, ctx)
            if result is not None:
                self.route(result, timestamp, callback)
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
            del self.records[mark:]
            if key is None and key_of is not None:
                key = key_of(exc)
            self.dead_letter(callback, exc, arg, key, timestamp)
        finally:
            self._key = None

    def route(self, result: Any, timestamp: int | None, callback: str) -> None:
        """What a callback yielded (or returned): values, or ``(OutputTag, value)`` pairs."""
        if type(result) is not GeneratorType and (
            isinstance(result, (dict, str, bytes, Row)) or not hasattr(result, "__iter__")
        ):
            raise OutputTypeError(f"{callback} must yield its outputs (or return an iterable of "
                                  f"them), not return a {type(result).__name__}")
        append = self.records.append
        key = self._key
        for item in result:
            if type(item) is tuple and len(item) == 2 and type(item[0]) is OutputTag:
                append((item[0], item[1], timestamp, False, key))
            else:
                append((None, item, timestamp, False, key))

    def dead_letter(self, callback: str, exc: Exception, value: Any, key: Any,
                    timestamp: int | None) -> None:
        """One dead letter with the reason; with ``on_error="fail"`` raise instead."""
        key = None if key is NO_KEY else key  # a non-keyed function's errors name no key
        if self._fail:
            if raised_as_itself(exc):
                raise exc
            raise UserFunctionError(self._function_name, callback, key, exc) from exc
        letter = DeadLetter(callback, f"{type(exc).__name__}: {exc}", value, key, timestamp)
        self.records.append((DEAD_LETTERS, letter, timestamp, False, key))
