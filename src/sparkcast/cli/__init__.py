"""The ``sparkcast`` command: the top-level parser and ``main``, one module per command group.

::

    sparkcast demo [APP]                   generate data while the query runs, then a summary
    sparkcast generate APP --out DIR       events/, broadcast/ (and artifacts/) as JSON lines
    sparkcast run APP --events DIR --broadcast DIR --output DIR --checkpoint DIR
                  [--master URL] [--archive ENV.tar.gz] [--conf KEY=VALUE ...]
    sparkcast list                         the applications
    sparkcast state show CHECKPOINT [--key K]          a job's state
    sparkcast state rescale CHECKPOINT NEW --parallelism P [--state-buckets B]
    sparkcast view [--url URL | --output DIR]   the live view of any sparkcast query
    sparkcast report (--url URL | --output DIR) --html FILE   a run's pictures, one HTML file

The groups: :mod:`~sparkcast.cli.apps` (demo, generate, run, list), :mod:`~sparkcast.cli.state`
(state show, state rescale), :mod:`~sparkcast.cli.view` (view, report). Each adds its commands to
the parser (``add_commands``), names them (``COMMANDS``) and runs one (``run``); Spark is
imported only once a command needs it, so ``--help``, ``list`` and ``generate`` start at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sparkcast.cli import apps, state, view
from sparkcast.cli.apps import EPILOG

GROUPS = (apps, state, view)  # in the order of the help's list of commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkcast", epilog=EPILOG,
        description="Flink's Broadcast State Pattern on Spark Structured Streaming: "
                    "run the example applications.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    group = next(group for group in GROUPS if args.command in group.COMMANDS)
    return group.run(args)
