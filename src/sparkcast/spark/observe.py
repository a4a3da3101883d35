"""Metrics made visible whatever the user consumes: progress metrics, a WARN and an INFO line.

The counts are observed (``DataFrame.observe``) on the tagged frame, before any per-output
filter, so ``result.main.writeStream...`` alone reports them as well as ``write_stream``: they
appear in ``query.lastProgress["observedMetrics"]["sparkcast"]``. A ``StreamingQueryListener``,
registered once per session, logs one WARN line on the driver (logger ``sparkcast``) for each
micro-batch with dead letters: the count per callback and the first reason.

The metric names are stable, for monitoring to build on: ``main_rows``, ``side_output_rows``,
``dead_letters``, ``dead_letters_<callback>`` and ``first_dead_letter``; from the subtasks'
``_metrics`` rows (``core/batch_metrics.py``): the sums ``events_main``, ``events_broadcast``,
``broadcast_applied``, ``held``, ``timers_fired``, ``callback_ms``, the maximum
``effect_latency_ms``, the maps ``outputs`` (rows per output) and ``user_counters`` (the user's
counters and meters), summed key by key, and ``subtask_reports``, every subtask's report as
JSON (gauges, histograms, broadcast versions), which ``monitoring/progress.py`` merges. Observed
metrics must be aggregates and user metric names are data, hence the maps and the JSON list.

The listener also adds each report to the process's ``monitoring.store.MONITOR`` (the
Prometheus endpoint and the view read it), appends it to the progress log of a
``write_stream`` query (``<path>/_sparkcast_progress.jsonl``, for ``sparkcast view`` and
``sparkcast report``), and logs one INFO line per micro-batch (logger ``sparkcast``, off
unless the user sets it to INFO). Spark refuses two
observations of one name with different plans in one query (several ``process`` results
unioned), so each operator built in a session takes the next name: ``sparkcast``,
``sparkcast_2``, ... (the same for the same program, so stable across restarts);
``ProcessResult.observation`` says which.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from sparkcast.core.records import DEAD_LETTERS
from sparkcast.monitoring.progress import (
    CALLBACKS,
    OBSERVATION,
    batch_record,
    is_observation,
    plain,
)
from sparkcast.monitoring.store import MONITOR
from sparkcast.monitoring.view import batch_line
from sparkcast.spark.checks import is_connect
from sparkcast.spark.layout import METRICS, PAYLOAD, TAG

#: the subtasks' built-in counts summed in the observation (``core/batch_metrics.py``)
SUMMED = (("events_main", "long"), ("events_broadcast", "long"), ("broadcast_applied", "long"),
          ("held", "long"), ("timers_fired", "long"), ("callback_ms", "double"))

log = logging.getLogger("sparkcast")
_LISTENING: set[int] = set()
_METRIC_COLUMNS: dict[int, tuple[Any, list[Column]]] = {}
_STREAMED: dict[str, dict[int, tuple[str, dict[str, Any]]]] = {}  # query id -> batch -> row
_STREAMED_KEPT = 100
_STREAMED_LOCK = threading.Lock()
_BUILT: dict[int, int] = {}
#: query id -> the progress log file of a ``write_stream`` query
PROGRESS_LOGS: dict[str, str] = {}
_LOG_LOCK = threading.Lock()


def next_name(spark: SparkSession) -> str:
    count = _BUILT[id(spark)] = _BUILT.get(id(spark), 0) + 1
    return OBSERVATION if count == 1 else f"{OBSERVATION}_{count}"


def observed(tagged: DataFrame, name: str | Observation,
             session: SparkSession | None = None) -> DataFrame:
    """The tagged frame with the observation ``name`` (and the WARN listener on ``session``,
    by default the frame's). The streamed path's writer passes an ``Observation`` and the
    query's session: a ``foreachBatch`` batch comes in a new session object every time."""
    listen(session or tagged.sparkSession)
    return tagged.observe(name, *_metric_columns(tagged.sparkSession))


def _metric_columns(spark: SparkSession) -> list[Column]:
    """Built once per Spark context (~0.2 s a time, and the streamed path observes every
    micro-batch); Spark Connect builds them anew."""
    if is_connect(spark):
        return _build_metric_columns()
    context = spark.sparkContext
    cached = _METRIC_COLUMNS.get(id(context))
    if cached is None or cached[0] is not context:
        cached = _METRIC_COLUMNS[id(context)] = (context, _build_metric_columns())
    return cached[1]


def _build_metric_columns() -> list[Column]:
    tag = F.col(TAG)
    letter = tag == F.lit(DEAD_LETTERS.tag_id)
    report = tag == F.lit(METRICS)
    callback = F.get_json_object(F.col(PAYLOAD), "$.callback")
    return [
        F.count(F.when(tag.isNull(), 1)).alias("main_rows"),
        F.count(F.when(tag.isNotNull() & ~letter & ~report, 1)).alias("side_output_rows"),
        F.count(F.when(letter, 1)).alias("dead_letters"),
        *[F.count(F.when(letter & (callback == F.lit(name)), 1)).alias(f"dead_letters_{name}")
          for name in CALLBACKS],
        F.min(F.when(letter, F.concat_ws(": ", callback,
                                          F.get_json_object(F.col(PAYLOAD), "$.error"))))
        .alias("first_dead_letter"),
        *[F.sum(F.when(report, F.get_json_object(F.col(PAYLOAD), f"$.{field}").cast(kind)))
          .alias(field) for field, kind in SUMMED],
        F.max(F.when(report, F.get_json_object(F.col(PAYLOAD), "$.effect_latency_ms")
                     .cast("double"))).alias("effect_latency_ms"),
        _summed_map(report, "$.outputs").alias("outputs"),
        _summed_map(report, "$.user.counters").alias("user_counters"),
        F.collect_list(F.when(report, F.col(PAYLOAD))).alias("subtask_reports"),
    ]


def _summed_map(report: Column, path: str) -> Column:
    """The ``map<string,bigint>`` at ``path`` of the metrics rows, summed key by key (the names
    are the user's, so they cannot be columns of their own)."""
    maps = F.collect_list(F.when(report, F.from_json(F.get_json_object(F.col(PAYLOAD), path),
                                                     "map<string,bigint>")))
    return F.aggregate(maps, F.create_map().cast("map<string,bigint>"), lambda total, more: (
        F.map_zip_with(total, more, lambda _, a, b: F.coalesce(a, F.lit(0))
                       + F.coalesce(b, F.lit(0)))))


def listen(spark: SparkSession) -> None:
    """Register the WARN listener once per session."""
    if id(spark) in _LISTENING:
        return
    spark.streams.addListener(ProgressListener())
    _LISTENING.add(id(spark))


def report_streamed(query_id: str, batch_id: int, name: str, row: dict[str, Any]) -> None:
    """The observed row of a streamed-path micro-batch, for the listener to merge into that
    batch's progress: Spark does not put a ``foreachBatch``'s own jobs in ``observedMetrics``."""
    with _STREAMED_LOCK:
        batches = _STREAMED.setdefault(query_id, {})
        batches[batch_id] = (name, row)
        for stale in sorted(batches)[:-_STREAMED_KEPT]:  # progress that never came (a crash)
            del batches[stale]


def with_streamed(progress: dict[str, Any]) -> dict[str, Any]:
    with _STREAMED_LOCK:
        found = _STREAMED.get(str(progress.get("id")), {}).pop(
            int(progress.get("batchId") or 0), None)
    if found is not None:
        name, row = found
        progress["observedMetrics"] = {**(progress.get("observedMetrics") or {}), name: row}
    return progress


def warning(metrics: dict[str, Any], query: str, batch_id: int) -> str | None:
    """The WARN line for one micro-batch's metrics, None when it had no dead letter."""
    total = metrics.get("dead_letters") or 0
    if not total:
        return None
    counts = ", ".join(f"{name} {metrics[f'dead_letters_{name}']}" for name in CALLBACKS
                       if metrics.get(f"dead_letters_{name}"))
    return (f"sparkcast: query {query} micro-batch {batch_id}: {total} dead letter(s) "
            f"({counts}); first: {metrics.get('first_dead_letter')}; read them with "
            f"result.dead_letters or read_output(spark, path, 'dead_letters')")


def append_progress_log(path: str, record: dict[str, Any]) -> None:
    with _LOG_LOCK, open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(record, default=str) + "\n")


class ProgressListener(StreamingQueryListener):
    """Per micro-batch with a sparkcast operator (on the driver): feeds the monitor and the
    progress log, logs the INFO line and, with dead letters, one WARN line."""

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = with_streamed(plain(event.progress))
        if not any(is_observation(n) for n in progress.get("observedMetrics") or {}):
            return
        record = batch_record(progress)
        MONITOR.add(record)
        path = PROGRESS_LOGS.get(record["id"])
        if path is not None:
            append_progress_log(path, record)
        if log.isEnabledFor(logging.INFO):
            log.info(batch_line(record))
        for observation, row in progress["observedMetrics"].items():
            if is_observation(observation):
                line = warning(row, record["query"], record["batch"])
                if line is not None:
                    log.warning(line)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
