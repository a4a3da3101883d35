"""Kill the query process with SIGKILL mid-batch three times, restart it from the same checkpoint
each time, and compare what it wrote with the harness over the same input: nothing lost, nothing
twice, the same values and the same dead letters.

The pipeline (``fault_pipeline.py``) runs in its own process group, so SIGKILL takes the driver,
its JVM and its Python workers at once, as a crash of the machine would. The moments are read
from the checkpoint: a micro-batch whose offsets are logged but not committed is in flight; a
micro-batch whose files the sink has committed (``_spark_metadata``) but the checkpoint has not
is between the two commits. Both runtime paths that keep state across micro-batches run it: the
stateful operator (Spark's file sink) and the streamed-broadcast path (``foreachBatch`` with its
own commits in the same ``_spark_metadata`` log).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkcast.spark import read_output
from tests.spark import fault_pipeline as pipeline
from tests.spark.differential import write_batch_file

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def _logged(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(name) for name in os.listdir(directory) if name.isdigit()}


def _in_flight(base: Path, batch: int) -> bool:
    return batch in _logged(base / "checkpoint" / "offsets") and batch not in _logged(
        base / "checkpoint" / "commits")


def _between_commits(base: Path, batch: int) -> bool:
    return batch in _logged(base / "out" / "_spark_metadata") and batch not in _logged(
        base / "checkpoint" / "commits")


def _start(base: Path, log: Path, path: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.spark.fault_pipeline", str(base), path],
                            cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _kill_when(process: subprocess.Popen, moment, delay: float, timeout: float = 90) -> str:
    """SIGKILL the process group once ``moment()`` holds (then after ``delay`` seconds)."""
    deadline = time.monotonic() + timeout
    while not moment():
        if process.poll() is not None:
            return "finished before the moment"
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return "killed"


@pytest.mark.parametrize("path", pipeline.PATHS)
def test_sigkill_mid_batch_three_times_loses_and_duplicates_nothing(spark, tmp_path, path):
    for index in range(pipeline.EVENT_FILES):
        write_batch_file(tmp_path / "events", index, pipeline.events(index))
    for index in range(pipeline.RULE_FILES):
        write_batch_file(tmp_path / "rules", index, pipeline.rules(index))
    log = tmp_path / "runs.log"
    kills = [  # each run first replays the batch the previous one was killed in
        (lambda: _in_flight(tmp_path, 0), 1.0),  # batch 0 while its tasks run
        (lambda: _in_flight(tmp_path, 1), 0.0),  # as soon as batch 1 is planned
        (lambda: _between_commits(tmp_path, 2) or 3 in _logged(tmp_path / "checkpoint"
                                                               / "offsets"), 0.0),
    ]
    outcomes = []
    for moment, delay in kills:
        process = _start(tmp_path, log, path)
        try:
            outcomes.append(_kill_when(process, moment, delay))
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert outcomes == ["killed"] * 3, log.read_text()[-3000:]
    last = _start(tmp_path, log, path)
    assert last.wait(timeout=480) == 0, log.read_text()[-3000:]
    assert _logged(tmp_path / "checkpoint" / "commits") >= set(range(pipeline.EVENT_FILES))

    main, letters = pipeline.expected(path)
    out = str(tmp_path / "out")
    written = Counter(tuple(r) for r in read_output(spark, out).collect())
    assert sum(written.values()) == sum(main.values())  # nothing lost, nothing twice
    assert written == main
    dead = Counter((r.callback, r.error) for r in read_output(spark, out, "dead_letters").collect())
    assert dead == letters
    assert dead[("process_broadcast_element", "ValueError: negative limit -1")] == 1
