"""No poison values on Spark: a value the state codec cannot store, put into keyed or broadcast
state, fails inside the callback that put it, so it becomes a dead letter with the reason; the
query goes on (later events of the same and of later micro-batches are processed) and restarts
from its checkpoint. Before, it failed at flush, outside dead-letter handling, on every restart."""

from __future__ import annotations

import json
import re

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.spark import Stream, read_output
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, object)
EVENTS_SCHEMA = "id long, k string, poison boolean, ts long"
RULES_SCHEMA = "name string, version long, poison boolean"
OUTPUT = "k string, id long, n long, rules long"


class Notes(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))
        self.note = runtime_context.get_state(ValueStateDescriptor("note"))

    def process_broadcast_element(self, value, ctx):
        payload = re.compile(value["name"]) if value["poison"] else {"v": value["version"]}
        ctx.get_broadcast_state(RULES).put(value["name"], payload)

    def process_element(self, value, ctx):
        if value["poison"]:
            self.note.update(re.compile("x"))  # a compiled regex: the codec cannot store it
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value["k"], value["id"], n, len(ctx.get_broadcast_state(RULES))


def events(index: int, poison: set[int]) -> list[dict]:
    return [{"id": index * 10 + i, "k": "ab"[i % 2], "poison": i in poison,
             "ts": index * 100 + i} for i in range(6)]


def run(spark, root, parallelism: int = 2) -> None:
    main = read_stream(spark, EVENTS_SCHEMA, root / "events")
    rules = read_stream(spark, RULES_SCHEMA, root / "rules")
    result = Stream(main).key_by("k").connect(Stream(rules).broadcast(RULES)).process(
        Notes(), OUTPUT, parallelism=parallelism, on_error="dead_letter")
    query = result.write_stream(str(root / "out"), str(root / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None


def test_unstorable_state_values_are_dead_letters_and_the_query_goes_on(spark, tmp_path):
    write_batch_file(tmp_path / "rules", 0, [{"name": "good", "version": 1, "poison": False},
                                             {"name": "bad", "version": 2, "poison": True}])
    write_batch_file(tmp_path / "events", 0, events(0, poison={1}))  # poison mid-batch
    write_batch_file(tmp_path / "events", 1, events(1, poison={0}))
    run(spark, tmp_path)
    write_batch_file(tmp_path / "rules", 1, [{"name": "later", "version": 3, "poison": False}])
    write_batch_file(tmp_path / "events", 2, events(2, poison={4}))
    run(spark, tmp_path)  # restarted from the checkpoint

    out = str(tmp_path / "out")
    main = sorted(tuple(r) for r in read_output(spark, out).collect())
    poisoned = {1, 10, 24}
    good = [e for i in range(3) for e in events(i, set()) if e["id"] not in poisoned]
    assert sorted(r[1] for r in main) == sorted(e["id"] for e in good)  # all later events
    for key in "ab":  # counters carried over the restart; poisoned events did not count
        assert sorted(r[2] for r in main if r[0] == key) == list(
            range(1, 1 + sum(e["k"] == key for e in good)))
    # the bad rule was never stored; the good one survived the restart, the later one arrived
    assert {r[3] for r in main if r[1] < 20} == {1} and {r[3] for r in main if r[1] >= 20} == {2}

    letters = [r.asDict() for r in read_output(spark, out, "dead_letters").collect()]
    keyed = sorted(json.loads(r["value"])["id"] for r in letters
                   if r["callback"] == "process_element")
    assert keyed == sorted(poisoned)
    broadcast = [r for r in letters if r["callback"] == "process_broadcast_element"]
    assert broadcast and all(json.loads(r["value"])["name"] == "bad" for r in broadcast)
    for letter in letters:
        assert letter["error"].startswith("StateSerializationError: ")
        assert "cannot store a Pattern" in letter["error"]
