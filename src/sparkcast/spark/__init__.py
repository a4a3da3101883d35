"""The Spark runtime: the only package that imports pyspark.

``Stream`` wires DataFrames into the broadcast pattern; the processor runs the engine core inside
``transformWithStateInPandas`` with Spark-backed state.
"""

from sparkcast.spark.result import DEAD_LETTER_SCHEMA, ProcessResult
from sparkcast.spark.session import session
from sparkcast.spark.sink import read_output
from sparkcast.spark.stream import (
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
    "read_output",
    "session",
]
