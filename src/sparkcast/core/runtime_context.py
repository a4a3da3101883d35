"""The ``RuntimeContext`` given to ``open``: creates keyed state handles, reports task facts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparkcast.api.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.api.metrics import MetricGroup
from sparkcast.api.runtime_context import RuntimeContext
from sparkcast.api.state import AggregatingState, ListState, MapState, ReducingState, ValueState

if TYPE_CHECKING:
    from sparkcast.core.engine import SubtaskEngine


class EngineRuntimeContext(RuntimeContext):
    def __init__(self, engine: SubtaskEngine) -> None:
        self._engine = engine

    def _state(self, descriptor: StateDescriptor, kind: type[StateDescriptor]) -> Any:
        if not isinstance(descriptor, kind):
            raise TypeError(f"expected a {kind.__name__}, got {type(descriptor).__name__}")
        return self._engine.keyed_state(descriptor)

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState:
        return self._state(state_descriptor, ValueStateDescriptor)

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._state(state_descriptor, ListStateDescriptor)

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState:
        return self._state(state_descriptor, MapStateDescriptor)

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState:
        return self._state(state_descriptor, ReducingStateDescriptor)

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState:
        return self._state(state_descriptor, AggregatingStateDescriptor)

    def get_task_name(self) -> str:
        return self._engine.function_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._engine.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._engine.parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._engine.subtask_index

    def get_attempt_number(self) -> int:
        return 0

    def get_task_name_with_subtasks(self) -> str:
        engine = self._engine
        return f"{engine.function_name} ({engine.subtask_index + 1}/{engine.parallelism})"

    def get_job_parameter(self, key: str, default_value: Any = None) -> Any:
        return self._engine.options.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        return self._engine.metrics
