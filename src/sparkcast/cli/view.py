"""``sparkcast view`` and ``sparkcast report``: watch any sparkcast query, or picture a run.

The view reads a running job's metrics endpoint (``--url``, started by ``metrics_port`` /
``--metrics-port``) or a ``write_stream`` output folder (``--output``: its progress log and
its committed rows); in Python, ``sparkcast.monitoring.watch.view(query)`` shows a query of the
same process. The report writes one self-contained HTML file (``monitoring/report.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

COMMANDS = ("view", "report")


def add_commands(commands: Any) -> None:
    """The ``view`` and ``report`` commands, under the main parser's ``commands``."""
    view = commands.add_parser(
        "view", help="the live view of any sparkcast query (endpoint or output folder)",
        description="Show progress, rates, batch latency, Kafka lag (offsets behind the "
                    "latest, per source), outputs, dead letters and the "
                    "broadcast version of each subtask (with the micro-batch that applied it) "
                    "of a running or finished query. Without a terminal: no ANSI codes, one "
                    "line per micro-batch, then the whole view.")
    _source(view)
    view.add_argument("--once", action="store_true", help="show the view once and exit")
    view.add_argument("--duration", type=float, help="stop after this many seconds")
    view.add_argument("--refresh-seconds", type=float, default=1.0,
                      help="seconds between two refreshes (default 1)")
    view.add_argument("--query", help="only this query (its name)")

    report = commands.add_parser(
        "report", help="write a run's pictures as one self-contained HTML file",
        description="Events/s and batch latency per micro-batch, Kafka lag per micro-batch "
                    "(a run that reads Kafka), outputs and dead letters per "
                    "micro-batch, and broadcast versions per subtask and micro-batch, as inline "
                    "SVG in one HTML file.")
    _source(report)
    report.add_argument("--html", type=Path, required=True, help="the HTML file to write")


def _source(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a job's metrics endpoint, e.g. http://127.0.0.1:9108")
    where.add_argument("--output", type=Path,
                       help="a write_stream output folder (reads its progress log)")


def run(args: argparse.Namespace) -> int:
    from sparkcast.errors import PipelineError
    from sparkcast.monitoring.outputs import OutputFolder
    from sparkcast.monitoring.store import Monitor
    from sparkcast.monitoring.watch import load, watch

    if args.command == "report":
        from sparkcast.monitoring.report import report_html

        monitor = load(url=args.url, output=args.output)
        title = f"sparkcast run · {args.url or args.output}"
        args.html.write_text(report_html(monitor, title), encoding="utf-8")
        print(f"wrote {args.html} ({len(monitor.records())} micro-batches)")
        return 0
    folder = OutputFolder(args.output) if args.output is not None else None
    began = time.monotonic()

    def running() -> bool:
        return not args.once and (args.duration is None
                                  or time.monotonic() - began < args.duration)

    def source() -> Monitor:
        try:
            return load(url=args.url, output=args.output)
        except (PipelineError, OSError):  # not started yet, or the endpoint went away
            if running():
                return Monitor()
            raise

    try:
        watch(source, folder=folder, out=sys.stdout,
              refresh_seconds=args.refresh_seconds, running=running, query=args.query)
    except KeyboardInterrupt:
        pass
    return 0
