"""The Spark runtime: the only package that imports pyspark.

``Stream`` wires DataFrames into the broadcast pattern; the processor runs the engine core inside
``transformWithStateInPandas`` with Spark-backed state.
"""

# first: without pyspark, fail here with the extra to install
from sparkcast.spark.dependency import require_pyspark

require_pyspark()

from sparkcast.spark.prometheus import metrics_url, serve_metrics  # noqa: E402
from sparkcast.spark.rescale import rescale  # noqa: E402
from sparkcast.spark.result import DEAD_LETTER_SCHEMA, ProcessResult  # noqa: E402
from sparkcast.spark.session import session  # noqa: E402
from sparkcast.spark.sink import read_output  # noqa: E402
from sparkcast.spark.state_reader import read_state, state_value  # noqa: E402
from sparkcast.spark.stream import (  # noqa: E402
    BroadcastConnectedStream,
    BroadcastStream,
    KeyedStream,
    Stream,
)

__all__ = [
    "DEAD_LETTER_SCHEMA",
    "BroadcastConnectedStream",
    "BroadcastStream",
    "KeyedStream",
    "ProcessResult",
    "Stream",
    "metrics_url",
    "read_output",
    "read_state",
    "rescale",
    "serve_metrics",
    "session",
    "state_value",
]
