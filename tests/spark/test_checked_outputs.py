"""Every output checked on Spark, as in the harness: side outputs against their schema, unknown
tags and reserved field names refused, NaN/inf/-0.0 kept end to end, dead letters counted in
the query's progress and logged once per micro-batch whatever the user consumes."""

from __future__ import annotations

import json
import logging
import math
import time

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
)
from sparkcast.errors import PipelineError
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

FACTORS = MapStateDescriptor("factors", str, float)
FLOATS = OutputTag("floats", "id long, x double")
UNDECLARED = OutputTag("undeclared")
SPECIAL = {1: math.nan, 2: math.inf, 3: -math.inf, 4: -0.0, 5: 1.5}


class Special(KeyedBroadcastProcessFunction):
    """Keyed, so the stateful operator (transformWithStateInPandas) carries the main rows."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value, ctx):
        x = SPECIAL.get(value["id"], 0.0)
        yield value["id"], x
        yield FLOATS, (value["id"], x)
        if value["id"] == 5:
            yield FLOATS, (value["id"], "not a double")   # wrong type: a dead letter
            yield FLOATS, (value["id"],)                  # wrong width: a dead letter
            yield UNDECLARED, value["id"]                 # no schema anywhere: a dead letter


def _inputs(spark, base, rows):
    for index, chunk in enumerate(rows):
        write_batch_file(base / "events", index, chunk)
    write_batch_file(base / "rules", 0, [{"name": "x", "factor": 1.0}])
    events = read_stream(spark, "id long, user string", base / "events")
    rules = read_stream(spark, "name string, factor double", base / "rules")
    return events, rules


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                   math.copysign(1, b))


def test_nan_infinities_and_negative_zero_read_back_exactly_main_and_side(spark, tmp_path):
    events, rules = _inputs(spark, tmp_path, [[{"id": i, "user": f"u{i}"} for i in (1, 2, 3)],
                                              [{"id": i, "user": f"u{i}"} for i in (4, 5)]])
    result = (Stream(events).key_by("user").connect(Stream(rules).broadcast(FACTORS))
              .process(Special(), "id long, x double", parallelism=2, side_outputs=[FLOATS]))
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "ckpt"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    out = str(tmp_path / "out")
    for name in ("main", FLOATS):
        got = {r["id"]: r["x"] for r in read_output(spark, out, name).collect()}
        assert sorted(got) == [1, 2, 3, 4, 5]
        assert all(_same(got[i], SPECIAL[i]) for i in got), (name, got)
    letters = read_output(spark, out, "dead_letters").collect()
    assert sorted(r["callback"] for r in letters) == ["output"] * 3
    errors = " | ".join(r["error"] for r in letters)
    assert "side output 'floats'" in errors and "side_outputs=[OutputTag('undeclared'" in errors
    assert all(r["timestamp"] is None or isinstance(r["timestamp"], int) for r in letters)
    users = {f"u{i}" for i in range(1, 6)}  # an output's dead letter names its element's key
    assert all(json.loads(r["key"]) in users for r in letters), [r["key"] for r in letters]
    with pytest.raises(PipelineError, match="cannot type output 'undeclared'"):
        read_output(spark, out, "undeclared")


def test_the_harness_checks_outputs_with_the_same_code(spark):
    harness = KeyedBroadcastHarness(Special(), lambda v: v["user"], [FACTORS],
                                    output_schema="id long, x double", side_outputs=[FLOATS])
    harness.open()
    harness.process_element({"id": 5, "user": "u"})
    assert harness.output() == [(5, 1.5)] and harness.side_output(FLOATS) == [(5, 1.5)]
    assert [letter.callback for letter in harness.dead_letters()] == ["output"] * 3
    assert [letter.key for letter in harness.dead_letters()] == ["u"] * 3


class Raising(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value, ctx):
        if value["id"] % 2:
            raise ValueError(f"odd id {value['id']}")
        yield value["id"], float(value["id"])


def test_dead_letters_are_counted_and_logged_when_only_main_is_consumed(spark, tmp_path,
                                                                         caplog):
    events, rules = _inputs(spark, tmp_path, [[{"id": i, "user": "u"} for i in range(6)]])
    result = Stream(events).connect(Stream(rules).broadcast(FACTORS)).process(
        Raising(), "id long, x double", parallelism=2, on_error="dead_letter")
    caplog.set_level(logging.WARNING, logger="sparkcast")
    query = (result.main.writeStream.format("memory").queryName("only_main")
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    assert sorted(r["id"] for r in spark.table("only_main").collect()) == [0, 2, 4]
    name = result.observation
    assert name is not None and name.startswith("sparkcast")
    metrics = [p["observedMetrics"][name] for p in query.recentProgress
               if p.get("observedMetrics", {}).get(name)]
    assert sum(m["dead_letters"] for m in metrics) == 3
    assert sum(m["dead_letters_process_element"] for m in metrics) == 3
    assert sum(m["main_rows"] for m in metrics) == 3
    assert any("ValueError: odd id" in (m["first_dead_letter"] or "") for m in metrics)
    deadline = time.time() + 30  # the listener runs on Spark's listener bus, asynchronously
    while time.time() < deadline and not _warnings(caplog):
        time.sleep(0.2)
    [line] = _warnings(caplog)
    assert "3 dead letter(s) (process_element 3)" in line and "ValueError: odd id" in line


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == "sparkcast" and "only_main" in r.getMessage()]


def test_a_reserved_field_name_is_refused_at_process(spark, tmp_path):
    events, rules = _inputs(spark, tmp_path, [[{"id": 1, "user": "u"}]])
    with pytest.raises(PipelineError, match=r"\['_output'\] are reserved.*rename"):
        Stream(events).connect(Stream(rules).broadcast(FACTORS)).process(
            Raising(), "id long, _output string")
