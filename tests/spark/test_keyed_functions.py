"""The ported examples on Spark against the harness: KeyedProcessFunction (inactivity alert,
event- and processing-time timers), KeyedCoProcessFunction (enrichment from a keyed reference
stream, typed keyed state), the colour/shape function with typed values and a lazily created
MapState, the dead letters of a bad rule and a bad item, a co-function's dead letters; file
streams, one query, then a restart from its checkpoint with more files. And the multi-model
chain (two broadcast steps in one query)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from examples import inactivity_alert, keyed_enrichment, model_chain, shapes_typed
from sparkcast import KeyedCoProcessFunction
from sparkcast.api.row import Row
from sparkcast.spark import Stream
from sparkcast.testing import (
    BroadcastHarness,
    KeyedBroadcastHarness,
    KeyedCoProcessHarness,
    KeyedProcessHarness,
)
from tests.spark.differential import read_stream, with_watermark, write_batch_file

pytestmark = pytest.mark.spark


class FailOnReference(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield (value["k"],)

    def process_element2(self, value, ctx):
        if value["k"] == "bad":
            raise ValueError("bad reference row")
        yield (value["k"].upper(),)


@dataclass
class Case:
    """One program: its inputs per micro-batch, ``(rows of input 1, rows of input 2)``."""

    name: str
    schema1: str
    schema2: str
    output_schema: str
    batches: list[tuple[list[dict], list[dict]]]
    options: dict[str, Any] = field(default_factory=dict)


ALERTS = Case(
    "alerts", "user string, ts long", "", inactivity_alert.OUTPUT_SCHEMA,
    [([{"user": "a", "ts": 100}, {"user": "b", "ts": 200}], []),
     ([{"user": "a", "ts": 1_500}, {"user": "c", "ts": 1_600}], []),
     ([{"user": "b", "ts": 4_000}, {"user": "c", "ts": 4_100}], []),
     ([{"user": "a", "ts": 7_000}], [])],
    {"event_time": "ts"})
ENRICH = Case(
    "enrich", "order_id string, product_id string, qty long, ts long",
    "product_id string, name string, price double, ts long", keyed_enrichment.OUTPUT_SCHEMA,
    [([{"order_id": "o1", "product_id": "p1", "qty": 2, "ts": 1}],
      [{"product_id": "p2", "name": "ink", "price": 4.0, "ts": 2}]),
     ([{"order_id": "o2", "product_id": "p2", "qty": 1, "ts": 3}],
      [{"product_id": "p1", "name": "pen", "price": 1.5, "ts": 4}]),
     ([{"order_id": "o3", "product_id": "p1", "qty": 3, "ts": 5},
       {"order_id": "o4", "product_id": "p3", "qty": 1, "ts": 6}], []),
     ([{"order_id": "o5", "product_id": "p2", "qty": 2, "ts": 7}],
      [{"product_id": "p3", "name": "pad", "price": 2.0, "ts": 8}])])
SHAPES = Case(
    "shapes", "id long, color string, shape string, ts long",
    "name string, first string, second string, ts long", shapes_typed.OUTPUT_SCHEMA,
    [([{"id": 1, "color": "red", "shape": "square", "ts": 10}],
      [{"name": "sq-tri", "first": "square", "second": "triangle", "ts": 1}]),
     ([{"id": 2, "color": "blue", "shape": "square", "ts": 20},
       {"id": 5, "color": "red", "shape": "blob", "ts": 25}],        # a dead letter
      [{"name": "bad", "first": "hexagon", "second": "square", "ts": 21}]),  # one, not P
     ([{"id": 3, "color": "red", "shape": "triangle", "ts": 30}], []),
     ([{"id": 4, "color": "blue", "shape": "triangle", "ts": 40}],
      [{"name": "tri-sq", "first": "triangle", "second": "square", "ts": 41}])])
FAILING = Case(
    "failing", "k string, ts long", "k string, ts long", "k string",
    [([{"k": "x", "ts": 1}], [{"k": "bad", "ts": 2}]),
     ([], [{"k": "y", "ts": 3}])])
CASES = (ALERTS, ENRICH, SHAPES, FAILING)
RESTART_AFTER = 2  # batches of the first query; the rest after a restart


# --------------------------------------------------------------------------------- harness side


def _rows(schema: str, rows: list[dict]) -> list[Row]:
    names = [part.split()[0] for part in schema.split(",")]
    return [Row(**{n: r.get(n) for n in names}) for r in rows]


def harness_outputs(case: Case) -> Counter:
    if case is ALERTS:
        h: Any = KeyedProcessHarness(inactivity_alert.InactivityAlert(), lambda v: v["user"],
                                     on_error="dead_letter")
    elif case is SHAPES:
        h = KeyedBroadcastHarness(shapes_typed.MatchRules(), lambda v: v["color"],
                                  [shapes_typed.RULES], on_error="dead_letter")
    else:
        function = keyed_enrichment.EnrichOrders() if case is ENRICH else FailOnReference()
        key = "product_id" if case is ENRICH else "k"
        h = KeyedCoProcessHarness(function, lambda v: v[key], lambda v: v[key],
                                  on_error="dead_letter")
    h.open()
    seen: list[int] = []
    for index, (first, second) in enumerate(case.batches):
        watermark = (max(seen) if seen else 0) if case is ALERTS else None
        if case is ALERTS and index == RESTART_AFTER:
            h.process_micro_batch(watermark=watermark)  # the no-data batch ending query 1
        ones, twos = _rows(case.schema1, first), _rows(case.schema2, second) if second else []
        if case is SHAPES:
            h.process_micro_batch(ones, twos, main_timestamps=[r["ts"] for r in first],
                                  broadcast_timestamps=[None] * len(twos))
        elif case is ALERTS:
            h.process_micro_batch(ones, main_timestamps=[r["ts"] for r in first],
                                  watermark=watermark)
        else:
            h.process_co_micro_batch([(r, r["ts"]) for r in ones], [(r, r["ts"]) for r in twos])
        seen += [r["ts"] for r in first]
    if case is ALERTS:
        h.process_micro_batch(watermark=max(seen))
    names = [part.split()[0] for part in case.output_schema.split(",")]
    out = Counter(json.dumps(dict(zip(names, v, strict=True))) for v in h.output())
    out.update(f"dead:{d.error}" for d in h.dead_letters())
    return out


# ----------------------------------------------------------------------------------- Spark side


def _wired(spark: Any, case: Case, base: Path, upto: int) -> Any:
    for index, (first, second) in enumerate(case.batches[:upto]):
        write_batch_file(base / case.name / "in1", index, first)
        if case.schema2:
            write_batch_file(base / case.name / "in2", index, second)
    one = read_stream(spark, case.schema1, base / case.name / "in1")
    if case is ALERTS:
        return Stream(with_watermark(one)).key_by("user").process(
            inactivity_alert.InactivityAlert(), case.output_schema, parallelism=2,
            **case.options)
    two = read_stream(spark, case.schema2, base / case.name / "in2")
    if case is SHAPES:
        return Stream(one).key_by("color").connect(
            Stream(two).broadcast(shapes_typed.RULES)).process(
            shapes_typed.MatchRules(), case.output_schema, parallelism=2)
    key = "product_id" if case is ENRICH else "k"
    function = keyed_enrichment.EnrichOrders() if case is ENRICH else FailOnReference()
    return Stream(one).key_by(key).connect(Stream(two).key_by(key)).process(
        function, case.output_schema, parallelism=2)


def spark_run(spark: Any, base: Path, upto: int) -> dict[str, Counter]:
    frames = []
    for case in CASES:
        result = _wired(spark, case, base, upto)
        fields = [F.col(f"`{f}`") for f in result.plan.output_schema.fieldNames()]
        frames.append(result.tagged.select(
            F.lit(case.name).alias("program"), "_tag",
            F.to_json(F.struct(*fields), {"ignoreNullFields": "false"}).alias("main"),
            "_payload"))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    query = (union.writeStream.format("parquet").outputMode("append")
             .option("path", str(base / "_out"))
             .option("checkpointLocation", str(base / "_checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.read.parquet(str(base / "_out")).collect()  # committed files: both runs
    out: dict[str, Counter] = {case.name: Counter() for case in CASES}
    for row in rows:
        if row["_tag"] is None:
            out[row["program"]][json.dumps(json.loads(row["main"]))] += 1
        elif row["_tag"] == "dead_letters":
            out[row["program"]][f"dead:{json.loads(row['_payload'])['error']}"] += 1
    return out


def test_keyed_functions_match_the_harness_across_a_restart(spark, tmp_path):
    first = spark_run(spark, tmp_path, RESTART_AFTER)
    both = spark_run(spark, tmp_path, len(ALERTS.batches))  # same checkpoint, more files
    for case in CASES:
        expected = harness_outputs(case)
        assert expected, case.name
        assert both[case.name] == expected, case.name
        if case is not FAILING:  # the restarted query read the state the first one wrote
            assert both[case.name] - first[case.name], case.name


def test_two_broadcast_steps_chain_in_one_query(spark):
    tx = spark.createDataFrame([("t1", 100.0), ("t2", 20.0), ("t3", 90.0)],
                               "tx string, amount double")
    models = spark.createDataFrame([(1, 0.5)], "version int, weight double")
    thresholds = spark.createDataFrame([("high", 40.0), ("mid", 10.0)],
                                       "label string, minimum double")
    scored = Stream(tx).connect(Stream(models).broadcast(model_chain.MODELS)).process(
        model_chain.Score(), model_chain.SCORED_SCHEMA)
    labelled = scored.connect(Stream(thresholds).broadcast(model_chain.THRESHOLDS)).process(
        model_chain.Label(), model_chain.LABELLED_SCHEMA)
    got = sorted(tuple(r) for r in labelled.main.collect())
    score = BroadcastHarness(model_chain.Score(), [model_chain.MODELS])
    label = BroadcastHarness(model_chain.Label(), [model_chain.THRESHOLDS])
    score.open()
    label.open()
    score.process_broadcast_element(Row(version=1, weight=0.5))
    for row in thresholds.collect():
        label.process_broadcast_element(Row(**row.asDict()))
    for row in tx.collect():
        score.process_element(Row(**row.asDict()))
    for tx_id, value in score.output():
        label.process_element(Row(tx=tx_id, score=value))
    assert got == sorted(label.output()) == [("t1", 50.0, "high"), ("t2", 10.0, "mid"),
                                             ("t3", 45.0, "high")]
