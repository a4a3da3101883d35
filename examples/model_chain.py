"""The learning module's multi-model exercise: two broadcast steps chained in one query. Step 1
scores transactions with the broadcast scoring model; step 2 takes step 1's output
(``result.connect(...)``, or ``Stream(result.main)``) and labels it with broadcast thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcast import BroadcastProcessFunction, MapStateDescriptor

SCORED_SCHEMA = "tx string, score double"
LABELLED_SCHEMA = "tx string, score double, label string"


@dataclass(frozen=True)
class MLModel:
    version: int
    weight: float
    bias: float = 0.0


@dataclass(frozen=True)
class Threshold:
    label: str
    minimum: float


MODELS = MapStateDescriptor("models", str, MLModel)
THRESHOLDS = MapStateDescriptor("thresholds", str, Threshold)


class Score(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODELS).put("current", MLModel(value["version"], value["weight"]))

    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODELS).get("current")
        if model is not None:
            yield value["tx"], value["amount"] * model.weight + model.bias


class Label(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(THRESHOLDS).put(value["label"],
                                                Threshold(value["label"], value["minimum"]))

    def process_element(self, value, ctx):
        passed = [t for t in ctx.get_broadcast_state(THRESHOLDS).values()
                  if value["score"] >= t.minimum]
        best = max(passed, key=lambda t: t.minimum, default=None)
        yield value["tx"], value["score"], best.label if best else "none"
