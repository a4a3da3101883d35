"""Exactly-once across restarts: a file-source query is stopped and restarted from its
checkpoint four times while files keep arriving; ``write_stream``'s output holds every event
once, keyed counters and broadcast rules carry over, and event-time timers registered before a
restart fire exactly once after it."""

from __future__ import annotations

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.spark import Stream, read_output
from tests.spark.differential import read_stream, with_watermark, write_batch_file

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, int)
OUTPUT = "kind string, k string, id long, n long, version long"
EVENT_TS = [1_000, 1_100, 1_200, 1_300, 3_000, 3_100, 4_000]  # first ts of events file i
TIMERS = {0: ("a", 1_500), 2: ("b", 3_500)}  # events file -> timer its first event sets
RULE_VERSION_BEFORE_RUN = {1: 1, 2: 2, 4: 3}
EVENTS_BEFORE_RUN = {1: [0], 2: [2], 3: [4], 4: [6]}  # the rest arrives while a run is running
EVENTS_DURING_RUN = {1: [1], 2: [3], 3: [5]}
# a file that arrives during run r is read by run r (if it came before availableNow fixed its
# end offsets) or by run r + 1 (with the rule file written before that run): either version.
# Events file 4 sees version 2 in run 3, which gets no rule: the rules survived the restart.
EXPECTED_VERSIONS = {0: {1}, 1: {1, 2}, 2: {2}, 3: {2}, 4: {2}, 5: {2, 3}, 6: {3}}


class Ledger(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("version", value["version"])

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if value["fire_at"] is not None:
            ctx.timer_service().register_event_time_timer(value["fire_at"])
        yield "event", value["k"], value["id"], n, ctx.get_broadcast_state(RULES).get("version")

    def on_timer(self, timestamp, ctx):
        yield "timer", ctx.get_current_key(), timestamp, self.count.value(), None


def _events(index):
    rows = []
    for i in range(6):
        fire = TIMERS.get(index) if i == 0 else None
        rows.append({"id": index * 10 + i, "k": fire[0] if fire else "abc"[i % 3],
                     "ts": EVENT_TS[index] + i, "fire_at": fire[1] if fire else None})
    return rows


def test_restarts_neither_lose_nor_duplicate_and_state_survives(spark, tmp_path):
    events_dir, rules_dir, out = tmp_path / "events", tmp_path / "rules", str(tmp_path / "out")
    events_dir.mkdir()
    rules_dir.mkdir()
    rule_files = 0
    for run in range(1, 5):
        if run in RULE_VERSION_BEFORE_RUN:
            write_batch_file(rules_dir, rule_files, [
                {"version": RULE_VERSION_BEFORE_RUN[run], "ts": 0}])
            rule_files += 1
        for index in EVENTS_BEFORE_RUN[run]:
            write_batch_file(events_dir, index, _events(index))
        events = with_watermark(read_stream(spark, "id long, k string, ts long, fire_at long",
                                            events_dir))
        rules = read_stream(spark, "version long, ts long", rules_dir)
        result = Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES)).process(
            Ledger(), OUTPUT, parallelism=2, event_time="ts")
        query = result.write_stream(out, str(tmp_path / "checkpoint"),
                                    trigger={"availableNow": True})
        for index in EVENTS_DURING_RUN.get(run, []):
            write_batch_file(events_dir, index, _events(index))
        query.awaitTermination()
        assert query.exception() is None

    rows = [r.asDict() for r in read_output(spark, out).collect()]
    events = [r for r in rows if r["kind"] == "event"]
    ids = sorted(r["id"] for r in events)
    assert ids == sorted(e["id"] for i in range(7) for e in _events(i))  # none lost, none twice
    for r in events:
        assert r["version"] in EXPECTED_VERSIONS[r["id"] // 10], r
    for key in "abc":
        mine = sorted((r["id"], r["n"]) for r in events if r["k"] == key)
        assert [n for _, n in mine] == list(range(1, len(mine) + 1)), key  # counters carried over
    timers = sorted((r["k"], r["id"]) for r in rows if r["kind"] == "timer")
    assert timers == sorted(TIMERS.values())
