"""A local Spark session with the settings sparkcast needs; any configured session also works.

What it sets and why: workers run this interpreter (else they miss pandas), the RocksDB state
store (what transformWithState is built for), few shuffle partitions (the operator groups by a
handful of subtasks; 200 empty tasks per micro-batch would dominate small batches), Arrow batches.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from sparkcast.spark.java import ensure_java

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

DEFAULTS: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "4g",
    "spark.sql.streaming.noDataMicroBatches.enabled": "true",
}


def session(
    master: str = "local[2]", app_name: str = "sparkcast", conf: dict[str, Any] | None = None
) -> Any:
    """Get or create a SparkSession for sparkcast; ``conf`` adds or overrides settings."""
    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
