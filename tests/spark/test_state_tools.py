"""State tools on real checkpoints: read_state against the harness, rescale 2 -> 4 -> 1 mid-stream,
and a bootstrapped job, each compared with the harness over the same input.

One keyed broadcast function with every piece of state: value, list and map state, event-time
timers, held elements (the limit is removed in batch 1, so that batch's events are held across
the first rescale and released in batch 2) and broadcast state. Three runs of the same program:
parallelism 2 on batches 0-1, rescaled to 4 for batches 2-3, rescaled to 1 for batches 4-5; each
run reads a folder of its own (the input that follows), writes an output of its own.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.cli import main
from sparkcast.core import codec
from sparkcast.spark import Stream, read_output, read_state, rescale, state_value
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import read_stream, with_watermark, write_batch_file

pytestmark = pytest.mark.spark

LIMITS = MapStateDescriptor("limits", str, int)
COUNT = ValueStateDescriptor("count", int)
IDS = ListStateDescriptor("ids", int)
PARITY = MapStateDescriptor("parity", str, int)
OUTPUT = "k string, id long, n long, limit long"
EVENTS = "id long, k string, ts long"
RULES = "name string, value long, ts long"


class Tracker(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)
        self.ids = runtime_context.get_list_state(IDS)
        self.parity = runtime_context.get_map_state(PARITY)

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(LIMITS)
        if value["value"] is None:
            state.remove(value["name"])
        else:
            state.put(value["name"], value["value"])

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        self.ids.add(value["id"])
        side = "even" if value["id"] % 2 == 0 else "odd"
        self.parity.put(side, (self.parity.get(side) or 0) + 1)
        ctx.timer_service().register_event_time_timer(value["ts"] + 1500)
        yield value["k"], value["id"], n, ctx.get_broadcast_state(LIMITS).get("limit")

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), -timestamp, self.count.value(), None


def _events(batch):
    return [{"id": batch * 100 + i, "k": f"u{i % 5}", "ts": batch * 1000 + i * 10}
            for i in range(8)]


RULE_BATCHES = {0: [{"name": "limit", "value": 3, "ts": 0}],
                1: [{"name": "limit", "value": None, "ts": 1000}],
                2: [{"name": "limit", "value": 5, "ts": 2000}]}
BATCHES = range(4)
RUNS = ((2, (0, 1)), (4, (2,)), (1, (3,)))  # (parallelism, batches) of the three runs


def _harness(initial_state=None):
    h = KeyedBroadcastHarness(Tracker(), key_selector=lambda v: v["k"],
                              broadcast_descriptors=[LIMITS],
                              hold_until_ready=[(LIMITS, "limit")], initial_state=initial_state)
    h.open()
    return h


def _harness_batch(h, batch, high):
    """One micro-batch as Spark runs it, then the watermark Spark gives the next batch."""
    events = _events(batch)
    rules = RULE_BATCHES.get(batch, [])
    h.process_micro_batch(events, rules, main_timestamps=[e["ts"] for e in events],
                          broadcast_timestamps=[r["ts"] for r in rules])
    high = max([high, *[e["ts"] for e in events]])
    h.process_watermark(high)
    return high


def _result(spark, base, run, parallelism, initial_state=None):
    """The operator engine: these tools read and rescale Spark's state store (a timer function
    would take the partitioned path on its own)."""
    events = with_watermark(read_stream(spark, EVENTS, base / f"events{run}"))
    rules = read_stream(spark, RULES, base / f"rules{run}")
    return (Stream(events).key_by("k").connect(Stream(rules).broadcast(LIMITS))
            .process(Tracker(), OUTPUT, parallelism=parallelism, state_buckets=8,
                     event_time="ts", hold_until_ready=[(LIMITS, "limit")],
                     initial_state=initial_state, engine="operator"))


def _write_inputs(base, run, batches):
    for index, batch in enumerate(batches):
        write_batch_file(base / f"events{run}", index, _events(batch))
        write_batch_file(base / f"rules{run}", index, RULE_BATCHES.get(batch, []))


def _run(result, base, run):
    query = result.write_stream(str(base / f"out{run}"), str(base / f"ckpt{run}"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None


def _rows(spark, path):
    return [tuple(r) for r in read_output(spark, path).collect()]


@pytest.fixture(scope="module")
def rescaled(spark, tmp_path_factory):
    """The three runs; the harness's state after each run and its whole output."""
    base = tmp_path_factory.mktemp("rescale")
    h, high, snapshots, summaries = _harness(), 0, [], []
    for run, (parallelism, batches) in enumerate(RUNS):
        _write_inputs(base, run, batches)
        prepared = None if run == 0 else str(base / f"ckpt{run}")
        if run:
            summaries.append(rescale(spark, str(base / f"ckpt{run - 1}"), prepared,
                                     parallelism))
        _run(_result(spark, base, run, parallelism, prepared), base, run)
        for batch in batches:
            high = _harness_batch(h, batch, high)
        snapshots.append(_snapshot(h))
    spark_rows = [row for run in range(len(RUNS)) for row in _rows(spark, str(base / f"out{run}"))]
    return base, snapshots, h, spark_rows, summaries


def _snapshot(h):
    keys = [f"u{i}" for i in range(5)]
    return {"limits": h.broadcast_state(LIMITS),
            "count": {k: h.keyed_state(COUNT, k) for k in keys},
            "ids": {k: h.keyed_state(IDS, k) for k in keys},
            "parity": {k: h.keyed_state(PARITY, k) for k in keys},
            "timers": sorted(h.timers()["EVENT_TIME"]),
            "held": sorted(v["id"] for v in h.held())}


def test_state_show_prints_one_key(rescaled, capsys):
    base, snapshots, *_ = rescaled
    assert main(["state", "show", str(base / "ckpt0"), "--key", "u1"]) == 0
    printed = capsys.readouterr().out
    assert f"keyed count['u1'] = {snapshots[0]['count']['u1']}" in printed
    assert printed.count("subtask ") == 2 and "held elements: " in printed


def test_read_state_equals_the_harness_for_every_state_kind(spark, rescaled):
    base, snapshots, *_ = rescaled
    first, second = str(base / "ckpt0"), str(base / "ckpt1")
    for descriptor in (COUNT, IDS, PARITY):
        rows = read_state(spark, first, descriptor).collect()  # typed by the descriptor
        assert {r.key: r.value for r in rows} == snapshots[0][descriptor.name], descriptor.name
        by_name = read_state(spark, first, descriptor.name).collect()  # JSON text
        got = {state_value(r.key, key=True): state_value(r.value, descriptor) for r in by_name}
        assert got == snapshots[0][descriptor.name], descriptor.name
        assert len({r.subtask for r in rows}) == 2  # keys spread over both subtasks
    timers = read_state(spark, first, "timers").collect()
    assert sorted((r.timestamp, codec.decode(r.key)) for r in timers) == snapshots[0]["timers"]
    held = read_state(spark, first, "held").collect()
    assert sorted(codec.decode(r.value)["id"] for r in held) == snapshots[0]["held"] != []
    limits = read_state(spark, second, LIMITS).collect()  # run 1: parallelism 4, limit 5
    assert sorted(r.subtask for r in limits) == [0, 1, 2, 3]  # every subtask holds its copy
    assert len({r.version for r in limits}) == 1
    for row in limits:
        assert {row.key: row.value} == snapshots[1]["limits"] == {"limit": 5}


def test_rescaled_runs_equal_the_harness_over_the_whole_input(rescaled):
    _, snapshots, h, spark_rows, summaries = rescaled
    expected = Counter((v[0], v[1], v[2], v[3]) for v in h.output())
    got = Counter(spark_rows)
    assert got == expected  # 0 lost, 0 duplicated, counters continuous, each timer once
    assert summaries[0]["from_parallelism"] == 2 and summaries[0]["parallelism"] == 4
    assert summaries[0]["held"] == 8 and summaries[0]["timers"] == len(snapshots[0]["timers"]) > 0
    assert summaries[1]["from_parallelism"] == 4 and summaries[1]["parallelism"] == 1
    ids = [row[1] for row in spark_rows if row[1] >= 0]
    assert sorted(ids) == sorted(e["id"] for b in BATCHES for e in _events(b))


INITIAL = {LIMITS: [("limit", 4)], COUNT: [("u0", 10), ("u3", 7)], IDS: [("u1", [1, 2])]}


def test_a_bootstrapped_job_needs_no_hold_and_equals_the_harness(spark, tmp_path):
    frames = {LIMITS: spark.createDataFrame(INITIAL[LIMITS], "key string, value long"),
              COUNT: spark.createDataFrame(INITIAL[COUNT], "key string, value long"),
              "ids": spark.createDataFrame(INITIAL[IDS], "k string, value array<long>")}
    write_batch_file(tmp_path / "events9", 0, _events(0))
    write_batch_file(tmp_path / "rules9", 0, [])  # no limit on the stream: it is bootstrapped
    _run(_result(spark, tmp_path, 9, 2, frames), tmp_path, 9)
    h = _harness(INITIAL)
    assert not h.held()
    events = _events(0)
    h.process_micro_batch(events, [], main_timestamps=[e["ts"] for e in events])
    h.process_watermark(max(e["ts"] for e in events))
    expected = sorted(tuple(v) for v in h.output())
    got = sorted(_rows(spark, str(tmp_path / "out9")))
    assert got == expected
    assert ("u0", 0, 11, 4) in got  # counter continues from its initial 10, limit from the table
    assert h.keyed_state(IDS, "u1") == [1, 2, 1, 6]
