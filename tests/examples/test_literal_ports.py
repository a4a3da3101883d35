"""The six literal ports and the Flink docs' count-with-timeout example (tests/examples/ported)
on the harness, over both state backends (the dict one, and Spark's over stand-in state, which
encodes and decodes every value): objects kept under ``Types.PICKLED_BYTE_ARRAY()`` come back as
their own class with their methods (issue 25); and PyFlink programs as written with PyFlink's
``Types`` nested in state and outputs (issue 38): the Flink docs' broadcast-state Python tab, the
broadcast functions of PyFlink's tests against their own expected outputs, and rule/items over
``Row``s. tests/spark/test_literal_ports.py runs them on Spark."""

from __future__ import annotations

import pytest

from sparkcast import Row, Types, ValueStateDescriptor
from sparkcast.api.row import TupleRow
from sparkcast.errors import ReadOnlyStateError
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness, KeyedProcessHarness
from tests.examples.ported import (
    broadcast_state_docs,
    colour_shape,
    count_with_timeout,
    enrichment,
    feature_flags,
    fraud_rules,
    model_serving,
    multi_model,
    nested_types,
    pyflink_broadcast_tests,
)


def rows(**columns):
    """Input rows as Spark hands them over (read-only, field access by attribute)."""
    names = tuple(columns)
    return [TupleRow(**dict(zip(names, values, strict=True)))
            for values in zip(*columns.values(), strict=True)]


def test_colour_shape_items_and_rules_keep_their_classes(state_backend):
    h = KeyedBroadcastHarness(colour_shape.MatchFunction(), lambda v: v.color,
                              [colour_shape.rule_state_descriptor], state_backend=state_backend)
    h.open()
    for rule in rows(name=["sq-tri"], first=["square"], second=["triangle"]):
        h.process_broadcast_element(rule)
    for item in rows(id=[1, 2, 3, 4], color=["red", "blue", "red", "red"],
                     shape=["square", "square", "square", "triangle"]):
        h.process_element(item)
    assert h.output() == ["MATCH: square#1 - triangle#4", "MATCH: square#3 - triangle#4"]
    [blue] = h.keyed_state(colour_shape.MatchFunction().map_state_desc, "blue")["sq-tri"]
    assert isinstance(blue, colour_shape.Item) and blue.get_shape() is colour_shape.Shape.SQUARE
    rule = h.broadcast_state(colour_shape.rule_state_descriptor)["sq-tri"]
    assert isinstance(rule, colour_shape.Rule) and rule.second is colour_shape.Shape.TRIANGLE


def test_model_serving_predicts_with_the_model_and_the_version_asked_for(state_backend):
    h = BroadcastHarness(model_serving.ModelServingFunction(),
                         [model_serving.model_state_descriptor], state_backend=state_backend)
    h.open()
    for model in rows(version=[1, 2], weights=[[1.0, 1.0], [2.0, 0.0]], bias=[0.0, 0.5]):
        h.process_broadcast_element(model)
    for request in rows(request_id=["a", "b", "c"], features=[[1.0, 2.0], [1.0, 2.0], [3.0]],
                        version=[None, 1, 7]):
        h.process_element(request)
    assert h.output() == [("a", 2.5, 2), ("b", 3.0, 1)]
    [unprocessed] = h.side_output(model_serving.unprocessed_tag)  # an object, typed by ROW_NAMED
    assert isinstance(unprocessed, model_serving.UserEvent) and unprocessed.version == 7
    assert h.dead_letters() == []
    model = h.broadcast_state(model_serving.model_state_descriptor)["current"]
    assert isinstance(model, model_serving.MLModel) and model.predict([1.0, 1.0]) == 2.5


def test_multi_model_keys_by_enum_and_models_of_two_classes_one_slotted(state_backend):
    h = BroadcastHarness(multi_model.MultiModelFunction(), [multi_model.models_descriptor],
                         state_backend=state_backend)
    h.open()
    for model in rows(kind=["linear", "threshold"], name=["lin", "thr"],
                      params=[[0.5, 0.5], [3.0]]):
        h.process_broadcast_element(model)
    for request in rows(request_id=["a", "b"], kind=["linear", "threshold"],
                        features=[[2.0, 4.0], [1.0, 5.0]]):
        h.process_element(request)
    assert h.output() == [("a", "lin", 3.0), ("b", "thr", 1.0)]
    models = h.broadcast_state(multi_model.models_descriptor)
    assert isinstance(models[multi_model.ModelType.THRESHOLD], multi_model.ThresholdModel)


def test_feature_flags_with_nested_configuration(state_backend):
    h = BroadcastHarness(feature_flags.FeatureFlagFunction(), [feature_flags.flags_descriptor],
                         state_backend=state_backend)
    h.open()
    for flag in rows(name=["dark", "beta", "off"], rollout=["ALL", "PERCENT", "OFF"],
                     percent=[0, 100, 0], regions=[["eu"], [], []]):
        h.process_broadcast_element(flag)
    for request in rows(user_id=["u1", "u2"], region=["eu", "us"]):
        h.process_element(request)
    assert h.output() == [("u1", "beta,dark"), ("u2", "beta")]
    flag = h.broadcast_state(feature_flags.flags_descriptor)["dark"]
    assert flag.config.allowed_regions == {"eu"} and flag.rollout is feature_flags.Rollout.ALL


def test_fraud_rules_and_account_stats_objects_in_keyed_state(state_backend):
    h = KeyedBroadcastHarness(fraud_rules.FraudDetector(), lambda v: v.account,
                              [fraud_rules.rules_descriptor], state_backend=state_backend)
    h.open()
    for rule in rows(rule_id=["big", "many"], field=["amount", "count"],
                     operator=[">", ">"], threshold=[100.0, 2]):
        h.process_broadcast_element(rule)
    for tx in rows(account=["a", "a", "b", "a"], tx_id=["t1", "t2", "t3", "t4"],
                   amount=[10.0, 500.0, 20.0, 5.0]):
        h.process_element(tx)
    h.process_broadcast_element(TupleRow(rule_id="big", field=None, operator=None,
                                         threshold=None))
    h.process_element(TupleRow(account="b", tx_id="t5", amount=900.0))
    assert h.output() == [("a", "t2", "big"), ("a", "t4", "many")]
    review = h.side_output(fraud_rules.review_queue)  # ReviewItem objects, typed by ROW_NAMED
    assert [(r.tx_id, r.rule_id, r.amount) for r in review] == [("t2", "big", 500.0),
                                                               ("t4", "many", 5.0)]
    assert h.dead_letters() == []
    stats = h.keyed_state(ValueStateDescriptor("stats", Types.PICKLED_BYTE_ARRAY()), "a")
    assert isinstance(stats, fraud_rules.AccountStats) and stats.average == 515.0 / 3


def test_enrichment_and_segmentation_with_products_and_user_segments(state_backend):
    h = BroadcastHarness(enrichment.EnrichFunction(), [enrichment.products_descriptor,
                                                       enrichment.segments_descriptor],
                         state_backend=state_backend)
    h.open()
    for value in rows(kind=["product", "segment"], id=["p1", "u1"], name=["pen", "vip"],
                      price=[10.0, None], tier=[None, "GOLD"]):
        h.process_broadcast_element(value)
    for click in rows(user_id=["u1", "u2", "u2"], product_id=["p1", "p1", "p9"]):
        h.process_element(click)
    assert h.output() == [("u1", "pen", "vip", 9.0), ("u2", "pen", "unknown", 10.0),
                          ("u2", None, "unknown", None)]


def test_objects_are_also_accepted_as_broadcast_elements_and_are_read_only_on_the_main_side():
    class Mutating(model_serving.ModelServingFunction):
        def process_element(self, value, ctx):
            model = ctx.get_broadcast_state(model_serving.model_state_descriptor).get("current")
            model.version = 99  # Flink's rule: the main side must not modify broadcast state

    h = BroadcastHarness(Mutating(), [model_serving.model_state_descriptor], on_error="fail")
    h.open()
    h.process_broadcast_element(Row(version=3, weights=[1.0], bias=0.0))
    with pytest.raises(ReadOnlyStateError, match="must not modify broadcast state"):
        h.process_element(Row(request_id="a", features=[1.0], version=None))


@pytest.mark.parametrize("function", [count_with_timeout.CountWithTimeoutFunction,
                                      count_with_timeout.CountWithTimeoutRowFunction])
def test_count_with_timeout_in_its_java_and_python_forms(function, state_backend):
    h = KeyedProcessHarness(function(), lambda v: v[0], state_backend=state_backend)
    h.open()
    for key, ts in [("a", 1_000), ("b", 2_000), ("a", 30_000), ("b", 70_000)]:
        h.process_element(TupleRow(f0=key, f1=key), timestamp=ts)
    h.process_watermark(100_000)  # a: its 90_000 timer emits; b's first timer is outdated
    assert h.output() == [("a", 2)]
    h.process_watermark(130_000)
    assert h.output() == [("a", 2), ("b", 2)]


# ------------------------------------------- PyFlink's Types as written (issue 38): the harness


def _items(*specs):
    """The docs example's items, as PyFlink's source would give them (objects)."""
    return [broadcast_state_docs.Item(broadcast_state_docs.Color[c], broadcast_state_docs.Shape[s],
                                      f"{c.lower()}-{s.lower()}-{i}")
            for i, (c, s) in enumerate(specs)]


def test_the_broadcast_state_docs_program_keeps_a_list_of_items_per_rule(state_backend):
    docs = broadcast_state_docs
    function = docs.MyKeyedBroadcastProcessFunction()
    # broadcast with the function's descriptor, as the docs' Java tab does (see the next test)
    h = KeyedBroadcastHarness(function, lambda item: item.get_color(),
                              [function._rule_state_desc], state_backend=state_backend,
                              output_schema=Types.STRING())
    h.open()
    h.process_broadcast_element(docs.Rule("rect-tri", docs.Shape.RECTANGLE, docs.Shape.TRIANGLE))
    items = _items(("RED", "RECTANGLE"), ("BLUE", "RECTANGLE"), ("RED", "RECTANGLE"),
                   ("BLUE", "CIRCLE"))
    for item in items:
        h.process_element(item)
    [blue] = h.keyed_state(function._map_state_desc, docs.Color.BLUE)["rect-tri"]
    assert isinstance(blue, docs.Item) and blue.get_shape() is docs.Shape.RECTANGLE
    for item in _items(("RED", "TRIANGLE"), ("BLUE", "TRIANGLE")):
        h.process_element(item)
    assert h.output() == ["MATCH: red-rectangle-0 - red-triangle-0",
                          "MATCH: red-rectangle-2 - red-triangle-0",
                          "MATCH: blue-rectangle-1 - blue-triangle-1"]
    assert h.keyed_state(function._map_state_desc, docs.Color.RED) is None  # removed when empty
    assert h.dead_letters() == []


def test_the_docs_python_tab_broadcasts_under_another_name_than_it_reads():
    # the Python tab broadcasts "RuleBroadcastState" and reads "RulesBroadcastState": Flink
    # refuses an unknown broadcast state too; here the element is a dead letter naming both
    docs = broadcast_state_docs
    h = KeyedBroadcastHarness(docs.MyKeyedBroadcastProcessFunction(), lambda i: i.get_color(),
                              [docs.rule_state_descriptor], output_schema=Types.STRING())
    h.open()
    h.process_broadcast_element(docs.Rule("r", docs.Shape.RECTANGLE, docs.Shape.TRIANGLE))
    [letter] = h.dead_letters()
    assert letter.callback == "process_broadcast_element"
    assert "'RulesBroadcastState') is not a broadcast state" in letter.error
    assert "['RuleBroadcastState'] (pass it to broadcast(...))" in letter.error


def _two_subtasks(make, descriptors, main, broadcast, keyed=None, **options):
    """PyFlink's tests run at parallelism 2: every subtask applies every broadcast element (and
    emits what ``process_broadcast_element`` yields); the main elements go to one of them.
    ``main`` and ``broadcast`` are ``(value, timestamp)`` pairs; main elements first, so the
    functions' caches of early elements are used, as when they arrive before the rules."""
    harnesses = []
    for index in (0, 1):
        if keyed is None:
            h = BroadcastHarness(make(), descriptors, parallelism=2, subtask_index=index,
                                 on_error="fail", **options)
        else:
            h = KeyedBroadcastHarness(make(), keyed, descriptors, parallelism=2,
                                      subtask_index=index, on_error="fail", **options)
        h.open()
        for value, ts in main if index == 0 else []:
            h.process_element(value, timestamp=ts)
        for value, ts in broadcast:
            h.process_broadcast_element(value, timestamp=ts)
        h.process_watermark(2**62)  # the end of the bounded input: every timer fires
        harnesses.append(h)
    return harnesses


def test_pyflinks_co_broadcast_process_with_int_elements_and_a_cache():
    tests = pyflink_broadcast_tests
    harnesses = _two_subtasks(lambda: tests.MyBroadcastProcessFunction(tests.mapping_desc),
                              [tests.mapping_desc], [(v, None) for v in [1, 2, 3, 4, 5]],
                              [((0, "a"), None), ((1, "b"), None)],
                              output_schema=Types.STRING())
    assert sorted(v for h in harnesses for v in h.output()) == (
        tests.CO_BROADCAST_PROCESS_EXPECTED)
    assert harnesses[1].broadcast_state(tests.mapping_desc) == {0: "a", 1: "b"}


def test_pyflinks_keyed_co_broadcast_process_with_timers():
    tests = pyflink_broadcast_tests
    main = [(Row(v, str(ts)), ts) for v, ts in [(1, 1603708211000), (2, 1603708212000),
                                                (3, 1603708213000), (4, 1603708214000)]]
    broadcast = [(Row(k, "1603708215000", s), 1603708215000) for k, s in [(0, "a"), (1, "b")]]
    harnesses = _two_subtasks(
        lambda: tests.MyKeyedBroadcastProcessFunction(tests.mapping_desc), [tests.mapping_desc],
        main, broadcast, keyed=lambda t: t[0], output_schema=Types.STRING())
    assert sorted(v for h in harnesses for v in h.output()) == (
        tests.KEYED_CO_BROADCAST_PROCESS_EXPECTED)


@pytest.mark.parametrize(("make", "keyed", "expected"), [
    (pyflink_broadcast_tests.SideOutputBroadcastProcessFunction, None,
     pyflink_broadcast_tests.CO_BROADCAST_SIDE_OUTPUT_EXPECTED),
    (pyflink_broadcast_tests.SideOutputKeyedBroadcastProcessFunction, lambda e: e[0],
     pyflink_broadcast_tests.KEYED_CO_BROADCAST_SIDE_OUTPUT_EXPECTED),
], ids=["co_broadcast_side_output", "keyed_co_broadcast_side_output"])
def test_pyflinks_broadcast_side_outputs(make, keyed, expected):
    tests = pyflink_broadcast_tests
    keyed_test = keyed is not None
    main = [("a", 0), ("b", 1), ("a", 2), ("b", 3)] if keyed_test else [("a", 0), ("b", 1),
                                                                        ("c", 2)]
    broadcast = [(5, "c"), (6, "d")] if keyed_test else [(3, "d"), (4, "f")]
    harnesses = _two_subtasks(make, [tests.dummy_desc], [(Row(*v), None) for v in main],
                              [(Row(*v), None) for v in broadcast], keyed=keyed,
                              output_schema=Types.STRING(), side_outputs=[tests.tag])
    main_expected, side_expected = expected
    assert sorted(v for h in harnesses for v in h.output()) == main_expected
    assert sorted(v for h in harnesses for v in h.side_output(tests.tag)) == side_expected


def test_nested_pyflink_types_in_state_and_outputs(state_backend):
    program = nested_types
    h = KeyedBroadcastHarness(program.PairShapes(), lambda row: row["color"], [program.RULES],
                              state_backend=state_backend, output_schema=program.OUTPUT_TYPE,
                              side_outputs=[program.UNMATCHED])
    h.open()
    for rule in rows(name=["sq-tri"], first=["square"], second=["triangle"]):
        h.process_broadcast_element(rule)
    for item in rows(id=[1, 2, 3, 4, 5], color=["red", "blue", "red", "red", "blue"],
                     shape=["square", "square", "square", "triangle", "circle"]):
        h.process_element(item)
    [match] = h.output()
    assert (match.rule, match.color, match.shapes_seen) == ("sq-tri", "red",
                                                             ["square", "triangle"])
    assert [(p.first, p.second) for p in match.pairs] == [(1, 4), (3, 4)]
    assert match.counts == {"square": 2, "triangle": 1}
    assert [tuple(r) for r in h.side_output(program.UNMATCHED)] == [("blue", 5, "circle")]
    assert h.dead_letters() == []
    [waiting] = h.keyed_state(program.WAITING, "blue")["sq-tri"]
    assert waiting == program.Waiting(2, "square")  # a dataclass under LIST(PICKLED_BYTE_ARRAY)
    assert [(r.rule, r.first, r.second) for r in h.keyed_state(program.PAIRS, "red")] == [
        ("sq-tri", 1, 4), ("sq-tri", 3, 4)]
    assert h.keyed_state(program.SEEN, "blue") == {"square": 1, "circle": 1}
    assert h.broadcast_state(program.RULES) == {"sq-tri": {"first": "square",
                                                           "second": "triangle"}}
