"""sparkcast: Flink's Broadcast State Pattern on Spark Structured Streaming, in Python.

The API mirrors PyFlink's ``pyflink.datastream`` names, so ported code changes its imports and
its stream wiring only. Importing this package does not import pyspark: ``from sparkcast import
Stream`` (the Spark wiring) loads it on first use, so it stays out of ``__all__`` and a star
import stays Spark-free.
"""

from typing import Any

from sparkcast.api import (
    HOLD_OVERFLOW,
    MIN_WATERMARK,
    AggregateFunction,
    AggregatingState,
    AggregatingStateDescriptor,
    Avro,
    BroadcastProcessFunction,
    BroadcastState,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    OutputTag,
    Protobuf,
    ReadOnlyBroadcastState,
    ReduceFunction,
    ReducingState,
    ReducingStateDescriptor,
    Row,
    RuntimeContext,
    SchemaRegistry,
    StateTtlConfig,
    Time,
    TimeDomain,
    TimerService,
    Types,
    ValueState,
    ValueStateDescriptor,
    register_types,
)
from sparkcast.errors import MissingAttributeError, SparkcastError
from sparkcast.version import __version__ as __version__

_SPARK_NAMES = ("Stream",)


def __getattr__(name: str) -> Any:
    if name in _SPARK_NAMES:
        from sparkcast import spark

        return getattr(spark, name)
    raise MissingAttributeError(f"module 'sparkcast' has no attribute {name!r}")


__all__ = [
    "HOLD_OVERFLOW",
    "MIN_WATERMARK",
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "Avro",
    "BroadcastProcessFunction",
    "BroadcastState",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "OutputTag",
    "Protobuf",
    "ReadOnlyBroadcastState",
    "ReduceFunction",
    "ReducingState",
    "ReducingStateDescriptor",
    "Row",
    "RuntimeContext",
    "SchemaRegistry",
    "SparkcastError",
    "StateTtlConfig",
    "Time",
    "TimeDomain",
    "TimerService",
    "Types",
    "ValueState",
    "ValueStateDescriptor",
    "register_types",
]
