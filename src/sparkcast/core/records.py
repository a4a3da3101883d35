"""The values that flow out of and into a subtask: outputs, dead letters, broadcast elements.

They live apart from the engine because the harness, the Spark runtime and the output encoders
all handle them without needing the engine itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sparkcast.api.output_tag import OutputTag

#: Engine-internal tag of the dead-letter output (``result.dead_letters`` on Spark).
DEAD_LETTERS = OutputTag("dead_letters")


class OutputRecord(NamedTuple):
    """One output: ``tag`` None for the main output; ``batch`` when ``value`` is a DataFrame;
    ``key`` the key of the callback that emitted it (so an output that fails its schema check
    becomes a dead letter naming the key, like a failed callback's)."""

    tag: OutputTag | None
    value: Any
    timestamp: int | None
    batch: bool = False
    key: Any = None


@dataclass(frozen=True)
class DeadLetter:
    """An input the function could not process, with the reason."""

    callback: str
    error: str
    value: Any
    key: Any
    timestamp: int | None


class BroadcastElement(NamedTuple):
    """A broadcast element of a micro-batch; ``order`` is the user's ``order_by`` value."""

    value: Any
    timestamp: int | None = None
    order: Any = None
