"""What the driver knows of each query: recent micro-batch records and running totals.

The listener (``spark/observe/listener.py``) adds every progress report of a query with a sparkcast
operator; the Prometheus endpoint, the live view and the report read from here. Counts are
totals since this process started watching (Prometheus counters); gauges are the latest value
each subtask reported. A version change is kept with the micro-batch whose subtask report
carried it: the batch that applied it, whether or not its progress report was seen. A Kafka
source's lag (offsets behind the latest) is a gauge: the last micro-batch's.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sparkcast.monitoring.merge import SUMMED

RECENT = 500


@dataclass
class OperatorTotals:
    """Running totals and latest gauges of one sparkcast operator of a query."""

    counts: dict[str, float] = field(default_factory=lambda: {name: 0 for name in SUMMED})
    outputs: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    keyed: dict[str, dict[str, int]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    histogram_counts: dict[str, int] = field(default_factory=dict)
    #: latest values
    subtasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    gauges: dict[str, dict[str, Any]] = field(default_factory=dict)
    histograms: dict[str, dict[str, Any]] = field(default_factory=dict)
    effect_latency_ms: float | None = None
    #: (micro-batch, subtask, version) each time a subtask's version changed
    version_changes: list[tuple[int | None, str, str]] = field(default_factory=list)

    def add(self, merged: dict[str, Any]) -> None:
        for name in (*SUMMED, "broadcast_elements"):
            self.counts[name] = self.counts.get(name, 0) + (merged.get(name) or 0)
        _add(self.outputs, merged.get("outputs") or {})
        _add(self.dead_letters, merged.get("dead_letters_by_callback") or {})
        for name, sizes in (merged.get("keyed") or {}).items():
            _add(self.keyed.setdefault(name, {}), sizes)
        user = merged.get("user") or {}
        _add(self.counters, user.get("counters") or {})
        for name, summary in (user.get("histograms") or {}).items():
            self.histogram_counts[name] = self.histogram_counts.get(name, 0) + summary["count"]
            if summary["count"]:
                self.histograms[name] = summary
        for name, per_subtask in (user.get("gauges") or {}).items():
            self.gauges.setdefault(name, {}).update(per_subtask)
        for subtask, now in (merged.get("subtasks") or {}).items():
            before = self.subtasks.get(subtask)
            if before is None or before.get("version") != now.get("version"):
                self.version_changes.append((now.get("batch"), subtask, now.get("version")))
                del self.version_changes[:-RECENT]
            self.subtasks[subtask] = now
        if merged.get("effect_latency_ms") is not None:
            self.effect_latency_ms = merged["effect_latency_ms"]

    def applied_versions(self) -> dict[str, tuple[int | None, str]]:
        """Per subtask: its current broadcast version and the micro-batch that applied it."""
        latest: dict[str, tuple[int | None, str]] = {}
        for batch, subtask, version in self.version_changes:
            latest[subtask] = (batch, version)
        return dict(sorted(latest.items(), key=lambda item: int(item[0])))


@dataclass
class QueryState:
    """One query: its recent records (oldest first) and its operators' totals."""

    name: str
    records: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT))
    batches: int = 0
    input_rows: int = 0
    operators: dict[str, OperatorTotals] = field(default_factory=dict)

    @property
    def last(self) -> dict[str, Any] | None:
        return self.records[-1] if self.records else None

    def offsets_behind(self) -> dict[str, dict[str, float]]:
        """Per source that reports it (Kafka), by description: the offsets its partitions were
        behind the latest offset after the last micro-batch (``min``, ``max``, ``avg``)."""
        last = self.last
        sources = [] if last is None else last.get("sources") or []
        return {s["description"]: s["offsets_behind"] for s in sources
                if s.get("offsets_behind") is not None}


class Monitor:
    """Every watched query of this process, by query id; safe to read while the listener adds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queries: dict[str, QueryState] = {}

    def add(self, record: dict[str, Any]) -> None:
        with self._lock:
            state = self._queries.setdefault(record["id"], QueryState(record["query"]))
            state.name = record["query"]
            if any(r["batch"] == record["batch"] for r in state.records):
                return  # the same report seen twice (two listeners, a replayed progress)
            state.records.append(record)
            state.batches += 1
            state.input_rows += record["input_rows"]
            for name, merged in record["operators"].items():
                state.operators.setdefault(name, OperatorTotals()).add(merged)

    def query(self, query_id: str) -> QueryState | None:
        with self._lock:
            return self._queries.get(query_id)

    def queries(self) -> list[QueryState]:
        with self._lock:
            return list(self._queries.values())

    def records(self) -> list[dict[str, Any]]:
        """Every query's recent records, oldest first."""
        with self._lock:
            return [r for state in self._queries.values() for r in state.records]


def _add(total: dict[str, Any], more: dict[str, Any]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + (value or 0)


#: the process's monitor, fed by the listener of every session that built a sparkcast operator
MONITOR = Monitor()
