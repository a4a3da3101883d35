"""The literal ports (tests/examples/ported) on Spark: objects kept under
``Types.PICKLED_BYTE_ARRAY()`` come back as their own class, with their methods, in Spark's
workers (the registry built there from the shipped function), on two subtasks, and across a
restart from the checkpoint; the outputs equal the harness's (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from sparkcast.spark import Stream
from tests.examples.ported import colour_shape, count_with_timeout, fraud_rules, model_serving
from tests.spark.differential import read_stream, with_watermark, write_batch_file

pytestmark = pytest.mark.spark


def test_model_serving_and_colour_shape_on_spark(spark):
    models = spark.createDataFrame([(1, [1.0, 1.0], 0.0), (2, [2.0, 0.0], 0.5)],
                                   "version int, weights array<double>, bias double")
    requests = spark.createDataFrame([("a", [1.0, 2.0], None), ("b", [1.0, 2.0], 1),
                                      ("c", [3.0], 7)],
                                     "request_id string, features array<double>, version int")
    served = Stream(requests).connect(
        Stream(models).broadcast(model_serving.model_state_descriptor)).process(
        model_serving.ModelServingFunction(), "request_id string, score double, version int",
        parallelism=2, side_outputs=[model_serving.unprocessed_tag])
    assert sorted(tuple(r) for r in served.main.collect()) == [("a", 2.5, 2), ("b", 3.0, 1)]
    # a UserEvent object yielded to the ROW_NAMED-typed side output, mapped by field name
    assert [tuple(r) for r in served.side_output(model_serving.unprocessed_tag).collect()] == [
        ("c", [3.0], 7)]
    assert served.dead_letters.count() == 0

    rules = spark.createDataFrame([("sq-tri", "square", "triangle", 0)],
                                  "name string, first string, second string, ts long")
    items = spark.createDataFrame([(1, "red", "square", 1), (2, "blue", "square", 2),
                                   (3, "red", "square", 3), (4, "red", "triangle", 4)],
                                  "id int, color string, shape string, ts long")
    matched = Stream(items).key_by("color").connect(  # a batch frame's order is event time's
        Stream(rules).broadcast(colour_shape.rule_state_descriptor)).process(
        colour_shape.MatchFunction(), "match string", parallelism=2, event_time="ts")
    assert sorted(r[0] for r in matched.main.collect()) == [
        "MATCH: square#1 - triangle#4", "MATCH: square#3 - triangle#4"]


FRAUD_IN = [[{"account": "a", "tx_id": "t1", "amount": 10.0},
             {"account": "b", "tx_id": "t2", "amount": 20.0}],
            [{"account": "a", "tx_id": "t3", "amount": 500.0}],
            [{"account": "a", "tx_id": "t4", "amount": 5.0},
             {"account": "b", "tx_id": "t5", "amount": 1.0}],
            [{"account": "b", "tx_id": "t6", "amount": 1.0}]]
RULES_IN = [[{"rule_id": "big", "field": "amount", "operator": ">", "threshold": 100.0},
             {"rule_id": "many", "field": "count", "operator": ">", "threshold": 2.0}],
            [], [], []]
COUNTS_IN = [[{"f0": "a", "f1": "a", "ts": 1_000}, {"f0": "b", "f1": "b", "ts": 2_000}],
             [{"f0": "a", "f1": "a", "ts": 30_000}],
             [{"f0": "b", "f1": "b", "ts": 70_000}],
             [{"f0": "z", "f1": "z", "ts": 200_000}]]


def _run(spark: Any, base: Path, upto: int) -> dict[str, list]:
    for index in range(upto):
        write_batch_file(base / "tx", index, FRAUD_IN[index])
        write_batch_file(base / "rules", index, RULES_IN[index])
        write_batch_file(base / "counts", index, COUNTS_IN[index])
    tx = read_stream(spark, "account string, tx_id string, amount double", base / "tx")
    rules = read_stream(spark, "rule_id string, field string, operator string, "
                        "threshold double", base / "rules")
    counts = with_watermark(read_stream(spark, "f0 string, f1 string, ts long", base / "counts"))
    fraud = Stream(tx).key_by("account").connect(
        Stream(rules).broadcast(fraud_rules.rules_descriptor)).process(
        fraud_rules.FraudDetector(), "account string, tx_id string, rule string", parallelism=2,
        side_outputs=[fraud_rules.review_queue])
    counted = Stream(counts).key_by("f0").process(
        count_with_timeout.CountWithTimeoutRowFunction(), "key string, count long",
        parallelism=2, event_time="ts")
    out = {}
    for name, result in (("fraud", fraud), ("counts", counted)):
        fields = [F.col(f"`{f}`") for f in result.plan.output_schema.fieldNames()]
        frame = result.tagged.select("_tag", F.to_json(F.struct(*fields)).alias("main"),
                                     "_payload")
        query = (frame.writeStream.format("parquet").outputMode("append")
                 .option("path", str(base / name / "out"))
                 .option("checkpointLocation", str(base / name / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        rows = spark.read.parquet(str(base / name / "out")).collect()
        assert not [r["_payload"] for r in rows if r["_tag"] == "dead_letters"], name
        out[name] = sorted(tuple(json.loads(r["main"]).values()) for r in rows
                           if r["_tag"] is None)
        out[f"{name} review"] = sorted(tuple(json.loads(r["_payload"]).values()) for r in rows
                                       if r["_tag"] == "review")
    return out


def test_objects_and_rows_in_keyed_state_survive_a_restart_on_two_subtasks(spark, tmp_path):
    first = _run(spark, tmp_path, 2)
    assert first["fraud"] == [("a", "t3", "big")]
    both = _run(spark, tmp_path, 4)  # the same checkpoints, more files
    # account a's AccountStats (a plain object) was written before the restart, read after
    assert both["fraud"] == [("a", "t3", "big"), ("a", "t4", "many"), ("b", "t6", "many")]
    # ReviewItem objects yielded to the typed review queue, written as its columns
    assert both["fraud review"] == [("a", "t3", "big", 500.0), ("a", "t4", "many", 5.0),
                                    ("b", "t6", "many", 1.0)]
    # the Row in state (current[1] += 1) counted across the restart; its timers fired
    assert both["counts"] == [("a", 2), ("b", 2)]
