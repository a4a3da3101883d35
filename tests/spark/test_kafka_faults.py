"""SIGKILL the query process at the moments that matter for ``sinks.kafka``, restart it from the
same checkpoint, and read every topic with a ``read_committed`` consumer: each output exactly
once, equal to the harness.

The pipeline (``kafka_pipeline.py``) runs both writers' queries side by side in one process,
each with its own inputs, checkpoint and topics: the Kafka outputs written by the driver and by
the pattern's own tasks (``outputs/sinks_in_tasks.py``). It runs in its own process group, so a
SIGKILL takes the driver, its JVM and its Python workers at once. Each query holds itself at the
moment (``holds.py``, the first run only) and the test sleeps until both holds are claimed (a
file event), so one kill takes both at their moment. The moments: (1) after Kafka committed
batch 1 and before Spark's checkpoint did; (2) batch 2 in flight, its offsets logged and not
committed, held at its first event in the keyed function (the tasks writer's other subtasks may
have committed their transactions of it); (3) only the Python workers (the executors' side),
mid-batch 3, which Spark retries within the run (the retried task reads the markers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.spark import kafka_pipeline
from tests.spark import sink_pipeline as pipeline
from tests.spark.holds import FileEvents, arm, disarm, reached

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]
OUTPUTS = ("main", "dead_letters")


def _logged(folder: Path) -> set[int]:
    return {int(n) for n in os.listdir(folder) if n.isdigit()} if folder.is_dir() else set()


def _start(root: Path, bootstrap: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.spark.kafka_pipeline", str(root), bootstrap],
        cwd=ROOT, stdout=(root / "run.log").open("ab"), stderr=subprocess.STDOUT,
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


def _held(process: subprocess.Popen, root: Path, name: str, timeout: float = 300) -> bool:
    """Arm ``name`` in both writers' queries, sleep until both claimed it (a file event)."""
    folders = [kafka_pipeline.holds(root / writer) for writer in kafka_pipeline.WRITERS]
    with FileEvents(folders) as events:
        return events.wait(lambda: all(reached(f, name) for f in folders),
                           lambda: process.poll() is None, timeout)


def _arm(root: Path, name: str) -> None:
    for writer in kafka_pipeline.WRITERS:
        arm(kafka_pipeline.holds(root / writer), name)


def _disarm(root: Path) -> None:
    for writer in kafka_pipeline.WRITERS:
        disarm(kafka_pipeline.holds(root / writer))


def _read(broker, prefix: str) -> dict[str, Counter]:
    found = {}
    for output in OUTPUTS:
        values = [json.loads(r.value) for r in broker.read(f"{prefix}-{output}")]
        found[output] = Counter(pipeline.letter_key(v) if output == "dead_letters"
                                else (v["id"], v["scaled"]) for v in values)
    return found


def _topics_of(expected: dict[str, Counter]) -> dict[str, Counter]:
    """The outputs written to topics (the side output goes to a user's sink or files)."""
    return {output: expected[output] for output in OUTPUTS}


@pytest.mark.fresh_jvm
def test_sigkills_at_the_kafka_sinks_moments_lose_and_duplicate_nothing(tmp_path, kafka_broker):
    """Both writers in each killed process (3 JVMs, 4 when the workers' kill took a task's
    last attempt; they were 6 to 8)."""
    bootstrap, writers = kafka_broker.bootstrap, kafka_pipeline.WRITERS
    for writer in writers:
        for output in OUTPUTS:
            kafka_broker.create_topic(f"{kafka_pipeline.prefix(writer)}-{output}", partitions=3)
        pipeline.write_inputs(tmp_path / writer)
    want = _topics_of(pipeline.expected("partitioned"))
    log = tmp_path / "run.log"

    def checkpoint(writer: str, log_name: str) -> set[int]:
        return _logged(tmp_path / writer / "checkpoint" / log_name)

    def killed_at(name: str) -> bool:
        _arm(tmp_path, name)
        process = _start(tmp_path, bootstrap)
        try:
            return _held(process, tmp_path, name)
        finally:
            _kill(process)
            _disarm(tmp_path)

    # (1) after Kafka's commit of batch 1, before Spark's
    assert killed_at(kafka_pipeline.AFTER_KAFKA_1), log.read_text()[-3000:]
    for writer in writers:
        assert 1 not in checkpoint(writer, "commits"), writer
        assert _read(kafka_broker, kafka_pipeline.prefix(writer)) == _topics_of(
            pipeline.expected("partitioned", 2)), writer

    # (2) the replay of batch 1, then batch 2 in flight: the whole process group
    assert killed_at(pipeline.in_flight(2)), log.read_text()[-3000:]
    for writer in writers:
        assert 2 in checkpoint(writer, "offsets") and 2 not in checkpoint(writer, "commits")
        assert 1 in checkpoint(writer, "commits"), writer

    # (3) only the Python workers, mid-batch 3; the run goes on and finishes
    _arm(tmp_path, pipeline.in_flight(3))
    process = _start(tmp_path, bootstrap)
    try:
        planned = _held(process, tmp_path, pipeline.in_flight(3))
        workers = _python_workers(process.pid)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        _disarm(tmp_path)
        process.wait(timeout=480)
    finally:
        _kill(process)
    assert planned and workers, log.read_text()[-3000:]
    if process.returncode != 0:  # the kill took the batch's last attempt: restart once more
        process = _start(tmp_path, bootstrap)
        process.wait(timeout=480)
    assert process.returncode == 0, log.read_text()[-3000:]
    for writer in writers:
        assert checkpoint(writer, "commits") >= set(range(len(pipeline.EVENTS))), writer
        assert _read(kafka_broker, kafka_pipeline.prefix(writer)) == want, writer
        assert _parts_by(kafka_broker, tmp_path / writer / "checkpoint") == {
            kafka_pipeline.DRIVER: {"key"}, kafka_pipeline.TASKS: {"subtask"}}[writer]


def _parts_by(broker, checkpoint: Path) -> set[str]:
    """How the query's markers say its Kafka rows were split into parts."""
    [topic] = set(json.loads((checkpoint / "sparkcast" / "kafka-markers.json")
                             .read_text()).values())
    return {json.loads(record.value)["by"] for record in broker.read(topic)}
