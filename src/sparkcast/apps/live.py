"""The live view of a running application, and its closing summary.

The application's view adds to the general one (``monitoring/view.py``, ``sparkcast view``):
the query's progress reports (micro-batches, rows, latency), the operator's metrics as the
listener merged them (events, outputs, dead letters, the broadcast version of each subtask with
the micro-batch that applied it), and, from the output files of finished micro-batches
(:class:`OutputTracker`), the application's own version column per subtask, when each version
took effect, and the latest outputs under their column headers. ANSI codes only on a terminal.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from sparkcast.apps.base import App
from sparkcast.apps.outputs import OutputTracker
from sparkcast.monitoring.store import MONITOR
from sparkcast.monitoring.view import Style, operator_lines, table_row


@dataclass
class Progress:
    """Every progress report of the query, by batch id (Spark keeps only the recent ones)."""

    events_folder: str
    broadcast_folder: str
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)

    def update(self, query: Any) -> None:
        for report in query.recentProgress:
            batch = int(report["batchId"])
            if batch not in self.batches:
                self.batches[batch] = _plain(report)

    @property
    def last_batch(self) -> int | None:
        return max(self.batches) if self.batches else None

    def source_rows(self, folder: str) -> int:
        return sum(self._rows(report, folder) for report in self.batches.values())

    def _rows(self, report: dict[str, Any], folder: str) -> int:
        name = folder.rstrip("/").rsplit("/", 1)[-1]
        return sum(int(s.get("numInputRows") or 0) for s in report.get("sources", [])
                   if str(s.get("description", "")).rstrip("/]").endswith(name))

    def events_in(self) -> int:
        return self.source_rows(self.events_folder)

    def broadcast_batches(self) -> list[int]:
        """Micro-batches that read broadcast rows."""
        return sorted(b for b, r in self.batches.items() if self._rows(r, self.broadcast_folder))

    def latency_ms(self, batch: int) -> int:
        return int(self.batches[batch].get("durationMs", {}).get("triggerExecution") or 0)


def _plain(report: Any) -> dict[str, Any]:
    if isinstance(report, dict):
        return report
    json_value = getattr(report, "jsonValue", None)
    return json_value() if callable(json_value) else dict(report)


class LiveView:
    """Redraws the screen (a terminal) or prints one line per micro-batch (a pipe or log)."""

    def __init__(self, app: App, tracker: OutputTracker, progress: Progress, *,
                 out: TextIO | None = None, expected_events: int | None = None,
                 query_id: str | None = None) -> None:
        self.app = app
        self.tracker = tracker
        self.progress = progress
        self.out = out = out or sys.stdout  # the caller's, not the one at import
        self.expected = expected_events
        self.query_id = query_id
        self.style = Style(out.isatty())
        self.tty = self.style.tty
        self.started = time.monotonic()
        self._printed: set[int] = set()

    def refresh(self, status: str = "") -> None:
        if self.tty:
            self.out.write(self.style.clear + "\n".join(self.lines(status)) + "\n")
            self.out.flush()
            return
        for batch in sorted(self.progress.batches):
            if batch not in self._printed:
                self._printed.add(batch)
                self.out.write(self.batch_line(batch) + "\n")
        self.out.flush()

    def batch_line(self, batch: int) -> str:
        report = self.progress.batches[batch]
        return (f"[{self.app.name}] micro-batch {batch}: {report.get('numInputRows', 0)} rows in, "
                f"{self.progress.latency_ms(batch) / 1000:.1f} s, "
                f"{float(report.get('processedRowsPerSecond') or 0):.0f} rows/s; "
                f"{self.app.version_column} per subtask: " + self._per_subtask())

    def _per_subtask(self) -> str:
        return ", ".join(f"{s}→{v}" for s, (_, v) in sorted(self.tracker.latest.items())) or "-"

    def lines(self, status: str = "") -> list[str]:
        app, progress, tracker, st = self.app, self.progress, self.tracker, self.style
        elapsed = time.monotonic() - self.started
        last = progress.last_batch
        lines = [f"{st.bold}sparkcast · {app.name}{st.reset} — {app.title}",
                 f"{st.dim}elapsed {elapsed:5.0f} s   {status}{st.reset}", ""]
        if last is None:
            return lines + ["waiting for the first micro-batch (Spark starts its workers)…"]
        report = progress.batches[last]
        events = progress.events_in()
        expected = f" / {self.expected}" if self.expected else ""
        lines += [
            f"micro-batches {len(progress.batches):>4}   last #{last}   "
            f"rows in last batch {report.get('numInputRows', 0)}",
            f"events in {events:>6}{expected}   events/s "
            f"{float(report.get('processedRowsPerSecond') or 0):8.0f}   batch latency "
            f"{progress.latency_ms(last) / 1000:5.1f} s",
            "outputs: " + "  ".join(f"{n} {tracker.counts.get(n, 0)}" for n in app.output_names())]
        state = MONITOR.query(self.query_id) if self.query_id else None
        for name, totals in (state.operators.items() if state else ()):
            lines += operator_lines(name, totals, st)
        lines += ["", f"{st.bold}{app.version_column} per subtask{st.reset} (from the outputs):"]
        for subtask, (batch, version) in sorted(tracker.latest.items()):
            lines.append(f"  subtask {subtask}: {version}  (last output in micro-batch {batch})")
        lines += ["", f"{st.bold}versions took effect{st.reset}:"]
        for version, seen in tracker.switches():
            lines.append(f"  {version}: " + _switch_text(seen))
        lines += ["", f"{st.bold}recent outputs{st.reset}:"]
        columns = list(app.show_columns)
        lines.append("  " + table_row(["batch", *columns], 14))
        for batch, row in list(tracker.recent)[-6:]:
            lines.append("  " + table_row([f"#{batch}", *(row.get(c) for c in columns)], 14))
        for batch, name, row in list(tracker.recent_side)[-3:]:
            lines.append(f"  #{batch:<3} {st.yellow}{name}{st.reset} {_short(row)}")
        return lines


def _switch_text(seen: dict[int, int]) -> str:
    batches = sorted(set(seen.values()))
    subtasks = ", ".join(str(s) for s in sorted(seen))
    if len(batches) == 1:
        return f"micro-batch {batches[0]} on subtasks {subtasks}"
    return "; ".join(f"subtask {s} in micro-batch {b}" for s, b in sorted(seen.items()))


def _short(row: dict[str, Any], limit: int = 110) -> str:
    text = ", ".join(f"{k}={v}" for k, v in row.items() if v is not None)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(app: App, tracker: OutputTracker, progress: Progress,
            expected_events: int | None, style: Style | None = None) -> tuple[list[str], bool]:
    """The closing report and whether it is clean (no event lost, no dead letter)."""
    st = style or Style(tty=False)
    BOLD, RESET, GREEN, RED, YELLOW = st.bold, st.reset, st.green, st.red, st.yellow  # noqa: N806
    events_in = progress.events_in()
    lines = [f"{BOLD}summary · {app.name}{RESET}",
             f"  micro-batches: {len(progress.batches)}",
             f"  events in: {events_in}" + (f" (generated {expected_events})"
                                            if expected_events is not None else "")]
    for name in app.output_names():
        lines.append(f"  out · {name}: {tracker.counts.get(name, 0)}")
    ok = tracker.counts.get("dead_letters", 0) == 0
    if expected_events is not None and events_in != expected_events:
        ok = False
        lines.append(f"  {RED}not every generated event was read{RESET}")
    if app.per_event_outputs:
        out = tracker.per_event_total()
        parts = " + ".join(app.per_event_outputs)
        good = out == events_in
        ok = ok and good
        colour = GREEN if good else RED
        lines.append(f"  {colour}events in {events_in} = {parts} {out}: "
                     f"{'nothing lost, nothing duplicated' if good else 'MISMATCH'}{RESET}")
    broadcast_batches = progress.broadcast_batches()
    lines.append(f"  broadcast updates read in micro-batches: "
                 f"{', '.join(map(str, broadcast_batches)) or '-'}")
    switches = tracker.switches()
    for version, seen in switches:
        lines.append(f"  {app.version_column}={version} took effect: {_switch_text(seen)}")
    if len(switches) > 1:
        version, seen = switches[-1]
        together = len(set(seen.values())) == 1
        lines.append(f"  {GREEN if together else YELLOW}the update ({app.update_note}) took "
                     f"effect in micro-batch {min(seen.values())}"
                     + (f" on all {len(seen)} subtasks at once" if together else
                        " (subtasks without events in that batch show it later)") + RESET)
    return lines, ok
