"""One micro-batch as the monitoring sees it, built from a Spark progress report.

A progress report comes as ``query.lastProgress`` (a dict whose observed metrics are Rows), as
a listener's ``event.progress.json`` or as saved JSON: ``batch_record`` takes any of them and
returns plain JSON data. sparkcast's observations (``spark/observe/observation.py``) carry each
subtask's report in ``subtask_reports``; they are merged here (``merge.py``).

Each source keeps its description (``KafkaV2[Subscribe[topic]]``, ``FileStreamSource[path]``),
its rows, and, for a source that reports them (Spark's Kafka source), the offsets its partitions
were behind the latest offset when the micro-batch ended: min, max and average over the
partitions (Spark's ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest``; the latest offset as fetched when the micro-batch was planned, or,
with ``availableNow``, when the run began). Kafka's lag is ``offsets_behind["max"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sparkcast.monitoring.merge import merge_reports

OBSERVATION = "sparkcast"
#: the callbacks whose dead letters are counted apart (``input``: malformed input lines;
#: ``output``: outputs that do not match their schema)
CALLBACKS = ("input", "output", "process_element", "process_broadcast_element", "on_timer",
             "process_batch")
#: the observation's plain columns, copied into each operator's record
OBSERVED = ("main_rows", "side_output_rows", "dead_letters", "first_dead_letter")
# the broadcast elements the micro-batch engine's driver applied, once for every subtask
APPLIED_ONCE = "broadcast_applied_once"


def is_observation(name: str) -> bool:
    return name == OBSERVATION or name.startswith(f"{OBSERVATION}_")


def plain(value: Any) -> Any:
    """A progress report or Row as plain JSON data."""
    if hasattr(value, "asDict"):
        return plain(value.asDict(recursive=True))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    json_value = getattr(value, "json", None)
    if isinstance(json_value, str):
        return json.loads(json_value)
    return value


def batch_record(progress: Any) -> dict[str, Any]:
    """The monitoring's record of one micro-batch: rates, latency, sources, merged operators."""
    report = progress if isinstance(progress, Mapping) else plain(progress)
    operators = {}
    for name, row in (report.get("observedMetrics") or {}).items():
        if not is_observation(name):
            continue
        row = plain(row)
        merged = merge_reports(json.loads(text) for text in row.get("subtask_reports") or [])
        merged.update({key: row.get(key) for key in OBSERVED})
        once = row.get(APPLIED_ONCE) or 0
        merged["events_broadcast"] += once
        merged["broadcast_elements"] += once
        merged["broadcast_applied"] += once
        operators[name] = merged
    return {
        "query": report.get("name") or str(report.get("id")),
        "id": str(report.get("id")),
        "batch": int(report.get("batchId") or 0),
        "timestamp": report.get("timestamp"),
        "input_rows": int(report.get("numInputRows") or 0),
        "input_rows_per_second": float(report.get("inputRowsPerSecond") or 0.0),
        "processed_rows_per_second": float(report.get("processedRowsPerSecond") or 0.0),
        "duration_ms": int((report.get("durationMs") or {}).get("triggerExecution") or 0),
        "sources": [source_record(s) for s in report.get("sources") or []],
        "operators": operators,
    }


#: Spark's source metrics of the offsets behind the latest, by the record's name for them
BEHIND = {"min": "minOffsetsBehindLatest", "max": "maxOffsetsBehindLatest",
          "avg": "avgOffsetsBehindLatest"}


def source_record(source: Mapping[str, Any]) -> dict[str, Any]:
    """One source of a progress report: its description, rows, and ``offsets_behind``
    (``{"min", "max", "avg"}`` over its partitions; None when the source reports no lag)."""
    metrics = source.get("metrics") or {}
    behind: dict[str, float] | None = None
    if all(metrics.get(name) is not None for name in BEHIND.values()):
        behind = {"min": int(metrics[BEHIND["min"]]), "max": int(metrics[BEHIND["max"]]),
                  "avg": float(metrics[BEHIND["avg"]])}
    return {"description": str(source.get("description")),
            "rows": int(source.get("numInputRows") or 0), "offsets_behind": behind}
