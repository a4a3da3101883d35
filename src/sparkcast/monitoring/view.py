"""The live view of any sparkcast pipeline: progress, rates, Kafka lag, outputs, broadcast versions.

One renderer for every source: a ``Monitor`` holds the micro-batch records, whether the
listener filled it in this process, or they came from a job's ``/progress.json`` or from the
progress log ``write_stream`` keeps beside its output (``watch.py`` loads them); an optional
``OutputFolder`` adds the recent output rows under their column headers. On a terminal the
screen is redrawn; anywhere else (a pipe, a log file) there are no ANSI codes and one line per
micro-batch. A broadcast version is shown with the micro-batch whose subtask report carried it:
the batch that applied it, not the one in which the view happened to notice it. A Kafka source
shows its lag: the offsets its partitions were behind the latest after the last micro-batch
(max over the partitions, then min and average), on the screen and in each micro-batch's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkcast.monitoring.outputs import OutputFolder
from sparkcast.monitoring.store import Monitor, OperatorTotals, QueryState


class Style:
    """ANSI codes on a terminal, empty strings elsewhere."""

    def __init__(self, tty: bool) -> None:
        codes = {"clear": "\x1b[H\x1b[J", "bold": "\x1b[1m", "dim": "\x1b[2m",
                 "reset": "\x1b[0m", "green": "\x1b[32m", "red": "\x1b[31m",
                 "yellow": "\x1b[33m"}
        self.tty = tty
        for name, code in codes.items():
            setattr(self, name, code if tty else "")

    clear = bold = dim = reset = green = red = yellow = ""


def batch_line(record: dict[str, Any]) -> str:
    """One line per micro-batch: rows, duration, per operator events, outputs, dead letters and
    versions (the ``sparkcast`` logger's INFO line and the view's line off a terminal)."""
    parts = []
    for name, op in record["operators"].items():
        outputs = ", ".join(f"{k} {v}" for k, v in sorted(op["outputs"].items())) or "none"
        versions = sorted({str(s["version"])[:8] for s in op["subtasks"].values()})
        parts.append(f"{name}: events {op['events_main']} + broadcast "
                     f"{op.get('broadcast_elements', 0)} (counted once), "
                     f"outputs {outputs}, dead letters {op.get('dead_letters') or 0}, "
                     f"versions {'/'.join(versions) or '-'}")
    lag = "".join(f", {s['description']} {behind_text(s['offsets_behind'])} behind latest"
                  for s in record.get("sources") or [] if s.get("offsets_behind") is not None)
    return (f"sparkcast: query {record['query']} micro-batch {record['batch']}: "
            f"{record['input_rows']} rows in {record['duration_ms'] / 1000:.1f} s{lag}; "
            + "; ".join(parts))


def behind_text(behind: dict[str, float]) -> str:
    """A source's offsets behind the latest, over its partitions: ``max 120 (min 100, avg
    110.0)``."""
    return f"max {behind['max']:.0f} (min {behind['min']:.0f}, avg {behind['avg']:.1f})"


def screen(monitor: Monitor, folder: OutputFolder | None = None, *, style: Style,
           status: str = "", query: str | None = None) -> list[str]:
    """The whole view: each watched query (or only ``query``), then the recent outputs."""
    lines: list[str] = []
    states = [q for q in monitor.queries() if query is None or q.name == query]
    if not states:
        lines.append("waiting for the first micro-batch of a sparkcast query…")
    for state in states:
        lines += query_lines(state, style, status)
    if folder is not None and folder.recent:
        lines += ["", f"{style.bold}recent outputs{style.reset}:"]
        lines += recent_lines(folder)
    return lines


def query_lines(state: QueryState, style: Style, status: str = "") -> list[str]:
    last = state.last
    lines = [f"{style.bold}sparkcast · query {state.name}{style.reset}  {style.dim}{status}"
             f"{style.reset}".rstrip()]
    if last is None:
        return lines
    lines += [f"micro-batches {state.batches:>5}   last #{last['batch']}   rows in last batch "
              f"{last['input_rows']}   rows in total {state.input_rows}",
              f"rows/s {last['processed_rows_per_second']:9.0f}   batch latency "
              f"{last['duration_ms'] / 1000:6.2f} s"]
    for source, behind in state.offsets_behind().items():
        colour = style.yellow if behind["max"] else style.green
        lines.append(f"offsets behind latest {colour}{behind_text(behind)}{style.reset}   "
                     f"{source}")
    for name, totals in state.operators.items():
        lines += operator_lines(name, totals, style)
    return lines


def operator_lines(name: str, t: OperatorTotals, style: Style) -> list[str]:
    """One operator: events, outputs, dead letters, latency, and the broadcast state per
    subtask with the micro-batch that applied its version."""
    c = t.counts
    outputs = "  ".join(f"{k} {v}" for k, v in sorted(t.outputs.items())) or "-"
    letters = sum(t.dead_letters.values())
    colour = style.red if letters else style.green
    latency = ("-" if t.effect_latency_ms is None else f"{t.effect_latency_ms:.0f} ms")
    lines = ["", f"{style.bold}operator {name}{style.reset}: events main {c['events_main']:.0f}"
                 f" + broadcast {c.get('broadcast_elements', 0):.0f} (counted once)   "
                 f"timers {c['timers_fired']:.0f}   in callbacks {c['callback_ms'] / 1000:.1f} s",
             f"broadcast applied {c['broadcast_applied']:.0f} times (summed over the subtasks "
             "that applied them)",
             f"outputs: {outputs}",
             f"{colour}dead letters {letters}{style.reset}"
             + "".join(f"  {k} {v}" for k, v in sorted(t.dead_letters.items()) if v)
             + f"   update-to-effect latency {latency}",
             "broadcast state per subtask:"]
    for subtask, (batch, version) in t.applied_versions().items():
        now = t.subtasks.get(subtask, {})
        entries = ", ".join(f"{d} {n}" for d, n in sorted(
            (now.get("broadcast_entries") or {}).items()))
        applied = "-" if batch is None else f"#{batch}"
        lines.append(f"  subtask {subtask:>2}: version {str(version)[:12] or '(none)':<12}  "
                     f"applied in micro-batch {applied:<5} entries {entries or '-'}   "
                     f"held {now.get('held') or 0}")
    if t.counters:
        lines.append("user counters: " + "  ".join(f"{k} {v}" for k, v in
                                                   sorted(t.counters.items())))
    return lines


def recent_lines(folder: OutputFolder, width: int = 18) -> list[str]:
    """The recent rows grouped by output, each group under its column headers."""
    lines: list[str] = []
    by_output: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for batch, name, row in folder.recent:
        by_output.setdefault(name, []).append((batch, row))
    for name, rows in by_output.items():
        columns = folder.columns.get(name) or list(rows[-1][1])
        lines.append(f"  {name}")
        lines.append("    " + table_row(["batch", *columns], width))
        for batch, row in rows:
            lines.append("    " + table_row([batch, *(row.get(c) for c in columns)], width))
    return lines


def table_row(values: Sequence[Any], width: int = 18) -> str:
    """Cells left-aligned in columns of ``width`` (the first, a batch number, narrower)."""
    cells = []
    for value in values:
        text = "" if value is None else str(value)
        cells.append(text if len(text) <= width else text[: width - 1] + "…")
    return "  ".join(f"{cell:<{width if i else 6}}" for i, cell in enumerate(cells)).rstrip()
