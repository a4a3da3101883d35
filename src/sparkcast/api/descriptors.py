"""State descriptors: name a piece of state and its types, as in PyFlink.

The declared types are checked here (``api/declared_types.py``): typed values (dataclasses, enums,
NamedTuples) are rebuilt from them when state is read back, so a type the codec cannot store,
or a string where a type belongs, fails when the descriptor is made.

Examples:
    >>> rules = MapStateDescriptor("rules", str, dict)
    >>> counts = ValueStateDescriptor("count", int)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sparkcast.api.aggregate_functions import AggregateFunction, ReduceFunction
from sparkcast.api.declared_types import describe_type
from sparkcast.api.pyflink_types import python_type
from sparkcast.api.ttl import StateTtlConfig
from sparkcast.errors import ArgumentTypeError, PipelineError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


class StateDescriptor:
    """Base of the descriptors; Flink's ``StateDescriptor``. Equal when class and name are."""

    kind = "state"

    def __init__(self, name: str, type_info: Any = None) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise PipelineError(
                f"state name {name!r} is invalid: use letters, digits, '_', '.', '-' "
                "(at most 128, starting with a letter or '_')"
            )
        self.name = name
        type_info = python_type(type_info)  # Types.ROW_NAMED(...) and friends: their Python type
        describe_type(type_info, f"{type(self).__name__}({name!r})")  # refused now, not at put
        self.type_info = type_info
        self.ttl_config: StateTtlConfig | None = None

    def get_name(self) -> str:
        """The state's name: unique within a function, and the name the checkpoint and the
        state reader know it by."""
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Expire this state's values after the config's TTL; a disabled config turns TTL off.
        Keyed state only: a broadcast descriptor with a TTL is refused with ``PipelineError``.
        Call it before the state is first obtained in ``open``."""
        if not isinstance(ttl_config, StateTtlConfig):
            raise ArgumentTypeError("enable_time_to_live takes a StateTtlConfig (see new_builder)")
        self.ttl_config = ttl_config if ttl_config.is_enabled() else None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, StateDescriptor) and type(other) is type(self)
                and other.name == self.name)

    def __hash__(self) -> int:
        return hash((self.kind, self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """Names a ``ValueState`` and its value type (``None``: any value the codec stores);
    Flink's ``ValueStateDescriptor``."""

    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)


class ListStateDescriptor(StateDescriptor):
    """Names a ``ListState`` and its element type; Flink's ``ListStateDescriptor``."""

    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None) -> None:
        super().__init__(name, elem_type_info)


class MapStateDescriptor(StateDescriptor):
    """Keyed map state, and the only kind of broadcast state (as in Flink)."""

    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None) -> None:
        super().__init__(name, value_type_info)
        key_type_info = python_type(key_type_info)
        describe_type(key_type_info, f"MapStateDescriptor({name!r}) key")
        self.key_type_info = key_type_info
        self.value_type_info = self.type_info


class ReducingStateDescriptor(StateDescriptor):
    """Names a ``ReducingState``, its reduce function (a ``ReduceFunction`` or a plain
    ``callable(a, b)``) and its value type; Flink's ``ReducingStateDescriptor``."""

    kind = "reducing"

    def __init__(
        self,
        name: str,
        reduce_function: ReduceFunction | Callable[[Any, Any], Any],
        type_info: Any = None,
    ) -> None:
        super().__init__(name, type_info)
        self.reduce: Callable[[Any, Any], Any]
        if isinstance(reduce_function, ReduceFunction):
            self.reduce = reduce_function.reduce
        elif callable(reduce_function):
            self.reduce = reduce_function
        else:
            raise ArgumentTypeError("reduce_function must be a ReduceFunction or a callable(a, b)")
        self.reduce_function = reduce_function

    def get_reduce_function(self) -> ReduceFunction | Callable[[Any, Any], Any]:
        """The reduce function as it was given."""
        return self.reduce_function


class AggregatingStateDescriptor(StateDescriptor):
    """Names an ``AggregatingState``, its ``AggregateFunction`` and the accumulator's type
    (what the state stores); Flink's ``AggregatingStateDescriptor``."""

    kind = "aggregating"

    def __init__(self, name: str, agg_function: AggregateFunction, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        if not isinstance(agg_function, AggregateFunction):
            raise ArgumentTypeError("agg_function must be an AggregateFunction")
        self.agg_function = agg_function

    def get_agg_function(self) -> AggregateFunction:
        """The aggregate function."""
        return self.agg_function
