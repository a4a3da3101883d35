"""One micro-batch as the monitoring sees it, built from a Spark progress report.

A progress report comes as ``query.lastProgress`` (a dict whose observed metrics are Rows), as
a listener's ``event.progress.json`` or as saved JSON: ``batch_record`` takes any of them and
returns plain JSON data. sparkcast's observations (``spark/observe/observation.py``) carry each
subtask's report in ``subtask_reports``; they are merged here (``merge.py``).
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
        "sources": [{"description": str(s.get("description")),
                     "rows": int(s.get("numInputRows") or 0)}
                    for s in report.get("sources") or []],
        "operators": operators,
    }
