"""The streamed-broadcast path (``streamed.py``): a non-keyed function over a broadcast side read
as a stream, run by ``write_stream`` as one ``foreachBatch`` query.

It must be chosen exactly where it gives the operator's results, run without a shuffle or a
state store, give the harness's outputs (per element and ``process_batch``; side outputs,
outputs of ``process_broadcast_element``, dead letters and malformed input included), and stay
exactly-once when a micro-batch is replayed, before or after its output was committed. The
SIGKILL test (``test_fault_injection.py``) runs it too.
"""

from __future__ import annotations

import os
from collections import Counter

import pandas as pd
import pytest

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark import Stream, read_output
from sparkcast.testing import BroadcastHarness
from tests.spark.corpus import BATCH, ENRICH
from tests.spark.differential import (
    canon,
    harness_outputs,
    process,
    read_stream,
    write_batch_file,
)
from tests.spark.kinds import kind_of
from tests.spark.test_stateless import (
    BIG,
    FACTORS,
    MAIN,
    OUTPUT,
    Announce,
    KeyedScale,
    Scale,
    ScaleBatch,
)

pytestmark = pytest.mark.spark

FACTOR_SCHEMA = "name string, factor double"
EVENTS = [
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(0, 30)],
    [{"id": 30, "user": "u", "amount": -1.0}, '{"id": 31, "user": "u',
     {"id": 32, "user": "v", "amount": 40.0}],
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(33, 60)],
]
FACTOR_BATCHES = [  # the broadcast side changes between micro-batches
    [{"name": "u", "factor": 10.0}, {"name": "v", "factor": 0.5}],
    [],
    [{"name": "v", "factor": 3.0}, {"name": "w", "factor": 2.0}],
]
PARALLELISM = 3


def _write_inputs(base, batches):
    for index in batches:
        write_batch_file(base / "events", index, EVENTS[index])
        write_batch_file(base / "factors", index, FACTOR_BATCHES[index])


def _process(spark, base, function, **options):
    events = Stream(read_stream(spark, MAIN, base / "events"))
    factors = read_stream(spark, FACTOR_SCHEMA, base / "factors")
    if isinstance(function, KeyedScale):
        events = events.key_by("user")
    return events.connect(Stream(factors).broadcast(FACTORS)).process(
        function, OUTPUT, parallelism=PARALLELISM, side_outputs=[BIG], **options)


def _run(result, base):
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    return query


def _read(spark, base):
    out = str(base / "out")
    return (Counter(tuple(r) for r in read_output(spark, out).collect()),
            Counter(tuple(r) for r in read_output(spark, out, BIG).collect()),
            Counter(r["callback"] for r in read_output(spark, out, "dead_letters").collect()))


def _expected(function, batches=range(3), copies=PARALLELISM):
    """The harness over the same micro-batches; what ``process_broadcast_element`` emits comes
    once from each of the operator path's P subtasks (``copies``: from how many of them)."""
    h = BroadcastHarness(function, broadcast_descriptors=[FACTORS], on_error="dead_letter",
                         output_schema=OUTPUT, side_outputs=[BIG])
    h.open()
    for index in batches:
        rows = [r for r in EVENTS[index] if isinstance(r, dict)]
        main = pd.DataFrame(rows) if isinstance(function, ScaleBatch) else rows
        h.process_micro_batch(main, FACTOR_BATCHES[index])
    main = Counter(_rows(h.output()))
    big = Counter()
    for value in h.side_output(BIG):
        big[tuple(value)] += copies if value[0] == 0 else 1
    letters = Counter(d.callback for d in h.dead_letters())
    letters["input"] += 1  # the malformed line
    return main, big, letters


def _rows(values):
    return [tuple(v.values()) if isinstance(v, dict) else tuple(v) for v in values]


def _drop(directory, batch):
    """Remove a log file (and Hadoop's checksum beside it), as if it was never written."""
    for name in (str(batch), f".{batch}.crc"):
        if (directory / name).exists():
            os.remove(directory / name)


def _logged(directory):
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit())


# --------------------------------------------------------------------------- the path chosen


@pytest.mark.parametrize("function, options, path", [
    (Scale(), {}, "streamed"),
    (ScaleBatch(), {}, "streamed"),
    (Announce(), {}, "streamed"),
    (KeyedScale(), {}, "partitioned"),
    (Scale(), {"hold_until_ready": [FACTORS]}, "partitioned"),
    (Scale(), {"time_alignment": "event", "event_time": "id"}, "partitioned"),
], ids=["element", "batch", "broadcast-outputs", "keyed", "hold_until_ready", "event-aligned"])
def test_the_path_is_chosen_where_it_gives_the_operators_results(
        spark, tmp_path, function, options, path):
    _write_inputs(tmp_path, [0])
    if "event_time" in options:  # both sides need the event-time column
        write_batch_file(tmp_path / "factors", 0, [{"name": "u", "factor": 1.0, "id": 0}])
        factors = read_stream(spark, FACTOR_SCHEMA + ", id long", tmp_path / "factors")
        events = Stream(read_stream(spark, MAIN, tmp_path / "events"))
        result = events.connect(Stream(factors).broadcast(FACTORS)).process(
            function, OUTPUT, parallelism=2, **options)
    else:
        result = _process(spark, tmp_path, function, **options)
    assert kind_of(result) == path
    # result.main stays a streaming DataFrame: the operator's on this path
    assert result.main.isStreaming
    assert "TransformWithState" in result.main._jdf.queryExecution().analyzed().toString()


# --------------------------------------------------------------- outputs, restarts, replays


def _write_parquet(base, batch):
    """Batch ``batch``'s well-formed events in three Parquet files (so Spark reads them as
    several partitions), its factors in one."""
    rows = [r for r in EVENTS[batch] if isinstance(r, dict)]
    (base / "pq_events").mkdir(exist_ok=True)
    (base / "pq_factors").mkdir(exist_ok=True)
    for part in range(3):
        pd.DataFrame(rows[part::3], columns=["id", "user", "amount"]).astype(
            {"id": "int64", "amount": "float64"}).to_parquet(
            base / "pq_events" / f"b{batch}-{part}.parquet")
    pd.DataFrame(FACTOR_BATCHES[batch], columns=["name", "factor"]).astype(
        {"factor": "float64"}).to_parquet(base / "pq_factors" / f"b{batch}.parquet")


def test_parquet_sources_read_the_broadcast_partitions_alone_and_report_each_batch(
        spark, tmp_path, monkeypatch):
    """Without malformed-row capture the writer reads only the broadcast source's partitions of
    the union for the collect (the main rows once, by the write), and each batch's counts
    reach the monitoring through the listener, with the broadcast applied once."""
    from sparkcast.spark.outputs import batch_driver

    found = []
    real = batch_driver.side_partitions
    monkeypatch.setattr(batch_driver, "side_partitions",
                        lambda *a: found.append(real(*a)) or found[-1])
    main_rows, factor_rows, batches = 0, 0, [0, 1, 2]
    for batch in batches:  # one micro-batch a run, the query restarted in between
        _write_parquet(tmp_path, batch)
        events = spark.readStream.schema("id long, user string, amount double").parquet(
            str(tmp_path / "pq_events"))
        factors = spark.readStream.schema(FACTOR_SCHEMA).parquet(str(tmp_path / "pq_factors"))
        result = Stream(events).connect(Stream(factors).broadcast(FACTORS)).process(
            ScaleBatch(), OUTPUT, parallelism=PARALLELISM, side_outputs=[BIG])
        query = _run(result, tmp_path)
        rows = [r for r in EVENTS[batch] if isinstance(r, dict)]
        main_rows, factor_rows = main_rows + len(rows), factor_rows + len(FACTOR_BATCHES[batch])
        # the broadcast rows are read twice (the collect, the write), the main rows once
        [progress] = [p for p in query.recentProgress if p["numInputRows"]]
        assert progress["numInputRows"] == len(rows) + 2 * len(FACTOR_BATCHES[batch])
    assert all(f is not None for f in found) and len(found) == len(batches), found
    assert [len(f[1]) for f in found] == [1, 1, 1]  # one factors file (batch 1: empty) each
    assert all(f[0] and not set(f[0]) & set(f[1]) for f in found)
    main, big, letters = _read(spark, tmp_path)
    expected_main, expected_big, expected_letters = _expected(ScaleBatch())
    expected_letters["input"] -= 1  # Parquet has no malformed line
    assert (main, big, +letters) == (expected_main, expected_big, +expected_letters)
    records = _progress_records(tmp_path / "out", len(batches))
    [operators] = [r["operators"].values() for r in records[-1:]]  # one operator a batch
    assert len(operators) == 1 and len(records) == len(batches)
    counts = [op for r in records for op in r["operators"].values()]
    assert sum(op["events_main"] for op in counts) == main_rows
    assert sum(op["events_broadcast"] for op in counts) == factor_rows
    assert sum(op["dead_letters"] for op in counts) == sum(expected_letters.values())


def _progress_records(out, count):
    """The progress log's records, once the listener (asynchronous, on Spark's listener bus)
    has written ``count`` of them."""
    import json
    import time

    log = out / "_sparkcast_progress.jsonl"
    deadline = time.time() + 30
    while True:
        records = ([json.loads(line) for line in log.read_text().splitlines()]
                   if log.exists() else [])
        if len(records) >= count or time.time() > deadline:
            return records
        time.sleep(0.2)


def test_a_batch_whose_broadcast_source_brought_nothing_runs_no_job_for_it(spark, tmp_path):
    """A quiet broadcast side costs no Spark job: the micro-batch that brings factors reads
    them with one job over the broadcast partitions alone; the next run's micro-batch, with new
    events and no new factors file, runs none for them, and still scales by the factors the
    first one brought (the snapshot)."""
    def process():  # no malformed-row capture: its batches are read the slower safe way
        events = read_stream(spark, "id long, user string, amount double", tmp_path / "events")
        factors = read_stream(spark, FACTOR_SCHEMA, tmp_path / "factors")
        return Stream(events).connect(Stream(factors).broadcast(FACTORS)).process(
            Scale(), OUTPUT, parallelism=PARALLELISM, side_outputs=[BIG])

    write_batch_file(tmp_path / "events", 0, EVENTS[0])
    write_batch_file(tmp_path / "factors", 0, FACTOR_BATCHES[0])
    loud = _run(process(), tmp_path)
    write_batch_file(tmp_path / "events", 2, EVENTS[2])
    quiet = _run(process(), tmp_path)
    assert _broadcast_reads(spark, loud) == 1
    assert _broadcast_reads(spark, quiet) == 0
    h = BroadcastHarness(Scale(), broadcast_descriptors=[FACTORS], output_schema=OUTPUT,
                         side_outputs=[BIG])
    h.open()
    h.process_micro_batch(EVENTS[0], FACTOR_BATCHES[0])
    h.process_micro_batch(EVENTS[2], [])
    main, _, _ = _read(spark, tmp_path)
    assert main == Counter(_rows(h.output()))


def _broadcast_reads(spark, query) -> int:
    """How many jobs of the query's run read broadcast rows: the jobs named so in their
    description (``execution/phases.py``), from the driver's status store."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    run, named = str(query.runId), "sparkcast: broadcast rows"
    found = [jobs.apply(i) for i in range(jobs.size())]
    return sum(1 for job in found if job.jobGroup().isDefined() and job.jobGroup().get() == run
               and job.description().isDefined() and named in job.description().get())


@pytest.mark.parametrize("function", [Announce(), ScaleBatch()], ids=["element", "batch"])
def test_outputs_equal_the_harness_across_a_restart_without_shuffle_or_state(
        spark, tmp_path, caplog, function):
    _write_inputs(tmp_path, [0, 1])
    result = _process(spark, tmp_path, function)
    assert kind_of(result) == "streamed"
    with caplog.at_level("WARNING", logger="sparkcast"):
        query = _run(result, tmp_path)
    assert "StateStore" not in query._jsq.explainInternal(False)
    assert _read(spark, tmp_path) == _expected(type(function)(), [0, 1])
    # each input line counted once: the parsed and the malformed rows are tagged in one pass
    # over the events source (33 lines), the factors 2; the writer's two jobs (collect, write)
    # read the persisted batch, so they do not count it again
    assert sum(p["numInputRows"] for p in query.recentProgress) == 33 + 2
    # batch 1's dead letters (the malformed line, the negative amount) are not silent
    # (WARNING only: the listener's thread may log the batch's INFO line after the block, on
    # a logger an earlier test left at INFO)
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == "WARNING" and "micro-batch 1:" in r.getMessage()]
    assert len(warned) == 1 and "input 1" in warned[0], caplog.text
    _write_inputs(tmp_path, [2])  # the broadcast side changes, then the query restarts
    _run(_process(spark, tmp_path, type(function)()), tmp_path)
    assert _read(spark, tmp_path) == _expected(type(function)())
    # only the snapshots a replay of the next batch could need are kept
    assert _logged(tmp_path / "checkpoint" / "sparkcast" / "broadcast") == [0, 2]


class AnnounceOnce(Scale):
    """Emits on the broadcast side from subtask 0 only, as the fraud application does."""

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value, ctx):
        super().process_broadcast_element(value, ctx)
        if self.subtask == 0:
            yield BIG, (0, value["factor"])


def test_a_function_that_asks_its_subtask_gets_each_subtasks_own_broadcast_outputs(
        spark, tmp_path):
    """The driver applies a batch's broadcast elements once for the state; a function that asks
    which subtask it is may emit differently on each, so each subtask's outputs are its own
    (here one copy, as on the operator path), not subtask 0's copied P times."""
    _write_inputs(tmp_path, [0, 1, 2])
    result = _process(spark, tmp_path, AnnounceOnce())
    assert kind_of(result) == "streamed"
    _run(result, tmp_path)
    assert _read(spark, tmp_path) == _expected(AnnounceOnce(), copies=1)


def test_a_replayed_batch_is_written_once_whether_or_not_its_output_committed(spark, tmp_path):
    _write_inputs(tmp_path, [0, 1, 2])
    _run(_process(spark, tmp_path, Scale()), tmp_path)
    expected = _expected(Scale())
    assert _read(spark, tmp_path) == expected
    commits, log = tmp_path / "checkpoint" / "commits", tmp_path / "out" / "_spark_metadata"
    last = _logged(commits)[-1]
    assert last == 2
    # killed between the output's commit and the checkpoint's: the replay skips the batch
    _drop(commits, last)
    _run(_process(spark, tmp_path, Scale()), tmp_path)
    assert _read(spark, tmp_path) == expected
    # killed before the output's commit: the replay rewrites the batch (from the snapshot of
    # batch 0, its own is rewritten); the first attempt's files are in no log file
    _drop(commits, last)
    _drop(log, last)
    _run(_process(spark, tmp_path, Scale()), tmp_path)
    assert _read(spark, tmp_path) == expected
    assert _logged(log) == [0, 1, 2]


def test_the_corpus_matches_the_harness_on_the_streamed_path(spark, tmp_path):
    for program in (ENRICH, BATCH):
        base = tmp_path / program.name
        for index, (bcast, main) in enumerate(program.batches):
            write_batch_file(base / "main", index, main)
            write_batch_file(base / "bcast", index, bcast)
        result = process(program, read_stream(spark, program.main_schema, base / "main"),
                         read_stream(spark, program.broadcast_schema, base / "bcast"), 4)
        assert kind_of(result) == "streamed"
        _run(result, base)
        written = Counter(canon(r.asDict()) for r in read_output(spark, str(base / "out"))
                          .collect())
        assert written == harness_outputs(program)["main"], program.name


def test_a_checkpoint_of_one_path_is_refused_by_the_other(spark, tmp_path):
    _write_inputs(tmp_path, [0])
    _run(_process(spark, tmp_path, Scale(), hold_until_ready=[FACTORS]), tmp_path)
    streamed = _process(spark, tmp_path, Scale())
    assert kind_of(streamed) == "streamed"
    with pytest.raises(IncompatibleCheckpointError, match="keeps state per subtask"):
        streamed.write_stream(str(tmp_path / "out"), str(tmp_path / "checkpoint"))
    # a checkpoint holding operator state (a query the user started on result.main)
    os.makedirs(tmp_path / "other" / "state")
    with pytest.raises(IncompatibleCheckpointError, match="holds the stateful operator's state"):
        _process(spark, tmp_path, Scale()).write_stream(str(tmp_path / "out2"),
                                                        str(tmp_path / "other"))
