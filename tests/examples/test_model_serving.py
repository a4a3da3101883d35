"""ML model updates: a linear model is broadcast; every prediction names the model version that
made it, and predictions are counted per version (keyed MapState and metrics)."""

import pandas as pd
import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
)
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

MODELS = MapStateDescriptor("models", str, dict)
REJECTED = OutputTag("rejected_models")


def score(model, features):
    return model["bias"] + sum(w * features.get(name, 0.0) for name, w in model["weights"].items())


def accept_model(value, ctx):
    """Shared broadcast logic: install a newer model, reject a stale one."""
    state = ctx.get_broadcast_state(MODELS)
    current = state.get("current")
    if current is not None and value["version"] <= current["version"]:
        yield REJECTED, value["version"]
        return
    state.put("current", value)


class Predict(KeyedBroadcastProcessFunction):
    COUNTS = MapStateDescriptor("predictions_by_version", int, int)

    def open(self, runtime_context):
        self.counts = runtime_context.get_map_state(self.COUNTS)
        self.metrics = runtime_context.get_metrics_group().add_group("model")

    def process_broadcast_element(self, value, ctx):
        yield from accept_model(value, ctx)

    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODELS).get("current")
        version = model["version"]
        self.counts.put(version, (self.counts.get(version) or 0) + 1)
        self.metrics.add_group("version", str(version)).counter("predictions").inc()
        yield {"user": ctx.get_current_key(), "score": round(score(model, value["features"]), 6),
               "model_version": version}


def model(version, weights, bias=0.0):
    return {"version": version, "weights": weights, "bias": bias}


@pytest.fixture
def h():
    harness = KeyedBroadcastHarness(Predict(), lambda v: v["user"], [MODELS],
                                    hold_until_ready=[(MODELS, "current")],
                                    side_outputs=[REJECTED])
    harness.open()
    return harness


def event(user, **features):
    return {"user": user, "features": features}


def test_predictions_name_their_model_version_across_an_update(h):
    h.process_element(event("u1", x=2.0))  # before any model: held, not dropped
    h.process_broadcast_element(model(1, {"x": 1.0}, bias=0.5))
    h.process_element(event("u2", x=1.0))
    h.process_broadcast_element(model(2, {"x": 3.0}))
    h.process_element(event("u1", x=1.0))
    assert h.output() == [
        {"user": "u1", "score": 2.5, "model_version": 1},
        {"user": "u2", "score": 1.5, "model_version": 1},
        {"user": "u1", "score": 3.0, "model_version": 2},
    ]


def test_counters_per_version_in_keyed_state_and_metrics(h):
    h.process_broadcast_element(model(1, {"x": 1.0}))
    for user in ("u1", "u1", "u2"):
        h.process_element(event(user, x=1.0))
    h.process_broadcast_element(model(2, {"x": 1.0}))
    h.process_element(event("u1", x=1.0))
    assert h.keyed_state(Predict.COUNTS, "u1") == {1: 2, 2: 1}
    assert h.keyed_state(Predict.COUNTS, "u2") == {1: 1}
    metrics = h.metrics()
    assert metrics["model.version.1.predictions"] == 3
    assert metrics["model.version.2.predictions"] == 1


def test_stale_models_are_rejected_to_a_side_output(h):
    h.process_broadcast_element(model(3, {"x": 1.0}))
    h.process_broadcast_element(model(2, {"x": 9.0}))
    h.process_element(event("u1", x=1.0))
    assert h.side_output(REJECTED) == [2]
    assert h.output() == [{"user": "u1", "score": 1.0, "model_version": 3}]


def test_the_order_of_model_updates_in_one_batch_does_not_matter():
    outputs = []
    for updates in ([model(1, {"x": 1.0}), model(2, {"x": 2.0})],
                    [model(2, {"x": 2.0}), model(1, {"x": 1.0})]):
        harness = KeyedBroadcastHarness(Predict(), lambda v: v["user"], [MODELS],
                                        side_outputs=[REJECTED])
        harness.open()
        harness.process_micro_batch(main=[event("u1", x=1.0)], broadcast=updates,
                                    broadcast_timestamps=[10, 10])
        outputs.append((harness.output(), harness.side_output(REJECTED)))
    assert outputs[0] == outputs[1]


class PredictBatch(BroadcastProcessFunction):
    """The vectorized form: one pandas call per micro-batch."""

    def process_broadcast_element(self, value, ctx):
        yield from accept_model(value, ctx)

    def process_batch(self, batch, ctx):
        current = ctx.get_broadcast_state(MODELS).get("current")
        scores = current["bias"] + sum(batch[name] * w for name, w in current["weights"].items())
        return pd.DataFrame({"user": batch["user"], "score": scores.round(6),
                             "model_version": current["version"]})


def test_vectorized_predictions_match_per_element_ones(h):
    m = model(4, {"x": 0.25, "y": -1.0}, bias=0.1)
    rows = [{"user": f"u{i}", "x": float(i), "y": i / 10} for i in range(6)]
    h.process_broadcast_element(m)
    for row in rows:
        h.process_element(event(row["user"], x=row["x"], y=row["y"]))
    batch = BroadcastHarness(PredictBatch(), [MODELS])
    batch.open()
    batch.process_micro_batch(main=rows, broadcast=[m])
    assert batch.output() == h.output()
