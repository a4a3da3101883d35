"""A local Spark session with the settings sparkcast needs; any configured session also works.

What it sets and why: workers run this interpreter (else they miss pandas), the RocksDB state
store (what transformWithState is built for), few shuffle partitions (the operator groups by a
handful of subtasks; 200 empty tasks per micro-batch would dominate small batches), Arrow batches.
Logs stay at Spark's own level with only known noise silenced (``quiet.py``); the Spark UI is off
unless ``ui=True``; ``metrics_port`` serves the Prometheus endpoint (``spark/prometheus.py``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from sparkcast.spark.java import ensure_java
from sparkcast.spark.quiet import java_options, start_filtered_context

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
    master: str = "local[2]", app_name: str = "sparkcast", conf: dict[str, Any] | None = None,
    *, ui: bool = False, quiet: bool = True, metrics_port: int | None = None,
) -> Any:
    """Get or create a SparkSession for sparkcast; ``conf`` adds or overrides settings.

    ``ui=True`` switches the Spark UI on (http://localhost:4040); ``quiet=False`` keeps Spark's
    state-server WARNs and the Python workers' banners; ``metrics_port`` starts the Prometheus
    endpoint on 127.0.0.1 (``0`` picks a free port: ``sparkcast.spark.metrics_url()``)."""
    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = {**DEFAULTS, **({"spark.ui.enabled": "true"} if ui else {}),
                **{k: str(v) for k, v in (conf or {}).items()}}
    if quiet:
        settings["spark.driver.extraJavaOptions"] = java_options(settings)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    if quiet and SparkSession.getActiveSession() is None:
        start_filtered_context(master, app_name, settings)
    spark = builder.getOrCreate()
    if metrics_port is not None:
        from sparkcast.spark.prometheus import serve_metrics

        serve_metrics(spark, metrics_port)
    return spark
