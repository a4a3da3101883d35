"""``sparkcast report``: one self-contained HTML page (inline SVG, no dependency) of a run.

From the micro-batch records (``watch.load``): events/s and batch latency per micro-batch, a
Kafka source's lag (the offsets its most-behind partition was behind the latest) per
micro-batch, outputs and dead letters per micro-batch, and the broadcast version each subtask
held after each micro-batch, coloured per version, so the batch that applied an update stands
out.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from sparkcast.monitoring.store import Monitor, QueryState
from sparkcast.monitoring.view import behind_text

WIDTH, HEIGHT, PAD = 760, 220, 64
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")


def report_html(monitor: Monitor, title: str = "sparkcast run") -> str:
    """The page: one section per query."""
    sections = [query_section(state) for state in monitor.queries()]
    body = "\n".join(sections) or "<p>no micro-batch recorded</p>"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            "</title><style>body{font-family:sans-serif;margin:24px;color:#222}"
            "h2{margin-top:32px}svg{display:block;margin:8px 0 20px}"
            "td,th{padding:2px 10px;text-align:right}</style></head><body>"
            f"<h1>{html.escape(title)}</h1>{body}</body></html>\n")


def query_section(state: QueryState) -> str:
    records = sorted(state.records, key=lambda r: r["batch"])
    batches = [r["batch"] for r in records]
    parts = [f"<h2>query {html.escape(state.name)}</h2>", _summary(state)]
    parts.append(line_chart("events per second (processed rows/s)", batches,
                            {"rows/s": [r["processed_rows_per_second"] for r in records]}))
    parts.append(line_chart("batch latency (s)", batches,
                            {"latency": [r["duration_ms"] / 1000 for r in records]}))
    lag = lag_series(records)
    if lag:
        parts.append(line_chart("offsets behind latest per source (max over its partitions)",
                                batches, lag))
    for name in state.operators:
        ops = [r["operators"].get(name) or {} for r in records]
        outputs = sorted({o for op in ops for o in op.get("outputs") or {}})
        series = {o: [float((op.get("outputs") or {}).get(o, 0)) for op in ops] for o in outputs}
        series.setdefault("dead_letters", [float(op.get("dead_letters") or 0) for op in ops])
        parts.append(line_chart(f"{name}: outputs and dead letters per micro-batch", batches,
                                series))
        parts.append(version_grid(f"{name}: broadcast version per subtask after each "
                                  "micro-batch", batches, ops))
    return "\n".join(parts)


def lag_series(records: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Per source that reports it (Kafka), the offsets its most-behind partition was behind the
    latest after each micro-batch (0 for a micro-batch that did not report it)."""
    by_batch = [{s["description"]: s["offsets_behind"]["max"] for s in r.get("sources") or []
                 if s.get("offsets_behind") is not None} for r in records]
    names = dict.fromkeys(name for lags in by_batch for name in lags)
    return {name: [float(lags.get(name, 0)) for lags in by_batch] for name in names}


def _summary(state: QueryState) -> str:
    rows: list[tuple[str, Any]] = [("micro-batches", state.batches),
                                   ("rows in", state.input_rows)]
    rows += [(f"{source} offsets behind latest after the last micro-batch",
              behind_text(behind)) for source, behind in state.offsets_behind().items()]
    for name, t in state.operators.items():
        rows += [(f"{name} events main", int(t.counts["events_main"])),
                 (f"{name} broadcast (counted once)", int(t.counts.get("broadcast_elements", 0))),
                 (f"{name} broadcast applied (summed over subtasks)",
                  int(t.counts["broadcast_applied"])),
                 *((f"{name} out {o}", n) for o, n in sorted(t.outputs.items())),
                 (f"{name} dead letters", sum(t.dead_letters.values()))]
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def line_chart(title: str, xs: Sequence[int], series: dict[str, list[float]]) -> str:
    """An SVG line chart (with dots) of several series over the micro-batches."""
    top = max([v for values in series.values() for v in values] + [1e-9])
    left, right = min(xs, default=0), max(xs, default=1)
    span = max(right - left, 1)

    def x(batch: int) -> float:
        return PAD + (batch - left) / span * (WIDTH - 2 * PAD)

    def y(value: float) -> float:
        return HEIGHT - PAD + 10 - value / top * (HEIGHT - PAD - 20)

    items = [_frame(title, top, left, right)]
    for i, (name, values) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        points = " ".join(f"{x(b):.1f},{y(v):.1f}" for b, v in zip(xs, values, strict=True))
        items.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' "
                     f"points='{points}'/>")
        items += [f"<circle cx='{x(b):.1f}' cy='{y(v):.1f}' r='2.5' fill='{colour}'/>"
                  for b, v in zip(xs, values, strict=True)]
        items.append(f"<text x='{WIDTH - PAD + 6}' y='{28 + 14 * i}' fill='{colour}' "
                     f"font-size='11'>{html.escape(name)}</text>")
    return _svg(items, WIDTH + 90)


def version_grid(title: str, xs: Sequence[int], ops: Sequence[dict[str, Any]]) -> str:
    """One row per subtask, one cell per micro-batch, coloured by the version it held."""
    subtasks = sorted({s for op in ops for s in op.get("subtasks") or {}}, key=int)
    order: dict[str, int] = {}
    cell = max(6.0, min(24.0, (WIDTH - 2 * PAD) / max(len(xs), 1)))
    height = 40 + 18 * len(subtasks) + 24
    items = [f"<text x='{PAD}' y='16' font-size='13' font-weight='bold'>"
             f"{html.escape(title)}</text>"]
    for row, subtask in enumerate(subtasks):
        top = 28 + 18 * row
        items.append(f"<text x='{PAD - 6}' y='{top + 12}' font-size='11' "
                     f"text-anchor='end'>subtask {subtask}</text>")
        for column, (batch, op) in enumerate(zip(xs, ops, strict=True)):
            now = (op.get("subtasks") or {}).get(subtask)
            if now is None:
                continue
            version = str(now.get("version"))
            index = order.setdefault(version, len(order))
            items.append(f"<rect x='{PAD + column * cell:.1f}' y='{top}' width='{cell - 1:.1f}'"
                         f" height='16' fill='{PALETTE[index % len(PALETTE)]}'>"
                         f"<title>micro-batch {batch}: {html.escape(version)}</title></rect>")
    legend = "  ".join(f"{i + 1}: {v[:10] or '(none)'}" for v, i in order.items())
    items.append(f"<text x='{PAD}' y='{height - 6}' font-size='11'>versions in order: "
                 f"{html.escape(legend)} (cells: micro-batches {xs[0] if xs else '-'}…"
                 f"{xs[-1] if xs else '-'})</text>")
    return _svg(items, WIDTH + 90, height)


def _frame(title: str, top: float, left: int, right: int) -> str:
    base = HEIGHT - PAD + 10
    return (f"<text x='{PAD}' y='16' font-size='13' font-weight='bold'>{html.escape(title)}"
            f"</text><line x1='{PAD}' y1='{base}' x2='{WIDTH - PAD}' y2='{base}' "
            f"stroke='#888'/><line x1='{PAD}' y1='30' x2='{PAD}' y2='{base}' stroke='#888'/>"
            f"<text x='{PAD - 4}' y='34' font-size='10' text-anchor='end'>{top:.4g}</text>"
            f"<text x='{PAD - 4}' y='{base}' font-size='10' text-anchor='end'>0</text>"
            f"<text x='{PAD}' y='{base + 14}' font-size='10'>micro-batch {left}</text>"
            f"<text x='{WIDTH - PAD}' y='{base + 14}' font-size='10' text-anchor='end'>"
            f"{right}</text>")


def _svg(items: list[str], width: float, height: float = HEIGHT) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}'"
            f" viewBox='0 0 {width:.0f} {height:.0f}'>" + "".join(items) + "</svg>")
