"""Hold-until-ready: main elements that arrive before the broadcast state they need.

Flink leaves events that beat the rules to the program (they are usually lost). The engine keeps
them, in arrival order and in state (so they survive restarts), and processes them right after
the broadcast element that makes every condition true. A full buffer sends further elements to
the ``HOLD_OVERFLOW`` side output instead of dropping them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcast.api.options import ANY_KEY, ReadyCondition
from sparkcast.core.scope import NO_KEY

Held = tuple[Any, "int | None", Any]  # (value, timestamp, key)


class HoldBuffer:
    def __init__(self, conditions: tuple[ReadyCondition, ...], capacity: int) -> None:
        self.conditions = conditions
        self.capacity = capacity
        self.items: list[Held] = []
        self.ready = not conditions
        self.stale = False
        self.changed = False

    def refresh(self, broadcast_tables: Mapping[str, Mapping[Any, Any]]) -> None:
        """Re-evaluate the conditions against the broadcast state (after it changed)."""
        self.stale = False
        if self.conditions:
            self.ready = all(_holds(c, broadcast_tables[c.descriptor]) for c in self.conditions)

    def add(self, value: Any, timestamp: int | None, key: Any) -> bool:
        """Keep an element; False when the buffer is full."""
        if len(self.items) >= self.capacity:
            return False
        self.items.append((value, timestamp, key))
        self.changed = True
        return True

    def take(self) -> list[Held]:
        items, self.items = self.items, []
        self.changed = self.changed or bool(items)
        return items

    def snapshot(self) -> list[list[Any]]:
        return [[v, ts] if key is NO_KEY else [v, ts, key] for v, ts, key in self.items]

    def restore(self, entries: list[list[Any]]) -> None:
        self.items = [(e[0], e[1], e[2] if len(e) > 2 else NO_KEY) for e in entries]
        self.changed = False


def _holds(condition: ReadyCondition, table: Mapping[Any, Any]) -> bool:
    return bool(table) if condition.key is ANY_KEY else condition.key in table
