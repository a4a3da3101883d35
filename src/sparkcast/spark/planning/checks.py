"""Checks of a freshly built plan against its session, on the driver, before a query runs.

* the state store: Spark refuses its default HDFS-backed store for ``transformWithState``;
  the error names the fix here, before the query starts;
* parallelism: Spark's default 200 shuffle partitions made 200 virtual subtasks (about 60 s per
  micro-batch of ten rows on 2 cores): a warning names the setting;
* where files live: a checkpoint on a local path cannot serve a remote master (every host would
  write its own), so ``write_stream`` refuses it and asks for a shared URI; the blob store
  defaults to a folder beside the checkpoint.

The session's Python workers are checked before the plan is built (``launch/workers.py``).
"""

from __future__ import annotations

from typing import Any

from sparkcast.errors import PipelineError, warn
from sparkcast.spark.environment import (
    ROCKSDB,
    SPARK_DEFAULT_PARTITIONS,
    STATE_STORE,
    is_local_master,
    is_rocksdb,
    master_of,
    session_cores,
)
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import blobs, storage


def prepare(plan: RuntimePlan) -> None:
    """Check the session of a freshly built plan; give it its default blob store."""
    spark = plan.spark
    assert spark is not None
    if not plan.blob_store_chosen:
        plan.blob_store = blobs.default_blob_store(plan.pipeline_id,
                                                   is_local_master(master_of(spark)))
    if not plan.in_place:
        _check_state_store(spark)
    if str(spark.conf.get("spark.sql.shuffle.partitions", "")) == SPARK_DEFAULT_PARTITIONS:
        warn(
            "spark.sql.shuffle.partitions is Spark's default 200: each micro-batch of the "
            "stateful operator runs 200 tasks. Set it to about the cluster's cores, e.g. "
            f"spark.conf.set('spark.sql.shuffle.partitions', '{session_cores(spark)}'), "
            "before the query's first start (it is fixed per checkpoint)")


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
    if not is_rocksdb(provider):
        raise PipelineError(
            f"transformWithState needs the RocksDB state store, and this session uses "
            f"{provider or 'the default HDFS store'}: spark.conf.set('{STATE_STORE}', "
            f"'{ROCKSDB}') before starting the query (or build the session with "
            "sparkcast.spark.session())")
