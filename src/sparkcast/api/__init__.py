"""The user API, pure Python: functions, contexts, state, descriptors, timers, tags, TTL,
Kafka value formats and the schema registry that names their writer schemas."""

from sparkcast.api.aggregate_functions import AggregateFunction, ReduceFunction
from sparkcast.api.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.api.formats import Avro
from sparkcast.api.functions import (
    BaseBroadcastProcessFunction,
    BroadcastProcessFunction,
    Function,
    KeyedBroadcastProcessFunction,
)
from sparkcast.api.keyed_functions import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.api.metrics import Counter, Distribution, Histogram, Meter, MetricGroup
from sparkcast.api.options import HOLD_OVERFLOW, ProcessOptions, ReadyCondition
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.protobuf import Protobuf
from sparkcast.api.pyflink_types import Types
from sparkcast.api.registry import SchemaRegistry
from sparkcast.api.row import Row
from sparkcast.api.runtime_context import RuntimeContext
from sparkcast.api.state import (
    AggregatingState,
    BroadcastState,
    ListState,
    MapState,
    ReadOnlyBroadcastState,
    ReducingState,
    State,
    ValueState,
)
from sparkcast.api.timers import MIN_WATERMARK, TimeDomain, TimerService
from sparkcast.api.ttl import StateTtlConfig, Time
from sparkcast.api.type_registry import register_types

__all__ = [
    "HOLD_OVERFLOW",
    "MIN_WATERMARK",
    "AggregateFunction",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "Avro",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "BroadcastState",
    "Counter",
    "Distribution",
    "Function",
    "Histogram",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "Meter",
    "MetricGroup",
    "OutputTag",
    "ProcessOptions",
    "Protobuf",
    "ReadOnlyBroadcastState",
    "ReadyCondition",
    "ReduceFunction",
    "ReducingState",
    "ReducingStateDescriptor",
    "Row",
    "RuntimeContext",
    "SchemaRegistry",
    "State",
    "StateDescriptor",
    "StateTtlConfig",
    "Time",
    "TimeDomain",
    "TimerService",
    "Types",
    "ValueState",
    "ValueStateDescriptor",
    "register_types",
]
