"""``sparkcast run PATH.py[:NAME]``: run a user's own pipeline, as ``flink run -py`` does.

The job file defines ``NAME(spark)`` (default ``pipeline``), which builds the pipeline on the
session the CLI made and returns either a ``ProcessResult`` (the CLI writes it with ``--output``
and ``--checkpoint``, as for the built-in applications) or a started ``StreamingQuery`` (it
brings its own sinks; the CLI watches it and stops it). Three steps, the first before Spark:

* ``load_job`` imports the file by its path. A file inside a package (folders with
  ``__init__.py``) is imported under its dotted name with the folder above the top package on
  ``sys.path``, so its relative and absolute imports of the package work.
* ``ship_job`` gives the file, or its whole top package zipped, to ``SparkContext.addPyFile``,
  as ``spark-submit --py-files`` does, so code the executors import at run time finds it (not
  when ``spark-submit --py-files`` already ships a file of that name: Spark refuses a second
  one, and the driver imported the package from the first); and
  registers the package with PySpark's cloudpickle to be pickled *by value*, so that no Python
  process needs the py-files to unpickle the job's functions (the runner
  ``transformWithStateInPandas`` starts on the driver sees none, ``spark/launch/shipping.py``;
  the operator's processor gives it no function to unpickle, only state to declare).
* ``run_job`` calls the function, starts the query and shows the live view until the query
  ends, Ctrl-C, or ``--duration`` passes (then it stops between two micro-batches). At the
  end it says what the run came to when it was all or mostly dead letters (the first reason),
  and a run that wrote no row but dead letters fails (``QueryFailedError``: exit status 1).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any, TextIO
from urllib.parse import urlsplit

from sparkcast.errors import QueryFailedError, UsageError


@dataclass(frozen=True)
class JobSpec:
    """``PATH.py[:NAME]``: the job file and the name of its function of the session."""

    path: Path
    name: str = "pipeline"

    def __str__(self) -> str:
        return f"{self.path}:{self.name}"


def module_of(path: Path) -> tuple[Path, str]:
    """The folder to import from and the module's dotted name: the file's own folder for a lone
    file; for a file inside packages, the folder above the top package."""
    path = path.resolve()
    parts, folder = [path.stem], path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def load_job(spec: JobSpec) -> Callable[[Any], Any]:
    """Import the job file and return its function; every mistake is a :class:`UsageError`."""
    root, name = module_of(spec.path)
    taken = sys.modules.get(name.split(".")[0])
    file = getattr(taken, "__file__", None)
    if taken is not None and not (_inside(file, root) or _from_archive(file)):
        raise UsageError(f"the job file {spec.path} would be imported as {name!r}, a name "
                         f"already taken by {getattr(taken, '__file__', 'a built-in module')}: "
                         "rename the file")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any error of the user's code is reported as theirs
        raise UsageError(f"the job file {spec.path} does not import: "
                         f"{type(exc).__name__}: {exc}") from exc
    function = getattr(module, spec.name, None)
    if not callable(function):
        found = sorted(n for n, v in vars(module).items() if _is_own_function(v, module))
        raise UsageError(f"{spec.path} defines no function {spec.name}(spark)"
                         + (f"; its functions: {', '.join(found)} (name one: "
                            f"{spec.path}:NAME)" if found else ""))
    return function


def check_run(spec: JobSpec, function: Callable[[Any], Any], output: str | None) -> None:
    """Before Spark: a function annotated ``-> ProcessResult`` needs ``--output`` and
    ``--checkpoint`` (``checks`` saw that they go together); others are checked on its result."""
    returns = inspect.signature(function).return_annotation
    name = returns if isinstance(returns, str) else getattr(returns, "__name__", "")
    if output is None and name.rpartition(".")[2] == "ProcessResult":
        raise UsageError(f"{spec}(spark) returns a ProcessResult: give --output and "
                         "--checkpoint to write it")


def _inside(file: str | None, root: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(root)


def _from_archive(file: str | None) -> bool:
    """Whether the module came from a zip (``spark-submit --py-files``, wherever the zip is)."""
    return file is not None and any(folder.is_file() for folder in Path(file).parents)


def _is_own_function(value: Any, module: ModuleType) -> bool:
    return callable(value) and getattr(value, "__module__", None) == module.__name__ \
        and not isinstance(value, type)


def ship_job(spark: Any, spec: JobSpec) -> Path | None:
    """Ship the job's file (a lone file) or its top package (zipped) to the executors, and have
    PySpark pickle its functions by value; returns what was shipped, None when spark-submit's
    ``--py-files`` ships it already."""
    from pyspark import cloudpickle

    root, name = module_of(spec.path)
    top = name.split(".")[0]
    cloudpickle.register_pickle_by_value(sys.modules[top])
    if (spec.path.name if top == name else f"{top}.zip") in submitted_py_files(spark):
        return None
    shipped = spec.path.resolve() if top == name else zip_package(root / top)
    spark.sparkContext.addPyFile(str(shipped))
    return shipped


def submitted_py_files(spark: Any) -> set[str]:
    """The names of the files ``spark-submit --py-files`` shipped (``spark.submit.pyFiles``)."""
    listed = spark.sparkContext.getConf().get("spark.submit.pyFiles", "") or ""
    return {PurePosixPath(urlsplit(item).path).name for item in listed.split(",") if item}


def zip_package(package: Path) -> Path:
    """``<package>.zip`` in a temporary folder, with the package at its top (``--py-files``)."""
    target = Path(tempfile.mkdtemp(prefix="sparkcast-job-")) / f"{package.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                archive.write(file, file.relative_to(package.parent))
    return target


@dataclass
class JobRun:
    """The run options of a job (``sparkcast run PATH.py``)."""

    output: str | None = None
    checkpoint: str | None = None
    available_now: bool = False
    trigger_seconds: float | None = None
    duration: float | None = None
    no_view: bool = False  # a line per micro-batch, no screen at the end


def run_job(spark: Any, spec: JobSpec, function: Callable[[Any], Any], run: JobRun,
            out: TextIO) -> Any:
    """Call the job's function on ``spark``, start (or take) its query and watch it until it
    ends, ``run.duration`` passes or Ctrl-C; returns the stopped query."""
    ship_job(spark, spec)
    query = start_result(function(spark), spec, run)
    if run.duration:
        threading.Thread(target=stop_between_batches, args=(query, run.duration), daemon=True,
                         name="sparkcast-duration").start()
    try:
        from sparkcast.monitoring.watch import view

        view(query, run.output, out=out, final_screen=not run.no_view)
    except KeyboardInterrupt:
        out.write("\nstopping (the checkpoint keeps the progress; run again to resume)…\n")
    finally:
        if query.isActive:
            query.stop()
    failure = query.exception()
    if failure is not None:
        raise QueryFailedError(f"the query failed: {failure}") from failure
    say_the_outcome(query, sys.stderr)
    return query


def say_the_outcome(query: Any, out: TextIO) -> None:
    """The end-of-run warning of a run that was all or mostly dead letters; a run in which
    every output failed raises ``QueryFailedError`` (a non-zero exit)."""
    from sparkcast.spark.observe.listener import outcome_of

    outcome = outcome_of(str(query.id))
    if outcome is None:
        return
    line = outcome.warning(query.name or str(query.id))
    if line is not None:
        out.write(line + "\n")
    if outcome.all_failed:
        raise QueryFailedError(
            f"every output of the run was a dead letter ({outcome.dead_letters}), none was "
            f"written; the first reason: {outcome.first_reason}")


def stop_between_batches(query: Any, after: float) -> None:
    """Stop ``query`` once ``after`` seconds have passed and no micro-batch is running (a stop
    in the middle of one aborts its write, and Spark logs the abort as an ERROR)."""
    time.sleep(after)
    while query.isActive and query.status.get("isTriggerActive"):
        time.sleep(0.2)
    query.stop()


def start_result(result: Any, spec: JobSpec, run: JobRun) -> Any:
    """The query of what the job's function returned: a ``ProcessResult`` written with the
    run's options, or a ``StreamingQuery`` the function started (with its own sinks)."""
    from pyspark.sql.streaming import StreamingQuery

    from sparkcast.spark import ProcessResult

    if isinstance(result, ProcessResult):
        if run.output is None or run.checkpoint is None:
            raise UsageError(f"{spec}(spark) returned a ProcessResult: give --output and "
                             "--checkpoint to write it")
        trigger = ({"availableNow": True} if run.available_now
                   else {"processingTime": f"{run.trigger_seconds or 1.0} seconds"})
        return result.write_stream(run.output, run.checkpoint, trigger=trigger,
                                   query_name=spec.name)
    if isinstance(result, StreamingQuery):
        given = [flag for flag, on in (("--output", run.output), ("--checkpoint", run.checkpoint),
                                       ("--available-now", run.available_now),
                                       ("--trigger-seconds", run.trigger_seconds)) if on]
        if given:
            result.stop()
            raise UsageError(f"{spec}(spark) started its own query, which has its own sinks "
                             f"and trigger: {', '.join(given)} apply to a returned "
                             "ProcessResult only")
        return result
    raise UsageError(f"{spec}(spark) returned {type(result).__name__}: return a ProcessResult "
                     "(the CLI writes it) or a started StreamingQuery")
