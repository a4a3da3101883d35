"""Dead letters made visible whatever the user consumes: progress metrics and one WARN line.

The counts are observed (``DataFrame.observe``) on the tagged frame, before any per-output
filter, so ``result.main.writeStream...`` alone reports them as well as ``write_stream``: they
appear in ``query.lastProgress["observedMetrics"]["sparkcast"]``. A ``StreamingQueryListener``,
registered once per session, logs one WARN line on the driver (logger ``sparkcast``) for each
micro-batch with dead letters: the count per callback and the first reason.

The metric names are stable, for monitoring to build on: ``main_rows``, ``side_output_rows``,
``dead_letters``, ``dead_letters_<callback>`` and ``first_dead_letter``. Spark refuses two
observations of one name with different plans in one query (several ``process`` results
unioned), so each operator built in a session takes the next name: ``sparkcast``,
``sparkcast_2``, ... (the same for the same program, so stable across restarts);
``ProcessResult.observation`` says which.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.layout import METRICS, PAYLOAD, TAG

OBSERVATION = "sparkcast"
#: the callbacks whose dead letters are counted apart (``input``: malformed input lines;
#: ``output``: outputs that do not match their schema)
CALLBACKS = ("input", "output", "process_element", "process_broadcast_element", "on_timer",
             "process_batch")

#: the subtasks' built-in counts summed in the observation (``core/batch_metrics.py``)
SUMMED = (("events_main", "long"), ("events_broadcast", "long"), ("broadcast_applied", "long"),
          ("held", "long"), ("timers_fired", "long"), ("callback_ms", "double"))

log = logging.getLogger("sparkcast")
_LISTENING: set[int] = set()
_BUILT: dict[int, int] = {}


def next_name(spark: SparkSession) -> str:
    count = _BUILT[id(spark)] = _BUILT.get(id(spark), 0) + 1
    return OBSERVATION if count == 1 else f"{OBSERVATION}_{count}"


def observed(tagged: DataFrame, name: str) -> DataFrame:
    """The tagged frame with the observation ``name`` (and the session's WARN listener)."""
    listen(tagged.sparkSession)
    tag = F.col(TAG)
    letter = tag == F.lit(DEAD_LETTERS.tag_id)
    report = tag == F.lit(METRICS)
    callback = F.get_json_object(F.col(PAYLOAD), "$.callback")
    metrics: list[Column] = [
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
    return tagged.observe(name, *metrics)


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
    spark.streams.addListener(DeadLetterListener())
    _LISTENING.add(id(spark))


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


class DeadLetterListener(StreamingQueryListener):
    """Logs one WARN line per micro-batch with dead letters (on the driver)."""

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        name = progress.name or str(progress.id)
        for observation, row in progress.observedMetrics.items():
            if observation == OBSERVATION or observation.startswith(f"{OBSERVATION}_"):
                line = warning(row.asDict(), name, progress.batchId)
                if line is not None:
                    log.warning(line)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
