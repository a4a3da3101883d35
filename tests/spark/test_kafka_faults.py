"""SIGKILL the query process at the moments that matter for ``sinks.kafka``, restart it from the
same checkpoint, and read every topic with a ``read_committed`` consumer: each output exactly
once, equal to the harness.

The pipeline (``kafka_pipeline.py``) runs in its own process group, so a SIGKILL takes the driver,
its JVM and its Python workers at once. The moments: (1) after Kafka committed batch 1 and before
Spark's checkpoint did (the pipeline kills itself there, from a sink that runs after Kafka's);
(2) batch 2 in flight, its offsets logged and not committed, while the tasks' transactions may
be open; (3) only the Python workers (the executors' side), mid-batch, which Spark retries
within the run (the retried task reads the markers). Each with the Kafka outputs written by the
driver and by the pattern's own tasks (``outputs/sinks_in_tasks.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.spark import kafka_pipeline
from tests.spark import sink_pipeline as pipeline

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("main", "dead_letters")


def _logged(folder: Path) -> set[int]:
    return {int(n) for n in os.listdir(folder) if n.isdigit()} if folder.is_dir() else set()


def _start(base: Path, bootstrap: str, prefix: str, writer: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.kafka_pipeline", str(base), bootstrap, prefix,
         writer],
        cwd=ROOT, stdout=(base / "run.log").open("ab"), stderr=subprocess.STDOUT,
        start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _python_workers(session: int) -> list[int]:
    """The pids of the pipeline's Python workers (PySpark's daemon and its forks): in the
    pipeline's session, though the daemon makes a process group of its own."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(pid)) != session:
                continue
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ProcessLookupError):
            continue
        if b"pyspark.daemon" in command or b"pyspark/daemon" in command:
            found.append(int(pid))
    return found


def _wait(condition, process: subprocess.Popen, timeout: float = 240) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _read(broker, prefix: str) -> dict[str, Counter]:
    found = {}
    for output in OUTPUTS:
        values = [json.loads(r.value) for r in broker.read(f"{prefix}-{output}")]
        found[output] = Counter(pipeline.letter_key(v) if output == "dead_letters"
                                else (v["id"], v["scaled"]) for v in values)
    return found


def _topics_of(expected: dict[str, Counter]) -> dict[str, Counter]:
    """The outputs written to topics (the side output goes to the killing user's sink)."""
    return {output: expected[output] for output in OUTPUTS}


@pytest.mark.parametrize("writer", [kafka_pipeline.DRIVER, kafka_pipeline.TASKS])
def test_sigkills_at_the_kafka_sinks_moments_lose_and_duplicate_nothing(tmp_path, kafka_broker,
                                                                       writer):
    prefix = f"faults-{writer}"
    for output in OUTPUTS:
        kafka_broker.create_topic(f"{prefix}-{output}", partitions=3)
    pipeline.write_inputs(tmp_path)
    commits = tmp_path / "checkpoint" / "commits"
    want = _topics_of(pipeline.expected("partitioned"))
    log = tmp_path / "run.log"

    # (1) after Kafka's commit of batch 1, before Spark's
    (tmp_path / kafka_pipeline.KILL_FLAG).write_text("1")
    process = _start(tmp_path, kafka_broker.bootstrap, prefix, writer)
    process.wait(timeout=480)
    assert process.returncode == -signal.SIGKILL, log.read_text()[-3000:]
    assert 1 not in _logged(commits)
    assert _read(kafka_broker, prefix) == _topics_of(pipeline.expected("partitioned", 2))

    # (2) the replay of batch 1, then batch 2 in flight: the whole process group, 0.3 s in
    process = _start(tmp_path, kafka_broker.bootstrap, prefix, writer)
    try:
        in_flight = _wait(lambda: 2 in _logged(tmp_path / "checkpoint" / "offsets")
                          and 2 not in _logged(commits), process)
        time.sleep(0.3)
    finally:
        _kill(process)
    assert in_flight, log.read_text()[-3000:]

    # (3) only the Python workers, once batch 3 is planned; the run goes on and finishes
    process = _start(tmp_path, kafka_broker.bootstrap, prefix, writer)
    try:
        planned = _wait(lambda: 3 in _logged(tmp_path / "checkpoint" / "offsets")
                        and _python_workers(process.pid) != [], process)
        for pid in _python_workers(process.pid):
            os.kill(pid, signal.SIGKILL)
        process.wait(timeout=480)
    finally:
        _kill(process)
    if process.returncode != 0:  # the kill took the batch's last attempt: restart once more
        process = _start(tmp_path, kafka_broker.bootstrap, prefix, writer)
        process.wait(timeout=480)
    assert planned and process.returncode == 0, log.read_text()[-3000:]
    assert _logged(commits) >= set(range(len(pipeline.EVENTS)))
    assert _read(kafka_broker, prefix) == want
    assert _parts_by(kafka_broker, tmp_path / "checkpoint") == {
        kafka_pipeline.DRIVER: {"key"}, kafka_pipeline.TASKS: {"subtask"}}[writer]


def _parts_by(broker, checkpoint: Path) -> set[str]:
    """How the query's markers say its Kafka rows were split into parts."""
    [topic] = set(json.loads((checkpoint / "sparkcast" / "kafka-markers.json")
                             .read_text()).values())
    return {json.loads(record.value)["by"] for record in broker.read(topic)}
