"""A user's job file on a real Spark standalone cluster (master and two one-core workers from the
PySpark wheel, on loopback addresses): ``examples/enrich_job.py`` run by
``sparkcast run --master`` with a packed environment, then the unchanged file submitted with
``spark-submit`` (its ``__main__`` block runs the same ``sparkcast run`` in the submitted
session). Both outputs read back equal to the harness's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from examples import enrich_job
from sparkcast.spark import read_output
from tests.cli.test_jobs import EXAMPLE, expected_enrichment
from tests.deploy.cluster import SPARK_HOME, pack_environment, spark_env

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]
RUN_SECONDS = 600
SHARE = ["--conf", "spark.executor.memory=1g", "--conf", "spark.executor.cores=1",
         "--conf", "spark.cores.max=2"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the driver runs: the packed environment, and unpacked beside it (docs/deploy.md);
    the sample input of the job."""
    root = tmp_path_factory.mktemp("job-driver")
    archive = pack_environment(root)
    with tarfile.open(archive) as tar:
        tar.extractall(root / "environment", filter="fully_trusted")
    enrich_job.write_sample(root / "data")
    return root


def run_driver(command: list[str], workdir: Path, log: Path) -> str:
    """The driver in its own process group (killed with its children on a timeout)."""
    env = {**spark_env(), "ENRICH_DATA": str(workdir / "data"),
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    with open(log, "wb") as out:
        driver = subprocess.Popen(command, cwd=workdir, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = driver.wait(timeout=RUN_SECONDS)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait()
    text = log.read_text(errors="replace")
    assert code == 0, text[-5_000:]
    return text


def assert_outputs(spark: object, out: Path) -> None:
    main_rows, unknown = expected_enrichment()
    assert Counter(tuple(r) for r in read_output(spark, out.as_uri()).collect()) == main_rows
    assert Counter(tuple(r) for r in read_output(spark, out.as_uri(), "unknown").collect()) \
        == unknown


def test_sparkcast_run_runs_a_job_file_on_the_cluster(cluster, workdir, spark):
    out, ck = workdir / "run-out", workdir / "run-ck"
    log = run_driver([sys.executable, "-m", "sparkcast.cli", "run", str(EXAMPLE),
                      "--master", cluster.master_url, "--archive", str(workdir / "env.tar.gz"),
                      "--output", out.as_uri(), "--checkpoint", ck.as_uri(),
                      "--available-now", "--no-view", *SHARE], workdir, workdir / "run.log")
    assert "outputs in" in log
    assert_outputs(spark, out)


def test_spark_submit_runs_the_same_file_unchanged(cluster, workdir, spark):
    out, ck = workdir / "submit-out", workdir / "submit-ck"
    python = "./environment/bin/python"
    run_driver([str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url,
                "--archives", f"{workdir / 'env.tar.gz'}#environment",
                "--conf", f"spark.pyspark.python={python}",
                "--conf", f"spark.pyspark.driver.python={python}", *SHARE,
                str(EXAMPLE), "--output", out.as_uri(), "--checkpoint", ck.as_uri(),
                "--available-now", "--no-view"], workdir, workdir / "submit.log")
    assert_outputs(spark, out)
