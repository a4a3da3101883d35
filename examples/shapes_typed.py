"""Flink's colour/shape rule matching ("The Broadcast State Pattern"), ported as written: typed
items and rules (dataclasses, enums) and the keyed ``MapState`` obtained inside
``process_element``, as Flink's example does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor

OUTPUT_SCHEMA = "rule string, first string, second string"


class Shape(str, enum.Enum):  # noqa: UP042 - the form ported code uses
    SQUARE = "square"
    CIRCLE = "circle"
    TRIANGLE = "triangle"


@dataclass(frozen=True)
class Item:
    id: int
    color: str
    shape: Shape

    @staticmethod
    def of(row) -> Item:  # main elements arrive as Rows on Spark
        return Item(row["id"], row["color"], Shape(row["shape"]))


@dataclass(frozen=True)
class Rule:
    name: str
    first: Shape
    second: Shape


RULES = MapStateDescriptor("rules", str, Rule)
ITEMS = MapStateDescriptor("items", str, list[Item])


class MatchRules(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.runtime_context = runtime_context

    def process_broadcast_element(self, value, ctx):
        rule = Rule(value["name"], Shape(value["first"]), Shape(value["second"]))
        ctx.get_broadcast_state(RULES).put(rule.name, rule)

    def process_element(self, value, ctx):
        item = Item.of(value)
        state = self.runtime_context.get_map_state(ITEMS)  # Flink: getRuntimeContext().getMapState
        for name, rule in ctx.get_broadcast_state(RULES).items():
            stored = state.get(name) or []
            if item.shape == rule.second and stored:
                for first in stored:
                    yield name, f"{first.shape.value}#{first.id}", f"{item.shape.value}#{item.id}"
                stored = []
            if item.shape == rule.first:
                stored = [*stored, item]
            if stored:
                state.put(name, stored)
            else:
                state.remove(name)
