"""Exactly once into Kafka on the real standalone cluster (two one-core workers, no shuffle
service), read back with ``read_committed``: the keyed job's main output goes to
``sinks.kafka``, written by the pattern's own tasks; the executor whose task had just
committed its part of a micro-batch is SIGKILLed before Spark hears of the task, and the
batch's shuffle files are gone with it (the test removes the other executor's too, as a lost
executor that held map outputs does), so the part's retry meets a FetchFailed and Spark
re-attempts the stages: the part runs again at attempt number 0 of a new stage attempt. Before
the commit protocol of ``PartWriter.write_once`` that run wrote the part a second time (the
issue's job: 1,958-2,059 duplicate rows in 6 of 6 runs; this test on the code before: 21 extra
rows, part 0 of batch 3 twice) and the job exited 0; now every row is in Kafka once, equal to
the harness, so the per-key counters went on from the committed state, and the part's keyed
state is the one the killed attempt staged (its marker names it), not the re-attempt's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from tests.deploy import kafka_hold
from tests.deploy.test_cluster import (
    JOB_SECONDS,
    expected_outputs,
    finished,
    submit,
    write_inputs,
)

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]


def test_an_executor_lost_after_its_task_committed_a_kafka_part_duplicates_nothing(
        cluster, kafka_broker, tmp_path):
    data, out, workdir = tmp_path / "data", tmp_path / "out", tmp_path / "submit"
    workdir.mkdir()
    write_inputs(data)
    (data / "held").mkdir()
    kafka_broker.create_topic("cluster-keyed", partitions=3)
    driver = submit(cluster, workdir, data, out, extra=[f"{kafka_broker.bootstrap}/cluster-keyed"],
                    hooks=(Path(kafka_hold.__file__),),
                    conf={f"spark.executorEnv.{kafka_hold.VARIABLE}": str(data / "held")})
    with finished(driver):
        pid, part = _committed_part(data / "held" / "committed", driver)
        executor = cluster.executor_of(pid)
        os.kill(executor, signal.SIGKILL)
        for shuffle in cluster.shuffle_files():
            shuffle.unlink(missing_ok=True)
        code = driver.wait(timeout=JOB_SECONDS)
    log = (workdir / "driver.log").read_text(errors="replace")
    assert code == 0, log[-5_000:]
    written = Counter()
    counts: dict[str, list[int]] = {}
    for record in kafka_broker.read("cluster-keyed"):
        row = json.loads(record.value)
        written[(row["k"], row["id"], row["n"], row["limit"])] += 1
        counts.setdefault(row["k"], []).append(row["n"])
    expected = expected_outputs()["keyed"]
    lost, extra = expected - written, written - expected
    print(f"cluster kafka figures: executor {executor} killed after part {part} of batch "
          f"{kafka_hold.HOLD_BATCH} committed; expected {sum(expected.values())}, "
          f"lost {sum(lost.values())}, extra {sum(extra.values())}")
    assert not lost and not extra, (dict(list(lost.items())[:5]), dict(list(extra.items())[:5]))
    # the counters in the outputs are the state: no key's count was given out twice
    assert all(len(n) == len(set(n)) for n in counts.values())
    assert "ExecutorLostFailure" in log and "FetchFailed" in log, log[-5_000:]
    # the part's keyed state is the killed attempt's, whose rows Kafka holds: its marker names
    # that attempt, and the re-attempt published the state it had staged, not its own
    named = _marker_attempt(kafka_broker, out / "keyed-checkpoint", part)
    delta = out / "keyed-checkpoint" / "sparkcast" / "keyed" / str(part) / (
        f"{kafka_hold.HOLD_BATCH}.delta")
    token = pa.ipc.open_stream(delta.read_bytes()).schema.metadata[b"lineage"].decode()
    assert named is not None and token == named
    assert not list(delta.parent.glob(f"{kafka_hold.HOLD_BATCH}.delta.*"))  # none kept


def _marker_attempt(broker, checkpoint: Path, part: int) -> str | None:
    """The attempt that the main output's marker of ``part`` names."""
    [topic] = set(json.loads((checkpoint / "sparkcast" / "kafka-markers.json").read_text())
                  .values())
    markers = [json.loads(r.value) for r in broker.read(topic)
               if r.key is not None and r.key.endswith(f"/main/{part}")]
    [marker] = [m for m in markers if m["batch"] == kafka_hold.HOLD_BATCH]
    return marker.get("attempt")


def _committed_part(marker: Path, driver) -> tuple[int, int]:
    deadline = time.monotonic() + JOB_SECONDS
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text().strip():
            pid, part = marker.read_text().split()
            return int(pid), int(part)
        assert driver.poll() is None, "the job ended before a part of the batch was committed"
        time.sleep(0.2)
    raise AssertionError(f"no part of batch {kafka_hold.HOLD_BATCH} was committed")
