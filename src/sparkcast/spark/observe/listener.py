"""The driver's ``StreamingQueryListener``: one record per micro-batch with a sparkcast operator.

Registered once per session (the query's session: a ``foreachBatch`` batch comes in a new session
object every time), it merges the batch's observed counts (``observation.py``; for the micro-batch
engine's ``foreachBatch`` query the row the writer reported, ``report_streamed``) into one record
(``monitoring/progress.py``), adds it to the process's ``monitoring.store.MONITOR`` (the Prometheus
endpoint and the view read it), appends it to the progress log of a ``write_stream`` query
(``<path>/_sparkcast_progress.jsonl``, for ``sparkcast view`` and ``sparkcast report``; one that
cannot be written is one WARN line, then left alone), logs one INFO line per micro-batch
(logger ``sparkcast``, off unless the user sets it to INFO) and, for a micro-batch with dead
letters, one WARN line: the count per callback and the first reason. It sums each query's
records (``monitoring/outcome.py``): when the query ends, a run that was all or mostly dead
letters is one more WARN line naming the first reason, and ``outcome_of`` hands the sums to
``sparkcast run``.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

from sparkcast.monitoring.outcome import RunOutcome
from sparkcast.monitoring.progress import CALLBACKS, batch_record, is_observation, plain
from sparkcast.monitoring.store import MONITOR
from sparkcast.monitoring.view import batch_line

log = logging.getLogger("sparkcast")
_LISTENING: set[int] = set()
_STREAMED: dict[str, dict[int, tuple[str, dict[str, Any]]]] = {}  # query id -> batch -> row
_STREAMED_KEPT = 100
_STREAMED_LOCK = threading.Lock()
#: query id -> the progress log file of a ``write_stream`` query
PROGRESS_LOGS: dict[str, str] = {}
_LOG_LOCK = threading.Lock()
#: query id -> the sums of its micro-batches, and whether its end was reported
_OUTCOMES: dict[str, RunOutcome] = {}
_ENDED: dict[str, threading.Event] = {}
_KEPT_OUTCOMES = 100


def outcome_of(query_id: str, wait: float = 10.0) -> RunOutcome | None:
    """What a query with a sparkcast operator came to (None: no micro-batch reported one),
    once the listener saw it end (it hears events after the query stopped: up to ``wait``
    seconds)."""
    ended = _ENDED.setdefault(str(query_id), threading.Event())
    ended.wait(wait)
    return _OUTCOMES.get(str(query_id))


def listen(spark: SparkSession) -> None:
    """Register the WARN listener once per session."""
    if id(spark) in _LISTENING:
        return
    spark.streams.addListener(ProgressListener())
    _LISTENING.add(id(spark))


def report_streamed(query_id: str, batch_id: int, name: str, row: dict[str, Any]) -> None:
    """The observed row of a micro-batch of a ``foreachBatch`` query, for the listener to merge
    into that batch's progress: Spark does not put a ``foreachBatch``'s own jobs in
    ``observedMetrics``."""
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
    """A progress log that cannot be written (its folder deleted while the query runs, a full
    disk) is said once and not tried again: a listener that raises gets an ERROR line with a
    traceback from Spark at every later micro-batch."""
    try:
        with _LOG_LOCK, open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, default=str) + "\n")
    except OSError as error:
        PROGRESS_LOGS.pop(record["id"], None)
        log.warning("sparkcast: query %s: its progress log %s cannot be written (%s); later "
                    "micro-batches are not logged there (the monitor and the metrics endpoint "
                    "still have them)", record["query"], path, error.strerror or error)


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
        _OUTCOMES.setdefault(record["id"], RunOutcome()).add(record)
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
        query_id = str(event.id)
        outcome = _OUTCOMES.get(query_id)
        line = None if outcome is None else outcome.warning(query_id)
        if line is not None:
            log.warning(line)
        _ENDED.setdefault(query_id, threading.Event()).set()
        for stale in list(_ENDED)[:-_KEPT_OUTCOMES]:
            _ENDED.pop(stale, None)
            _OUTCOMES.pop(stale, None)
