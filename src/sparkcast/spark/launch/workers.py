"""Whether the session's Python workers can run sparkcast, checked before a plan is built.

Without ``sparkcast`` installed where the tasks run, every task fails with ``No module named
'sparkcast'``, far from its cause. On a local master the driver's interpreter is used (set here
when the session's one cannot import sparkcast); on a cluster or Spark Connect one tiny job per
session imports sparkcast where the tasks run, and its failure says what to ship
(docs/deploy.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import lru_cache
from typing import Any

from sparkcast.errors import PipelineError, warn
from sparkcast.spark.environment import is_connect, is_local_master, master_of

_PROBED: set[int] = set()  # sessions (by id) whose workers imported sparkcast


def check_workers(spark: Any) -> None:
    """Before a plan makes its Python functions (each captures the worker executable)."""
    master = master_of(spark)
    if is_local_master(master) and not is_connect(spark):
        _use_importing_python(spark)
    elif id(spark) not in _PROBED:
        _probe_workers(spark, master)
        _PROBED.add(id(spark))


def _use_importing_python(spark: Any) -> None:
    """Local master: the workers run ``sc.pythonExec``; make it one that imports sparkcast."""
    context = spark.sparkContext
    if _imports_sparkcast(context.pythonExec):
        return
    warn(
        f"the session's Python workers run {context.pythonExec!r}, which cannot import "
        f"sparkcast; using this interpreter ({sys.executable}) from now on. DataFrames made "
        f"earlier from Python objects keep the old one: set PYSPARK_PYTHON={sys.executable} "
        "before creating the session")
    context.pythonExec = sys.executable
    os.environ["PYSPARK_PYTHON"] = sys.executable


@lru_cache(maxsize=8)
def _imports_sparkcast(python: str) -> bool:
    if python == sys.executable:
        return True
    found = shutil.which(python)
    if found is None:
        return False
    done = subprocess.run([found, "-c", "import sparkcast"], capture_output=True, timeout=60,
                          check=False)
    return done.returncode == 0


def _probe_workers(spark: Any, master: str) -> None:
    """One tiny job: does the Python where tasks run import sparkcast?"""
    try:
        spark.range(1).mapInArrow(_probe, "ok boolean").collect()
    except Exception as exc:  # noqa: BLE001 - Spark wraps the worker's error in its own types
        if "sparkcast" not in str(exc):
            raise
        raise PipelineError(
            f"the Python workers of {master} cannot import sparkcast. Ship it with the job: "
            "spark-submit --archives env.tar.gz#environment with "
            "spark.pyspark.python=./environment/bin/python (see docs/deploy.md), or install "
            "sparkcast on every host and set PYSPARK_PYTHON to that interpreter"
        ) from exc


def _probe(batches: Any) -> Any:
    import pyarrow as pa

    for _ in batches:
        yield pa.RecordBatch.from_pydict({"ok": [True]})
