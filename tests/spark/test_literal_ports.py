"""The literal ports (tests/examples/ported) on Spark: objects kept under
``Types.PICKLED_BYTE_ARRAY()`` come back as their own class, with their methods, in Spark's
workers (the registry built there from the shipped function), on two subtasks, and across a
restart from the checkpoint; the outputs equal the harness's (issue 25). PyFlink programs as
written, declaring PyFlink's ``Types`` nested (issue 38), in one streaming query: outputs equal
the harness's and PyFlink's own expected ones, or, where elements must be the source's objects,
dead letters naming the failing attribute or operator."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from sparkcast import Types
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark import Stream
from tests.examples.ported import (
    broadcast_state_docs,
    colour_shape,
    count_with_timeout,
    fraud_rules,
    model_serving,
    nested_types,
    pyflink_broadcast_tests,
)
from tests.spark.corpus import Program
from tests.spark.differential import (
    harness_outputs,
    read_stream,
    spark_outputs,
    with_watermark,
    write_batch_file,
)

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


# ---------------------------------- PyFlink's Types as written (issue 38): the corpus on Spark

DOCS_RULES = broadcast_state_docs.MyKeyedBroadcastProcessFunction()._rule_state_desc
RULE_ROWS = "name string, first string, second string, ts long"
PYFLINK_CORPUS = (
    Program(  # the docs' Python tab: its items are Item objects, Spark's elements are Rows
        "docs", broadcast_state_docs.MyKeyedBroadcastProcessFunction, (DOCS_RULES,),
        "color string, shape string, name string, ts long", RULE_ROWS, Types.STRING(),
        (([{"name": "rect-tri", "first": "RECTANGLE", "second": "TRIANGLE", "ts": 1}],
          [{"color": "RED", "shape": "RECTANGLE", "name": "r0", "ts": 2},
           {"color": "RED", "shape": "TRIANGLE", "name": "r1", "ts": 3}]),),
        key="color"),
    Program(  # test_co_broadcast_process: its main elements are ints, Spark's are Rows
        "co_broadcast_process",
        lambda: pyflink_broadcast_tests.MyBroadcastProcessFunction(
            pyflink_broadcast_tests.mapping_desc),
        (pyflink_broadcast_tests.mapping_desc,), "f0 long, ts long", "f0 long, f1 string, ts long",
        Types.STRING(),
        (([{"f0": 0, "f1": "a", "ts": 1}, {"f0": 1, "f1": "b", "ts": 2}],
          [{"f0": v, "ts": 10 + v} for v in range(1, 6)]),)),
    Program(  # test_keyed_co_broadcast_process; the second batch moves Spark's watermark on
        "keyed_co_broadcast_process",
        lambda: pyflink_broadcast_tests.MyKeyedBroadcastProcessFunction(
            pyflink_broadcast_tests.mapping_desc),
        (pyflink_broadcast_tests.mapping_desc,), "f0 long, f1 string, ts long",
        "f0 long, f1 string, f2 string, ts long", Types.STRING(),
        (([{"f0": k, "f1": "1603708215000", "f2": s, "ts": 1603708215000}
           for k, s in [(0, "a"), (1, "b")]],
          [{"f0": v, "f1": str(1603708210000 + 1000 * v), "ts": 1603708210000 + 1000 * v}
           for v in range(1, 5)]),
         ([], [{"f0": 5, "f1": "1603708230000", "ts": 1603708230000}])),
        key="f0", timers=True),
    Program(
        "co_broadcast_side_output", pyflink_broadcast_tests.SideOutputBroadcastProcessFunction,
        (pyflink_broadcast_tests.dummy_desc,), "f0 string, f1 long, ts long",
        "f0 long, f1 string, ts long", Types.STRING(),
        (([{"f0": 3, "f1": "d", "ts": 1}, {"f0": 4, "f1": "f", "ts": 2}],
          [{"f0": s, "f1": i, "ts": 10 + i} for i, s in enumerate("abc")]),),
        side_outputs=(pyflink_broadcast_tests.tag,)),
    Program(
        "keyed_co_broadcast_side_output",
        pyflink_broadcast_tests.SideOutputKeyedBroadcastProcessFunction,
        (pyflink_broadcast_tests.dummy_desc,), "f0 string, f1 long, ts long",
        "f0 long, f1 string, ts long", Types.STRING(),
        (([{"f0": 5, "f1": "c", "ts": 1}, {"f0": 6, "f1": "d", "ts": 2}],
          [{"f0": s, "f1": i, "ts": 10 + i} for i, s in enumerate("abab")]),),
        key="f0", side_outputs=(pyflink_broadcast_tests.tag,)),
    Program(
        "nested_types", nested_types.PairShapes, (nested_types.RULES,),
        "id long, color string, shape string, ts long", RULE_ROWS, nested_types.OUTPUT_TYPE,
        (([{"name": "sq-tri", "first": "square", "second": "triangle", "ts": 1}],
          [{"id": 1, "color": "red", "shape": "square", "ts": 10},
           {"id": 2, "color": "blue", "shape": "square", "ts": 11}]),
         ([], [{"id": 3, "color": "red", "shape": "triangle", "ts": 20},
               {"id": 4, "color": "blue", "shape": "circle", "ts": 21}])),
        key="color", side_outputs=(nested_types.UNMATCHED,)),
)


def _harness_at(program: Program, parallelism: int) -> dict[str, Counter]:
    """The harness's outputs as ``parallelism`` subtasks give them: each applies every
    broadcast element and emits what ``process_broadcast_element`` yields (a broadcast dead
    letter is reported once); the main elements' outputs do not depend on which subtask."""
    outputs = harness_outputs(program)
    copies = harness_outputs(program, [(bcast, []) for bcast, _ in program.batches])
    for name, counter in copies.items():
        if name != DEAD_LETTERS.tag_id:
            for _ in range(parallelism - 1):
                outputs[name] += counter
    return outputs


def _values(counter: Counter) -> list:
    """A one-column output's values (a side output's payload is the bare value)."""
    found = [json.loads(text) for text in counter.elements()]
    return sorted(v["value"] if isinstance(v, dict) else v for v in found)


def test_pyflink_programs_as_written_give_the_harness_outputs_on_spark(spark, tmp_path):
    runs = spark_outputs(spark, list(PYFLINK_CORPUS), 2, stream_dir=tmp_path)
    for program in PYFLINK_CORPUS:
        assert runs[program.name] == _harness_at(program, 2), program.name
    tests = pyflink_broadcast_tests
    for name, (main, side) in [
            ("co_broadcast_side_output", tests.CO_BROADCAST_SIDE_OUTPUT_EXPECTED),
            ("keyed_co_broadcast_side_output", tests.KEYED_CO_BROADCAST_SIDE_OUTPUT_EXPECTED)]:
        assert _values(runs[name]["main"]) == main, name  # PyFlink's own expected outputs
        assert _values(runs[name]["side"]) == side, name
    # PyFlink's outputs, and the match of the element added to move the watermark on
    assert _values(runs["keyed_co_broadcast_process"]["main"]) == sorted(
        [*tests.KEYED_CO_BROADCAST_PROCESS_EXPECTED, "value: b5, ts: 1603708230000"])
    [match] = runs["nested_types"]["main"].elements()
    assert json.loads(match) == {"rule": "sq-tri", "color": "red", "pairs": [
        {"first": 1, "second": 3}], "shapes_seen": ["square", "triangle"],
        "counts": {"square": 1, "triangle": 1}}  # a map column: it failed the batch before
    assert [json.loads(u) for u in runs["nested_types"]["unmatched"]] == [
        {"id": 4, "color": "blue", "shape": "circle"}]
    # where the program cannot run unchanged: its elements are Rows, not the source's objects
    docs_letters = [json.loads(d) for d in runs["docs"][DEAD_LETTERS.tag_id].elements()]
    assert len(docs_letters) == 2 and all(
        d["callback"] == "process_element" and "has no attribute 'get_shape'" in d["error"]
        for d in docs_letters)
    int_letters = [json.loads(d) for d in
                   runs["co_broadcast_process"][DEAD_LETTERS.tag_id].elements()]
    assert len(int_letters) == 5 and all("unsupported operand type(s) for %" in d["error"]
                                         for d in int_letters)
    assert _values(runs["co_broadcast_process"]["main"]) == ["0a", "0a", "1b", "1b"]
