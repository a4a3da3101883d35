"""Spark Connect (``remote("local")``, the server built into PySpark 4): the keyed operator
path, the shuffle-free path, ``write_stream`` and ``read_output`` give what a classic session
gives. Spark refuses a Connect session in a process that has a classic one, so the Connect side
runs in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy import connect_job

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]  # a Spark Connect server
ROOT = Path(__file__).parents[2]


def test_connect_session_gives_the_classic_results(spark, tmp_path):
    report = tmp_path / "connect.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "connect.log"
    with open(log, "wb") as out:  # the Connect run goes on while the classic one runs here
        remote_run = subprocess.Popen(
            [sys.executable, "-m", "tests.deploy.connect_job", str(tmp_path / "connect"),
             str(report)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)  # its Connect server JVM is killed with it
        try:
            classic = json.loads(json.dumps(connect_job.run_all(spark, tmp_path / "classic")))
            code = remote_run.wait(timeout=400)
        finally:
            if remote_run.poll() is None:
                os.killpg(remote_run.pid, signal.SIGKILL)
                remote_run.wait()
    assert code == 0, log.read_text(errors="replace")[-5_000:]
    remote = json.loads(report.read_text())
    assert remote["session"].startswith("pyspark.sql.connect")
    assert remote["shuffle_free_stateless"] and not remote["keyed_stateless"]
    for name in ("keyed", "shuffle_free", "write_stream"):
        assert remote[name] == classic[name], name
        assert len(classic[name]) == len(connect_job.ORDERS)
    assert classic["keyed"][0] == ["u0", "i0", 0] and ["u1", "i1", 20] in classic["keyed"]
    print(f"connect run: {remote['seconds']} s")
