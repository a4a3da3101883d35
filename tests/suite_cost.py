"""What the suite costs, printed after every run: per file, its fresh JVMs, against the budget.

A pytest plugin (``tests/conftest.py`` loads it). After the run it prints

* one line per test file: tests, seconds in setup (a module's or session's fixtures: a Spark
  session, a broker, a cluster start land in the first test that asks for them), in the call
  and in teardown, and the total, the costliest first;
* the tests that start fresh JVMs of their own (marker ``fresh_jvm``: a subprocess that runs
  Spark, a cluster's workers, a killed pipeline), each with its seconds;
* the wall time of the run against ``BUDGET_SECONDS`` (25 minutes on the 2-core machine CI
  runs on), the line to read first.

The same figures go to ``.test-results/durations.json`` beside pytest's junit XML (``make
test`` asks for ``.test-results/junit.xml``), so two runs compare file by file::

    python -m tests.suite_cost old/durations.json .test-results/durations.json

``--no-jvm`` (``make check``) runs only the tests that need no JVM: a test needs one when it
asks for the ``spark``, ``kafka_broker`` or ``cluster`` fixture, directly or through another,
or is marked ``spark`` or ``fresh_jvm``. Under it, a test that starts a JVM anyway fails with
the marker to add: ``subprocess.Popen`` refuses ``java`` and ``spark-submit``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BUDGET_SECONDS = 25 * 60
RESULTS = Path(".test-results")
#: fixtures that start a JVM (the shared Spark session, the Kafka broker, the standalone cluster)
JVM_FIXTURES = frozenset({"spark", "kafka_broker", "cluster"})
JVM_MARKERS = frozenset({"spark", "fresh_jvm"})
#: the fixture whose tests run alone, after the parallel part (marker ``solo``)
SOLO_FIXTURE = "cluster"
_PHASES = ("setup", "call", "teardown")


@dataclass
class FileCost:
    tests: set[str] = field(default_factory=set)
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(_PHASES, 0.0))

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


class SuiteCost:
    """Adds up each report's duration by file and phase; prints and saves them at the end."""

    def __init__(self, earlier: Path | None = None) -> None:
        self.started = time.monotonic()
        self.files: dict[str, FileCost] = defaultdict(FileCost)
        self.fresh: dict[str, float] = defaultdict(float)
        #: the wall time of the earlier run this one goes on from (``--cost-after``)
        self.earlier_wall = 0.0
        if earlier is not None:
            self.earlier_wall = load(earlier, self.files, self.fresh)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # the report's keywords carry its markers, also from a pytest-xdist worker
        cost = self.files[report.nodeid.split("::")[0]]
        cost.tests.add(report.nodeid)
        cost.seconds[report.when] += report.duration
        if "fresh_jvm" in report.keywords:
            self.fresh[report.nodeid] += report.duration

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        wall = self.earlier_wall + time.monotonic() - self.started
        if not self.files:
            return
        write = terminalreporter.write_line
        terminalreporter.section("suite cost (seconds)")
        for line in table(self.files):
            write(line)
        if self.fresh:
            write("")
            write(f"{len(self.fresh)} tests start fresh JVMs (marker fresh_jvm), "
                  f"{sum(self.fresh.values()):,.0f} s:")
            for nodeid, seconds in sorted(self.fresh.items(), key=lambda kv: -kv[1]):
                write(f"{seconds:8.1f}  {nodeid}")
        write("")
        write(budget_line(wall))
        save(self.files, self.fresh, wall)


def table(files: dict[str, FileCost]) -> list[str]:
    """The per-file lines, the costliest first, with a total line."""
    lines = [f"{'total':>8} {'setup':>8} {'call':>8} {'teardown':>8} {'tests':>6}  file"]
    for name, cost in sorted(files.items(), key=lambda kv: -kv[1].total):
        s = cost.seconds
        lines.append(f"{cost.total:8.1f} {s['setup']:8.1f} {s['call']:8.1f} "
                     f"{s['teardown']:8.1f} {len(cost.tests):6d}  {name}")
    phases = {p: sum(c.seconds[p] for c in files.values()) for p in _PHASES}
    count = sum(len(c.tests) for c in files.values())
    lines.append(f"{sum(phases.values()):8.1f} {phases['setup']:8.1f} {phases['call']:8.1f} "
                 f"{phases['teardown']:8.1f} {count:6d}  all {len(files)} files")
    return lines


def budget_line(wall: float) -> str:
    verdict = "within" if wall <= BUDGET_SECONDS else "OVER"
    return (f"suite wall time {wall / 60:.1f} min of the {BUDGET_SECONDS // 60}-minute budget: "
            f"{verdict} ({wall:,.0f} s of {BUDGET_SECONDS:,} s)")


def save(files: dict[str, FileCost], fresh: dict[str, float], wall: float) -> None:
    RESULTS.mkdir(exist_ok=True)
    figures = {"wall_seconds": round(wall, 1),
               "files": {name: {"tests": len(c.tests), **{p: round(v, 2)
                                                          for p, v in c.seconds.items()}}
                         for name, c in files.items()},
               "fresh_jvm": {k: round(v, 2) for k, v in fresh.items()}}
    (RESULTS / "durations.json").write_text(json.dumps(figures, indent=1, sort_keys=True))


def load(path: Path, files: dict[str, FileCost], fresh: dict[str, float]) -> float:
    """An earlier run's saved figures added into ``files`` and ``fresh``; its wall time."""
    figures = json.loads(path.read_text())
    for name, saved in figures["files"].items():
        cost = files[name]
        cost.tests.update(f"{name}::#{i}" for i in range(saved["tests"]))
        for phase in _PHASES:
            cost.seconds[phase] += saved.get(phase, 0.0)
    for nodeid, seconds in figures["fresh_jvm"].items():
        fresh[nodeid] += seconds
    return float(figures["wall_seconds"])


def needs_jvm(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return bool(fixtures & JVM_FIXTURES) or any(item.get_closest_marker(m) for m in JVM_MARKERS)


class NoJvm:
    """``--no-jvm``: deselects the tests that need a JVM and fails any other that starts one."""

    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        kept = [i for i in items if not needs_jvm(i)]
        dropped = [i for i in items if needs_jvm(i)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        original = subprocess.Popen.__init__

        def refuse_jvm(popen: Any, args: Any, *rest: Any, **options: Any) -> None:
            words = args if isinstance(args, list | tuple) else [args]
            if any(Path(str(w)).name in ("java", "spark-submit") for w in words[:1]):
                raise RuntimeError(f"{item.nodeid} starts a JVM under --no-jvm: mark it "
                                   "fresh_jvm (or spark), or ask for the spark fixture")
            original(popen, args, *rest, **options)

        subprocess.Popen.__init__ = refuse_jvm  # type: ignore[method-assign]
        try:
            return (yield)
        finally:
            subprocess.Popen.__init__ = original  # type: ignore[method-assign]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-jvm", action="store_true",
                     help="run only the tests that need no JVM (make check)")
    parser.addoption("--cost-after", type=Path, default=None,
                     help="a durations.json this run goes on from: one table and one budget "
                          "line for both (make test's solo part after its parallel part)")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The standalone cluster's tests are ``solo``: their jobs hold a moment on two one-core
    workers, which a second test beside them on 2 cores makes them miss."""
    for item in items:
        if SOLO_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.solo)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fresh_jvm: starts a JVM of its own (a subprocess that "
                                       "runs Spark, a cluster, a killed pipeline)")
    config.addinivalue_line("markers", "solo: runs after the parallel part of make test, alone "
                                       "on the machine (the standalone cluster's tests)")
    config.pluginmanager.register(SuiteCost(config.getoption("--cost-after")), "suite_cost")
    if config.getoption("--no-jvm"):
        config.pluginmanager.register(NoJvm(), "no_jvm")


def compare(before: Path, after: Path) -> list[str]:
    """Per-file totals of two runs side by side, the largest growth first; each run is a saved
    ``durations.json`` or a junit XML (an older tree run with ``--junitxml``)."""
    old, new = file_totals(before), file_totals(after)
    names = sorted(set(old) | set(new), key=lambda n: old.get(n, 0.0) - new.get(n, 0.0))
    lines = [f"{'before':>8} {'after':>8} {'change':>8}  file"]
    for name in names:
        a, b = old.get(name, 0.0), new.get(name, 0.0)
        lines.append(f"{a:8.1f} {b:8.1f} {b - a:+8.1f}  {name}")
    lines.append(f"{sum(old.values()):8.1f} {sum(new.values()):8.1f} "
                 f"{sum(new.values()) - sum(old.values()):+8.1f}  all files")
    return lines


def file_totals(path: Path) -> dict[str, float]:
    """Seconds per test file of one run."""
    if path.suffix == ".json":
        files = json.loads(path.read_text())["files"]
        return {name: sum(f.get(p, 0.0) for p in _PHASES) for name, f in files.items()}
    import xml.etree.ElementTree as ElementTree

    totals: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(path).iter("testcase"):
        totals[_test_file(case.get("classname", ""))] += float(case.get("time", 0))
    return dict(totals)


def _test_file(classname: str) -> str:
    """``tests/spark/test_x.py`` for junit's ``tests.spark.test_x`` or ``...test_x.TestClass``."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        candidate = "/".join(parts[:end]) + ".py"
        if Path(candidate).is_file():
            return candidate
    return classname


if __name__ == "__main__":
    print("\n".join(compare(Path(sys.argv[1]), Path(sys.argv[2]))))
