"""Rule/items matching as a PyFlink author writes it over ``Row`` elements, every state and
output declared with PyFlink's nested ``Types`` (issue 38): per rule a list of waiting items as
dataclass objects under ``Types.LIST(Types.PICKLED_BYTE_ARRAY())``, rules as
``Types.MAP(Types.STRING(), Types.PICKLED_BYTE_ARRAY())`` in broadcast state, a count per shape
under ``Types.MAP(Types.STRING(), Types.LONG())``, the pairs made under a ``ListStateDescriptor``
of ``Types.ROW_NAMED``, a ``ROW_NAMED`` output holding a ``LIST`` of ``ROW_NAMED`` and a
``BASIC_ARRAY`` and a ``MAP``, and a ``ROW_NAMED`` side output. Only the imports changed from
the PyFlink program."""

from dataclasses import dataclass

from sparkcast import (
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    OutputTag,
    Row,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)


@dataclass
class Waiting:
    id: int
    shape: str


RULES = MapStateDescriptor("rules", Types.STRING(),
                           Types.MAP(Types.STRING(), Types.PICKLED_BYTE_ARRAY()))
WAITING = MapStateDescriptor("waiting", Types.STRING(), Types.LIST(Types.PICKLED_BYTE_ARRAY()))
SEEN = ValueStateDescriptor("seen", Types.MAP(Types.STRING(), Types.LONG()))
PAIRS = ListStateDescriptor("pairs", Types.ROW_NAMED(["rule", "first", "second"],
                                                     [Types.STRING(), Types.INT(), Types.INT()]))
UNMATCHED = OutputTag("unmatched", Types.ROW_NAMED(["id", "color", "shape"],
                                                   [Types.INT(), Types.STRING(), Types.STRING()]))
OUTPUT_TYPE = Types.ROW_NAMED(
    ["rule", "color", "pairs", "shapes_seen", "counts"],
    [Types.STRING(), Types.STRING(),
     Types.LIST(Types.ROW_NAMED(["first", "second"], [Types.INT(), Types.INT()])),
     Types.BASIC_ARRAY(Types.STRING()), Types.MAP(Types.STRING(), Types.LONG())])


class PairShapes(KeyedBroadcastProcessFunction):

    def open(self, runtime_context: RuntimeContext):
        self.waiting = runtime_context.get_map_state(WAITING)
        self.seen = runtime_context.get_state(SEEN)
        self.pairs = runtime_context.get_list_state(PAIRS)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], {"first": value["first"],
                                                           "second": value["second"]})

    def process_element(self, value, ctx):
        seen = self.seen.value() or {}
        seen[value["shape"]] = seen.get(value["shape"], 0) + 1
        self.seen.update(seen)
        matched = False
        for name, rule in ctx.get_broadcast_state(RULES).items():
            stored = self.waiting.get(name) or []
            if value["shape"] == rule["second"] and stored:
                pairs = [Row(first=w.id, second=value["id"]) for w in stored]
                for w in stored:
                    self.pairs.add(Row(rule=name, first=w.id, second=value["id"]))
                yield Row(rule=name, color=ctx.get_current_key(), pairs=pairs,
                          shapes_seen=sorted(seen), counts=dict(seen))
                stored = []
                matched = True
            if value["shape"] == rule["first"]:
                stored.append(Waiting(value["id"], value["shape"]))
                matched = True
            if stored:
                self.waiting.put(name, stored)
            else:
                self.waiting.remove(name)
        if not matched:
            yield UNMATCHED, Row(id=value["id"], color=value["color"], shape=value["shape"])
