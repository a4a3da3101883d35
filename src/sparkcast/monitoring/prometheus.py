"""The Prometheus endpoint: ``/metrics`` in Prometheus' text format, ``/progress.json`` for
``sparkcast view``, served on 127.0.0.1 from the process's ``Monitor``.

Names follow Prometheus' conventions: ``sparkcast_`` prefix, ``_total`` for counters, base
units (seconds, bytes); labels ``query``, ``operator`` (the observation name: ``sparkcast``,
``sparkcast_2``, ...), ``subtask``, ``output``, ``callback``, ``descriptor``, ``source`` (a
source's description, for a Kafka source's offsets behind the latest) and, for the user's
metrics, ``metric`` (their dotted names are data, not metric names). ``prometheus_client`` is
the ``metrics`` extra: ``pip install 'sparkcast[metrics]'``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sparkcast.errors import MissingDependencyError
from sparkcast.monitoring.progress import CALLBACKS
from sparkcast.monitoring.store import MONITOR, Monitor, OperatorTotals, QueryState

_SERVERS: dict[int, ThreadingHTTPServer] = {}


def _client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise MissingDependencyError("the Prometheus endpoint needs prometheus_client: "
                                     "pip install 'sparkcast[metrics]'",
                                     name="prometheus_client") from exc
    return prometheus_client


class MonitorCollector:
    """Turns the monitor's state into metric families at each scrape."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    def collect(self) -> Iterator[Any]:
        core = _client().core
        families = Families(core)
        for query in self.monitor.queries():
            families.query(query)
            for name, totals in query.operators.items():
                families.operator(query.name, name, totals)
        yield from families.all()


class Families:
    """The metric families of one scrape, filled query by query."""

    def __init__(self, core: Any) -> None:
        counter, gauge = core.CounterMetricFamily, core.GaugeMetricFamily
        q, op = ["query"], ["query", "operator"]
        self.f = {
            "batches": counter("sparkcast_batches", "micro-batches completed", labels=q),
            "input_rows": counter("sparkcast_input_rows", "rows read by the query", labels=q),
            "duration": gauge("sparkcast_batch_duration_seconds",
                              "duration of the last micro-batch", labels=q),
            "rate": gauge("sparkcast_processed_rows_per_second",
                          "rows per second in the last micro-batch", labels=q),
            "events": counter("sparkcast_events", "elements into the operator, per side (a "
                              "broadcast element once per subtask that received it)",
                              labels=[*op, "side"]),
            "broadcast": counter("sparkcast_broadcast_elements", "broadcast elements, each "
                                 "counted once", labels=op),
            "outputs": counter("sparkcast_outputs", "rows out, per output (main, side outputs, "
                               "dead_letters, hold_overflow)", labels=[*op, "output"]),
            "letters": counter("sparkcast_dead_letters", "dead letters, per callback",
                               labels=[*op, "callback"]),
            "applied": counter("sparkcast_broadcast_applied", "broadcast elements applied, "
                               "summed over the subtasks (or the driver) that applied them",
                               labels=op),
            "timers": counter("sparkcast_timers_fired", "timers fired", labels=op),
            "callback": counter("sparkcast_callback_seconds",
                                "time in the engine running user callbacks", labels=op),
            "keys": counter("sparkcast_keyed_state_written_keys",
                            "keys in keyed-state buckets written", labels=[*op, "descriptor"]),
            "bytes": counter("sparkcast_keyed_state_written_bytes",
                             "bytes of keyed state written", labels=[*op, "descriptor"]),
            "held": gauge("sparkcast_held_elements", "main elements held until ready",
                          labels=[*op, "subtask"]),
            "entries": gauge("sparkcast_broadcast_state_entries", "entries of broadcast state",
                             labels=[*op, "subtask", "descriptor"]),
            "version": gauge("sparkcast_broadcast_version_info",
                             "the broadcast state version of each subtask (value 1)",
                             labels=[*op, "subtask", "version"]),
            "version_batch": gauge("sparkcast_broadcast_version_batch",
                                   "the micro-batch that applied each subtask's version",
                                   labels=[*op, "subtask"]),
            "latency": gauge("sparkcast_update_effect_latency_seconds",
                             "last broadcast update to the first main element that saw it",
                             labels=op),
            **{f"behind_{stat}": gauge(
                f"sparkcast_source_offsets_behind_latest_{stat}",
                f"the {word} over the source's partitions of the offsets behind the latest "
                "offset after the last micro-batch (Kafka's lag)", labels=[*q, "source"])
               for stat, word in (("max", "most"), ("min", "least"), ("avg", "average"))},
            "user_counter": counter("sparkcast_user_counter", "the function's counters and "
                                    "meters, summed over subtasks", labels=[*op, "metric"]),
            "user_gauge": gauge("sparkcast_user_gauge", "the function's gauges, per subtask",
                                labels=[*op, "subtask", "metric"]),
            "user_histogram": gauge("sparkcast_user_histogram", "the function's histograms in "
                                    "the last micro-batch that updated them",
                                    labels=[*op, "metric", "quantile"]),
            "user_observations": counter("sparkcast_user_histogram_observations",
                                         "values recorded into each histogram",
                                         labels=[*op, "metric"]),
        }

    def query(self, state: QueryState) -> None:
        f, q = self.f, [state.name]
        f["batches"].add_metric(q, state.batches)
        f["input_rows"].add_metric(q, state.input_rows)
        last = state.last
        if last is not None:
            f["duration"].add_metric(q, last["duration_ms"] / 1000)
            f["rate"].add_metric(q, last["processed_rows_per_second"])
        for source, behind in sorted(state.offsets_behind().items()):
            for stat, value in behind.items():
                f[f"behind_{stat}"].add_metric([*q, source], value)

    def operator(self, query: str, name: str, t: OperatorTotals) -> None:
        f, op = self.f, [query, name]
        f["events"].add_metric([*op, "main"], t.counts["events_main"])
        f["events"].add_metric([*op, "broadcast"], t.counts["events_broadcast"])
        for output, count in sorted(t.outputs.items()):
            f["outputs"].add_metric([*op, output], count)
        for callback in sorted({*CALLBACKS, *t.dead_letters}):  # zeros too, as counters should
            f["letters"].add_metric([*op, callback], t.dead_letters.get(callback, 0))
        f["broadcast"].add_metric(op, t.counts.get("broadcast_elements", 0))
        f["applied"].add_metric(op, t.counts["broadcast_applied"])
        f["timers"].add_metric(op, t.counts["timers_fired"])
        f["callback"].add_metric(op, t.counts["callback_ms"] / 1000)
        for descriptor, sizes in sorted(t.keyed.items()):
            f["keys"].add_metric([*op, descriptor], sizes.get("keys_written", 0))
            f["bytes"].add_metric([*op, descriptor], sizes.get("bytes_written", 0))
        for subtask, now in sorted(t.subtasks.items()):
            f["held"].add_metric([*op, subtask], now.get("held") or 0)
            for descriptor, entries in sorted((now.get("broadcast_entries") or {}).items()):
                f["entries"].add_metric([*op, subtask, descriptor], entries)
            f["version"].add_metric([*op, subtask, str(now.get("version"))], 1)
        for subtask, (batch, _) in t.applied_versions().items():
            if batch is not None:
                f["version_batch"].add_metric([*op, subtask], batch)
        if t.effect_latency_ms is not None:
            f["latency"].add_metric(op, t.effect_latency_ms / 1000)
        self._user(op, t)

    def _user(self, op: list[str], t: OperatorTotals) -> None:
        f = self.f
        for metric, count in sorted(t.counters.items()):
            f["user_counter"].add_metric([*op, metric], count)
        for metric, per_subtask in sorted(t.gauges.items()):
            for subtask, value in sorted(per_subtask.items()):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    f["user_gauge"].add_metric([*op, subtask, metric], value)
        for metric, count in sorted(t.histogram_counts.items()):
            f["user_observations"].add_metric([*op, metric], count)
        for metric, summary in sorted(t.histograms.items()):
            for quantile, key in (("0", "min"), ("0.5", "p50"), ("0.95", "p95"),
                                  ("0.99", "p99"), ("1", "max")):
                if summary.get(key) is not None:
                    f["user_histogram"].add_metric([*op, metric, quantile], summary[key])

    def all(self) -> list[Any]:
        return list(self.f.values())


def exposition(monitor: Monitor = MONITOR) -> bytes:
    """The Prometheus text of the monitor (what ``/metrics`` answers)."""
    client = _client()
    registry = client.CollectorRegistry()
    registry.register(MonitorCollector(monitor))
    data: bytes = client.generate_latest(registry)
    return data


def start_server(port: int, monitor: Monitor = MONITOR, host: str = "127.0.0.1") -> int:
    """Serve ``/metrics`` and ``/progress.json`` on ``host``:``port`` (0: a free port) in a
    daemon thread; one server per port per process. Returns the port. ``host`` stays loopback
    unless asked: ``0.0.0.0`` lets a cluster's Prometheus scrape the driver."""
    _client()
    if port and port in _SERVERS:
        return port

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path.startswith("/metrics"):
                body, kind = exposition(monitor), _client().CONTENT_TYPE_LATEST
            elif self.path.startswith("/progress.json"):
                body = json.dumps(monitor.records(), default=str).encode()
                kind = "application/json"
            else:
                self.send_error(404, "try /metrics or /progress.json")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a scrape every few seconds is not news

    server = ThreadingHTTPServer((host, port), Handler)
    chosen = int(server.server_address[1])
    _SERVERS[chosen] = server
    threading.Thread(target=server.serve_forever, daemon=True,
                     name=f"sparkcast-metrics-{chosen}").start()
    return chosen


def served_ports() -> list[int]:
    return sorted(_SERVERS)
