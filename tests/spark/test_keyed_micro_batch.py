"""``KeyedProcessFunction`` and ``KeyedCoProcessFunction`` on the micro-batch engine (no
broadcast side: main rows, and a co-function's second input, repartitioned by subtask into the
per-subtask keyed store; event-time timers fired by the clock without more input). The same
programs as test_keyed_functions.py (which runs them on the operator), fed one file per
micro-batch, against the harness across a restart, and against the operator's timer rows; and
the processing-time clock, which reads a streamed broadcast side where there is one."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from examples import inactivity_alert, keyed_enrichment
from sparkcast import (
    KeyedBroadcastProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from sparkcast.spark import Stream, read_output, read_state
from tests.spark.differential import read_stream, with_watermark, write_batch_file
from tests.spark.test_keyed_functions import (
    ALERTS,
    ENRICH,
    FAILING,
    RESTART_AFTER,
    Case,
    FailOnReference,
    harness_outputs,
)

pytestmark = pytest.mark.spark


def _wired(spark: Any, case: Case, base: Path, upto: int, engine: str) -> Any:
    for index, (first, second) in enumerate(case.batches[:upto]):
        write_batch_file(base / "in1", index, first)
        if case.schema2:
            write_batch_file(base / "in2", index, second)
    one = read_stream(spark, case.schema1, base / "in1")
    if case is ALERTS:
        return Stream(with_watermark(one)).key_by("user").process(
            inactivity_alert.InactivityAlert(), case.output_schema, parallelism=2,
            engine=engine, **case.options)
    two = read_stream(spark, case.schema2, base / "in2")
    key = "product_id" if case is ENRICH else "k"
    function = keyed_enrichment.EnrichOrders() if case is ENRICH else FailOnReference()
    return Stream(one).key_by(key).connect(Stream(two).key_by(key)).process(
        function, case.output_schema, parallelism=2, engine=engine)


def _run(spark: Any, case: Case, base: Path, upto: int, engine: str = "auto") -> Counter:
    """Run ``case`` over its first ``upto`` files to the end; every output written so far."""
    result = _wired(spark, case, base, upto, engine)
    expected = "micro_batch" if engine == "auto" else engine
    assert result.explain(str(base / "checkpoint")).engine == expected
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    out = Counter(json.dumps(r.asDict()) for r in read_output(spark, str(base / "out"))
                  .collect())
    out.update(f"dead:{r['error']}" for r in read_output(spark, str(base / "out"),
                                                          "dead_letters").collect())
    return out


@pytest.mark.parametrize("case", [ALERTS, ENRICH, FAILING], ids=lambda c: c.name)
def test_keyed_functions_match_the_harness_across_a_restart(spark, tmp_path, case):
    first = _run(spark, case, tmp_path, RESTART_AFTER)
    both = _run(spark, case, tmp_path, len(case.batches))  # same checkpoint, more files
    assert both == harness_outputs(case)
    if case is not FAILING:  # the restarted query read the keyed state the first one wrote
        assert both - first
    if case is ENRICH:  # the state tools read the per-subtask stores
        products = read_state(spark, str(tmp_path / "checkpoint"), keyed_enrichment.PRODUCT)
        assert sorted(r["key"] for r in products.collect()) == ["p1", "p2", "p3"]


def test_an_available_now_run_ends_with_the_operators_timer_rows(spark, tmp_path):
    """c's alert (its last event at 4100, due at 5100) waits for the watermark of the last
    file (7000), which no input follows: the clock's no-data micro-batch fires it."""
    batches = len(ALERTS.batches)
    fast = _run(spark, ALERTS, tmp_path / "micro_batch", batches)
    operator = _run(spark, ALERTS, tmp_path / "operator", batches, engine="operator")
    assert fast == operator
    assert json.dumps({"user": "c", "last_seen": 4100, "alert_at": 5100}) in fast


class Later(KeyedProcessFunction):
    """Counts a key's events; a processing-time timer a second after its first one reports."""

    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", int))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.seen.value() is None:
            timers = ctx.timer_service()
            timers.register_processing_time_timer(timers.current_processing_time() + 1_000)
        self.seen.update((self.seen.value() or 0) + 1)
        return ()

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.seen.value()


def _run_until_fired(spark: Any, result: Any, base: Path, wanted: int) -> tuple[Any, set]:
    """Run ``result`` at a 1 s trigger until ``wanted`` main rows are written (at most 180 s);
    the stopped query and the rows."""
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"processingTime": "1 second"})
    fired: set = set()
    deadline = time.time() + 180
    while len(fired) < wanted and time.time() < deadline and query.exception() is None:
        time.sleep(2)
        if (base / "out" / "_output=main").exists():
            fired = {tuple(r) for r in read_output(spark, str(base / "out")).collect()}
    query.stop()
    return query, fired


def test_processing_time_timers_fire_without_more_input(spark, tmp_path):
    """One file, then nothing: the clock (a no-op transformWithState in ProcessingTime mode)
    makes Spark run micro-batches at every trigger, and the timers fire in one of them."""
    write_batch_file(tmp_path / "in", 0, [{"k": f"k{i % 6}", "ts": i} for i in range(9)])
    result = Stream(read_stream(spark, "k string, ts long", tmp_path / "in")).key_by("k").process(
        Later(), "k string, seen long", parallelism=2)
    explained = result.explain()
    assert explained.engine == "micro_batch"
    assert "every trigger" in explained.reason and "every trigger" in explained.cost
    query, fired = _run_until_fired(spark, result, tmp_path, 6)
    assert fired == {("k0", 2), ("k1", 2), ("k2", 2), ("k3", 1), ("k4", 1), ("k5", 1)}
    empty = [p for p in query.recentProgress if p["numInputRows"] == 0]
    assert empty  # the timers fired in micro-batches without input


class LaterRule(KeyedBroadcastProcessFunction):
    """``Later`` with a broadcast rule: the timer reports the count and the rule it saw."""

    open = Later.open
    process_element = Later.process_element

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULE).put("rule", value[0])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield ctx.get_current_key(), self.seen.value(), ctx.get_broadcast_state(RULE).get("rule")


RULE = MapStateDescriptor("rule", Types.STRING(), Types.STRING())


def test_the_processing_time_clock_reads_the_broadcast_side_not_the_main_rows_again(
        spark, tmp_path):
    """With a streamed broadcast side the processing-time clock runs over it: the timers still
    fire in micro-batches without input, and each main row is read (and counted in Spark's
    ``numInputRows``) once; the one rule row is read by the broadcast side's collect, the
    batch's write and the clock. Over the main stream the clock read every main row twice."""
    events = [{"k": f"k{i % 6}", "ts": i} for i in range(9)]
    write_batch_file(tmp_path / "in", 0, events)
    write_batch_file(tmp_path / "rules", 0, [{"name": "strict"}])
    rules = Stream(read_stream(spark, "name string", tmp_path / "rules")).broadcast(RULE)
    result = Stream(read_stream(spark, "k string, ts long", tmp_path / "in")).key_by(
        "k").connect(rules).process(LaterRule(), "k string, seen long, rule string",
                                    parallelism=2)
    assert result.explain().engine == "micro_batch"
    query, fired = _run_until_fired(spark, result, tmp_path, 6)
    assert fired == {(f"k{i}", 2 if i < 3 else 1, "strict") for i in range(6)}
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [
        len(events) + 3]
    assert [p for p in query.recentProgress if p["numInputRows"] == 0]


def test_a_malformed_line_of_the_second_input_is_a_dead_letter(spark, tmp_path):
    """The micro-batch engine's input carries both inputs' malformed rows (``_side`` 5): the
    bad line of the second input is a dead letter, its good rows still meet their key."""
    write_batch_file(tmp_path / "in1", 0, [{"k": "x", "ts": 1}, {"k": "y", "ts": 2}])
    write_batch_file(tmp_path / "in2", 0, [{"k": "y", "ts": 3}, "{not json"])
    schema = "k string, ts long, _corrupt_record string"
    one = read_stream(spark, schema, tmp_path / "in1")
    two = read_stream(spark, schema, tmp_path / "in2")
    result = Stream(one).key_by("k").connect(Stream(two).key_by("k")).process(
        FailOnReference(), "k string", parallelism=2)
    assert result.explain().engine == "micro_batch"
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    out = str(tmp_path / "out")
    assert sorted(r["k"] for r in read_output(spark, out).collect()) == ["Y", "x", "y"]
    letters = read_output(spark, out, "dead_letters").collect()
    assert [(r["callback"], r["value"]) for r in letters] == [("input", "{not json")]
    assert sum(p["numInputRows"] for p in query.recentProgress) == 4  # each line read once
