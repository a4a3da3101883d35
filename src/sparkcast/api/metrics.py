"""User metrics, PyFlink's ``MetricGroup`` API; values are read with ``MetricGroup.snapshot``.

On Spark the engine adds each subtask's metrics to the query's progress; in the harness
``harness.metrics()`` returns them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any


class Counter:
    """A count that goes up and down; Flink's ``Counter``."""

    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        """Add ``n``."""
        self._count += n

    def dec(self, n: int = 1) -> None:
        """Subtract ``n``."""
        self._count -= n

    def get_count(self) -> int:
        """The current count."""
        return self._count


class Meter:
    """Counts events; the rate is computed where the metrics are read."""

    def __init__(self, time_span_in_seconds: int = 60) -> None:
        self.time_span_in_seconds = time_span_in_seconds
        self._count = 0

    def mark_event(self, value: int = 1) -> None:
        """Count ``value`` events."""
        self._count += value

    def get_count(self) -> int:
        """How many events were marked."""
        return self._count


class Distribution:
    """Count, sum, min, max and mean of the values seen; Flink's ``Distribution``."""

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.min: float | None = None
        self.max: float | None = None

    def update(self, value: float) -> None:
        """Add a value to the summary."""
        self.count += 1
        self.sum += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)

    def snapshot(self) -> dict[str, Any]:
        """``count``, ``sum``, ``min``, ``max`` and ``mean`` (``None`` before any value)."""
        mean = self.sum / self.count if self.count else None
        return {"count": self.count, "sum": self.sum, "min": self.min, "max": self.max,
                "mean": mean}


class Histogram(Distribution):
    """A distribution that also keeps its newest values, for quantiles."""

    def __init__(self, max_values: int = 10_000) -> None:
        super().__init__()
        self._values: deque[float] = deque(maxlen=max_values)

    def update(self, value: float) -> None:
        """Add a value; the oldest kept value is dropped past ``max_values``."""
        super().update(value)
        self._values.append(value)

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0 to 1) of the kept values, or ``None`` when there are none."""
        if not self._values:
            return None
        ordered = sorted(self._values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def newest(self, count: int) -> list[float]:
        """The newest ``count`` values still kept (at most ``max_values``)."""
        values = self._values
        count = min(count, len(values))
        return [values[i] for i in range(len(values) - count, len(values))]

    def snapshot(self) -> dict[str, Any]:
        """The distribution's summary plus ``p50`` and ``p99``."""
        return {**super().snapshot(), "p50": self.quantile(0.5), "p99": self.quantile(0.99)}


class MetricGroup:
    """A named scope of metrics; ``add_group`` nests scopes as dotted names."""

    def __init__(self, prefix: str = "", registry: dict[str, Any] | None = None) -> None:
        self._prefix = prefix
        self._registry: dict[str, Any] = {} if registry is None else registry

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """A nested group: its metrics are named ``<this group>.name[.extra].<metric>``."""
        scope = name if extra is None else f"{name}.{extra}"
        return MetricGroup(self._name(scope), self._registry)

    def counter(self, name: str) -> Counter:
        """The counter of this name, created on first use (a second call returns the same)."""
        return self._register(name, Counter)

    def gauge(self, name: str, obj: Callable[[], Any]) -> None:
        """Report ``obj()`` under this name each time the metrics are read."""
        self._registry[self._name(name)] = obj

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        """The meter of this name, created on first use."""
        return self._register(name, lambda: Meter(time_span_in_seconds))

    def distribution(self, name: str) -> Distribution:
        """The distribution of this name, created on first use."""
        return self._register(name, Distribution)

    def histogram(self, name: str) -> Histogram:
        """The histogram of this name, created on first use."""
        return self._register(name, Histogram)

    def registered(self) -> dict[str, Any]:
        """The metric objects by full name (gauges are their callables): what the engine reports
        to Spark after every micro-batch."""
        return dict(self._registry)

    def snapshot(self) -> dict[str, Any]:
        """Every metric's current value: counts, gauge readings, distribution summaries."""
        return {name: _read(metric) for name, metric in sorted(self._registry.items())}

    def _name(self, name: str) -> str:
        return f"{self._prefix}.{name}" if self._prefix else name

    def _register(self, name: str, factory: Callable[[], Any]) -> Any:
        full = self._name(name)
        if full not in self._registry:
            self._registry[full] = factory()
        return self._registry[full]


def _read(metric: Any) -> Any:
    if isinstance(metric, (Counter, Meter)):
        return metric.get_count()
    if isinstance(metric, Distribution):
        return metric.snapshot()
    return metric()
