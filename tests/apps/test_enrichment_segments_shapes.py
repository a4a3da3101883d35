"""Enrichment, segments and shapes through the harness."""

from sparkcast.apps import get_app
from sparkcast.apps.enrichment import UNKNOWN, product_row
from sparkcast.apps.enrichment import generate as generate_orders
from sparkcast.apps.segments import REJECTED, refresh_rows
from sparkcast.apps.segments import generate as generate_visits
from sparkcast.apps.shapes import MatchShapes, rule_row
from sparkcast.apps.shapes import generate as generate_items

from .conftest import harness_for

ENRICHMENT, SEGMENTS, SHAPES = get_app("enrichment"), get_app("segments"), get_app("shapes")


def order(event_id, product, quantity=2):
    return {"event_id": event_id, "user_id": "u1", "product_id": product, "quantity": quantity,
            "ts": 0}


def test_events_are_enriched_and_unknown_products_go_aside():
    h = harness_for(ENRICHMENT)
    h.process_micro_batch(broadcast=[product_row(0, 1, 10.0), product_row(1, 2, 2.5)],
                          main=[order("o1", "sku001"), order("o2", "sku009"),
                                order("o3", "sku002", 4)])
    assert [(r["event_id"], r["name"], r["category"], r["price"], r["total"])
            for r in h.output()] == [("o1", "kettle 1", "kitchen", 10.0, 20.0),
                                     ("o3", "novel 2", "books", 2.5, 10.0)]
    assert h.side_output(UNKNOWN) == [{"event_id": "o2", "product_id": "sku009",
                                       "catalog_version": 2, "subtask": 0}]
    h.process_micro_batch(broadcast=[product_row(5, 9, 1.0), product_row(6, 1, 11.0),
                                     product_row(7, 2, 0.0, op="delete")],
                          main=[order("o4", "sku009"), order("o5", "sku001"),
                                order("o6", "sku002")])
    assert [(r["event_id"], r["price"], r["catalog_version"]) for r in h.output()[2:]] == [
        ("o4", 1.0, 5), ("o5", 11.0, 5)]
    assert h.side_output(UNKNOWN)[-1]["event_id"] == "o6"


def test_generated_orders_are_all_accounted_for(run_app):
    h = run_app(ENRICHMENT, generate_orders(7, files=4, per_file=50))
    ids = [r["event_id"] for r in h.output()] + [r["event_id"] for r in h.side_output(UNKNOWN)]
    assert sorted(ids) == sorted(f"ord{i:06d}" for i in range(200))
    assert h.side_output(UNKNOWN)


def visit(event_id, user):
    return {"event_id": event_id, "user_id": user, "amount": 10.0, "ts": 0}


def test_segments_default_to_new_and_a_refresh_replaces_the_previous():
    h = harness_for(SEGMENTS)
    h.process_micro_batch(broadcast=list(refresh_rows(1, 0, {"a": "VIP", "b": "CHURNING"})),
                          main=[visit("v1", "a"), visit("v2", "b"), visit("v3", "c")])
    assert [(r["segment"], r["discount_pct"], r["refresh_id"]) for r in h.output()] == [
        ("VIP", 15.0, 1), ("CHURNING", 20.0, 1), ("NEW", 10.0, 1)]
    h.process_micro_batch(
        broadcast=list(refresh_rows(2, 10, {"b": "REGULAR"}) + refresh_rows(1, 20, {"c": "VIP"}))
        + [{"seq": 30, "refresh_id": 2, "user_id": "d", "segment": "GOLD"}],
        main=[visit("v4", "a"), visit("v5", "b"), visit("v6", "c")])
    assert [r["segment"] for r in h.output()[3:]] == ["NEW", "REGULAR", "NEW"]
    reasons = sorted(r["reason"] for r in h.side_output(REJECTED))
    assert reasons == ["refresh 1 is older than 2", "unknown segment"]


def test_generated_visits_switch_refresh_and_lose_nothing(run_app):
    h = run_app(SEGMENTS, generate_visits(7, files=4, per_file=50))
    assert len(h.output()) == 200
    assert {r["refresh_id"] for r in h.output()} == {1, 2}
    assert {r["segment"] for r in h.output()} == {"VIP", "REGULAR", "NEW", "CHURNING"}


def item(item_id, color, shape):
    return {"item_id": item_id, "color": color, "shape": shape, "ts": 0}


def test_shapes_match_per_color_as_in_flinks_documentation():
    h = harness_for(SHAPES)
    h.process_broadcast_element(rule_row(0, "rect-tri", "rectangle", "triangle"))
    for it in [item("1", "red", "rectangle"), item("2", "blue", "rectangle"),
               item("3", "red", "rectangle"), item("4", "red", "triangle"),
               item("5", "red", "triangle"), item("6", "blue", "triangle")]:
        h.process_element(it)
    assert [o[:4] for o in h.output()] == [("rect-tri", "red", "1", "4"),
                                           ("rect-tri", "red", "3", "4"),
                                           ("rect-tri", "blue", "2", "6")]
    assert h.keyed_state(MatchShapes.PENDING, "red") is None


def test_removing_a_rule_drops_its_pending_items():
    h = harness_for(SHAPES)
    h.process_broadcast_element(rule_row(0, "rect-tri", "rectangle", "triangle"))
    h.process_element(item("1", "red", "rectangle"))
    assert h.keyed_state(MatchShapes.PENDING, "red") == {"rect-tri": ["1"]}
    h.process_broadcast_element(rule_row(1, "rect-tri", None, None, op="delete"))
    h.process_broadcast_element(rule_row(2, "rect-tri", "rectangle", "triangle"))
    h.process_element(item("2", "red", "triangle"))
    assert h.output() == []


def test_generated_items_match_under_both_rule_sets(run_app):
    h = run_app(SHAPES, generate_items(7, files=4, per_file=60))
    rules = {o[0]: o[4] for o in h.output()}
    assert set(rules) == {"rectangle-triangle", "circle-square"}
    assert rules["circle-square"] == 3
