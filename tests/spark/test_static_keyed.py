"""A keyed function over a static broadcast side ("enrich a keyed stream with a dimension
table") on the micro-batch engine: the static rows applied once on the driver when the plan is
built, their state written as snapshot -1, main rows repartitioned by subtask into the keyed
store. Its outputs equal the operator's (whose subtasks seed their new state with the same
static side before their first element), including what
``process_broadcast_element`` emits for them (once per subtask) and what a restart with other
static rows does (the checkpoint's broadcast state is kept), and the harness's main output."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    Row,
    ValueStateDescriptor,
)
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.corpus import COUNTER, HOLD, TIMERS
from tests.spark.differential import (
    canon,
    harness_outputs,
    process,
    read_stream,
    with_watermark,
    write_batch_file,
)
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark

TIERS = MapStateDescriptor("tiers", str, int)
LOADED = OutputTag("loaded", "tier string, subtask int")
EVENTS = "k string, amount long, ts long"
STATIC = "name string, limit long, ts long"
OUTPUT = "k string, total long, tier string"


class Tiers(KeyedBroadcastProcessFunction):
    """A running total per key, named by the highest tier of the dimension table it passed;
    every loaded tier is reported (by each subtask, as Flink's broadcast side does)."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(ValueStateDescriptor("total", int))
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        if value["limit"] < 0:
            raise ValueError(f"tier {value['name']} has a negative limit")
        ctx.get_broadcast_state(TIERS).put(value["name"], value["limit"])
        yield LOADED, (value["name"], self.subtask)

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.total.value() or 0) + value["amount"]
        self.total.update(total)
        passed = [(limit, name) for name, limit in ctx.get_broadcast_state(TIERS).items()
                  if total >= limit]
        yield value["k"], total, max(passed)[1] if passed else None


FIRST = [{"name": "silver", "limit": 50, "ts": 0}, {"name": "gold", "limit": 120, "ts": 0},
         {"name": "broken", "limit": -1, "ts": 0}]
SECOND = [{"name": "silver", "limit": 10, "ts": 0}]  # a restart's table: the state is kept


def _events(index: int) -> list[dict]:
    return [{"k": f"k{(index * 3 + i) % 6}", "amount": (index * 11 + i * 7) % 40,
             "ts": 1_000 * index + i} for i in range(12)]


def _run(spark: Any, base: Path, files: int, static: list[dict], engine: str) -> Counter:
    for index in range(files):
        write_batch_file(base / "events", index, _events(index))
    events = read_stream(spark, EVENTS, base / "events")
    result = (Stream(events).key_by("k")
              .connect(Stream(spark.createDataFrame(
                  [tuple(r.values()) for r in static], STATIC)).broadcast(TIERS))
              .process(Tiers(), OUTPUT, parallelism=2, event_time="ts", side_outputs=[LOADED],
                       engine=engine))
    assert kind_of(result, str(base / "checkpoint")) == (
        "partitioned" if engine == "auto" else "operator")
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    out = str(base / "out")
    written = Counter(json.dumps(r.asDict()) for r in read_output(spark, out).collect())
    written.update(f"loaded:{tuple(r)}" for r in read_output(spark, out, LOADED).collect())
    written.update(f"dead:{r['callback']}:{r['error']}"
                   for r in read_output(spark, out, "dead_letters").collect())
    return written


def _harness_main(files: int) -> Counter:
    h = KeyedBroadcastHarness(Tiers(), lambda v: v["k"], [TIERS], output_schema=OUTPUT,
                              on_error="dead_letter", side_outputs=[LOADED])
    h.open()
    for tier in FIRST:
        h.process_broadcast_element(Row(**tier), timestamp=0)
    for index in range(files):
        for event in _events(index):
            h.process_element(Row(**event), timestamp=event["ts"])
    names = OUTPUT.split(", ")
    return Counter(json.dumps(dict(zip([n.split()[0] for n in names], v, strict=True)))
                   for v in h.output())


def test_a_static_side_with_keyed_state_matches_the_operator_across_a_restart(spark, tmp_path):
    runs = {}
    for engine in ("auto", "operator"):
        base = tmp_path / engine
        first = _run(spark, base, 2, FIRST, engine)
        runs[engine] = (first, _run(spark, base, 4, SECOND, engine))
    (fast_first, fast), (operator_first, operator) = runs["auto"], runs["operator"]
    assert fast_first == operator_first
    assert fast == operator
    # each of the 2 subtasks loaded the first run's tiers once, the broken one a dead letter
    # once; the restart's table changed nothing: the checkpoint's broadcast state was kept
    assert {k: n for k, n in fast.items() if k.startswith(("loaded", "dead"))} == {
        "loaded:('silver', 0)": 1, "loaded:('gold', 0)": 1, "loaded:('silver', 1)": 1,
        "loaded:('gold', 1)": 1,
        "dead:process_broadcast_element:ValueError: tier broken has a negative limit": 1}
    assert Counter({k: n for k, n in fast.items() if k.startswith("{")}) == _harness_main(4)


@pytest.mark.parametrize("program", [COUNTER, HOLD, TIMERS], ids=lambda p: p.name)
def test_the_keyed_corpus_over_a_static_side_matches_the_harness(spark, tmp_path, program):
    """The corpus's keyed programs with every broadcast row in a static DataFrame (applied
    before the first main row), their main rows one file per micro-batch; the timers' last
    session closes in the clock's no-data micro-batch."""
    static = [r for b, _ in program.batches for r in b]
    batches = [(static if i == 0 else [], main) for i, (_, main) in enumerate(program.batches)]
    for index, (_, main) in enumerate(batches):
        write_batch_file(tmp_path / "main", index, main)
    events = read_stream(spark, program.main_schema, tmp_path / "main")
    result = process(program, with_watermark(events) if program.timers else events,
                     spark.createDataFrame([tuple(r[f] for f in _names(program.broadcast_schema))
                                            for r in static], program.broadcast_schema), 3)
    assert kind_of(result) == "partitioned"
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    expected = harness_outputs(program, batches)
    assert expected["main"]
    out = str(tmp_path / "out")
    assert Counter(canon(r.asDict(recursive=True)) for r in read_output(spark, out)
                   .collect()) == expected["main"]
    assert Counter(canon({"callback": r["callback"], "error": r["error"]})
                   for r in read_output(spark, out, "dead_letters").collect()
                   ) == expected[DEAD_LETTERS.tag_id]


def _names(ddl: str) -> list[str]:
    return [part.split()[0] for part in ddl.split(",")]
