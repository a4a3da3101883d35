"""Read what a running query wrote, without Spark: for the live view and the summaries.

``write_stream`` writes with Spark's file sink: parquet files under ``<output>/_output=<name>/``
and, per micro-batch, a commit log entry ``<output>/_spark_metadata/<batch>`` listing the files
that batch added. The tracker reads each committed batch once (the log says which files belong
to which micro-batch) with pyarrow, so it costs nothing on the Spark side and can run every
second. Side outputs are JSON in the ``_payload`` column.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

from sparkcast.apps.base import App
from sparkcast.spark.layout import METRICS

INTERNAL = ("_ts", "_payload", "_output")


@dataclass
class OutputTracker:
    """Counts per output, per subtask, per broadcast version; first micro-batch of each version
    on each subtask; the most recent main rows."""

    app: App
    path: Path
    counts: dict[str, int] = field(default_factory=dict)
    first_seen: dict[Any, dict[int, int]] = field(default_factory=dict)  # version → subtask → batch
    latest: dict[int, tuple[int, Any]] = field(default_factory=dict)  # subtask → (batch, version)
    rows_by_batch: dict[int, int] = field(default_factory=dict)
    recent: deque = field(default_factory=lambda: deque(maxlen=6))
    recent_side: deque = field(default_factory=lambda: deque(maxlen=4))

    seen_files: set[str] = field(default_factory=set)
    logs_read: set[int] = field(default_factory=set)

    def scan(self, upto_batch: int | None = None) -> None:
        """Read every committed micro-batch not yet read (up to ``upto_batch`` inclusive)."""
        log = Path(self.path) / "_spark_metadata"
        if not log.is_dir():
            return
        entries = []
        for entry in log.iterdir():
            number = entry.name.split(".", 1)[0]
            if number.isdigit() and not entry.name.endswith((".tmp", ".crc")):
                entries.append((int(number), entry))
        for batch, entry in sorted(entries):
            if batch in self.logs_read or (upto_batch is not None and batch > upto_batch):
                continue
            for name, rows in self._files(entry):
                self._read(name, batch, rows)
            self.logs_read.add(batch)

    def skip_existing(self) -> None:
        """Treat what is already committed as read: a restarted query reports only its own
        micro-batches."""
        log = Path(self.path) / "_spark_metadata"
        if not log.is_dir():
            return
        for entry in log.iterdir():
            number = entry.name.split(".", 1)[0]
            if number.isdigit() and not entry.name.endswith((".tmp", ".crc")):
                self.logs_read.add(int(number))
                for line in entry.read_text(encoding="utf-8").splitlines()[1:]:
                    self.seen_files.add(json.loads(line).get("path", ""))

    def _files(self, entry: Path) -> list[tuple[str, list[dict[str, Any]]]]:
        """The new files a commit-log entry lists (a ``.compact`` entry repeats older ones)."""
        found = []
        for line in entry.read_text(encoding="utf-8").splitlines()[1:]:
            record = json.loads(line)
            location = record.get("path", "")
            if record.get("action", "add") != "add" or location in self.seen_files:
                continue
            self.seen_files.add(location)
            local = Path(unquote(urlparse(location).path))
            name = local.parent.name.removeprefix("_output=")
            if name == METRICS:  # the subtasks' metrics rows: the progress reports show them
                continue
            found.append((name, _rows(pq.read_table(local).to_pylist(), name == "main")))
        return found

    def _read(self, name: str, batch: int, rows: list[dict[str, Any]]) -> None:
        self.counts[name] = self.counts.get(name, 0) + len(rows)
        if name in self.app.per_event_outputs:
            self.rows_by_batch[batch] = self.rows_by_batch.get(batch, 0) + len(rows)
        column = self.app.version_column
        for row in rows:
            if column in row and "subtask" in row:
                version, subtask = row[column], row["subtask"]
                seen = self.first_seen.setdefault(version, {})
                if subtask not in seen or batch < seen[subtask]:
                    seen[subtask] = batch
                if subtask not in self.latest or batch >= self.latest[subtask][0]:
                    self.latest[subtask] = (batch, version)
        if name == "main":
            self.recent.extend((batch, row) for row in rows[-6:])
        elif name not in self.app.per_event_outputs or name == "dead_letters":
            self.recent_side.extend((batch, name, row) for row in rows[-4:])

    def per_event_total(self) -> int:
        return sum(self.counts.get(name, 0) for name in self.app.per_event_outputs)

    def switches(self) -> list[tuple[Any, dict[int, int]]]:
        """``(version, {subtask: first batch})`` in the order versions took effect."""
        return sorted(self.first_seen.items(), key=lambda item: min(item[1].values()))



def _rows(rows: list[dict[str, Any]], main: bool) -> list[dict[str, Any]]:
    if main:
        return [{k: v for k, v in row.items() if k not in INTERNAL} for row in rows]
    return [json.loads(row["_payload"]) if row.get("_payload") else {} for row in rows]
