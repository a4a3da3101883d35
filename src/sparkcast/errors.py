"""Every error sparkcast raises derives from ``SparkcastError``.

Each error below the two bases (``SparkcastError``, ``StateError``) also inherits the built-in
exception a Python user would expect, so ``except TypeError`` keeps working around code that
misuses read-only state, and ``except KeyError`` around a missing map-state key. Every error
class of the package is defined and importable here, the applications' too:
``from sparkcast.errors import PipelineError, StateTypeError``.

    SparkcastError
    ├── PipelineError (ValueError)            a pipeline, descriptor or option is invalid; raised
    │   │                                     when it is built (on Spark, on the driver)
    │   └── IncompatibleCheckpointError       a restart whose layout the checkpoint cannot serve
    ├── ArgumentTypeError (TypeError)         an API call given an argument of the wrong type
    ├── MissingKeyError (KeyError)            ``[]`` on a field that is not there (Row)
    ├── MissingAttributeError (AttributeError)  a name the ``sparkcast`` package does not have
    ├── UndefinedMethodError (NotImplementedError)  a base-class method the user's class must
    │                                         define, called without being defined
    ├── MissingDependencyError (ModuleNotFoundError)  an optional package is not installed; the
    │                                         message names the extra to install
    ├── MicroBatchInterrupted (RuntimeError)  a micro-batch interrupted by ``query.stop()``
    ├── JavaNotFoundError (RuntimeError)      no Java that Spark runs on; the message says how
    ├── UnsupportedSparkError (RuntimeError)  a PySpark outside the tested range; names the range
    ├── DatabaseError (RuntimeError)          a database (PostgreSQL) that cannot be started,
    │                                         reached or read; the message says why and the fix
    ├── BrokerError (RuntimeError)            a throwaway Kafka broker (``sparkcast.testing``)
    │                                         that did not start, serve or deliver in time
    ├── StateError
    │   ├── ReadOnlyStateError (TypeError)    a write to broadcast state outside the broadcast side
    │   ├── UnknownStateError (KeyError)      a broadcast descriptor not passed to broadcast(...)
    │   ├── KeyedStateError (RuntimeError)    keyed state without a key (unkeyed function, no key)
    │   ├── StateTypeError (TypeError)        a value that does not match its descriptor's type
    │   └── StateSerializationError (ValueError)  a value the state codec cannot store
    │       └── UnknownTypeError              stored data names a class the job does not know
    ├── OutputTypeError (TypeError)           a callback's outputs are not yielded values/frames
    ├── TimerError (RuntimeError)             timers where Flink forbids them
    ├── ContextError (RuntimeError)           a context used after its callback returned
    ├── HarnessError (RuntimeError)           a test harness driven before ``open()``
    ├── QueryFailedError (RuntimeError)       a streaming query stopped with an error
    ├── UsageError (ValueError)               a ``sparkcast`` command-line mistake, found before
    │                                         Spark starts (exit status 2)
    ├── SinkError (RuntimeError)              a sink refused before start (missing table, column
    │                                         mismatch, unreachable database) or failed a batch
    ├── UserFunctionError (RuntimeError)      the user's code raised: function, callback, key
    │   the built-in applications (``sparkcast.apps``, ``sparkcast run <app>``):
    ├── AppError (ValueError)                 an unknown application, or a bad data directory
    ├── ModelError (ValueError)               a model that does not load or verify
    ├── RuleError (ValueError)                a fraud rule that does not parse or type-check
    └── ConfigError (ValueError)              a refused ``AppConfig`` (the previous one stays)
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


class ArgumentTypeError(SparkcastError, TypeError):
    """An API call was given an argument of the wrong type (a TTL that is not a
    ``StateTtlConfig``, a ``ValueStateDescriptor`` passed to ``get_map_state``, ...): raised at
    the call, where Python's own ``TypeError`` would be."""


class MissingKeyError(SparkcastError, KeyError):
    """``row["field"]`` where there is no such field, or ``outputs["name"]`` of
    ``foreach_batch`` where there is no such output; a ``KeyError``, as the mapping protocol
    requires. (``state[key]`` of map and broadcast state is ``get(key)``, as in PyFlink.)"""


class MissingAttributeError(SparkcastError, AttributeError):
    """A name the ``sparkcast`` package does not have; an ``AttributeError``, as a module's
    ``__getattr__`` must raise (``hasattr`` and ``from sparkcast import ...`` rely on it)."""


class UndefinedMethodError(SparkcastError, NotImplementedError):
    """A base-class method that the user's class must define was called without being defined:
    ``process_element`` or ``process_broadcast_element`` reached through ``super()`` (a pipeline
    refuses such a function before it runs, with ``PipelineError``), or
    ``AggregateFunction.merge``, which sparkcast never calls."""


class MissingDependencyError(SparkcastError, ModuleNotFoundError):
    """An optional dependency is not installed (PySpark for ``sparkcast.spark``,
    ``prometheus_client`` for the metrics endpoint); the message names the extra to install."""


class MicroBatchInterrupted(SparkcastError, RuntimeError):
    """A micro-batch interrupted by ``query.stop()``, said in few words: Spark reads it as a
    stop (``spark/outputs/batch_driver.py``)."""


class JavaNotFoundError(SparkcastError, RuntimeError):
    """No Java that Spark runs on was found; the message says which versions and how to get
    one."""


class UnsupportedSparkError(SparkcastError, RuntimeError):
    """The installed PySpark is outside the range sparkcast is tested on; the message names the
    range and the version found (``spark/launch/versions.py``)."""


class DatabaseError(SparkcastError, RuntimeError):
    """A database could not be started, reached or read (a throwaway PostgreSQL cluster, a
    broadcast side read from a table); the message names the database, the cause and the fix."""


class BrokerError(SparkcastError, RuntimeError):
    """A throwaway Kafka broker (``sparkcast.testing.kafka``) did not start, serve a topic or
    deliver records in time; the message names the broker's log."""


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


class UnknownTypeError(StateSerializationError):
    """Stored data names a class that resolves to none the job knows (its function's module, its
    descriptors' types, ``sparkcast.register_types``): decoding never imports what data names."""


class OutputTypeError(SparkcastError, TypeError):
    """A callback returned something other than an iterable of outputs (a dict instead of
    yielding it) or emitted to something that is not an ``OutputTag``. It is a mistake in how the
    function hands back outputs, so it is raised as itself, not wrapped in ``UserFunctionError``:
    ``except TypeError`` sees it, as it would in plain Python."""


class TimerError(SparkcastError, RuntimeError):
    """Timers are only for keyed functions, on the main side and in ``on_timer``."""


class ContextError(SparkcastError, RuntimeError):
    """A context is valid only during the callback it was passed to."""


class HarnessError(SparkcastError, RuntimeError):
    """A test harness was given an element, a watermark or a time before ``open()``, which
    Flink's harnesses also require."""


class UsageError(SparkcastError, ValueError):
    """A mistake in the arguments of the ``sparkcast`` command (or in the job file it names),
    found before Spark starts; the command prints it as one line and exits 2."""


class QueryFailedError(SparkcastError, RuntimeError):
    """A streaming query that sparkcast waited on stopped with an error; the query's exception
    is named in the message and is the ``__cause__``."""


class SinkError(SparkcastError, RuntimeError):
    """A sink of ``write_stream(sinks=...)`` cannot take an output: found before the query
    starts where the sink can tell (missing table, a column that does not match, an unreachable
    database), else when a micro-batch is written; the message names the output, the sink and
    the fix."""


class UserFunctionError(SparkcastError, RuntimeError):
    """The user's function raised; the original exception is ``__cause__``."""

    def __init__(self, function: str, callback: str, key: Any, cause: BaseException) -> None:
        where = f"{function}.{callback}" + ("" if key is None else f" for key {key!r}")
        super().__init__(f"{where} raised {type(cause).__name__}: {cause}")
        self.function = function
        self.callback = callback
        self.key = key


# ------------------------------------------------------------- the built-in applications'


class AppError(SparkcastError, ValueError):
    """An application was asked for something it does not have (unknown app, bad data dir)."""


class ModelError(SparkcastError, ValueError):
    """A model that cannot be loaded or fails verification."""


class RuleError(SparkcastError, ValueError):
    """A rule that does not parse or does not type-check (the compiler raises it too);
    ``position`` is a 0-based offset."""

    def __init__(self, message: str, text: str, position: int | None = None) -> None:
        self.message = message
        self.text = text
        self.position = position
        where = "" if position is None else f" at column {position + 1}"
        super().__init__(f"{message}{where}: {text!r}")


class ConfigError(SparkcastError, ValueError):
    """A configuration that is refused: the previous one stays (``rejected_config``)."""


def raised_as_itself(exc: BaseException) -> bool:
    """Whether a failing callback's exception reaches the caller as itself under
    ``on_error="fail"``: a misuse of sparkcast (read-only state, timers, contexts, types) already
    names its fix. Anything else, a missed ``MissingKeyError`` lookup included (the user's code
    asked for a key that is not there, as a ``KeyError`` in plain Python would say), is wrapped
    in a ``UserFunctionError`` naming the function, the callback and the key."""
    return isinstance(exc, SparkcastError) and not isinstance(exc, MissingKeyError)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn at the user's line: the innermost caller outside sparkcast's own files (Python
    3.12's ``skip_file_prefixes``, which 3.11 lacks), so the warning names the user's file and
    line, whatever path inside sparkcast led to it. The message stays on one line."""
    import inspect
    import os
    import warnings

    own = os.path.dirname(os.path.abspath(__file__)) + os.sep
    here = inspect.currentframe()
    frame: Any = here.f_back if here is not None else None
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(own):
        frame, level = frame.f_back, level + 1
    warnings.warn(" ".join(message.split("\n")), category, stacklevel=level + 1)
