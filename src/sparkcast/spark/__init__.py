"""The Spark runtime: the only package that imports pyspark, in rooms by job.

``datastream`` wires DataFrames into the pattern (``Stream`` ... ``ProcessResult``); ``planning``
turns a ``process(...)`` call into a ``plan.RuntimePlan`` run by one ``plan.Engine`` of two,
chosen once by ``planning.choice`` (``result.explain()`` shows it), and picks the query around
the runner by shape; ``execution`` runs the engine core in the Python workers; ``outputs``
starts the query and writes the typed outputs to their sinks; ``state``,
``observe``, ``launch`` and ``tools`` serve them. Imports run one way: leaves (``layout``,
``plan``, ``environment``) → ``state`` → ``observe`` → ``launch`` → ``execution`` → ``planning`` →
``outputs`` → ``tools`` → ``datastream`` (docs/architecture.md).

The public names below load on first use (PEP 562), so a Python worker that unpickles a
processor imports only the engine it runs, and ``layout`` imports without pyspark.
"""

from __future__ import annotations

import importlib
from typing import Any

from sparkcast.errors import MissingAttributeError, MissingDependencyError

INSTALL_HINT = "pip install 'sparkcast[spark]'"

_EXPORTS = {
    "DEAD_LETTER_SCHEMA": "sparkcast.spark.layout",
    "BroadcastConnectedStream": "sparkcast.spark.datastream",
    "BroadcastStream": "sparkcast.spark.datastream",
    "KeyedStream": "sparkcast.spark.datastream",
    "ProcessResult": "sparkcast.spark.datastream",
    "Stream": "sparkcast.spark.datastream",
    "decode_output": "sparkcast.core.output_codec",
    "metrics_url": "sparkcast.spark.observe.prometheus",
    "read_output": "sparkcast.spark.outputs.files",
    "read_state": "sparkcast.spark.tools.state_reader",
    "rescale": "sparkcast.spark.tools.rescale",
    "rescale_in_place": "sparkcast.spark.tools.rescale",
    "serve_metrics": "sparkcast.spark.observe.prometheus",
    "session": "sparkcast.spark.launch.builder",
    "state_value": "sparkcast.spark.tools.state_reader",
}

__all__ = [
    "DEAD_LETTER_SCHEMA",
    "BroadcastConnectedStream",
    "BroadcastStream",
    "KeyedStream",
    "ProcessResult",
    "Stream",
    "decode_output",
    "metrics_url",
    "read_output",
    "read_state",
    "rescale",
    "rescale_in_place",
    "serve_metrics",
    "session",
    "state_value",
]


def require_pyspark() -> None:
    """PySpark is an optional dependency: say which extra to install (Quix Streams' habit),
    instead of a bare ``No module named 'pyspark'``; and one in the tested range, instead of an
    ``ImportError`` of a name an older PySpark lacks (``launch/versions.py``)."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"sparkcast.spark runs on Apache Spark and needs PySpark, which is not installed "
            f"({exc}): {INSTALL_HINT}", name="pyspark") from exc
    from sparkcast.spark.launch.versions import check_pyspark

    check_pyspark()


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise MissingAttributeError(f"module 'sparkcast.spark' has no attribute {name!r}")
    require_pyspark()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
