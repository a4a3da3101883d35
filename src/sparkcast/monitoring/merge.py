"""Merge the subtasks' reports of one micro-batch (``core/batch_metrics.py``) into one picture.

Each kind of metric merges as it must: counts are summed (so ``events_broadcast`` and
``broadcast_applied`` count an element once per subtask that received or applied it;
``broadcast_elements`` counts the batch's broadcast elements once: the most any subtask
received), gauges stay per subtask (the last value each reported), histograms sum their counts
and sums, take the min of mins and max of maxes, and merge percentiles from every subtask's 21
quantile points weighted by its count (exact to 5 % steps for one subtask, an approximation
across several).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: built-in counts summed over subtasks
SUMMED = ("events_main", "events_broadcast", "broadcast_applied", "held", "timers_fired",
          "callback_ms")
PERCENTILES = (0.5, 0.95, 0.99)


def merge_reports(reports: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """One micro-batch of one operator: totals, per-subtask state, user metrics."""
    merged: dict[str, Any] = {name: 0 for name in SUMMED}
    merged.update(broadcast_elements=0, effect_latency_ms=None, outputs={},
                  dead_letters_by_callback={}, keyed={},
                  subtasks={}, user={"counters": {}, "gauges": {}, "histograms": {}})
    points: dict[str, list[tuple[float, float]]] = {}
    for report in reports:
        for name in SUMMED:
            merged[name] += report.get(name) or 0
        # every subtask receives every broadcast element: the most any received, counted once
        merged["broadcast_elements"] = max(merged["broadcast_elements"],
                                           report.get("events_broadcast") or 0)
        latency = report.get("effect_latency_ms")
        if latency is not None:
            merged["effect_latency_ms"] = max(latency, merged["effect_latency_ms"] or 0)
        _add(merged["outputs"], report.get("outputs") or {})
        _add(merged["dead_letters_by_callback"], report.get("dead_letters") or {})
        for name, sizes in (report.get("keyed") or {}).items():
            _add(merged["keyed"].setdefault(name, {}), sizes)
        subtask = str(report.get("subtask"))
        merged["subtasks"][subtask] = {
            "batch": report.get("batch"), "version": report.get("version"),
            "broadcast_entries": report.get("broadcast_entries") or {},
            "held": report.get("held") or 0}
        _merge_user(merged["user"], report.get("user") or {}, subtask, points)
    for name, summary in merged["user"]["histograms"].items():
        summary.update(_percentiles(points.get(name, [])))
        summary["mean"] = summary["sum"] / summary["count"] if summary["count"] else None
    merged["callback_ms"] = round(merged["callback_ms"], 3)
    return merged


def _add(total: dict[str, Any], more: Mapping[str, Any]) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + (value or 0)


def _merge_user(user: dict[str, Any], report: Mapping[str, Any], subtask: str,
                points: dict[str, list[tuple[float, float]]]) -> None:
    _add(user["counters"], report.get("counters") or {})
    for name, value in (report.get("gauges") or {}).items():
        user["gauges"].setdefault(name, {})[subtask] = value
    for name, part in (report.get("histograms") or {}).items():
        summary = user["histograms"].setdefault(
            name, {"count": 0, "sum": 0.0, "min": None, "max": None})
        count = part.get("count") or 0
        summary["count"] += count
        summary["sum"] += part.get("sum") or 0.0
        for bound, pick in (("min", min), ("max", max)):
            if part.get(bound) is not None:
                known = summary[bound]
                summary[bound] = part[bound] if known is None else pick(known, part[bound])
        quantiles = part.get("q") or []
        if count and quantiles:
            weight = count / len(quantiles)
            points.setdefault(name, []).extend((value, weight) for value in quantiles)


def _percentiles(points: list[tuple[float, float]]) -> dict[str, float | None]:
    if not points:
        return {f"p{round(q * 100)}": None for q in PERCENTILES}
    ordered = sorted(points)
    total = sum(weight for _, weight in ordered)
    found: dict[str, float | None] = {}
    for q in PERCENTILES:
        running = 0.0
        for value, weight in ordered:
            running += weight
            if running >= q * total - 1e-9:
                found[f"p{round(q * 100)}"] = value
                break
    return found
