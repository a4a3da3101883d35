"""A real Spark standalone cluster: master and two one-core workers as separate JVMs from the
PySpark wheel, on loopback addresses (``cluster.py``). The job is shipped as a packed
environment (``--archives``), so the executors run the shipped sparkcast, not the driver's; it
runs a keyed and a non-keyed pipeline with changing broadcast sides, and one executor is killed
(SIGKILL) while a micro-batch is in flight. The outputs are exactly the harness's: nothing lost,
nothing duplicated."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tarfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sparkcast.api.row import row_type
from sparkcast.spark import read_output
from sparkcast.spark.environment import ROCKSDB, STATE_STORE
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness
from tests.conftest import write_json_lines
from tests.deploy import cluster_job as job
from tests.deploy.cluster import SPARK_HOME, Cluster, pack_environment, spark_env

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]
JOB_SECONDS = 420


def write_inputs(data: Path, count: int = job.BATCHES) -> None:
    """One events file and one rules file per micro-batch (the first ``count``), in order of
    modification time."""
    start = time.time() - 1_000
    for b, (rules, events) in enumerate(job.batches(count)):
        for folder, rows in (("events", events), ("rules", rules)):
            if rows:
                path = write_json_lines(data / folder, f"batch-{b:03d}.json", rows)
                os.utime(path, (start + b, start + b))
    (data / "slow").mkdir()


def submit(cluster: Cluster, workdir: Path, data: Path, out: Path,
           extra: list[str] | None = None, hooks: tuple[Path, ...] = (),
           conf: dict[str, str] | None = None) -> subprocess.Popen:
    """``spark-submit`` in client mode with the documented shipping options (docs/deploy.md):
    the archive is unpacked by every executor as ./environment, and the driver (whose
    transformWithStateInPandas runner also starts ./environment/bin/python) finds the same
    environment unpacked in its working directory."""
    archive = pack_environment(workdir, hooks)
    with tarfile.open(archive) as tar:
        tar.extractall(workdir / "environment", filter="fully_trusted")
    command = [
        str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url,
        "--archives", f"{archive}#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
        "--conf", "spark.pyspark.driver.python=./environment/bin/python",
        "--conf", "spark.executor.memory=1g", "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=2", "--conf", "spark.driver.memory=1g",
        "--conf", f"{STATE_STORE}={ROCKSDB}", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", "spark.ui.enabled=false",
        *[word for key, value in (conf or {}).items() for word in ("--conf", f"{key}={value}")],
        str(Path(job.__file__)), data.as_uri(), out.as_uri(), *(extra or []),
    ]
    log = open(workdir / "driver.log", "wb")  # noqa: SIM115 - closed when the driver exits
    return subprocess.Popen(command, cwd=workdir, env=spark_env(), stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


@contextmanager
def finished(driver: subprocess.Popen) -> Iterator[None]:
    """The driver's process group is killed if the block leaves it running."""
    try:
        yield
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()


def kill_executor_mid_batch(cluster: Cluster, data: Path, out: Path,
                            driver: subprocess.Popen) -> dict[str, Any]:
    """Wait for the slow event's Python worker, then SIGKILL its executor JVM."""
    deadline = time.monotonic() + JOB_SECONDS
    while time.monotonic() < deadline and driver.poll() is None:
        markers = list((data / "slow").iterdir())
        if markers:
            worker = int(markers[0].name.removeprefix("worker-"))
            executor = cluster.executor_of(worker)
            batch = 3
            commits = out / "keyed-checkpoint" / "commits"
            in_flight = not (commits / str(batch)).exists()
            os.kill(executor, signal.SIGKILL)
            return {"executor": executor, "batch": batch, "in_flight": in_flight}
        time.sleep(0.2)
    raise AssertionError("the slow micro-batch never started")


def expected_outputs(count: int = job.BATCHES) -> dict[str, Counter]:
    """The harness's outputs of the first ``count`` micro-batches."""
    fields_e, fields_r = _fields(job.EVENTS_SCHEMA), _fields(job.RULES_SCHEMA)
    keyed = KeyedBroadcastHarness(job.Thresholds(), lambda v: v["k"], [job.RULES],
                                  on_error="dead_letter")
    plain = BroadcastHarness(job.Labels(), [job.LABELS], on_error="dead_letter")
    for harness in (keyed, plain):
        harness.open()
        for rules, events in job.batches(count):
            harness.process_micro_batch(
                [_row(fields_e, e) for e in events], [_row(fields_r, r) for r in rules],
                main_timestamps=[e["ts"] for e in events],
                broadcast_timestamps=[r["ts"] for r in rules])
    return {
        "keyed": Counter(tuple(v) for v in keyed.output()),
        "alerts": Counter(tuple(v) for v in keyed.side_output(job.ALERTS)),
        "dead_letters": Counter((d.callback, d.value["id"]) for d in keyed.dead_letters()),
        "enriched": Counter(tuple(v) for v in plain.output()),
    }


def actual_outputs(spark: Any, out: Path) -> dict[str, Counter]:
    keyed, enriched = (out / "keyed").as_uri(), (out / "enriched").as_uri()
    return {
        "keyed": Counter(tuple(r) for r in read_output(spark, keyed).collect()),
        "alerts": Counter(tuple(r) for r in read_output(spark, keyed, job.ALERTS).collect()),
        "dead_letters": Counter((r.callback, json.loads(r.value)["id"])
                                for r in read_output(spark, keyed, "dead_letters").collect()),
        "enriched": Counter(tuple(r) for r in read_output(spark, enriched).collect()),
    }


def test_a_shipped_job_on_a_standalone_cluster_survives_an_executor_kill(
        cluster, spark, tmp_path):
    data, out, workdir = tmp_path / "data", tmp_path / "out", tmp_path / "submit"
    workdir.mkdir()
    write_inputs(data)
    driver = submit(cluster, workdir, data, out)
    with finished(driver):
        kill = kill_executor_mid_batch(cluster, data, out, driver)
        code = driver.wait(timeout=JOB_SECONDS)
    log = (workdir / "driver.log").read_text(errors="replace")
    assert code == 0, log[-5_000:]
    assert kill["in_flight"], "the executor died between micro-batches, not during one"
    expected, actual = expected_outputs(), actual_outputs(spark, out)
    figures = {name: {"expected": sum(expected[name].values()),
                      "lost": sum((expected[name] - actual[name]).values()),
                      "extra": sum((actual[name] - expected[name]).values())}
               for name in expected}
    print(f"cluster figures: kills=1 (executor {kill['executor']}, batch {kill['batch']}) "
          f"{figures}")
    assert all(f["lost"] == 0 and f["extra"] == 0 for f in figures.values()), figures
    assert figures["dead_letters"]["expected"] > 0 and figures["alerts"]["expected"] > 0
    # the executors ran the shipped environment's Python and sparkcast, not the driver's
    ((python, package),) = re.findall(r"^EXECUTOR-PYTHON (\S+) (\S+)", log, re.MULTILINE)
    assert "/environment/" in python and "/environment/" in package
    assert "worker-" in package  # unpacked in an executor's work folder


def _fields(ddl: str) -> list[str]:
    return [part.split()[0] for part in ddl.split(",")]


def _row(fields: list[str], record: dict) -> Any:
    return row_type(tuple(fields))._make(record.get(f) for f in fields)
