"""``RuntimeContext``: the handle ``open`` receives; PyFlink's ``RuntimeContext``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from sparkcast.api.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.api.metrics import MetricGroup
from sparkcast.api.state import AggregatingState, ListState, MapState, ReducingState, ValueState


class RuntimeContext(ABC):
    """Keyed state handles (bound to the current key at each call), task facts and metrics."""

    @abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState:
        """The keyed ``ValueState`` that ``state_descriptor`` names; another kind of descriptor
        raises ``ArgumentTypeError``."""

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        """The keyed ``ListState`` that ``state_descriptor`` names."""

    @abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState:
        """The keyed ``MapState`` that ``state_descriptor`` names (broadcast state comes from
        the context's ``get_broadcast_state`` instead)."""

    @abstractmethod
    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState:
        """The keyed ``ReducingState`` that ``state_descriptor`` names."""

    @abstractmethod
    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState:
        """The keyed ``AggregatingState`` that ``state_descriptor`` names."""

    @abstractmethod
    def get_task_name(self) -> str:
        """The function's class name."""

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int:
        """How many subtasks run the function (the pipeline's parallelism)."""

    @abstractmethod
    def get_max_number_of_parallel_subtasks(self) -> int:
        """The same as ``get_number_of_parallel_subtasks``: the parallelism is fixed for a
        checkpoint, so there is no separate maximum."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> int:
        """This subtask's index, from 0 to parallelism - 1."""

    @abstractmethod
    def get_attempt_number(self) -> int:
        """Always 0: sparkcast does not number attempts (a failed micro-batch is re-run from the
        checkpoint)."""

    @abstractmethod
    def get_task_name_with_subtasks(self) -> str:
        """The task name with the subtask, Flink's way: ``"MatchRules (2/4)"``."""

    @abstractmethod
    def get_job_parameter(self, key: str, default_value: Any = None) -> Any:
        """A value of the pipeline's ``job_parameters`` (given to ``process``), or
        ``default_value``."""

    @abstractmethod
    def get_metrics_group(self) -> MetricGroup:
        """The function's metric group, for user-defined counters, meters and
        histograms."""
