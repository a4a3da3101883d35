"""Shape patterns: the example of Flink's "Broadcast State Pattern" documentation.

Items (a color and a shape) are keyed by color; rules such as "a rectangle followed by a
triangle" are broadcast. Per color, each rule keeps the items of its first shape that still wait
for the second (keyed ``MapState`` rule name → pending items); when an item of the second shape
arrives, every waiting item matches it. Rules can be added, changed and removed at run time
(``op`` upsert or delete); a removed rule's pending items are dropped with it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import KeyedBroadcastProcessFunction
from sparkcast.apps.base import BROADCAST, EVENTS, App, Drop, next_version

RULES = MapStateDescriptor("shape_rules", str, dict)
RULES_VERSION = MapStateDescriptor("shape_rules_version", str, int)

EVENTS_SCHEMA = "item_id string, color string, shape string, ts long"
BROADCAST_SCHEMA = "seq long, op string, name string, first string, second string"
OUTPUT_SCHEMA = ("rule string, color string, first_item string, second_item string, "
                 "rules_version long, subtask int")
SHAPES = ("rectangle", "triangle", "circle", "square")
COLORS = ("red", "green", "blue", "yellow")


class MatchShapes(KeyedBroadcastProcessFunction):
    """Flink's ``KeyedBroadcastProcessFunction<Color, Item, Rule, String>`` from the docs."""

    # Flink: MapStateDescriptor<String, List<Item>>("items", ...)
    PENDING = MapStateDescriptor("pending_items", str, list)

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.pending = runtime_context.get_map_state(self.PENDING)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        rules = ctx.get_broadcast_state(RULES)
        if value["op"] == "delete":
            rules.remove(value["name"])
            ctx.apply_to_keyed_state(self.PENDING, lambda _, state: state.remove(value["name"]))
        else:
            rules.put(value["name"], {"first": value["first"], "second": value["second"]})
        next_version(ctx.get_broadcast_state(RULES_VERSION))

    def process_element(self, item: Any, ctx: Any) -> Iterator[Any]:
        shape = item["shape"]
        version = ctx.get_broadcast_state(RULES_VERSION).get("version") or 0
        for name, rule in sorted(ctx.get_broadcast_state(RULES).items()):
            stored = list(self.pending.get(name) or [])
            if shape == rule["second"] and stored:
                for first in stored:
                    yield name, item["color"], first, item["item_id"], version, self.subtask
                stored = []
            if shape == rule["first"]:  # no "else": a rule "A then A" pairs items of one shape
                stored.append(item["item_id"])
            if stored:
                self.pending.put(name, stored)
            elif self.pending.contains(name):
                self.pending.remove(name)


# ---------------------------------------------------------------------------------- data

def rule_row(seq: int, name: str, first: str | None, second: str | None, op: str = "upsert"
             ) -> dict[str, Any]:
    return {"seq": seq, "op": op, "name": name, "first": first, "second": second}


def generate(seed: int = 7, files: int = 6, per_file: int = 60) -> list[Drop]:
    """Rule "rectangle then triangle" at step 0; mid-run "circle then square" is added and the
    first rule removed."""
    rng = random.Random(seed)
    drops = [Drop(0, BROADCAST, "rules-000.json",
                  (rule_row(0, "rectangle-triangle", "rectangle", "triangle"),)),
             Drop(files // 2, BROADCAST, "rules-001.json",
                  (rule_row(10, "circle-square", "circle", "square"),
                   rule_row(11, "rectangle-triangle", None, None, op="delete")))]
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"items-{f:03d}.json", tuple(
            {"item_id": f"it{f * per_file + i:05d}", "color": rng.choice(COLORS),
             "shape": rng.choice(SHAPES), "ts": 1_700_000_000_000 + f * per_file + i}
            for i in range(per_file))))
    return drops


APP = App(
    name="shapes",
    title="Shape patterns (Flink's documentation example, keyed MapState)",
    make_function=MatchShapes,
    descriptors=(RULES, RULES_VERSION),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=60 * scale),
    key_by=("color",),
    hold_until_ready=((RULES_VERSION, "version"),),
    version_column="rules_version",
    per_event_outputs=(),
    show_columns=("rule", "color", "first_item", "second_item", "rules_version", "subtask"),
    update_note="rules-001.json: 'circle-square' added, 'rectangle-triangle' removed",
)
