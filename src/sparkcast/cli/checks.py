"""Every argument checked before Spark starts: a mistake costs the user a second, not a JVM.

``check(args)`` runs after argparse and before any command imports pyspark. It raises
:class:`~sparkcast.errors.UsageError` with one sentence that names the option, what was given
and what is accepted; ``main`` prints it as one line on stderr and exits 2 (``--debug``: the
traceback).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from sparkcast.errors import UsageError

#: a URI scheme (``hdfs://``, ``s3a://``, ``file://``): a location only Spark can check
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def check(args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` for the first argument of ``args`` that cannot work."""
    _numbers(args)
    if args.command in ("run", "demo"):
        _run(args)
    elif args.command in ("view", "report"):
        _source(args)
    elif args.command == "state":
        _state(args)
    elif args.command == "init":
        _init(args)


def at_least(value: float | None, low: float, option: str, strict: bool = False) -> None:
    if value is None:
        return
    if value < low or (strict and value == low):
        bound = f"more than {low:g}" if strict else f"{low:g} or more"
        raise UsageError(f"{option} must be {bound}, not {value:g}")


def _numbers(args: argparse.Namespace) -> None:
    get = vars(args).get
    at_least(get("parallelism"), 1, "--parallelism")
    at_least(get("state_buckets"), 1, "--state-buckets")
    at_least(get("max_files_per_trigger"), 0, "--max-files-per-trigger")
    at_least(get("scale"), 1, "--scale")
    at_least(get("files"), 2, "--files")
    at_least(get("step_seconds"), 0, "--step-seconds")
    for name in ("trigger_seconds", "duration", "timeout", "refresh_seconds"):
        at_least(get(name), 0, "--" + name.replace("_", "-"), strict=True)
    port = get("metrics_port")
    if port is not None and not 0 <= port <= 65535:
        raise UsageError(f"--metrics-port must be a port number 0-65535 (0: a free one), "
                         f"not {port}")


def _run(args: argparse.Namespace) -> None:
    for item in getattr(args, "conf", []):
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf takes KEY=VALUE, not {item!r}")
    if getattr(args, "archive", None):
        _existing_file(args.archive, "--archive")
        _unpacked_here(args.archive)
    if args.command == "run":
        _target(args)
        if args.job is None:
            _existing_dir(args.events, "--events")
            _existing_dir(args.broadcast, "--broadcast")
            _required(args, "events", "broadcast", "output", "checkpoint")
        elif (args.output is None) != (args.checkpoint is None):
            raise UsageError("--output and --checkpoint go together: a job that returns a "
                             "ProcessResult needs both, one that starts its own query neither")
        if args.job is not None:
            _apps_only(args)
    if getattr(args, "workdir", None) is not None and args.workdir.is_file():
        raise UsageError(f"--workdir {args.workdir} is a file, not a folder")


def _target(args: argparse.Namespace) -> None:
    """``run``'s first argument: an application's name, or ``PATH.py[:NAME]`` (a job file)."""
    from sparkcast.apps import APP_NAMES
    from sparkcast.cli.jobs import JobSpec

    args.app, args.job = None, None
    if args.target in APP_NAMES:
        args.app = args.target
        return
    path, colon, name = args.target.rpartition(":")
    if not colon or not path.endswith(".py"):
        path, name = args.target, ""
    if not path.endswith(".py"):
        raise UsageError(f"{args.target!r} is neither an application ({', '.join(APP_NAMES)}) "
                         "nor a job file PATH.py[:NAME]")
    name = name or "pipeline"
    if not name.isidentifier():
        raise UsageError(f"{args.target!r}: after the colon comes the job function's name, "
                         f"not {name!r}")
    if not os.path.isfile(path):
        raise UsageError(f"the job file {path} does not exist")
    args.job = JobSpec(Path(path), name)
    args.app = Path(path).stem


def _apps_only(args: argparse.Namespace) -> None:
    given = [option for option in ("events", "broadcast", "artifacts", "parallelism",
                                   "max_files_per_trigger") if getattr(args, option) is not None]
    if given:
        flags = ", ".join("--" + option.replace("_", "-") for option in given)
        raise UsageError(f"{flags}: options of the built-in applications; a job file sets "
                         "its sources and parallelism in its own code")


def _unpacked_here(archive: str) -> None:
    """The driver also runs the packed environment's Python: it must be unpacked here."""
    from sparkcast.errors import PipelineError
    from sparkcast.spark.launch.shipping import packed_environment_conf

    try:
        packed_environment_conf(archive)
    except PipelineError as exc:
        raise UsageError(str(exc)) from exc


def _required(args: argparse.Namespace, *names: str) -> None:
    missing = ["--" + n for n in names if getattr(args, n) is None]
    if missing:
        raise UsageError(f"{args.app} needs {', '.join(missing)} (sparkcast run --help)")


def _source(args: argparse.Namespace) -> None:
    if args.output is not None:
        _existing_dir(args.output, "--output")
    if args.url is not None:
        parts = urlsplit(args.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--url takes a metrics endpoint such as http://127.0.0.1:9108, "
                             f"not {args.url!r}")
    html = getattr(args, "html", None)
    if html is not None and not html.parent.resolve().is_dir():
        raise UsageError(f"--html {html}: the folder {html.parent} does not exist")


def _state(args: argparse.Namespace) -> None:
    if not _URI.match(args.checkpoint):
        _existing_dir(Path(args.checkpoint), "the checkpoint")
    new = getattr(args, "new_checkpoint", None)
    if new is not None and not _URI.match(new) and Path(new).exists() and any(Path(new).iterdir()):
        raise UsageError(f"the new checkpoint {new} exists and is not empty: state "
                         f"{args.action} writes a fresh one")


def _init(args: argparse.Namespace) -> None:
    name = args.name
    if not name.isidentifier() or name.startswith("_"):
        raise UsageError(f"the project name becomes a Python package: a name such as "
                         f"my_job, not {name!r}")
    target = args.directory / name
    if target.exists():
        raise UsageError(f"{target} exists already: choose another name or --directory")
    if not args.directory.is_dir():
        raise UsageError(f"--directory {args.directory} is not a folder")


def _existing_dir(path: Path | None, option: str) -> None:
    if path is None or _URI.match(str(path)):
        return
    if not path.exists():
        raise UsageError(f"{option} {path} does not exist")
    if not path.is_dir():
        raise UsageError(f"{option} {path} is a file, not a folder")


def _existing_file(path: str, option: str) -> None:
    if _URI.match(path):
        return
    if not os.path.isfile(path):
        raise UsageError(f"{option} {path} does not exist" if not os.path.exists(path)
                         else f"{option} {path} is not a file")
