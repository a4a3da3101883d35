"""A user's module as a Python worker finds it: it imports the public API, nothing of the
runtime (``test_worker_imports.py`` ships functions from here)."""

from __future__ import annotations

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    ValueStateDescriptor,
)

RULES = MapStateDescriptor("rules", str, int)


class Count(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", int))

    def process_element(self, value, ctx):
        self.seen.update((self.seen.value() or 0) + 1)
        yield value.k, self.seen.value()

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)


class Enrich(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value.k, ctx.get_broadcast_state(RULES).get(value.k, 0)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value.name, value.limit)
