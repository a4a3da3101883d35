"""Options of the broadcast operator beyond Flink's: readiness holds, time alignment, errors."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.type_registry import registered_types
from sparkcast.errors import PipelineError

HOLD_OVERFLOW = OutputTag("hold_overflow")
"""Where main elements go when the hold-until-ready buffer is full (never dropped)."""


class _Sentinel(enum.Enum):
    ANY_KEY = "any key"


#: "the state holds anything". An enum member, not ``object()``: the plan is pickled to the
#: workers, and a plain object would arrive as a copy that no ``is`` check matches (every
#: descriptor-wide hold then waited forever on Spark).
ANY_KEY: Any = _Sentinel.ANY_KEY

TimeAlignment = Literal["batch", "event"]
OnError = Literal["dead_letter", "fail"]


@dataclass(frozen=True)
class ReadyCondition:
    """Broadcast state ``descriptor`` holds ``key`` (or anything at all, for ``ANY_KEY``)."""

    descriptor: str
    key: Any = ANY_KEY

    def __repr__(self) -> str:
        key = "<any>" if self.key is ANY_KEY else repr(self.key)
        return f"ReadyCondition({self.descriptor!r}, {key})"


@dataclass(frozen=True)
class ProcessOptions:
    """How the engine runs a function; built and checked on the driver by ``process(...)``."""

    hold_until_ready: tuple[ReadyCondition, ...] = ()
    hold_capacity: int = 100_000
    time_alignment: TimeAlignment = "batch"
    on_error: OnError = "fail"
    job_parameters: dict[str, Any] = field(default_factory=dict)
    #: classes registered with ``sparkcast.register_types`` when the pipeline was built: they
    #: travel to the workers with the options (``core/type_registry.py``)
    types: tuple[type, ...] = field(default_factory=registered_types)

    def __post_init__(self) -> None:
        if self.time_alignment not in ("batch", "event"):
            raise PipelineError(f"time_alignment must be 'batch' or 'event', not "
                                f"{self.time_alignment!r}")
        if self.on_error not in ("dead_letter", "fail"):
            raise PipelineError(f"on_error must be 'dead_letter' or 'fail', not {self.on_error!r}")
        if self.hold_capacity < 0:
            raise PipelineError("hold_capacity must be >= 0")


def ready_conditions(
    spec: Iterable[Any] | None, broadcast_descriptors: Sequence[MapStateDescriptor]
) -> tuple[ReadyCondition, ...]:
    """Read ``hold_until_ready``: descriptors (non-empty), ``(descriptor, key)`` pairs, or bare keys
    of the only broadcast descriptor.

    Examples:
        >>> ready_conditions([RULES, (MODELS, "current")], [RULES, MODELS])
    """
    if spec is None:
        return ()
    if isinstance(spec, (str, bytes, MapStateDescriptor)):
        spec = [spec]
    names = {d.name for d in broadcast_descriptors}
    conditions = tuple(_condition(item, broadcast_descriptors) for item in spec)
    for condition in conditions:
        if condition.descriptor not in names:
            raise PipelineError(f"hold_until_ready names broadcast state "
                                f"{condition.descriptor!r}, which is not broadcast; "
                                f"broadcast states: {sorted(names)}")
    return conditions


def _condition(item: Any, descriptors: Sequence[MapStateDescriptor]) -> ReadyCondition:
    if isinstance(item, ReadyCondition):
        return item
    if isinstance(item, MapStateDescriptor):
        return ReadyCondition(item.name)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], MapStateDescriptor):
        return ReadyCondition(item[0].name, item[1])
    if len(descriptors) != 1:
        raise PipelineError(
            f"hold_until_ready key {item!r} is ambiguous with {len(descriptors)} broadcast states: "
            "name it as (descriptor, key)"
        )
    return ReadyCondition(descriptors[0].name, item)
