"""Flink's colour/shape rule matching (docs: "The Broadcast State Pattern"), as PyFlink code:
plain classes and enums kept under ``Types.PICKLED_BYTE_ARRAY()``."""

from enum import Enum

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, RuntimeContext, Types


class Color(Enum):
    RED = "red"
    BLUE = "blue"
    GREEN = "green"


class Shape(Enum):
    SQUARE = "square"
    TRIANGLE = "triangle"
    CIRCLE = "circle"


class Item:
    def __init__(self, item_id, color, shape):
        self.id = item_id
        self.color = color
        self.shape = shape

    def get_color(self):
        return self.color

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return f"{self.shape.value}#{self.id}"


class Rule:
    def __init__(self, name, first, second):
        self.name = name
        self.first = first
        self.second = second


rule_state_descriptor = MapStateDescriptor(
    "RulesBroadcastState", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class MatchFunction(KeyedBroadcastProcessFunction):
    def __init__(self):
        self.map_state_desc = MapStateDescriptor(
            "items", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
        self.state = None

    def open(self, runtime_context: RuntimeContext):
        self.state = runtime_context.get_map_state(self.map_state_desc)

    def process_broadcast_element(self, value, ctx):
        rule = Rule(value.name, Shape(value.first), Shape(value.second))
        ctx.get_broadcast_state(rule_state_descriptor).put(rule.name, rule)

    def process_element(self, value, ctx):
        item = Item(value.id, Color(value.color), Shape(value.shape))
        shape = item.get_shape()
        for rule_name, rule in ctx.get_broadcast_state(rule_state_descriptor).items():
            stored = self.state.get(rule_name)
            if stored is None:
                stored = []
            if shape == rule.second and len(stored) > 0:
                for i in stored:
                    yield "MATCH: " + str(i) + " - " + str(item)
                stored.clear()
            if shape == rule.first:
                stored.append(item)
            if len(stored) == 0:
                self.state.remove(rule_name)
            else:
                self.state.put(rule_name, stored)
