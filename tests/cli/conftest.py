"""The CLI run in this process: ``main([...])`` on the shared session, its output from capsys.

A command whose point is its output runs in the session (``cli``), not in a fresh interpreter
with a JVM of its own. "Before Spark starts" is checked, not timed: ``no_spark`` makes every way
of starting Spark raise :class:`SparkStarted` (a ``subprocess.Popen`` of ``spark-submit`` or
``java``, PySpark's ``launch_gateway``, a new ``SparkContext``, a session's ``getOrCreate``,
which also covers a JVM already running in this process). A test that proves what only a fresh
process shows (spark-submit, Ctrl-C, the start-up stderr) keeps its subprocess and is marked
``fresh_jvm``.

Each test leaves the process as it found it: the job files it imported (from its temporary
folders) leave ``sys.modules`` and ``sys.path``, PySpark's pickle-by-value registrations are
restored, and so are the shared session's runtime settings a command changed.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkcast.cli import main

ROOT = Path(__file__).resolve().parents[2]
HAS_PYSPARK = importlib.util.find_spec("pyspark") is not None


class SparkStarted(BaseException):
    """Spark was about to start; a ``BaseException``, so no ``except Exception`` takes it."""


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way this process could start Spark raises :class:`SparkStarted`."""
    real = subprocess.Popen

    class Guard(real):  # type: ignore[valid-type, misc]
        # in __new__: before any __init__, also the one ``--no-jvm`` wraps (suite_cost.py)
        def __new__(cls, args: Any, *rest: Any, **options: Any) -> Any:
            words = args if isinstance(args, list | tuple) else [args]
            if any("spark-submit" in str(w) or Path(str(w)).name == "java" for w in words):
                raise SparkStarted(f"a JVM was about to start: {words}")
            return super().__new__(cls)

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise SparkStarted(f"Spark was about to start: {what}")
        return refused

    monkeypatch.setattr(subprocess, "Popen", Guard)
    if HAS_PYSPARK:  # imported first, so that its ``from subprocess import Popen`` is the real one
        import pyspark.core.context as context
        import pyspark.java_gateway as gateway
        from pyspark.sql import SparkSession

        monkeypatch.setattr(gateway, "Popen", Guard)
        monkeypatch.setattr(gateway, "launch_gateway", refuse("launch_gateway"))
        monkeypatch.setattr(context, "launch_gateway", refuse("launch_gateway"))
        monkeypatch.setattr(context.SparkContext, "_ensure_initialized",
                            refuse("SparkContext"))
        monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse("getOrCreate"))


@pytest.fixture(autouse=True)
def isolated_imports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The job files a test imported (from its temporary folders) are forgotten after it."""
    path, modules = list(sys.path), set(sys.modules)
    by_value = _pickled_by_value()
    saved = set(by_value) if by_value is not None else None
    yield
    base = tmp_path_factory.getbasetemp().resolve()
    for name in set(sys.modules) - modules:
        file = getattr(sys.modules[name], "__file__", None)
        if file is not None and Path(file).resolve().is_relative_to(base):
            del sys.modules[name]
    sys.path[:] = path
    by_value = _pickled_by_value()
    if by_value is not None:
        by_value.intersection_update(saved or set())


def _pickled_by_value() -> set[str] | None:
    """PySpark's cloudpickle's set of modules pickled by value (``ship_job`` adds the job's)."""
    module = sys.modules.get("pyspark.cloudpickle.cloudpickle")
    return getattr(module, "_PICKLE_BY_VALUE_MODULES", None)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
        ) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``sparkcast ARGV...`` in this process, in ``cwd``: its exit status and output."""

    def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()  # what came before is not the command's
        with monkeypatch.context() as local:
            local.chdir(cwd)
            try:
                code = main(list(argv))
            except SystemExit as exit_:  # argparse's mistakes exit; checks' mistakes return
                code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(argv), code, out, err)

    return run


@pytest.fixture
def session_cli(spark: Any, cli: Callable[..., subprocess.CompletedProcess[str]],
                capsys: pytest.CaptureFixture[str]
                ) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``cli`` on the shared session, its stderr with what the JVM wrote meanwhile
    (``jvm_stderr``); the settings a command gives ``session()`` (its ``getOrCreate`` applies
    the runtime ones to the running session) are undone after."""
    before = dict(spark.conf.getAll)

    def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
        jvm_stderr(spark, capsys)  # what the JVM wrote before is not the command's
        done = cli(*argv, cwd=cwd)
        done.stderr += jvm_stderr(spark, capsys)
        return done

    yield run
    # as getOrCreate set them: in the session's SQL conf, core settings (the default
    # parallelism) too, which ``spark.conf`` refuses to set or unset
    conf = spark._jsparkSession.sessionState().conf()
    for key, value in dict(spark.conf.getAll).items():
        if before.get(key) != value:
            if key in before:
                conf.setConfString(key, before[key])
            else:
                conf.unsetConf(key)


def jvm_stderr(spark: Any, capsys: pytest.CaptureFixture[str], timeout: float = 60.0) -> str:
    """What the shared session's JVM wrote to its stderr so far, as capsys saw it: sparkcast's
    ``session()`` forwards the JVM's output to ``sys.stderr`` line by line (``quiet.py``), so a
    marker printed by the JVM last arrives after everything it wrote before."""
    import time

    from sparkcast.spark.launch import quiet

    assert quiet._GATEWAY and spark.sparkContext._gateway is quiet._GATEWAY[0], \
        "the shared session's JVM output is not forwarded to sys.stderr (quiet.py)"
    marker = f"sparkcast-tests-drained-{time.monotonic_ns()}"
    spark.sparkContext._jvm.java.lang.System.err.println(marker)
    seen, deadline = "", time.monotonic() + timeout
    while marker not in seen:
        assert time.monotonic() < deadline, "the JVM's stderr did not drain"
        time.sleep(0.05)
        seen += capsys.readouterr().err
    return seen[:seen.index(marker)]
