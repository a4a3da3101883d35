"""A Spark session with the settings sparkcast needs; any session set up the same way works.

``process(...)`` checks a session it did not make (``launch/workers.py``,
``planning/checks.py``) and names what to set. What ``session()`` sets, and why:

* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = this interpreter: Python workers must import
  sparkcast and its dependencies (else ``No module named 'sparkcast'``); on a cluster, ship an
  environment instead (docs/deploy.md);
* ``spark.sql.streaming.stateStore.providerClass`` = RocksDB: what transformWithState is built
  for; Spark refuses its default HDFS-backed store for it;
* ``spark.sql.shuffle.partitions`` / ``spark.default.parallelism`` = 4: the operator groups rows
  by a handful of virtual subtasks; 200 partitions cost 200 mostly empty tasks per micro-batch
  (the shuffle partitions are fixed in a checkpoint, so choose before the first run);
* ``spark.sql.execution.arrow.pyspark.enabled`` and ``arrow.maxRecordsPerBatch`` = 100000: rows
  cross to Python as Arrow batches, big enough to amortize each call;
* ``spark.sql.session.timeZone`` = UTC: event times mean the same on every host;
* ``spark.python.worker.reuse``: a worker keeps its decoded broadcast state between tasks;
* ``spark.sql.streaming.noDataMicroBatches.enabled``: a batch without data still advances the
  watermark, so event-time timers fire;
* ``spark.driver.memory`` = 4g (a default for every master: on a local master the driver is
  also the executor; ``conf`` overrides it, and under ``spark-submit`` its ``--driver-memory``
  wins, since the driver JVM is already running);
  ``spark.ui.enabled`` / ``showConsoleProgress`` off: no port to bind, no progress bars in logs
  (``ui=True`` switches the UI on);
* where no ``.jars/`` folder of a clone is found (a pip install): nothing resolved at start
  unless the job declares it (``packages=("kafka", ...)``, or Delta named by
  ``SPARKCAST_PACKAGES``), so a job that reads files only starts with no resolution and no
  network; Spark's Kafka connector and spark-avro join the session at their first use
  (``kafka_topic``, an Avro value: ``connectors.py``), by Maven coordinates matching the
  running PySpark (``packages.py``). Not when the settings name ``spark.jars`` or
  ``spark.jars.packages`` themselves or ``SPARKCAST_PACKAGES=off``, nor under
  ``spark-submit``, whose ``--packages`` does it;
* the installed PySpark is one of the tested range (``versions.py``), else one clear error;
* logs stay at Spark's own level with only known noise silenced (``quiet.py``);
  ``metrics_port`` serves the Prometheus endpoint (``observe/prometheus.py``).

A session already running in this process (a notebook's, the shell's) is returned with only
``conf`` (and ``ui``) applied: Spark's ``getOrCreate`` would set every default above on it, so a
second ``session()`` would change the shuffle partitions of a session the user had chosen.

``remote="sc://host:15002"`` (or ``"local"``) makes a Spark Connect session instead: only the
SQL settings apply (the server owns the rest); a ``local`` server is started by this process
and inherits ``PYSPARK_PYTHON``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from sparkcast.spark.environment import ROCKSDB, STATE_STORE
from sparkcast.spark.launch.java import ensure_java
from sparkcast.spark.launch.packages import resolution_error, with_connectors
from sparkcast.spark.launch.quiet import java_options, start_filtered_context
from sparkcast.spark.launch.versions import check_pyspark
from sparkcast.spark.observe.prometheus import serve_metrics

DEFAULTS: dict[str, str] = {
    STATE_STORE: ROCKSDB,
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
    *, remote: str | None = None, ui: bool = False, quiet: bool = True,
    metrics_port: int | None = None, metrics_host: str = "127.0.0.1",
    packages: Iterable[str] = (),
) -> Any:
    """Get or create a SparkSession for sparkcast; ``conf`` adds or overrides settings.

    ``master`` is any Spark master (``local[4]``, ``spark://host:7077``, ``yarn``); under
    ``spark-submit`` the submitted ``--master`` wins. ``remote`` makes a Spark Connect session.
    ``ui=True`` switches the Spark UI on (http://localhost:4040); ``quiet=False`` keeps Spark's
    state-server WARNs and the Python workers' banners; ``metrics_port`` starts the Prometheus
    endpoint on ``metrics_host`` (``0`` picks a free port: ``sparkcast.spark.metrics_url()``).
    ``packages`` names connectors (``kafka``, ``avro``, ``delta``) to resolve as the JVM starts
    rather than at their first use (a pip install; ignored on Spark Connect)."""
    check_pyspark()
    given = {**({"spark.ui.enabled": "true"} if ui else {}),
             **{k: str(v) for k, v in (conf or {}).items()}}
    spark = (_connect(remote, app_name, {**DEFAULTS, **given}) if remote is not None
             else _classic(master, app_name, given, quiet, tuple(packages)))
    if metrics_port is not None:
        serve_metrics(spark, metrics_port, metrics_host)
    return spark


def _classic(master: str, app_name: str, given: dict[str, str], quiet: bool,
             packages: tuple[str, ...]) -> Any:
    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    launched = "PYSPARK_GATEWAY_PORT" not in os.environ  # else spark-submit started us
    fresh = SparkSession.getActiveSession() is None
    settings = {**DEFAULTS, **given} if fresh else dict(given)
    starts = launched and fresh
    added: list[str] = []
    if starts:  # jars join a JVM when it starts
        settings, added = with_connectors(settings, packages)
    if quiet and starts:
        settings["spark.driver.extraJavaOptions"] = java_options(settings)
    builder = SparkSession.builder.appName(app_name)
    if launched:  # under spark-submit its --master wins
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        if quiet and starts:
            start_filtered_context(master, app_name, settings)
        return builder.getOrCreate()
    except Exception as error:
        if added and "JAVA_GATEWAY_EXITED" in str(error):  # Ivy's resolution ends the JVM
            raise resolution_error(added, settings) from error
        raise


def _connect(remote: str, app_name: str, settings: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(remote).appName(app_name)
    if remote.startswith("local"):  # the server is a child of this process: same Python
        ensure_java()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in settings.items():
        if key.startswith("spark.sql."):  # runtime settings; the server owns the others
            builder = builder.config(key, str(value))
    return builder.getOrCreate()

