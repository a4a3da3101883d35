"""What one subtask reports about one micro-batch: built-in counts and the user's metrics.

The engine counts in bulk (per micro-batch, per broadcast element, per timer; never per main
element), and ``subtask_report`` turns the counts into one JSON-ready dict. On Spark that dict
travels as one row of the operator's own output (the only channel from Python workers to the
driver that is exactly-once and works on Spark Connect); the driver merges the subtasks' reports
(``sparkcast.monitoring.merge``).

User metrics are reported per micro-batch, not as running totals, because an engine lives in one
Python worker: a restart, a retried task or a subtask moving to another worker would otherwise
reset or repeat them. Counters and meters give the increase during the call, gauges their
reading at its end, distributions and histograms the values recorded during the call (count,
sum, min, max and, for histograms, 21 quantile points from which the driver merges percentiles).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sparkcast.api.metrics import Counter, Distribution, Histogram, Meter, MetricGroup

#: quantile points a histogram ships per micro-batch (0, 5, ..., 100 %)
QUANTILE_POINTS = tuple(i / 20 for i in range(21))
#: 2000-01-01 in epoch milliseconds: an earlier event time is on another scale (a version, a
#: count, epoch seconds), not a wall-clock time to measure a latency from
WALL_CLOCK_FROM_MS = 946_684_800_000
#: how far ahead of this clock an event time may be and still count as wall-clock milliseconds
#: (clock skew); further ahead it is on another scale (epoch microseconds)
WALL_CLOCK_AHEAD_MS = 60_000


def made_at(event_time: int | None, now_ms: int) -> int:
    """When a broadcast update was made, for the update-to-effect latency: its event time when
    that is a wall-clock time in epoch milliseconds, else ``now_ms`` (its arrival), so event
    times on another scale never give a nonsense latency."""
    if event_time is None or not (WALL_CLOCK_FROM_MS <= event_time
                                  <= now_ms + WALL_CLOCK_AHEAD_MS):
        return now_ms
    return int(event_time)


class SubtaskMeter:
    """The engine's per-call counters and the baseline of the user's metrics."""

    __slots__ = ("_baseline", "_group", "_started", "broadcast_applied", "callback_ms",
                 "effect_latency_ms", "pending_since", "timers_fired")

    def __init__(self, group: MetricGroup) -> None:
        self._group = group
        self._baseline: dict[str, tuple[int, float]] = {}
        self._started = 0.0
        #: when the oldest broadcast update not yet seen by a main element was made (epoch ms)
        self.pending_since: int | None = None
        self.begin()

    def begin(self) -> None:
        """Start a call: zero the counts, remember where the user's metrics stand (a failed
        earlier attempt's increments are dropped with its outputs)."""
        self.timers_fired = 0
        self.broadcast_applied = 0
        self.callback_ms = 0.0
        self.effect_latency_ms: float | None = None
        self._baseline = {}
        for name, metric in self._group.registered().items():
            position = _position(metric)
            if position is not None:
                self._baseline[name] = position
        self._started = time.perf_counter()

    def broadcast_applied_at(self, event_time: int | None) -> None:
        """A broadcast element was applied; its update takes effect with the next main element."""
        self.broadcast_applied += 1
        self.awaiting_effect(made_at(event_time, int(time.time() * 1000)))

    def awaiting_effect(self, since: int | None) -> None:
        """An update made at ``since`` (epoch ms) waits for the next main element; the micro-batch
        engine's workers hear it from the driver, which applied it (the oldest one counts)."""
        if self.pending_since is None and since is not None:
            self.pending_since = since

    def take_pending(self) -> int | None:
        """The oldest update still waiting, no longer waiting here (the driver hands it on)."""
        since, self.pending_since = self.pending_since, None
        return since

    def main_started(self) -> None:
        """Main elements are about to see the broadcast state: an update takes effect now."""
        if self.pending_since is not None:
            self.effect_latency_ms = max(0.0, time.time() * 1000 - self.pending_since)
            self.pending_since = None

    def finish(self) -> None:
        self.callback_ms = (time.perf_counter() - self._started) * 1000

    def user_report(self) -> dict[str, Any]:
        """The user's metrics for this call: counters (increase), gauges, histograms."""
        counters: dict[str, int] = {}
        gauges: dict[str, Any] = {}
        histograms: dict[str, dict[str, Any]] = {}
        for name, metric in self._group.registered().items():
            if isinstance(metric, (Counter, Meter)):
                counters[name] = metric.get_count() - int(self._start(name)[0])
            elif isinstance(metric, Distribution):
                histograms[name] = self._distribution(name, metric)
            else:
                gauges[name] = _gauge(metric)
        return {"counters": counters, "gauges": gauges, "histograms": histograms}

    def _start(self, name: str) -> tuple[int, float]:
        return self._baseline.get(name, (0, 0.0))

    def _distribution(self, name: str, metric: Distribution) -> dict[str, Any]:
        count0, sum0 = self._start(name)
        count = metric.count - count0
        summary: dict[str, Any] = {"count": count, "sum": metric.sum - sum0}
        if isinstance(metric, Histogram) and count:
            ordered = sorted(metric.newest(count))
            last = len(ordered) - 1
            summary["q"] = [ordered[round(q * last)] for q in QUANTILE_POINTS]
            summary["min"], summary["max"] = ordered[0], ordered[-1]
        elif count:  # a plain distribution keeps no values: its running min and max
            summary["min"], summary["max"] = metric.min, metric.max
        return summary


def _position(metric: Any) -> tuple[int, float] | None:
    if isinstance(metric, (Counter, Meter)):
        return metric.get_count(), 0.0
    if isinstance(metric, Distribution):
        return metric.count, metric.sum
    return None


def _gauge(read: Any) -> Any:
    try:
        value = read()
    except Exception as exc:  # noqa: BLE001 - a broken gauge must not fail the batch
        return f"error: {type(exc).__name__}: {exc}"
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def subtask_report(meter: SubtaskMeter, *, subtask: int, batch: int | None,
                   events_main: int, events_broadcast: int, held: int, version: str,
                   broadcast_entries: Mapping[str, int], outputs: Mapping[str, int],
                   dead_letters: Mapping[str, int],
                   keyed: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
    """One subtask's report of one call (the payload of its ``_metrics`` row)."""
    return {
        "subtask": subtask, "batch": batch,
        "events_main": events_main, "events_broadcast": events_broadcast,
        "broadcast_applied": meter.broadcast_applied, "held": held,
        "timers_fired": meter.timers_fired, "callback_ms": round(meter.callback_ms, 3),
        "effect_latency_ms": meter.effect_latency_ms,
        "version": version, "broadcast_entries": dict(broadcast_entries),
        "outputs": dict(outputs), "dead_letters": dict(dead_letters),
        "keyed": {name: dict(sizes) for name, sizes in (keyed or {}).items()},
        "user": meter.user_report(),
    }
