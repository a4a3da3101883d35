"""Every error sparkcast raises derives from :class:`SparkcastError`.

Each subclass also inherits the built-in exception a Python user would expect, so
``except TypeError`` keeps working around code that misuses read-only state.

::

    SparkcastError
    ├── PipelineError (ValueError)          a pipeline or option is invalid; raised on the driver
    │   └── IncompatibleCheckpointError     a restart whose layout the checkpoint cannot serve
    ├── StateError
    │   ├── ReadOnlyStateError (TypeError)  a write to broadcast state outside the broadcast side
    │   ├── UnknownStateError (KeyError)    a descriptor that was never declared
    │   ├── KeyedStateError (RuntimeError)  keyed state without a key (unkeyed function, no key)
    │   ├── StateTypeError (TypeError)      a value that does not match its descriptor's type
    │   └── StateSerializationError (ValueError)  a value the state codec cannot store
    ├── OutputTypeError (TypeError)         a callback's outputs are not yielded values/frames
    ├── TimerError (RuntimeError)           timers where Flink forbids them
    ├── ContextError (RuntimeError)         a context used after its callback returned
    └── UserFunctionError (RuntimeError)    the user's code raised: function, callback, key
"""

from __future__ import annotations

from typing import Any


class SparkcastError(Exception):
    """Root of every error raised by sparkcast."""


class PipelineError(SparkcastError, ValueError):
    """A pipeline, descriptor or option is invalid; found when the pipeline is built."""


class IncompatibleCheckpointError(PipelineError):
    """A restart changes what the checkpoint's state or outputs depend on (parallelism, state
    buckets, output schema, ...); raised before any batch runs, naming the old and new value and
    what to do instead (docs/operations.md)."""


class StateError(SparkcastError):
    """Base of the state errors."""


class ReadOnlyStateError(StateError, TypeError):
    """Broadcast state is read-only on the main side, as in Flink's ``ReadOnlyBroadcastState``."""


class UnknownStateError(StateError, KeyError):
    """A broadcast state descriptor that was not passed to ``broadcast(...)``."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class KeyedStateError(StateError, RuntimeError):
    """Keyed state used where there is no current key."""


class StateTypeError(StateError, TypeError):
    """A key or value that does not match the type its descriptor declares."""


class StateSerializationError(StateError, ValueError):
    """A state value the stable codec cannot encode or decode."""


class OutputTypeError(SparkcastError, TypeError):
    """A callback returned something other than an iterable of outputs (a dict instead of
    yielding it) or emitted to something that is not an ``OutputTag``. It is a mistake in how the
    function hands back outputs, so it is raised as itself, not wrapped in ``UserFunctionError``:
    ``except TypeError`` sees it, as it would in plain Python."""


class TimerError(SparkcastError, RuntimeError):
    """Timers are only for keyed functions, on the main side and in ``on_timer``."""


class ContextError(SparkcastError, RuntimeError):
    """A context is valid only during the callback it was passed to."""


class UserFunctionError(SparkcastError, RuntimeError):
    """The user's function raised; the original exception is ``__cause__``."""

    def __init__(self, function: str, callback: str, key: Any, cause: BaseException) -> None:
        where = f"{function}.{callback}" + ("" if key is None else f" for key {key!r}")
        super().__init__(f"{where} raised {type(cause).__name__}: {cause}")
        self.function = function
        self.callback = callback
        self.key = key
