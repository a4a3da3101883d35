"""Quiet logs at Spark's own level: silence only what is known to be noise.

Two kinds of noise reach a sparkcast user's terminal. The JVM's
``TransformWithStateInPySparkStateServer`` logs a WARN for every state lookup of a key never
written (hundreds per micro-batch): ``log4j2.properties`` beside this module sets that logger
(and Hadoop's native-library notice) to ERROR and leaves the rest at Spark's WARN; ``session()``
passes it to the driver JVM as ``-Dlog4j2.configurationFile`` (the session is created in this
process, so the JVM is launched with the options given to the builder). And PySpark's
transformWithState driver worker ``print``s "Starting/Completed execution of UDF" banners,
which the JVM copies to its stderr: ``launch_filtered_gateway`` starts the JVM with its output
piped through a thread that drops exactly those lines and passes everything else on.

Two notices came before any log configuration could act, at every start of a local session:
Spark's ``Utils`` WARNs that the hostname resolves to a loopback address (twice), and the JVM
prints ``WARNING: Using incubator modules: jdk.incubator.vector`` (Spark asks for the module).
On a local master everything runs in this one JVM, so ``launch_filtered_gateway`` starts it with
``SPARK_LOCAL_IP=127.0.0.1`` (unless set): Spark binds loopback and has nothing to warn about;
the incubator line is filtered like the banners (``NOTICES``). On a cluster master the address
lookup is left alone: there its WARN says something true.

A connector added at its first use (``connectors.py``) makes Ivy print its resolution report
(some 40 lines) on the JVM's stdout and stderr. ``held`` keeps what the JVM prints meanwhile
off the console: it writes a begin and an end line (``_HOLD``) to both streams from the JVM,
which the forwarding threads read in order with the JVM's own lines, and hands over the lines
between them, for the caller to print when the resolution failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import IO, Any

from sparkcast.spark.environment import is_local_master

LOG4J2 = str(resources.files("sparkcast.spark.launch") / "log4j2.properties")
#: the lines PySpark's transformWithState driver worker prints (pyspark 4.3)
BANNERS = (
    "Python worker Starting execution of UDF",
    "Python worker Completed execution of UDF",
    "finish init stage of Python runner",
    "Python worker received parameters for UDF",
    "Starting Streaming TransformWithStateInPandas Python worker",
)


#: the JVM's own notices at start, harmless and not from log4j (so no level can quieten them)
NOTICES = ("WARNING: Using incubator modules: jdk.incubator.vector",)
#: Ivy's first line of a resolution, from a logger Ivy keeps, which reaches the JVM's stdout
#: after a hold ended (seen on PySpark 4.2): part of the report ``held`` keeps off the console
IVY_NOTICE = ":: loading settings :: "


def is_banner(line: str) -> bool:
    return any(banner in line for banner in BANNERS)


def is_notice(line: str) -> bool:
    return line.rstrip("\n") in NOTICES or line.startswith(IVY_NOTICE)


def java_options(conf: dict[str, str]) -> str:
    """The driver's Java options with sparkcast's log configuration, unless one is given."""
    options = conf.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" in options:
        return options
    return f"{options} -Dlog4j2.configurationFile=file:{LOG4J2}".strip()


_GATEWAY: list[Any] = []  # the JVM this module launched (one per process, reused)


def start_filtered_context(master: str, app_name: str, settings: dict[str, str]) -> Any:
    """A SparkContext on a JVM whose output is filtered (made before the session's builder
    runs, which then takes it as the active context)."""
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
    if not _GATEWAY:
        _GATEWAY.append(launch_filtered_gateway(conf, local=is_local_master(master)))
    return SparkContext(conf=conf, gateway=_GATEWAY[0])


def launch_filtered_gateway(conf: Any, local: bool = False) -> Any:
    """PySpark's ``launch_gateway`` with the JVM's stdout and stderr filtered (``BANNERS``,
    ``NOTICES``); ``local``: a local master's JVM, bound to loopback."""
    from pyspark.java_gateway import launch_gateway

    bind = local and "SPARK_LOCAL_IP" not in os.environ
    if bind:  # read by launch_gateway, which copies os.environ for the JVM
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": subprocess.PIPE,
                                                     "stderr": subprocess.PIPE})
    finally:
        if bind:
            del os.environ["SPARK_LOCAL_IP"]
    process = gateway.proc
    for source, target in ((process.stdout, "stdout"), (process.stderr, "stderr")):
        threading.Thread(target=_forward, args=(source, target), daemon=True,
                         name=f"sparkcast-jvm-{target}").start()
    return gateway


#: the start of the lines that begin and end a hold: ``<_HOLD>begin <token>``
_HOLD = "\x1esparkcast-hold "
_TARGETS = ("stdout", "stderr")


class _Held:
    """The lines one ``held`` block kept, and, per stream, whether its end was read."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ended = {target: threading.Event() for target in _TARGETS}


_HOLDS: dict[str, _Held] = {}


@contextmanager
def held(jvm: Any, timeout: float = 10.0) -> Iterator[list[str]]:
    """Keep what the JVM prints inside the block off the console; the list yielded holds those
    lines once the block ends. Nothing is held (the list stays empty) in a JVM this module did
    not launch: its output is not read here."""
    lines: list[str] = []
    if not _GATEWAY or _GATEWAY[0].jvm is not jvm:
        yield lines
        return
    token, hold = uuid.uuid4().hex, _Held()
    _HOLDS[token] = hold
    streams = (jvm.java.lang.System.out, jvm.java.lang.System.err)
    for stream in streams:
        stream.println(f"{_HOLD}begin {token}")
    try:
        yield lines
    finally:
        for stream in streams:
            stream.println(f"{_HOLD}end {token}")
        for event in hold.ended.values():
            event.wait(timeout)
        lines.extend(_HOLDS.pop(token).lines)


def _forward(source: IO[bytes], target: str) -> None:
    """Copy lines to ``sys.<target>`` (looked up per line: tests capture it), minus banners and
    the blank line each banner's ``print`` adds, and minus the lines of a hold (``held``)."""
    after_banner, holding = False, None
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", "replace")
        if line.startswith(_HOLD):
            kind, _, token = line[len(_HOLD):].strip().partition(" ")
            hold = _HOLDS.get(token)
            holding = hold if kind == "begin" else None
            if kind == "end" and hold is not None:
                hold.ended[target].set()
            continue
        if holding is not None:
            holding.lines.append(line)
            continue
        if is_banner(line):
            after_banner = True
            continue
        if is_notice(line):
            continue
        if after_banner and not line.strip():
            continue
        after_banner = False
        stream = getattr(sys, target)
        stream.write(line)
        stream.flush()
