"""``sparkcast demo``, ``generate``, ``run`` and ``list``: the applications (sparkcast.apps).

::

    sparkcast demo [APP]                   generate data while the query runs, then a summary
    sparkcast generate APP --out DIR       events/, broadcast/ (and artifacts/) as JSON lines
    sparkcast run APP --events DIR --broadcast DIR --output DIR --checkpoint DIR
                  [--master URL] [--archive ENV.tar.gz] [--conf KEY=VALUE ...]
    sparkcast run PATH.py[:NAME] [--output DIR --checkpoint DIR] [the same options]
    sparkcast list                         the applications

A job file's loading, shipping and run are in :mod:`~sparkcast.cli.jobs`; every argument is
checked (:mod:`~sparkcast.cli.checks`) before Spark starts.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from sparkcast.apps import APP_NAMES, FLAGSHIP, get_app

COMMANDS = ("demo", "generate", "run", "list")
#: the docs online (the wheel ships none): a page is DOCS + "deploy.md"
DOCS = "https://github.com/sparkcast/sparkcast/blob/main/docs/"
EPILOG = ("applications: " + ", ".join(APP_NAMES) + f" (the demo's default: {FLAGSHIP}). "
          f"Docs: {DOCS}getting-started.md")


def add_commands(commands: Any) -> None:
    """The application commands, under the main parser's ``commands``."""
    demo = commands.add_parser(
        "demo", help="run an application on generated data that arrives over time",
        description="Generate an application's data into a temporary folder while its query "
                    "runs (a broadcast update arrives mid-run), show the live view, and end "
                    "with a summary: events in and out, and when the update took effect.",
        epilog=EPILOG)
    demo.add_argument("app", nargs="?", default=FLAGSHIP, choices=APP_NAMES, metavar="APP")
    demo.add_argument("--seed", type=int, default=7, help="data generator seed (default 7)")
    demo.add_argument("--scale", type=int, default=2,
                      help="events per file, in hundreds (default 2)")
    demo.add_argument("--files", type=int,
                      help="event files, one per step (default: the app's, 6 or 8)")
    demo.add_argument("--step-seconds", type=float, default=4.0,
                      help="seconds between two generated files (default 4)")
    demo.add_argument("--timeout", type=float, default=300.0,
                      help="stop after this many seconds even if unfinished (default 300)")
    demo.add_argument("--workdir", type=Path, help="keep data, outputs and checkpoint here")
    demo.add_argument("--postgres", action="store_true",
                      help="fraud only: rules in a throwaway PostgreSQL table (changed mid-run "
                           "by an UPDATE), decisions written to PostgreSQL tables exactly once")
    demo.add_argument("--kafka", action="store_true",
                      help="fraud only: transactions and rules in topics of a throwaway Kafka "
                           "broker (a rule update produced mid-run), decisions written to "
                           "topics exactly once and read back with read_committed")
    _run_options(demo, demo, defaults=True)

    generate = commands.add_parser(
        "generate", help="write an application's events and broadcast updates",
        description="Write reproducible data for an application: OUT/events/*.json, "
                    "OUT/broadcast/*.json (JSON lines) and, for models, OUT/artifacts/*.npz.",
        epilog=EPILOG)
    generate.add_argument("app", choices=APP_NAMES, metavar="APP")
    generate.add_argument("--out", type=Path, required=True, help="folder to write into")
    generate.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    generate.add_argument("--scale", type=int, default=1,
                          help="events per file, in hundreds (default 1)")
    generate.add_argument("--files", type=int,
                          help="event files (default: the app's, 6 or 8)")

    run = commands.add_parser(
        "run", help="run an application or your own job file until stopped (restartable)",
        description="Run a streaming query until Ctrl-C, --duration, or (with --available-now) "
                    "the end of its input; started again with the same --checkpoint it resumes: "
                    "nothing is lost or processed twice. APP is a built-in application over two "
                    "folders of JSON lines (--events, --broadcast). PATH.py[:NAME] is your own "
                    "job file: NAME(spark) (default: pipeline) returns a ProcessResult, written "
                    "with --output and --checkpoint, or a started StreamingQuery with its own "
                    "sinks. The file, or the package it belongs to (zipped), is shipped to the "
                    "executors as spark-submit --py-files does.",
        epilog=EPILOG + ". Output layout: <output>/_output=main/, _output=<side output>/, "
                        "_output=dead_letters/, _output=_metrics/ (parquet, partitioned by "
                        "_output; read one with sparkcast.spark.read_output(spark, <output>, "
                        "name)), the outputs' schemas in <output>/_sparkcast_outputs.json and, "
                        "for a local output, one line per micro-batch in "
                        "<output>/_sparkcast_progress.jsonl (sparkcast view --output <output>).")
    run.add_argument("target", metavar="APP|PATH.py[:NAME]",
                     help="an application, or a job file and its function (default pipeline)")
    where = run.add_argument_group(
        "required by an application, and by a job file whose function returns a "
        "ProcessResult")
    where.add_argument("--output", help="output folder or URI (see the layout below)")
    where.add_argument("--checkpoint",
                       help="checkpoint folder or URI (hdfs://, s3a://, file:///shared/...)")
    apps = run.add_argument_group("applications only")
    apps.add_argument("--events", type=Path, help="folder of event files")
    apps.add_argument("--broadcast", type=Path, help="folder of broadcast files")
    apps.add_argument("--artifacts", type=Path,
                      help="model artifact store (default: <broadcast>/../artifacts)")
    run.add_argument("--duration", type=float,
                     help="stop after this many seconds (a job file: once the running "
                          "micro-batch ends)")
    run.add_argument("--available-now", action="store_true",
                     help="process what the input holds now, then stop")
    run.add_argument("--trigger-seconds", type=float,
                     help="micro-batch interval (default 1)")
    run.add_argument("--master", help="Spark master (default local[2]; spark://host:7077, "
                                      f"yarn, k8s://...); see {DOCS}deploy.md")
    run.add_argument("--archive", metavar="ENV.tar.gz",
                     help="a packed Python environment with sparkcast, shipped to the "
                          "executors as ./environment (also unpack it here, see "
                          f"{DOCS}deploy.md)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                     help="a Spark setting (repeatable), as spark-submit's --conf")
    _run_options(run, apps)

    commands.add_parser("list", help="list the applications",
                        description="List the applications and what they do.")


def _run_options(parser: argparse.ArgumentParser, apps: Any, defaults: bool = False) -> None:
    """The options of ``demo`` and ``run``; ``apps``: where the application-only ones go."""
    apps.add_argument("--parallelism", type=int, default=4 if defaults else None,
                      help="virtual subtasks (fixed per checkpoint; default 4)")
    apps.add_argument("--max-files-per-trigger", type=int, default=1 if defaults else None,
                      help="files per source per micro-batch (default 1; 0 = all)")
    parser.add_argument("--no-view", action="store_true",
                        help="no live view (one line per micro-batch instead)")
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve Prometheus metrics on http://HOST:PORT/metrics "
                             f"(0 picks a free port; see {DOCS}monitoring.md)")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                        help="the address the metrics endpoint binds (default 127.0.0.1; "
                             "0.0.0.0: every interface, for a cluster's Prometheus)")
    parser.add_argument("--spark-ui", action="store_true",
                        help="switch the Spark UI on (http://localhost:4040)")


def run(args: argparse.Namespace) -> int:
    if args.command == "list":
        for name in APP_NAMES:
            print(f"{name:<11} {get_app(name).title}")
        return 0
    if args.command == "generate":
        return _generate(args)
    if args.command == "run" and args.job is not None:
        return _run_job(args)
    from sparkcast.apps.runner import RunSettings

    parallelism = 4 if args.parallelism is None else args.parallelism
    files = 1 if args.max_files_per_trigger is None else args.max_files_per_trigger
    settings = RunSettings(parallelism=parallelism, max_files_per_trigger=files or None,
                           ui=args.spark_ui, metrics_port=args.metrics_port,
                           metrics_host=args.metrics_host)
    if args.command == "demo":
        return _demo(args, settings)
    return _run(args, settings)


def _generate(args: argparse.Namespace) -> int:
    from sparkcast.apps.base import write_drops

    app = get_app(args.app)
    counts = write_drops(args.out, app.drops(args.seed, args.scale, args.files))
    print(f"{app.name}: wrote " + ", ".join(f"{n} rows to {args.out / folder}"
                                            for folder, n in sorted(counts.items()) if n))
    print(f"run it: sparkcast run {app.name} --events {args.out / 'events'} "
          f"--broadcast {args.out / 'broadcast'} --output {args.out / 'output'} "
          f"--checkpoint {args.out / 'checkpoint'}")
    return 0


def _demo(args: argparse.Namespace, settings: object) -> int:
    from sparkcast.apps.runner import run_demo

    if args.postgres or args.kafka:
        return _external_demo(args)
    report = run_demo(get_app(args.app), seed=args.seed, scale=args.scale, files=args.files,
                      step_seconds=args.step_seconds, timeout=args.timeout,
                      workdir=args.workdir, settings=settings,  # type: ignore[arg-type]
                      out=sys.stdout if not args.no_view else _Quiet())
    print("\n".join(report.lines))
    print(f"  finished in {report.seconds:.0f} s")
    return 0 if report.ok else 1


def _external_demo(args: argparse.Namespace) -> int:
    """The fraud demo on PostgreSQL (``--postgres``) or on Kafka (``--kafka``)."""
    flag = "--postgres" if args.postgres else "--kafka"
    if args.postgres and args.kafka:
        raise SystemExit("choose one of --postgres and --kafka")
    if args.app != "fraud":
        raise SystemExit(f"{flag} runs the fraud demo only, not {args.app}")
    if args.postgres:
        from sparkcast.apps.fraud_postgres import run_postgres_demo as run_external
    else:
        from sparkcast.apps.fraud_kafka import run_kafka_demo as run_external

    report = run_external(seed=args.seed, scale=args.scale, files=args.files,
                          step_seconds=args.step_seconds, timeout=args.timeout,
                          parallelism=args.parallelism,
                          workdir=args.workdir, out=sys.stdout if not args.no_view else _Quiet())
    print("\n".join(report.lines))
    print(f"  finished in {report.seconds:.0f} s")
    return 0 if report.ok else 1


def session_settings(args: argparse.Namespace) -> dict[str, str]:
    """The Spark settings of ``run``'s --conf and --archive options (checked by ``checks``)."""
    conf = dict(item.partition("=")[::2] for item in args.conf)
    if args.archive:
        from sparkcast.spark.launch.shipping import packed_environment_conf

        conf.update(packed_environment_conf(args.archive))
    return conf


def _session(args: argparse.Namespace, parallelism: int, always: bool = False) -> object:
    """A session on ``--master`` with the shipping settings; None: the runner's local one."""
    if not (always or args.master or args.archive or args.conf):
        return None
    import os

    from sparkcast.spark import session
    from sparkcast.spark.launch.shipping import PYTHON

    conf = {"spark.sql.shuffle.partitions": str(parallelism), **session_settings(args)}
    if args.archive:  # this driver's own Python runners use the shipped environment too
        os.environ["PYSPARK_PYTHON"] = PYTHON
    return session(args.master or "local[2]", "sparkcast-" + args.app, conf=conf,
                   ui=args.spark_ui, metrics_port=args.metrics_port,
                   metrics_host=args.metrics_host)


def _run_job(args: argparse.Namespace) -> int:
    """``sparkcast run PATH.py[:NAME]``: the file is imported before Spark starts."""
    from sparkcast.cli.jobs import JobRun, check_run, load_job, run_job

    function = load_job(args.job)
    check_run(args.job, function, args.output)
    spark = _session(args, 4, always=True)
    run = JobRun(output=args.output, checkpoint=args.checkpoint,
                 available_now=args.available_now, trigger_seconds=args.trigger_seconds,
                 duration=args.duration, no_view=args.no_view)
    query = run_job(spark, args.job, function, run, sys.stdout if not args.no_view else _Quiet())
    print(f"{args.job}: query {query.name or query.id} stopped"
          + (f"; outputs in {args.output}" if args.output else ""))
    return 0


def _run(args: argparse.Namespace, settings: object) -> int:
    from sparkcast.apps.runner import run_app

    spark = _session(args, args.parallelism)
    settings.trigger_seconds = args.trigger_seconds or 1.0  # type: ignore[attr-defined]
    settings.available_now = args.available_now  # type: ignore[attr-defined]
    settings.duration = args.duration  # type: ignore[attr-defined]
    report = run_app(get_app(args.app), args.events, args.broadcast, args.output,
                     args.checkpoint, artifacts=args.artifacts, spark=spark,
                     settings=settings,  # type: ignore[arg-type]
                     out=sys.stdout if not args.no_view else _Quiet())
    print("\n".join(report.lines))
    return 0 if report.ok else 1


class _Quiet(io.StringIO):
    """A stream that is not a terminal: the view prints one line per micro-batch."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False
