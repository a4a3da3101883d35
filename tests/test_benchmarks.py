"""benchmarks/ as the project keeps it: scripts that import each other one way, systems chosen
by engine through the public API, one way to run a system in a child process, and the report's
target rows computed from a run's results (here, results made up to hit each verdict).

No benchmark runs here (``make bench`` and ``make bench-quick`` do that): these check the code
that turns a run into docs/benchmarks.md, and the child-process runner with real processes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.test_layers import circles, imports_of

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = {p.stem: p for p in sorted(BENCH.glob("*.py"))}


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ModuleType]]:
    """The benchmark scripts importable by their own names, as they import each other; the
    modules they load are forgotten afterwards (their names, such as ``data``, are generic)."""
    monkeypatch.syspath_prepend(str(BENCH))
    before = set(sys.modules)
    import child
    import report

    yield {"child": child, "report": report}
    for name in set(sys.modules) - before:
        if name in SCRIPTS:
            del sys.modules[name]


def test_no_benchmark_script_imports_one_that_imports_it_back():
    known = set(SCRIPTS)
    edges = {name: imports_of(name, path.read_text(encoding="utf-8"), known)
             for name, path in SCRIPTS.items()}
    assert circles(edges) == []
    assert "run" not in set().union(*edges.values())  # the runner is the top: nothing imports it


def test_benchmarks_choose_and_name_engines_through_the_public_api():
    private = re.compile(r"ExecutionPath|\.plan\.path|[\"'](stateless|partitioned)[\"']")
    found = [f"{name}.py:{number}: {line.strip()}" for name, path in SCRIPTS.items()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if private.search(line)]
    assert found == []


# ---- one way to run a system in a child process


def test_a_child_answers_with_its_result_line(bench, tmp_path, monkeypatch):
    child = bench["child"]
    monkeypatch.setattr(child, "RESULTS", tmp_path)
    script = ("import sys, child; print('noise'); print('more', file=sys.stderr); "
              "child.answer({'ok': True, 'seconds': 1.5})")
    assert child.run_once([sys.executable, "-c", script], 30, "t") == {"ok": True,
                                                                          "seconds": 1.5}
    assert "more" in (tmp_path / "t.log").read_text()


def test_a_child_past_its_time_limit_is_killed_and_reported(bench, tmp_path, monkeypatch):
    child = bench["child"]
    monkeypatch.setattr(child, "RESULTS", tmp_path)
    script = "import time; time.sleep(60)"
    assert child.run_once([sys.executable, "-c", script], 1, "t") == {
        "ok": False, "error": "timeout after 1 s"}


def test_a_child_that_dies_is_reported_with_its_error(bench, tmp_path, monkeypatch):
    child = bench["child"]
    monkeypatch.setattr(child, "RESULTS", tmp_path)
    (tmp_path / "t.log").write_text("an earlier run's ValueError: not this one\n")
    result = child.run_once([sys.executable, "-c", "raise KeyError('W9')"], 30, "t")
    assert result == {"ok": False, "error": "KeyError: 'W9'"}


# ---- the report's target rows


def _latency(mode: str, engine: str, p99: float, seen: int = 6) -> dict:
    return {"ok": True, "mode": mode, "engine": engine, "p50_ms": p99 / 2, "p99_ms": p99,
            "seen": seen, "updates": 6, "batch_ms_median": 300.0, "latencies_ms": [p99],
            "rows_per_batch_median": 6000.0}


def _rows(report: ModuleType, results: dict) -> dict[str, tuple[str, str]]:
    return {target: (measured, verdict) for target, measured, verdict
            in report.targets({"throughput": {}, **results})}


def test_the_timer_targets_come_from_the_latency_and_streamed_runs(bench):
    streamed = {"workloads": {"W7": {"element-mb": {"rate": 30_000.0},
                                     "element-operator": {"rate": 25_000.0}}}}
    latency = {"session timers, micro-batch engine": _latency("timer", "micro_batch", 850),
               "session timers, operator engine (forced)": _latency("timer", "operator", 1900)}
    rows = _rows(bench["report"], {"streamed": streamed, "latency": latency})
    assert rows["W7 update p99 < 1 s at 20k events/s (session timers, micro-batch engine)"] == (
        "p50 425 ms, p99 850 ms, micro-batch median 300 ms", "met")
    assert rows["W7 update p99 < 1 s at 20k events/s (session timers, operator engine "
                "(forced))"][1] == "missed"
    assert rows["W7 timers: micro-batch ≥ 1.5x the operator engine's"] == ("1.20x", "missed")


def test_an_update_never_seen_misses_the_latency_target(bench):
    latency = {"session timers, micro-batch engine": _latency("timer", "micro_batch", 500,
                                                              seen=5)}
    rows = _rows(bench["report"], {"latency": latency})
    assert rows["W7 update p99 < 1 s at 20k events/s (session timers, micro-batch engine)"][
        1] == "missed"


def test_w3_is_compared_with_pyflink_on_the_same_run(bench):
    def w3(mine: float, flink: float) -> dict:
        return {"throughput": {"W3": {"sparkcast-mb": {"rate": mine},
                                      "pyflink": {"rate": flink}}}}

    target = ("W3 per-element on the micro-batch engine ≥ 50x PyFlink (the same inputs, sizes "
              "and run)")
    assert _rows(bench["report"], w3(180_000.0, 3_000.0))[target] == ("60.0x", "met")
    assert _rows(bench["report"], w3(90_000.0, 3_000.0))[target] == ("30.0x", "missed")
    assert _rows(bench["report"], {"throughput": {}})[target] == ("—", "—")


# ---- the Kafka latency run: what its reader counts, and the table it makes

QUICK = {"keys": 10_000, "latency": {"rates": [5_000, 20_000], "updates": 5, "interval": 2.0,
                                     "warmup": 5.0, "catch_up": 15.0, "drain": 10.0}}


@pytest.fixture
def kafka_bench(bench) -> Iterator[tuple[ModuleType, ModuleType]]:
    """The latency run's measuring and judging (``kafka_latency``), its reader
    (``kafka_clients``)."""
    import kafka_clients
    import kafka_latency

    yield kafka_latency, kafka_clients


def test_the_reader_counts_a_later_version_as_reflecting_the_earlier_ones(kafka_bench):
    _, clients = kafka_bench
    decisions = clients.Decisions()
    assert decisions.note([{"version": 0, "event_ms": 900.0}], 1_000.0) == [0]
    assert decisions.note([{"version": 2, "event_ms": 1_500.0},
                           {"version": 1, "event_ms": 1_400.0}], 2_000.0) == [1, 2]
    assert decisions.note([{"version": 2, "event_ms": 1_900.0}], 2_100.0) == []
    assert decisions.seen == {0: 1_000.0, 1: 2_000.0, 2: 2_000.0}


def test_an_event_never_decided_is_slower_than_every_decided_one(kafka_bench):
    _, clients = kafka_bench
    decisions = clients.Decisions()
    decisions.note([{"version": 0, "event_ms": float(ms)} for ms in range(1_000, 1_100)],
                   1_200.0)
    decisions.note([{"version": 0, "event_ms": 5.0}], 1_250.0)  # before the window
    window = decisions.summary(1_000.0, 2_000.0, produced=100)
    assert window["read"] == 101  # every decision read in the window, whatever its event
    # latencies 101..200 ms: ranks 50 and 98 of 100
    assert (window["events_decided"], window["event_p50_ms"], window["event_p99_ms"]) == (
        100, 151.0, 199.0)
    window = decisions.summary(1_000.0, 2_000.0, produced=150)  # 50 never decided
    assert window["event_p50_ms"] == 175.0 and window["event_p99_ms"] is None


def _progress(kafka: ModuleType, start: dict | None, end: dict, batch: int = 0,
              began: str = "2026-11-28T10:00:00.000Z", took: int = 0) -> object:
    class Source:
        startOffset = None if start is None else kafka.json.dumps({"ev": start})
        endOffset = kafka.json.dumps({"ev": end})

    class Progress:
        sources = [Source()]
        batchId, timestamp, durationMs = batch, began, {"triggerExecution": took}

    return Progress()


def test_the_decision_rate_runs_from_the_first_batch_that_ended_in_the_window_to_the_last(
        kafka_bench):
    kafka, _ = kafka_bench
    progress = [_progress(kafka, {"0": 0}, {"0": 9_000}, 4, "2026-11-28T10:00:00.000Z", 3_000),
                _progress(kafka, {"0": 9_000}, {"0": 12_000}, 5, "2026-11-28T10:00:03.000Z",
                          1_000),
                _progress(kafka, {"0": 12_000}, {"0": 12_000}, 6, "2026-11-28T10:00:04.000Z",
                          100),  # no input: not counted
                _progress(kafka, {"0": 12_000}, {"0": 17_000}, 7, "2026-11-28T10:00:04.100Z",
                          900)]
    # batches 5 and 7 read 8,000 events between batch 4's end (10:00:03) and 7's (10:00:05)
    assert kafka._decided_per_s(progress, "ev", 4, 7) == 4_000.0
    assert kafka._decided_per_s(progress, "ev", 7, 7) is None  # one batch: no rate


def test_the_lag_is_what_the_last_completed_batch_left_in_the_topic(kafka_bench):
    kafka, _ = kafka_bench
    progress = _progress(kafka, {"0": 10, "1": 20}, {"0": 110, "1": 70})
    done = kafka._offsets(progress, "ev", "endOffset")
    assert done == {0: 110, 1: 70}
    assert kafka._offsets(progress, "other", "endOffset") == {}
    assert kafka.Mark(0.0, {0: 150, 1: 70, 2: 5}, done, 3).lag == 40 + 0 + 5


def _run(kafka: ModuleType, job: str, rate: int, update_p99: float | None,
         kept_up: bool = True) -> dict:
    return {"job": job, "rate": rate, "updates": 5, "seen": 5, "kept_up": kept_up,
            "update_p50_ms": 500.0, "update_p99_ms": update_p99, "event_p50_ms": 400.0,
            "event_p99_ms": 800.0, "decided_per_s": 4_990.0, "produced_per_s": rate * 1.0,
            "lag_start_s": 0.4, "lag_end_s": 0.6, "batch_ms": {"triggerExecution": 350.0},
            "failed": None}


def test_each_sparkcast_job_is_judged_beside_the_hand_written_one_at_its_rate(kafka_bench):
    kafka, _ = kafka_bench
    peer, keyed, timer = kafka.LATENCY_JOBS
    runs = [_run(kafka, peer, 5_000, 1_300.0), _run(kafka, keyed, 5_000, 900.0),
            _run(kafka, timer, 5_000, 2_600.0, kept_up=False),
            _run(kafka, keyed, 20_000, 1_200.0)]  # no peer at this rate
    rows = {target: (measured, verdict) for target, measured, verdict
            in kafka.latency_targets(runs)}
    assert rows[f"{keyed} at 5,000 events/s: update p99 ≤ the hand-written job's"] == (
        "900 ms vs 1,300 ms", "met")
    assert rows[f"{keyed} at 5,000 events/s: update p99 < 1 s (target)"][1] == "met"
    assert rows[f"{timer} at 5,000 events/s: keeps up"][1] == "missed"
    assert rows[f"{timer} at 5,000 events/s: update p99 ≤ the hand-written job's"][1] == (
        "missed")
    assert rows[f"{keyed} at 20,000 events/s: update p99 ≤ the hand-written job's"][1] == "—"
    assert rows[f"{keyed} at 20,000 events/s: update p99 < 1 s (aim)"][1] == "missed"
    text = "\n".join(kafka.latency_table(QUICK, runs))
    assert f"| 5,000 | {timer} | **no** | 4,990 ÷ 5,000 | 0.4 → 0.6 s | 500 ms (1.0x) | " \
           "2,600 ms (2.0x) | 400 ms (1.0x) | 800 ms (1.0x) | 350 ms |" in text


def test_an_update_never_seen_leaves_the_p99_unknown_and_the_target_missed(kafka_bench):
    kafka, _ = kafka_bench
    peer, keyed, _ = kafka.LATENCY_JOBS
    runs = [_run(kafka, peer, 5_000, 1_300.0), _run(kafka, keyed, 5_000, None)]
    rows = {target: (measured, verdict) for target, measured, verdict
            in kafka.latency_targets(runs)}
    assert rows[f"{keyed} at 5,000 events/s: update p99 ≤ the hand-written job's"] == (
        "— vs 1,300 ms", "missed")


def test_a_full_run_keeps_the_section_the_kafka_benchmark_wrote(bench):
    import kafka

    old = (f"# Benchmarks\n\nold figures\n\n{kafka.HEADING}\n\n{kafka.BEGIN}\n| a | b |\n"
           f"{kafka.END}\n")
    assert bench["report"].kept_sections(old) == (
        f"\n{kafka.HEADING}\n\n{kafka.BEGIN}\n| a | b |\n{kafka.END}\n")
    assert bench["report"].kept_sections("# Benchmarks\n\nno section\n") == ""


def test_a_job_that_failed_keeps_its_row_and_misses_its_targets(kafka_bench):
    kafka, _ = kafka_bench
    peer, _, timer = kafka.LATENCY_JOBS
    runs = [_run(kafka, peer, 5_000, 1_300.0),
            {"job": timer, "rate": 5_000, "failed": "StreamingQueryException: boom"}]
    assert kafka.latency_targets(runs) == [
        (f"{timer} at 5,000 events/s: runs", "failed: StreamingQueryException: boom", "missed")]
    assert (f"| 5,000 | {timer} | failed: StreamingQueryException: boom |"
            in "\n".join(kafka.latency_table(QUICK, runs)))


def test_a_batchs_jobs_are_summed_by_phase_and_a_phase_missing_from_a_batch_counts_zero(bench):
    import job_timeline

    assert job_timeline.call_site("collect at /a/long/path/streamed.py:138") == (
        "collect at streamed.py:138")
    assert job_timeline.call_site("start at NativeMethodAccessorImpl.java:0") == (
        "start at NativeMethodAccessorImpl.java:0")
    by_batch = {1: {"the pattern": 500.0, "broadcast rows": 80.0}, 2: {"the pattern": 700.0},
                3: {"the pattern": 600.0}}
    assert job_timeline.median_jobs(by_batch, [1, 2, 3]) == {"broadcast rows": 0.0,
                                                            "the pattern": 600.0}
    assert job_timeline.median_jobs(by_batch, [9]) == {}


def test_the_jobs_table_leaves_out_a_phase_that_is_zero_in_every_run(kafka_bench):
    latency, _ = kafka_bench
    runs = [{"job": "hand-written", "rate": 5_000, "jobs_ms": {"start at X:0": 700.0}},
            {"job": "sparkcast keyed", "rate": 5_000,
             "jobs_ms": {"the pattern": 519.0, "broadcast rows": 0.0}}]
    lines = latency.jobs_table(runs)
    assert [line for line in lines if line.startswith("| `")] == [
        "| `start at X:0` | 700 |  |", "| `the pattern` |  | 519 |"]
    assert latency.jobs_table([{"job": "hand-written", "rate": 5_000}]) == []


def test_the_scale_benchmark_measures_only_the_curves_asked_for(bench):
    import scale

    keys = scale.points("full", ["keys"])
    assert {p["curve"] for p in keys} == {"keys"}
    assert [p["keys"] for p in keys] == [10_000, 100_000, 1_000_000, 10_000_000]
    assert {p["curve"] for p in scale.points("quick")} == set(scale.CURVES)
