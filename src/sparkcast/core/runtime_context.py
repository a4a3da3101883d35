"""The ``RuntimeContext`` given to ``open``: creates keyed state handles, reports task facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
from sparkcast.core.keyed_state import KeyedStates
from sparkcast.errors import ArgumentTypeError


@dataclass(frozen=True)
class TaskInfo:
    """What a subtask reports about itself (Flink's ``TaskInfo``)."""

    function_name: str
    subtask_index: int
    parallelism: int
    job_parameters: dict[str, Any] = field(default_factory=dict)


class EngineRuntimeContext(RuntimeContext):
    def __init__(self, keyed: KeyedStates, task: TaskInfo, metrics: MetricGroup) -> None:
        self._keyed = keyed
        self._task = task
        self._metrics = metrics
        #: whether the function asked which subtask it is: its outputs may then differ by
        #: subtask, so a runtime that applies broadcast elements once must not copy them
        self.read_subtask = False

    def _state(self, descriptor: StateDescriptor, kind: type[StateDescriptor]) -> Any:
        if not isinstance(descriptor, kind):
            raise ArgumentTypeError(f"expected a {kind.__name__}, got {type(descriptor).__name__}")
        return self._keyed.handle(descriptor)

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
        return self._task.function_name

    def get_number_of_parallel_subtasks(self) -> int:
        return self._task.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._task.parallelism

    def get_index_of_this_subtask(self) -> int:
        self.read_subtask = True
        return self._task.subtask_index

    def get_attempt_number(self) -> int:
        return 0

    def get_task_name_with_subtasks(self) -> str:
        task = self._task
        self.read_subtask = True
        return f"{task.function_name} ({task.subtask_index + 1}/{task.parallelism})"

    def get_job_parameter(self, key: str, default_value: Any = None) -> Any:
        return self._task.job_parameters.get(key, default_value)

    def get_metrics_group(self) -> MetricGroup:
        return self._metrics
