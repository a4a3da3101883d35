"""The ``sparkcast`` command: the top-level parser and ``main``, one module per command group.

::

    sparkcast demo [APP] [--postgres|--kafka]   data generated while the query runs, a summary
    sparkcast generate APP --out DIR       events/, broadcast/ (and artifacts/) as JSON lines
    sparkcast run APP --events DIR --broadcast DIR --output DIR --checkpoint DIR
                  [--master URL] [--archive ENV.tar.gz] [--conf KEY=VALUE ...]
    sparkcast run PATH.py[:NAME] [--output DIR --checkpoint DIR]   your own job file
    sparkcast init NAME                    a project: function, harness test, job, README
    sparkcast list                         the applications
    sparkcast state show CHECKPOINT [--key K]          a job's state
    sparkcast state rescale CHECKPOINT NEW --parallelism P [--state-buckets B]
    sparkcast state move|copy CHECKPOINT NEW           to another folder or bucket
    sparkcast view [--url URL | --output DIR]   the live view of any sparkcast query
    sparkcast report (--url URL | --output DIR) --html FILE   a run's pictures, one HTML file
    sparkcast --version | --debug COMMAND ...

The groups: :mod:`~sparkcast.cli.apps` (demo, generate, run, list; a job file's run in
:mod:`~sparkcast.cli.jobs`), :mod:`~sparkcast.cli.state` (state show, rescale, move, copy),
:mod:`~sparkcast.cli.view` (view, report), :mod:`~sparkcast.cli.skeleton` (init).
:mod:`~sparkcast.cli.checks` checks every argument before a command runs: a mistake is one line
on stderr and exit status 2, within a second and before any JVM starts. Each adds its commands to
the parser (``add_commands``), names them (``COMMANDS``) and runs one (``run``); Spark is
imported only once a command needs it, so ``--help``, ``list`` and ``generate`` start at once.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from sparkcast.cli import apps, skeleton, state, view
from sparkcast.cli.apps import EPILOG
from sparkcast.cli.checks import check
from sparkcast.errors import QueryFailedError, SparkcastError, UsageError

GROUPS = (apps, state, view, skeleton)  # in the order of the help's list of commands
#: exit status of a user mistake (argparse's), of a failed run, of Ctrl-C before a run
USAGE, FAILED, INTERRUPTED = 2, 1, 130
DEBUG = "on an error, print the traceback, not only the message"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: ``sparkcast run: error: ... (sparkcast run --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from sparkcast import __version__

    parser = Parser(
        prog="sparkcast", epilog=EPILOG,
        description="Flink's Broadcast State Pattern on Spark Structured Streaming: run your "
                    "own job file or the example applications.")
    parser.add_argument("--version", action="version", version=f"sparkcast {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=Parser)
    for group in GROUPS:
        group.add_commands(commands)
    for command in commands.choices.values():  # main takes it anywhere; listed in every help
        command.add_argument("--debug", action="store_true", help=DEBUG)
    return parser


def error_text(command: str, exc: SparkcastError) -> str:
    """The error's first line (its point and the fix) after ``sparkcast COMMAND: error:``, then
    its details, a line each."""
    lead, _, details = str(exc).partition("\n")
    hint = "" if isinstance(exc, UsageError) else " (--debug: the traceback)"
    return f"sparkcast {command}: error: {lead}{hint}\n" + (f"{details}\n" if details else "")


def main(argv: Sequence[str] | None = None) -> int:
    """Parse, check every argument (before Spark starts), run one command. A sparkcast error
    leads with one line on stderr, its details after: exit status 2 for a mistake, 1 for a
    failed query."""
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words  # anywhere: ``sparkcast run job.py --debug`` too
    args = build_parser().parse_args([w for w in words if w != "--debug"])
    try:
        check(args)
        group = next(group for group in GROUPS if args.command in group.COMMANDS)
        return group.run(args)
    except SparkcastError as exc:
        if debug:
            traceback.print_exc()
        else:
            print(error_text(args.command, exc), file=sys.stderr, end="")
        return FAILED if isinstance(exc, QueryFailedError) else USAGE
    except KeyboardInterrupt:  # before a query ran (a running one is stopped by its command)
        print(f"sparkcast {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
