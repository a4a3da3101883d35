"""The counts of every micro-batch, observed on the operator's tagged frame.

The counts are observed (``DataFrame.observe``) on the tagged frame, before any per-output
filter, so ``result.main.writeStream...`` alone reports them as well as ``write_stream``. On the
operator engine and the micro-batch engine in place they appear in
``query.lastProgress["observedMetrics"]``; where the micro-batch engine's driver works per
micro-batch the ``foreachBatch`` writer observes each batch's write with an ``Observation``
(Spark does not put a ``foreachBatch``'s own jobs into ``observedMetrics``) and hands the row to
the listener (``listener.report_streamed``), which merges it into that batch's progress.

The metric names are stable, for monitoring to build on: ``main_rows``, ``side_output_rows``,
``dead_letters``, ``dead_letters_<callback>`` and ``first_dead_letter``; from the subtasks'
``_metrics`` rows (``core/batch_metrics.py``): the sums ``events_main``, ``events_broadcast``,
``broadcast_applied``, ``held``, ``timers_fired``, ``callback_ms``, the maximum
``effect_latency_ms``, the maps ``outputs`` (rows per output) and ``user_counters`` (the user's
counters and meters), summed key by key, and ``subtask_reports``, every subtask's report as
JSON (gauges, histograms, broadcast versions), which ``monitoring/progress.py`` merges. Observed
metrics must be aggregates and user metric names are data, hence the maps and the JSON list.

Spark refuses two observations of one name with different plans in one query (several
``process`` results unioned), so each operator built in a session takes the next name:
``sparkcast``, ``sparkcast_2``, ... (the same for the same program, so stable across restarts);
``ProcessResult.observation`` says which.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from sparkcast.core.records import DEAD_LETTERS
from sparkcast.monitoring.progress import CALLBACKS, OBSERVATION
from sparkcast.spark.environment import is_connect
from sparkcast.spark.layout import MAIN, METRICS, PAYLOAD, TAG
from sparkcast.spark.observe.listener import listen

#: the subtasks' built-in counts summed in the observation (``core/batch_metrics.py``)
SUMMED = (("events_main", "long"), ("events_broadcast", "long"), ("broadcast_applied", "long"),
          ("held", "long"), ("timers_fired", "long"), ("callback_ms", "double"))

_METRIC_COLUMNS: dict[int, tuple[Any, list[Column]]] = {}
_BUILT: dict[int, int] = {}


def next_name(spark: SparkSession) -> str:
    count = _BUILT[id(spark)] = _BUILT.get(id(spark), 0) + 1
    return OBSERVATION if count == 1 else f"{OBSERVATION}_{count}"


def observed(tagged: DataFrame, name: str | Observation,
             session: SparkSession | None = None) -> DataFrame:
    """The tagged frame with the observation ``name`` (and the WARN listener on ``session``,
    by default the frame's). The ``foreachBatch`` files writer passes an ``Observation`` and the
    query's session: a ``foreachBatch`` batch comes in a new session object every time."""
    listen(session or tagged.sparkSession)
    return tagged.observe(name, *_metric_columns(tagged.sparkSession))


def observed_row(observation: Observation) -> dict[str, Any]:
    """An ``Observation``'s row as Python values. PySpark 4.0's ``Observation.get`` leaves the
    array and map columns (``subtask_reports``, ``outputs``) as Scala collections, py4j
    handles a JSON encoder cannot write; 4.1 and later convert them."""
    return {name: _python_value(value) for name, value in observation.get.items()}


def counted_row(outputs: dict[str, int], letters: dict[str, int], first_letter: str | None,
                reports: list[str]) -> dict[str, Any]:
    """The row the observation gives (``_build_metric_columns``), from counts taken where the
    rows were written (``execution/task_writer.py``): rows per output, dead letters per
    callback, the least ``"callback: error"`` and the ``_metrics`` payloads."""
    dead = outputs.get(DEAD_LETTERS.tag_id, 0)
    side = sum(n for name, n in outputs.items() if name not in (MAIN, DEAD_LETTERS.tag_id, METRICS))
    parsed = [_json_object(text) for text in reports]
    row: dict[str, Any] = {
        "main_rows": outputs.get(MAIN, 0), "side_output_rows": side, "dead_letters": dead,
        **{f"dead_letters_{name}": letters.get(name, 0) for name in CALLBACKS},
        "first_dead_letter": first_letter if dead else None}
    for name, kind in SUMMED:
        found = [_number(r.get(name), kind) for r in parsed]
        present = [v for v in found if v is not None]
        row[name] = sum(present) if present else None
    latencies = [v for v in (_number(r.get("effect_latency_ms"), "double") for r in parsed)
                 if v is not None]
    row["effect_latency_ms"] = max(latencies) if latencies else None
    row["outputs"] = _summed([r.get("outputs") for r in parsed])
    row["user_counters"] = _summed([(r.get("user") or {}).get("counters") for r in parsed])
    row["subtask_reports"] = list(reports)
    return row


def _json_object(text: str) -> dict[str, Any]:
    found = json.loads(text)
    return found if isinstance(found, dict) else {}


def _number(value: Any, kind: str) -> int | float | None:
    if value is None or isinstance(value, (dict, list, str)):
        return None
    return int(value) if kind == "long" else float(value)


def _summed(maps: list[Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for found in maps:
        for name, value in (found if isinstance(found, dict) else {}).items():
            total[name] = total.get(name, 0) + (int(value) if value is not None else 0)
    return total


def _python_value(value: Any) -> Any:
    from py4j.java_gateway import JavaObject  # type: ignore[import-untyped]

    if not isinstance(value, JavaObject):
        return value
    if "Map" in value.getClass().getName():
        return {_python_value(k): _python_value(value.apply(k)) for k in _scala_items(
            value.keys())}
    return [_python_value(item) for item in _scala_items(value)]


def _scala_items(collection: Any) -> list[Any]:
    items, walk = [], collection.iterator()
    while walk.hasNext():
        items.append(walk.next())
    return items


def _metric_columns(spark: SparkSession) -> list[Column]:
    """Built once per Spark context (~0.2 s a time, and the ``foreachBatch`` writer observes
    every micro-batch); Spark Connect builds them anew."""
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
