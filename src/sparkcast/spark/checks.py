"""Checks of the user's Spark session, on the driver, before a pipeline runs.

sparkcast works in any session (its own ``session()``, one the user built, Spark Connect), but
three settings decide whether a job runs at all, and each failed far from its cause:

* the state store: Spark refuses its default HDFS-backed store for ``transformWithState``;
  the error names the fix here, before the query starts;
* the Python that runs the workers: without ``sparkcast`` installed there, every task fails
  with ``No module named 'sparkcast'``. On a local master the driver's interpreter is used
  (set here when the session's one cannot import sparkcast); on a cluster or Spark Connect one
  tiny job per session imports sparkcast where the tasks run, and its failure says what to ship;
* parallelism: Spark's default 200 shuffle partitions made 200 virtual subtasks (about 60 s per
  micro-batch of ten rows on 2 cores); the default here is the session's cores.

And where files live: a checkpoint on a local path cannot serve a remote master (every host would
write its own), so ``write_stream`` refuses it and asks for a shared URI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sparkcast.errors import PipelineError
from sparkcast.spark import blobs, storage
from sparkcast.spark.session import ROCKSDB

if TYPE_CHECKING:
    from sparkcast.spark.plan import RuntimePlan

STATE_STORE = "spark.sql.streaming.stateStore.providerClass"
SPARK_DEFAULT_PARTITIONS = "200"
_PROBED: set[int] = set()  # sessions (by id) whose workers imported sparkcast


def master_of(spark: Any) -> str:
    """The session's master URL (``local[2]``, ``spark://h:7077``, ``yarn``, ``k8s://...``)."""
    try:
        return str(spark.conf.get("spark.master"))
    except Exception:  # noqa: BLE001 - a Connect server may hide it: assume a cluster
        return "unknown"


def is_local_master(master: str) -> bool:
    return master.startswith("local")


def is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: Any) -> int:
    """Virtual subtasks when ``process`` is not told: the shuffle partitions when someone chose
    them, else the session's cores (never Spark's 200, which costs a task per subtask)."""
    partitions = str(spark.conf.get("spark.sql.shuffle.partitions", SPARK_DEFAULT_PARTITIONS))
    if partitions != SPARK_DEFAULT_PARTITIONS:
        return int(partitions)
    return session_cores(spark)


def session_cores(spark: Any) -> int:
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    master = master_of(spark)
    inside = master[master.find("[") + 1:-1] if master.startswith("local[") else ""
    return int(inside) if inside.isdigit() else os.cpu_count() or 2


def check_workers(spark: Any) -> None:
    """Before a plan makes its Python functions (each captures the worker executable)."""
    master = master_of(spark)
    if is_local_master(master) and not is_connect(spark):
        _use_importing_python(spark)
    elif id(spark) not in _PROBED:
        _probe_workers(spark, master)
        _PROBED.add(id(spark))


def prepare(plan: RuntimePlan) -> None:
    """Check the session of a freshly built plan; give it its default blob store."""
    spark = plan.spark
    assert spark is not None
    if not plan.blob_store_chosen:
        plan.blob_store = blobs.default_blob_store(plan.pipeline_id,
                                                   is_local_master(master_of(spark)))
    if not plan.stateless:
        _check_state_store(spark)
    if str(spark.conf.get("spark.sql.shuffle.partitions", "")) == SPARK_DEFAULT_PARTITIONS:
        warnings.warn(
            "spark.sql.shuffle.partitions is Spark's default 200: each micro-batch of the "
            "stateful operator runs 200 tasks. Set it to about the cluster's cores, e.g. "
            f"spark.conf.set('spark.sql.shuffle.partitions', '{session_cores(spark)}'), "
            "before the query's first start (it is fixed per checkpoint)", stacklevel=3)


def query_blob_store(plan: RuntimePlan, checkpoint_location: str) -> str:
    """The blob store of a ``write_stream`` query; refuses a local checkpoint on a cluster."""
    assert plan.spark is not None
    require_shared(checkpoint_location, master_of(plan.spark))
    return plan.blob_store if plan.blob_store_chosen else blobs.blob_store_under(
        checkpoint_location)


def require_shared(checkpoint_location: str, master: str) -> None:
    """A remote master needs a checkpoint every host reads: a URI, never a bare local path."""
    if not storage.is_uri(checkpoint_location) and not is_local_master(master):
        raise PipelineError(
            f"the checkpoint {checkpoint_location!r} is a local path but the master is "
            f"{master}: executors on other hosts would not see it. Give a location every host "
            "shares: hdfs://..., s3a://..., gs://..., or file:///... for a shared mount")


def _check_state_store(spark: Any) -> None:
    provider = str(spark.conf.get(STATE_STORE, ""))
    if provider != ROCKSDB:
        raise PipelineError(
            f"transformWithState needs the RocksDB state store, and this session uses "
            f"{provider or 'the default HDFS store'}: spark.conf.set('{STATE_STORE}', "
            f"'{ROCKSDB}') before starting the query (or build the session with "
            "sparkcast.spark.session())")


def _use_importing_python(spark: Any) -> None:
    """Local master: the workers run ``sc.pythonExec``; make it one that imports sparkcast."""
    context = spark.sparkContext
    if _imports_sparkcast(context.pythonExec):
        return
    warnings.warn(
        f"the session's Python workers run {context.pythonExec!r}, which cannot import "
        f"sparkcast; using this interpreter ({sys.executable}) from now on. DataFrames made "
        f"earlier from Python objects keep the old one: set PYSPARK_PYTHON={sys.executable} "
        "before creating the session", stacklevel=4)
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
