"""The Flink docs' "The Broadcast State Pattern" Python tab, as it is written there: items keyed
by colour, rules broadcast, and per rule a list of the items waiting for their second shape in
``MapStateDescriptor("item", Types.STRING(), Types.LIST(Types.PICKLED_BYTE_ARRAY()))`` — the
declaration issue 38 saw refused the moment it was built. Only the imports changed.

The docs leave ``Item`` and ``Rule`` to the reader; they are written here as a PyFlink author
would (plain classes, ``get_shape()``), since the function calls their methods. On Spark a
stream's elements are the DataFrame's ``Row``s, not these objects: ``value.get_shape()`` fails
there, and each item becomes a dead letter naming it (tests/spark/test_literal_ports.py)."""

from enum import Enum

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, RuntimeContext, Types


class Color(Enum):
    RED = 1
    BLUE = 2


class Shape(Enum):
    RECTANGLE = 1
    TRIANGLE = 2
    CIRCLE = 3


class Item:
    def __init__(self, color: Color, shape: Shape, name: str):
        self.color = color
        self.shape = shape
        self.name = name

    def get_color(self):
        return self.color

    def get_shape(self):
        return self.shape

    def __str__(self):
        return self.name


class Rule:
    def __init__(self, name: str, first: Shape, second: Shape):
        self.name = name
        self.first = first
        self.second = second


# a map descriptor to store the name of the rule (string) and the rule (Python object) itself.
rule_state_descriptor = MapStateDescriptor("RuleBroadcastState", Types.STRING(),
                                           Types.PICKLED_BYTE_ARRAY())


class MyKeyedBroadcastProcessFunction(KeyedBroadcastProcessFunction):

    def __init__(self):
        self._map_state_desc = MapStateDescriptor("item", Types.STRING(),
                                                  Types.LIST(Types.PICKLED_BYTE_ARRAY()))
        self._rule_state_desc = MapStateDescriptor("RulesBroadcastState", Types.STRING(),
                                                   Types.PICKLED_BYTE_ARRAY())
        self._map_state = None

    def open(self, ctx: RuntimeContext):
        self._map_state = ctx.get_map_state(self._map_state_desc)

    def process_broadcast_element(self, value: Rule,
                                  ctx: KeyedBroadcastProcessFunction.Context):
        ctx.get_broadcast_state(self._rule_state_desc).put(value.name, value)

    def process_element(self, value: Item, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext):
        shape = value.get_shape()

        for rule_name, rule in ctx.get_broadcast_state(self._rule_state_desc).items():

            stored = self._map_state.get(rule_name)
            if stored is None:
                stored = []

            if shape == rule.second and len(stored) > 0:
                for i in stored:
                    yield "MATCH: {} - {}".format(i, value)  # noqa: UP032 - as the docs write it
                stored = []

            if shape == rule.first:
                stored.append(value)

            if len(stored) == 0:
                self._map_state.remove(rule_name)
            else:
                self._map_state.put(rule_name, stored)
