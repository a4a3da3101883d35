"""Where a session runs: its master, whether it is Spark Connect, its cores, its state store.

Read by the planner (the default parallelism), the checks, the session builder and the
listener; nothing here changes the session.
"""

from __future__ import annotations

import os
from typing import Any

STATE_STORE = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
SPARK_DEFAULT_PARTITIONS = "200"


def is_rocksdb(provider: str) -> bool:
    """Spark's RocksDB state store, or a vendor's build of it under the same class name
    (Databricks: ``com.databricks.sql.streaming.state.RocksDBStateStoreProvider``)."""
    return provider.rsplit(".", 1)[-1] == ROCKSDB.rsplit(".", 1)[-1]


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
