"""The one way a benchmark runs a system in a child process, and the log line every runner prints.

Every measurement runs in a child process with a time limit, so a hung or crashed system is
reported, never fatal: ``run_once`` starts a script for one job (a PyFlink job, a scale point)
and reads its answer; ``SparkServer`` keeps one ``spark_systems.py`` process (one Spark session)
serving many jobs. A child answers with one line ``@@RESULT {json}`` on its stdout (``answer``);
everything else it prints goes to ``benchmarks/results/<name>.log``. On a time limit the child's
whole process group is killed (its JVM and Python workers too).

This module imports only the standard library: the runners import it, and so does the PyFlink
side, which runs in its own virtualenv.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
MAIN_PY = os.environ.get("BENCH_PYTHON", str(ROOT / ".venv" / "bin" / "python"))
PREFIX = "@@RESULT "


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def answer(result: dict, out: IO[str] | None = None) -> None:
    """The child's answer: one ``@@RESULT`` line on ``out`` (stdout)."""
    print(PREFIX + json.dumps(result), file=out or sys.stdout, flush=True)


def env() -> dict[str, str]:
    """The child's environment: this folder on ``PYTHONPATH`` (Spark's Python workers inherit
    it from the JVM, and unpickle the benchmark functions from these modules)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}


def _stop(proc: subprocess.Popen) -> None:
    """Kill the child's process group and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_once(argv: list[str], timeout: float, log_name: str) -> dict:
    """Run ``argv`` (one job) and return its answer, or ``{"ok": False, "error": ...}`` on a
    time limit or a child that died without one (with the last error line of its log)."""
    RESULTS.mkdir(exist_ok=True)
    log_path = RESULTS / f"{log_name}.log"
    with open(log_path, "a") as errors:
        start = errors.tell()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errors, text=True,
                                start_new_session=True, env=env(), cwd=str(HERE))
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return {"ok": False, "error": f"timeout after {timeout:.0f} s"}
    for line in reversed(out.splitlines()):
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    with open(log_path, errors="replace") as written:
        written.seek(start)
        said = [ln for ln in written.read().splitlines() if "Error" in ln or "Exception" in ln]
    return {"ok": False, "error": (said[-1] if said else
                                   f"no result (exit {proc.returncode}; {log_path.name})")[:500]}


class SparkServer:
    """A long-lived ``spark_systems.py`` process (one Spark session for many jobs): ``call``
    writes a job as a JSON line to its stdin and waits for its ``@@RESULT`` line."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def start(self, timeout: float = 180) -> None:
        RESULTS.mkdir(exist_ok=True)
        self.lines = queue.Queue()
        with open(RESULTS / "spark.log", "a") as errors:
            self.proc = subprocess.Popen(
                [MAIN_PY, str(HERE / "spark_systems.py")], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True,
                cwd=str(HERE), env=env())
        threading.Thread(target=self._pump, args=(self.proc, self.lines), daemon=True).start()
        if self._read(timeout, "@@READY") is None:
            self.stop()
            raise RuntimeError("the Spark benchmark process did not start")

    @staticmethod
    def _pump(proc: subprocess.Popen, lines: queue.Queue) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def _read(self, timeout: float, prefix: str) -> str | None:
        deadline = time.time() + timeout
        while (left := deadline - time.time()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return None
            if line is None:
                return None
            if line.startswith(prefix):
                return line
        return None

    def call(self, job: dict[str, Any], timeout: float) -> dict:
        """Run ``job`` (``{"op": <Runner method>, **arguments}``); a time limit or a dead
        process is reported, and the next call starts a fresh process."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self._read(timeout, PREFIX)
        if line is None:
            dead = self.proc.poll() is not None
            self.stop()
            return {"ok": False, "error": "the Spark process died" if dead else
                    f"timeout after {timeout:.0f} s"}
        return json.loads(line[len(PREFIX):])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=20)
            except Exception:  # noqa: BLE001 - whatever went wrong, the process must go
                _stop(self.proc)
        self.proc = None
