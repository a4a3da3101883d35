"""Run an application's query with the live view: ``sparkcast run`` and ``sparkcast demo``.

``run_app`` starts the query (resuming from its checkpoint), refreshes the view about once a
second, and stops the query on Ctrl-C, after ``duration`` seconds, or when ``until`` says so.
``run_demo`` generates an application's data into a temporary folder step by step while the
query runs, so files (and a broadcast update) appear mid-run, then prints the summary.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, App, event_count, steps, write_drop
from sparkcast.apps.live import LiveView, Progress, summary
from sparkcast.apps.outputs import OutputTracker
from sparkcast.errors import QueryFailedError


@dataclass
class RunSettings:
    parallelism: int = 4
    trigger_seconds: float = 1.0
    max_files_per_trigger: int | None = 1
    available_now: bool = False
    duration: float | None = None
    refresh_seconds: float = 1.0
    #: the Spark UI on http://localhost:4040 (``--spark-ui``)
    ui: bool = False
    #: serve Prometheus' /metrics and /progress.json (``--metrics-port``, ``--metrics-host``)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"


@dataclass
class RunReport:
    tracker: OutputTracker
    progress: Progress
    lines: list[str]
    ok: bool
    seconds: float


def spark_session(parallelism: int, ui: bool = False, metrics_port: int | None = None,
                  metrics_host: str = "127.0.0.1") -> Any:
    from sparkcast.spark import session

    partitions = str(min(parallelism, 2))
    return session(conf={"spark.sql.shuffle.partitions": partitions,
                         "spark.default.parallelism": partitions},
                   ui=ui, metrics_port=metrics_port, metrics_host=metrics_host)


def run_app(app: App, events: Path, broadcast: Path, output: Path, checkpoint: Path | str, *,
            artifacts: Path | None = None, settings: RunSettings | None = None,
            spark: Any = None, out: TextIO | None = None, view: bool = True,
            expected_events: int | None = None,
            until: Callable[[OutputTracker, Progress], bool] | None = None) -> RunReport:
    """Run until stopped (Ctrl-C), ``settings.duration`` elapses, ``until`` is true, or, with
    ``available_now``, everything in the folders is processed."""
    from sparkcast.apps.wiring import start

    settings = settings or RunSettings()
    out = out or sys.stdout  # the caller's, not the one at import
    spark = spark or spark_session(settings.parallelism, settings.ui, settings.metrics_port,
                                   settings.metrics_host)
    trigger = ({"availableNow": True} if settings.available_now
               else {"processingTime": f"{settings.trigger_seconds} seconds"})
    began = time.monotonic()
    tracker = OutputTracker(app, Path(output))
    tracker.skip_existing()
    query = start(app, spark, events, broadcast, output, checkpoint, artifacts=artifacts,
                  parallelism=settings.parallelism,
                  max_files_per_trigger=settings.max_files_per_trigger, trigger=trigger)
    progress = Progress(str(events), str(broadcast))
    live = LiveView(app, tracker, progress, out=out, expected_events=expected_events,
                    query_id=str(query.id))

    def poll() -> None:
        progress.update(query)
        tracker.scan(progress.last_batch)
        if view:
            live.refresh("running" if query.isActive else "stopped")

    try:
        while query.isActive:
            query.awaitTermination(settings.refresh_seconds)
            poll()
            if settings.duration and time.monotonic() - began > settings.duration:
                break
            if until is not None and until(tracker, progress):
                break
    except KeyboardInterrupt:
        out.write("\nstopping (the checkpoint keeps the progress; run again to resume)…\n")
    finally:
        if query.isActive:
            query.stop()
    failure = query.exception()
    if failure is not None:
        raise QueryFailedError(f"the query failed: {failure}") from failure
    poll()
    lines, ok = summary(app, tracker, progress, expected_events, live.style)
    return RunReport(tracker, progress, lines, ok, time.monotonic() - began)


def run_demo(app: App, *, seed: int = 7, scale: int = 2, files: int | None = None,
             step_seconds: float = 4.0, timeout: float = 300.0, workdir: Path | None = None,
             settings: RunSettings | None = None,
             out: TextIO | None = None, spark: Any = None) -> RunReport:
    """Files appear every ``step_seconds`` (the broadcast update in the middle) while the query
    runs; it stops once every generated event is accounted for, or after ``timeout``."""
    out = out or sys.stdout
    drops = app.drops(seed, scale, files)
    expected = event_count(drops)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=f"sparkcast-{app.name}-"))
    for folder in (EVENTS, BROADCAST, ARTIFACTS):
        (root / folder).mkdir(parents=True, exist_ok=True)
    groups = steps(drops)
    for drop in groups[0]:
        write_drop(root, drop)
    done, first_batch = threading.Event(), threading.Event()

    def writer() -> None:
        first_batch.wait(timeout)  # Spark's first micro-batch starts the workers: slow
        for group in groups[1:]:
            time.sleep(step_seconds)
            for drop in group:
                write_drop(root, drop)
        done.set()

    threading.Thread(target=writer, name="sparkcast-demo-writer", daemon=True).start()
    began = time.monotonic()

    def finished(tracker: OutputTracker, progress: Progress) -> bool:
        if progress.last_batch is not None:
            first_batch.set()
        if time.monotonic() - began > timeout:
            out.write("demo timeout reached\n")
            return True
        if not done.is_set() or progress.events_in() < expected:
            return False
        return not app.per_event_outputs or tracker.per_event_total() >= expected

    settings = settings or RunSettings()
    report = run_app(app, root / EVENTS, root / BROADCAST, root / "output", root / "checkpoint",
                     artifacts=root / ARTIFACTS, settings=settings, spark=spark, out=out,
                     expected_events=expected, until=finished)
    report.lines.insert(1, f"  data, outputs and checkpoint in {root}")
    if workdir is None and report.ok:
        shutil.rmtree(root, ignore_errors=True)
        report.lines[1] = "  (temporary data removed)"
    return report
