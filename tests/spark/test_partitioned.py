"""The partitioned path: keyed functions, ``hold_until_ready`` and event-time alignment over a
streamed broadcast side, broadcast applied once on the driver, main rows in one ``mapInArrow``
over each subtask's keyed store (``execution/partitioned.py``). Its outputs equal the harness's
for any parallelism and micro-batch size, across restarts, replays and rollbacks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    Row,
    ValueStateDescriptor,
)
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import PipelineError
from sparkcast.spark import Stream, read_output, read_state, rescale
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.corpus import CORPUS, COUNTER, HOLD, TIMERS
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

RULES = MapStateDescriptor("rules", str, int)
TOTAL = ValueStateDescriptor("total", int)
EVENTS_SCHEMA = "k string, amount long, ts long"
RULES_SCHEMA = "name string, limit long, ts long"
OUTPUT = "k string, total long, over boolean, resets long"


class Totals(KeyedBroadcastProcessFunction):
    """A running total per key, checked against a broadcast limit; a ``reset`` rule clears every
    key's total on every subtask (``apply_to_keyed_state``), and counts the keys it cleared."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(TOTAL)

    def process_element(self, value: Any, ctx: Any) -> Any:
        total = (self.total.value() or 0) + value["amount"]
        self.total.update(total)
        rules = ctx.get_broadcast_state(RULES)
        yield value["k"], total, total > (rules.get("limit") or 10**9), rules.get("resets")

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        rules = ctx.get_broadcast_state(RULES)
        if value["name"] == "reset":
            ctx.apply_to_keyed_state(TOTAL, lambda key, state: state.clear())
            rules.put("resets", (rules.get("resets") or 0) + 1)
        else:
            rules.put(value["name"], value["limit"])


def _events(index: int) -> list[dict]:
    return [{"k": f"k{(index * 5 + i) % 7}", "amount": (index * 13 + i * 7) % 50,
             "ts": 1_000 * index + i} for i in range(30)]


def _rules(index: int) -> list[dict]:
    return [[{"name": "limit", "limit": 100, "ts": 0}], [],
            [{"name": "reset", "limit": 0, "ts": 2_000}, {"name": "limit", "limit": 80,
                                                           "ts": 2_000}],
            [], [{"name": "reset", "limit": 0, "ts": 4_000}]][index]


def _write(base, batches) -> None:
    for index in batches:
        write_batch_file(base / "events", index, _events(index))
        write_batch_file(base / "rules", index, _rules(index))


def _totals(spark, base, parallelism: int = 3, files_per_trigger: int = 1, **options: Any
            ) -> Any:
    reader = spark.readStream.option("maxFilesPerTrigger", files_per_trigger)
    events = reader.schema(EVENTS_SCHEMA).json(str(base / "events"))
    rules = reader.schema(RULES_SCHEMA).json(str(base / "rules"))
    return (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES))
            .process(Totals(), OUTPUT, parallelism=parallelism, event_time="ts", **options))


def _expected(batches: list[list[int]]) -> Counter:
    """The harness over micro-batches made of the given files."""
    return Counter(tuple(v) for v in _harness(batches).output())


def _harness(batches: list[list[int]], initial: dict | None = None) -> KeyedBroadcastHarness:
    h = KeyedBroadcastHarness(Totals(), lambda v: v["k"], [RULES], output_schema=OUTPUT,
                              initial_state=initial)
    h.open()
    for files in batches:
        main = [e for i in files for e in _events(i)]  # source order
        bcast = [r for i in files for r in _rules(i)]
        h.process_micro_batch([Row(**e) for e in main], [Row(**r) for r in bcast],
                              main_timestamps=[e["ts"] for e in main],
                              broadcast_timestamps=[r["ts"] for r in bcast])
    assert not h.dead_letters()
    return h


def _run(result, base) -> None:
    assert kind_of(result) == "partitioned"
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None


def _written(spark, base) -> Counter:
    return Counter(tuple(r) for r in read_output(spark, str(base / "out")).collect())


def _logged(directory) -> list[int]:
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit())


# ------------------------------------------------------------------------------- the choice


@pytest.mark.parametrize("program, options, path", [
    (COUNTER, {}, "partitioned"),
    (HOLD, {}, "partitioned"),
    (COUNTER, {"time_alignment": "event"}, "partitioned"),
    (TIMERS, {}, "partitioned"),
], ids=["keyed", "hold_until_ready", "event-aligned", "timers"])
def test_each_plan_takes_the_partitioned_path_where_it_is_correct(spark, tmp_path, program,
                                                                  options, path):
    main = read_stream(spark, program.main_schema, tmp_path / "main")
    bcast = read_stream(spark, program.broadcast_schema, tmp_path / "bcast")
    result = process(program, main, bcast, 2, **options)
    assert kind_of(result) == path
    static = process(program, main, spark.createDataFrame([], program.broadcast_schema), 2,
                     **options)
    assert kind_of(static) == "partitioned"  # the static side written as snapshot -1


# ---------------------------------------------------------------------------- the outputs


def test_the_corpus_matches_the_harness_on_the_partitioned_path(spark, tmp_path):
    """Timer programs included: the harness (and the operator path, test_differential.py)
    ends with the timers Spark's last no-data micro-batch fires; so must this path."""
    programs = [p for p in CORPUS if p.key or p.options.get("hold_until_ready")]
    assert {p.name for p in programs} >= {COUNTER.name, HOLD.name, TIMERS.name}
    for program in programs:
        base = tmp_path / program.name
        for index, (bcast, main) in enumerate(program.batches):
            write_batch_file(base / "main", index, main)
            write_batch_file(base / "bcast", index, bcast)
        main = read_stream(spark, program.main_schema, base / "main")
        result = process(program, with_watermark(main) if program.timers else main,
                         read_stream(spark, program.broadcast_schema, base / "bcast"), 3)
        _run(result, base)
        expected = harness_outputs(program)
        out = str(base / "out")
        written = Counter(canon(r.asDict(recursive=True)) for r in read_output(spark, out)
                          .collect())
        assert written == expected["main"], program.name
        for tag in program.side_outputs:
            side = Counter(canon(r.asDict(recursive=True)) for r in read_output(spark, out, tag)
                           .collect())
            assert side == expected[tag.tag_id], (program.name, tag.tag_id)
        letters = Counter(canon({"callback": r["callback"], "error": r["error"]})
                          for r in read_output(spark, out, "dead_letters").collect())
        assert letters == expected[DEAD_LETTERS.tag_id], program.name
    # b's session (its last event at 2000, length 100) closes only at the last watermark
    # (5000), reached by no input after it: Spark's no-data micro-batch fired it
    fired = {(r["k"], r["fired"]) for r in read_output(spark, str(tmp_path / "timers" / "out"))
             .collect()}
    assert ("b", 2100) in fired and ("d", 5100) not in fired


def test_apply_to_keyed_state_reaches_every_subtask_and_sizes_do_not_matter(spark, tmp_path):
    _write(tmp_path / "one", range(5))
    _run(_totals(spark, tmp_path / "one", parallelism=3), tmp_path / "one")
    expected = _expected([[i] for i in range(5)])
    assert _written(spark, tmp_path / "one") == expected
    # totals were cleared twice on every subtask: no total after a reset exceeds that batch's
    assert any(row[3] == 2 for row in expected)
    # two files per micro-batch, one subtask: the harness over the same batches agrees, fed
    # each batch's files in the order Spark reads them (its file partitions: largest first,
    # then in the order the source took them), each file in line order
    _write(tmp_path / "two", range(5))
    _run(_totals(spark, tmp_path / "two", parallelism=1, files_per_trigger=2), tmp_path / "two")
    assert _written(spark, tmp_path / "two") == _expected(
        [_as_read(tmp_path / "two", batch) for batch in ([0, 1], [2, 3], [4])])


def _as_read(base, files: list[int]) -> list[int]:
    """The order a file source reads one micro-batch's small files in: by size, largest first,
    ties in the order of ``files``."""
    size = {i: (base / "events" / f"part-{i:04d}.json").stat().st_size for i in files}
    return sorted(files, key=lambda i: -size[i])


def test_a_restart_and_a_replay_continue_the_keyed_state_exactly_once(spark, tmp_path):
    _write(tmp_path, range(3))
    _run(_totals(spark, tmp_path), tmp_path)
    assert _written(spark, tmp_path) == _expected([[0], [1], [2]])
    keyed = tmp_path / "checkpoint" / "sparkcast" / "keyed"
    assert {p.name for p in (keyed / "0").iterdir()} >= {"0.delta", "1.delta", "2.delta"}
    _write(tmp_path, range(3, 5))
    _run(_totals(spark, tmp_path), tmp_path)
    everything = _expected([[i] for i in range(5)])
    assert _written(spark, tmp_path) == everything
    # the last batch replayed from its start: before its output committed, and after
    commits, log = tmp_path / "checkpoint" / "commits", tmp_path / "out" / "_spark_metadata"
    last = _logged(commits)[-1]
    for files in ((commits,), (commits, log)):
        for directory in files:
            for name in (str(last), f".{last}.crc"):
                if (directory / name).exists():
                    os.remove(directory / name)
        _run(_totals(spark, tmp_path), tmp_path)
        assert _written(spark, tmp_path) == everything
    # the state tools read the path's checkpoint: every key's total, on its subtask
    h = _harness([[i] for i in range(5)])
    totals = {r["key"]: r["value"] for r in read_state(spark, str(tmp_path / "checkpoint"), TOTAL)
              .collect()}
    assert totals == {f"k{i}": h.keyed_state(TOTAL, f"k{i}") for i in range(7)
                      if h.keyed_state(TOTAL, f"k{i}") is not None}
    rules = read_state(spark, str(tmp_path / "checkpoint"), RULES).collect()
    assert {(r["subtask"], r["key"], r["value"]) for r in rules} == {
        (s, k, v) for s in range(3) for k, v in h.broadcast_state(RULES).items()}


def test_initial_state_and_a_rescale_seed_the_stores(spark, tmp_path):
    initial = {TOTAL: [("k1", 1000), ("k3", 7)], RULES: [("limit", 50)]}
    frames = {TOTAL: spark.createDataFrame(initial[TOTAL], "key string, value long"),
              RULES: spark.createDataFrame(initial[RULES], "key string, value long")}
    _write(tmp_path, [1, 3])  # no rules in these files: the limit comes from the seed
    result = _totals(spark, tmp_path, initial_state=frames)
    _run(result, tmp_path)
    assert _written(spark, tmp_path) == Counter(
        tuple(v) for v in _harness([[1], [3]], initial).output())
    assert any(row[0] == "k1" and row[1] > 1000 for row in _written(spark, tmp_path))
    # rescale 3 -> 2 subtasks into a new checkpoint; a job started from it continues the totals
    rescale(spark, str(tmp_path / "checkpoint"), str(tmp_path / "rescaled"), parallelism=2)
    _write(tmp_path / "next", [0])
    again = _totals(spark, tmp_path / "next", parallelism=2,
                    initial_state=str(tmp_path / "rescaled"))
    assert kind_of(again) == "partitioned"
    query = again.write_stream(str(tmp_path / "next" / "out"), str(tmp_path / "rescaled"),
                               trigger={"availableNow": True})
    query.awaitTermination()
    h = _harness([[1], [3]], initial)
    h.process_micro_batch([Row(**e) for e in sorted(_events(0), key=lambda e: e["ts"])],
                          [Row(**r) for r in _rules(0)],
                          main_timestamps=sorted(e["ts"] for e in _events(0)),
                          broadcast_timestamps=[r["ts"] for r in _rules(0)])
    before = len(_harness([[1], [3]], initial).output())
    assert _written(spark, tmp_path / "next") == Counter(tuple(v) for v in h.output()[before:])


def test_a_checkpoint_of_the_operator_path_restarts_on_it(spark, tmp_path):
    """A keyed job of sparkcast 0.3.0 wrote its checkpoint on the operator path: it restarts
    there (the partitioned path cannot read Spark's state store), its state intact."""
    _write(tmp_path, range(2))
    checkpoint = str(tmp_path / "checkpoint")
    first = _totals(spark, tmp_path, engine="operator")  # what 0.3.0 chose for keyed functions
    query = first.write_stream(str(tmp_path / "out"), checkpoint, trigger={"availableNow": True})
    query.awaitTermination()
    _write(tmp_path, range(2, 4))
    again = _totals(spark, tmp_path)
    assert kind_of(again) == "partitioned"  # a new checkpoint would take it
    restarted = again.explain(checkpoint)
    assert restarted.engine == "operator"
    assert kind_of(again, checkpoint) == "operator"
    assert "written by the operator engine" in restarted.reason
    query = again.write_stream(str(tmp_path / "out"), checkpoint, trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    assert kind_of(again) == "partitioned"  # the plan is never changed by a query
    assert any(again.observation in p.get("observedMetrics", {})  # the query's counts
               for p in query.recentProgress)
    assert _written(spark, tmp_path) == _expected([[i] for i in range(4)])
    with pytest.raises(PipelineError, match="written by the operator engine"):
        _totals(spark, tmp_path, engine="micro_batch").write_stream(
            str(tmp_path / "out"), checkpoint, trigger={"availableNow": True})


def test_timers_restart_from_the_checkpoint_and_fire_once(spark, tmp_path):
    """Event-time timers live in the subtasks' stores; the clock's state beside them does not
    make a restart look like the operator's checkpoint."""
    def run(indices):
        for index in indices:
            bcast, main = TIMERS.batches[index]
            write_batch_file(tmp_path / "main", index, main)
            write_batch_file(tmp_path / "bcast", index, bcast)
        main = with_watermark(read_stream(spark, TIMERS.main_schema, tmp_path / "main"))
        result = process(TIMERS, main, read_stream(spark, TIMERS.broadcast_schema,
                                                   tmp_path / "bcast"), 2)
        assert kind_of(result, str(tmp_path / "checkpoint")) == "partitioned"
        _run(result, tmp_path)

    run([0, 1])
    run([2, 3])
    written = Counter(canon(r.asDict(recursive=True))
                      for r in read_output(spark, str(tmp_path / "out")).collect())
    assert written == harness_outputs(TIMERS)["main"]


def _line(base, contents: dict[int, int]) -> list[tuple[list[dict], list[dict]]]:
    """Write file ``i`` as the events of ``contents[i]`` (no rules after the first file);
    returns each micro-batch's (events, rules)."""
    batches = []
    for index, source in contents.items():
        events, rules = _events(source), _rules(0) if index == 0 else []
        write_batch_file(base / "events", index, events)
        write_batch_file(base / "rules", index, rules)
        batches.append((events, rules))
    return batches


def _run_in_another_application(base) -> None:
    """The query of ``base`` to the end of its input, in an application of its own with its own
    local folder, as a job on another host would run it."""
    code = ("import sys; from pathlib import Path; from sparkcast.spark import session; "
            "from tests.spark import test_partitioned as t; base = Path(sys.argv[1]); "
            "spark = session(conf={'spark.local.dir': sys.argv[2]}); "
            "t._run(t._totals(spark, base, parallelism=2), base); spark.stop()")
    subprocess.run([sys.executable, "-c", code, str(base), str(base / "elsewhere")],
                   cwd=Path(__file__).resolve().parents[2], check=True, timeout=300,
                   capture_output=True)


def test_a_rollback_leaves_no_warm_worker_and_no_local_copy_on_the_old_line(spark, tmp_path):
    """A backup of the checkpoint and the output taken after micro-batch 1; batches 2 and 3 run
    here; the backup restored, and batches 2 and 3 run again on other rows by another
    application with its own local folder (another host). This application's local copies
    and its workers' warm state (``write_stream`` again on one plan, as in a notebook: the same
    engines) reflect its own batch 3, the batch number the new line has reached. The lineage
    tokens keep both from being used: batch 4 continues the new line, and outputs and state
    equal the harness's over the new line. (A local copy matched by batch number alone fails
    this test; warm state matched so is tested on the store classes, where the workers a batch
    lands on can be chosen.)"""
    checkpoint, out, backup = tmp_path / "checkpoint", tmp_path / "out", tmp_path / "backup"
    first = _line(tmp_path, {0: 0, 1: 1})
    result = _totals(spark, tmp_path, parallelism=2)  # one plan: its engines stay warm
    _run(result, tmp_path)
    shutil.copytree(checkpoint, backup / "checkpoint")
    shutil.copytree(out, backup / "out")
    _line(tmp_path, {2: 2, 3: 3})
    _run(result, tmp_path)
    for folder in (checkpoint, out):
        shutil.rmtree(folder)
        shutil.copytree(backup / folder.name, folder)
    for source in ("events", "rules"):  # the old line's files go with it
        for index in (2, 3):
            os.remove(tmp_path / source / f"part-{index:04d}.json")
    second = _line(tmp_path, {2: 12, 3: 13})
    _run_in_another_application(tmp_path)
    second += _line(tmp_path, {4: 14})
    _run(result, tmp_path)
    h = KeyedBroadcastHarness(Totals(), lambda v: v["k"], [RULES], output_schema=OUTPUT)
    h.open()
    for events, rules in first + second:
        h.process_micro_batch([Row(**e) for e in events], [Row(**r) for r in rules],
                              main_timestamps=[e["ts"] for e in events],
                              broadcast_timestamps=[r["ts"] for r in rules])
    assert _written(spark, tmp_path) == Counter(tuple(v) for v in h.output())
    totals = {r["key"]: r["value"] for r in read_state(spark, str(checkpoint), TOTAL).collect()}
    assert totals == {f"k{i}": h.keyed_state(TOTAL, f"k{i}") for i in range(7)}


def test_partition_of_puts_a_grouping_value_where_sparks_repartition_does(spark):
    """The Kafka part writers make each subtask's producer ready in the task that will hold it
    (``subtasks_by_partition``), so ``partition_of`` must be Spark's own partitioning exactly:
    the balanced grouping keys and longs of every sign and size, into 2, 4 and 7 partitions."""
    from pyspark.sql import functions as F

    from sparkcast.spark.execution.routing import partition_of
    from sparkcast.spark.planning.tagging import balanced_group_keys

    values = [*balanced_group_keys(spark, 6), 0, -1, -7, 2**31, -2**31 - 1, 2**40 + 3,
              2**63 - 1, -2**63]
    frame = spark.createDataFrame([(v,) for v in values], "g long")
    for partitions in (2, 4, 7):
        found = {row["g"]: row["p"] for row in frame.repartition(partitions, "g").select(
            "g", F.spark_partition_id().alias("p")).collect()}
        assert found == {v: partition_of(v, partitions) for v in values}
