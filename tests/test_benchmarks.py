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
