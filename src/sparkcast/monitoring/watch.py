"""Where the view and the report get their micro-batch records, and the view's refresh loop.

Three sources, one record format (``progress.batch_record``): this process's ``MONITOR`` (a
query started here), a running job's endpoint (``/progress.json`` beside ``/metrics``, started
with ``metrics_port``), or a ``write_stream`` output folder, whose progress log
``_sparkcast_progress.jsonl`` also outlives the job (``sparkcast report`` reads it).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from sparkcast.errors import PipelineError
from sparkcast.monitoring.outputs import OutputFolder
from sparkcast.monitoring.progress import is_observation
from sparkcast.monitoring.store import MONITOR, Monitor
from sparkcast.monitoring.view import Style, batch_line, screen
from sparkcast.spark.layout import PROGRESS_LOG


def records_from_url(url: str) -> list[dict[str, Any]]:
    """The records a metrics endpoint serves (``http://127.0.0.1:PORT`` or its ``/metrics``)."""
    base = url.rstrip("/").removesuffix("/metrics").removesuffix("/progress.json")
    with urllib.request.urlopen(base + "/progress.json", timeout=10) as answer:
        records: list[dict[str, Any]] = json.loads(answer.read())
    return records


def records_from_folder(path: Path | str) -> list[dict[str, Any]]:
    """The records of a ``write_stream`` output folder's progress log (or of the log file)."""
    log = Path(path)
    if log.is_dir():
        log = log / PROGRESS_LOG
    if not log.exists():
        raise PipelineError(f"no progress log at {log}: it is written by write_stream(...) "
                            "on a local path while the query runs")
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]


def monitor_of(records: list[dict[str, Any]]) -> Monitor:
    monitor = Monitor()
    for record in sorted(records, key=lambda r: (r["id"], r["batch"])):
        monitor.add(record)
    return monitor


def load(url: str | None = None, output: Path | str | None = None) -> Monitor:
    """A monitor of the endpoint at ``url``, else of ``output``'s progress log, else this
    process's own."""
    if url is not None:
        return monitor_of(records_from_url(url))
    if output is not None:
        return monitor_of(records_from_folder(output))
    return MONITOR


def watch(source: Callable[[], Monitor], *, folder: OutputFolder | None = None,
          out: TextIO | None = None, refresh_seconds: float = 1.0,
          running: Callable[[], bool] = lambda: False, query: str | None = None,
          final_screen: bool = True) -> Monitor:
    """Show the view until ``running()`` is false (at least once); returns the last monitor.
    On a terminal the screen is redrawn; elsewhere a line per new micro-batch, then (unless
    ``final_screen`` is false: ``--no-view``) the whole screen once at the end, without ANSI
    codes. ``out`` defaults to the ``sys.stdout`` of the
    call, not of the import (a replaced stdout, e.g. a captured one, may be closed since)."""
    out = out or sys.stdout
    style = Style(out.isatty())
    printed: set[tuple[str, int]] = set()
    while True:
        monitor = source()
        if folder is not None:
            folder.scan()
        active = running()
        if style.tty:
            status = "running" if active else "finished"
            out.write(style.clear + "\n".join(screen(monitor, folder, style=style,
                                                     status=status, query=query)) + "\n")
        else:
            for record in monitor.records():
                if (record["id"], record["batch"]) not in printed and (
                        query is None or record["query"] == query):
                    printed.add((record["id"], record["batch"]))
                    out.write(batch_line(record) + "\n")
        out.flush()
        if not active:
            break
        time.sleep(refresh_seconds)
    if not style.tty and final_screen:
        out.write("\n".join(screen(monitor, folder, style=style, query=query)) + "\n")
    return monitor


def view(query: Any, output: str | Path | None = None, out: TextIO | None = None,
         refresh_seconds: float = 1.0, final_screen: bool = True) -> Monitor:
    """The view of a query started in this process, while it runs and (``final_screen``) once
    at its end; ``output`` (a ``write_stream`` folder) adds its recent rows."""
    folder = OutputFolder(output) if output is not None else None
    name = query.name or str(query.id)
    ended: list[float] = []

    def running() -> bool:
        if query.isActive:
            return True
        ended[:1] = ended[:1] or [time.monotonic()]
        return time.monotonic() - ended[0] < 10 and _catching_up(query)

    return watch(lambda: MONITOR, folder=folder, out=out, refresh_seconds=refresh_seconds,
                 running=running, query=name, final_screen=final_screen)


def _catching_up(query: Any) -> bool:
    """Whether the listener (asynchronous, on Spark's listener bus) has yet to deliver a
    finished query's last sparkcast micro-batch: one that read rows, or whose progress holds
    an observation (that of the micro-batch engine's foreachBatch query reaches only the
    listener's copy of the progress)."""
    reported = [int(p["batchId"]) for p in query.recentProgress
                if p.get("numInputRows") or any(is_observation(n)
                                                 for n in p.get("observedMetrics") or {})]
    state = MONITOR.query(str(query.id))
    seen = state.last["batch"] if state is not None and state.last is not None else None
    return bool(reported) and (seen is None or seen < max(reported))
