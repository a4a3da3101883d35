"""The ported examples under examples/ on the harness (tests/spark/test_keyed_functions.py runs
them on Spark)."""

from __future__ import annotations

import pytest

from examples import inactivity_alert, keyed_enrichment, model_chain, shapes_typed
from sparkcast import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.errors import PipelineError
from sparkcast.testing import (
    BroadcastHarness,
    KeyedBroadcastHarness,
    KeyedCoProcessHarness,
    KeyedProcessHarness,
)


def test_inactivity_alert_fires_event_time_alerts_and_processing_time_cleanup(state_backend):
    h = KeyedProcessHarness(inactivity_alert.InactivityAlert(), lambda v: v["user"],
                            state_backend=state_backend)
    h.open()
    h.set_processing_time(5)
    for user, ts in [("a", 100), ("b", 150), ("a", 900), ("b", 2_000)]:
        h.process_element({"user": user}, timestamp=ts)
    h.process_watermark(1_999)
    assert h.output() == [("a", 900, 1_900)]  # b's first timer was deleted by its later event
    assert h.timers()["PROCESSING_TIME"] == [(5 + inactivity_alert.DAY, "a"),
                                             (5 + inactivity_alert.DAY, "b")]
    h.set_processing_time(5 + inactivity_alert.DAY)
    assert h.keyed_state(inactivity_alert.ValueStateDescriptor("last_seen", int), "b") is None
    h.process_watermark(5_000)  # b's event-time timer still fires: its state was cleared
    assert h.output()[-1] == ("b", None, 3_000)
    with pytest.raises(PipelineError, match="no broadcast side"):
        h.process_broadcast_element({})


class Contexts(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(10)
        yield isinstance(ctx, KeyedProcessFunction.Context), ctx.get_current_key()

    def on_timer(self, timestamp, ctx):
        yield isinstance(ctx, KeyedProcessFunction.OnTimerContext), ctx.time_domain().name


def test_keyed_contexts_are_pyflinks_context_classes():
    h = KeyedProcessHarness(Contexts(), lambda v: v)
    h.open()
    h.process_element("k", timestamp=1)
    h.process_watermark(10)
    assert h.output() == [(True, "k"), (True, "EVENT_TIME")]


def test_keyed_enrichment_joins_two_keyed_streams_and_orders_wait_for_their_product(
        state_backend):
    h = KeyedCoProcessHarness(keyed_enrichment.EnrichOrders(), lambda o: o["product_id"],
                              lambda p: p["product_id"], state_backend=state_backend)
    h.open()
    h.process_element1({"order_id": "o1", "product_id": "p1", "qty": 2}, timestamp=1)
    h.process_element2({"product_id": "p1", "name": "pen", "price": 1.5}, timestamp=2)
    h.process_element1({"order_id": "o2", "product_id": "p1", "qty": 1}, timestamp=3)
    h.process_element1({"order_id": "o3", "product_id": "p2", "qty": 1}, timestamp=4)
    assert h.output() == [("o1", "pen", 3.0), ("o2", "pen", 1.5)]
    assert h.keyed_state(keyed_enrichment.PRODUCT, "p1") == keyed_enrichment.Product(
        "p1", "pen", 1.5)
    assert h.keyed_state(keyed_enrichment.WAITING, "p2") == [("o3", 1)]


class Failing(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield value

    def process_element2(self, value, ctx):
        raise ValueError("bad reference row")


def test_a_co_function_error_is_a_dead_letter_naming_the_input():
    h = KeyedCoProcessHarness(Failing(), lambda v: v, lambda v: v, on_error="dead_letter")
    h.open()
    h.process_co_micro_batch([("a", 2)], [("b", 1)])
    assert h.output() == ["a"]
    [letter] = h.dead_letters()
    assert "bad reference row" in letter.error and letter.value == (2, "b")


def test_typed_shapes_with_lazily_created_map_state(state_backend):
    h = KeyedBroadcastHarness(shapes_typed.MatchRules(), lambda v: v["color"],
                              [shapes_typed.RULES], state_backend=state_backend)
    h.open()
    h.process_broadcast_element({"name": "sq-tri", "first": "square", "second": "triangle"})
    for i, (color, shape) in enumerate([("red", "square"), ("blue", "square"),
                                        ("red", "square"), ("red", "triangle")]):
        h.process_element({"id": i, "color": color, "shape": shape})
    assert h.output() == [("sq-tri", "square#0", "triangle#3"), ("sq-tri", "square#2",
                                                                   "triangle#3")]
    blue = h.keyed_state(shapes_typed.ITEMS, "blue")
    assert blue == {"sq-tri": [shapes_typed.Item(1, "blue", shapes_typed.Shape.SQUARE)]}


def test_model_chain_on_the_harness():
    score = BroadcastHarness(model_chain.Score(), [model_chain.MODELS])
    label = BroadcastHarness(model_chain.Label(), [model_chain.THRESHOLDS])
    score.open()
    label.open()
    score.process_broadcast_element({"version": 1, "weight": 0.5})
    label.process_broadcast_element({"label": "high", "minimum": 40.0})
    for tx, amount in [("t1", 100.0), ("t2", 20.0)]:
        score.process_element({"tx": tx, "amount": amount})
    for tx, value in score.output():
        label.process_element({"tx": tx, "score": value})
    assert label.output() == [("t1", 50.0, "high"), ("t2", 10.0, "none")]
