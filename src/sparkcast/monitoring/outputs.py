"""Read what a ``write_stream`` query wrote, without Spark: for ``sparkcast view`` and the apps.

``write_stream`` writes with Spark's file sink: parquet files under ``<output>/_output=<name>/``
and, per micro-batch, a commit-log entry ``<output>/_spark_metadata/<batch>`` listing the files
that batch added. ``OutputFolder`` reads each committed batch once (the log says which files
belong to which micro-batch) with pyarrow, so it costs nothing on the Spark side and can run
every second. Side outputs and dead letters are JSON in the ``_payload`` column; the subtasks'
metrics rows (``_output=_metrics``) are left to the progress reports, which carry them.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.parquet as pq

from sparkcast.spark.layout import METRICS, OUTPUT, PAYLOAD, RESERVED

#: what a reader of committed rows gets: (output name, micro-batch, rows as dicts)
RowsHook = Callable[[str, int, list[dict[str, Any]]], None]


class OutputFolder:
    """Counts per output, the columns of each output and its most recent rows."""

    def __init__(self, path: Path | str, on_rows: RowsHook | None = None, recent: int = 8
                 ) -> None:
        self.path = Path(path)
        self.on_rows = on_rows
        self.counts: dict[str, int] = {}
        self.columns: dict[str, list[str]] = {}
        #: (micro-batch, output, row), newest last
        self.recent: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=recent)
        self.seen_files: set[str] = set()
        self.logs_read: set[int] = set()

    def scan(self, upto_batch: int | None = None) -> None:
        """Read every committed micro-batch not yet read (up to ``upto_batch`` inclusive)."""
        for batch, entry in self._entries():
            if batch in self.logs_read or (upto_batch is not None and batch > upto_batch):
                continue
            for name, rows in self._files(entry):
                self._read(name, batch, rows)
            self.logs_read.add(batch)

    def skip_existing(self) -> None:
        """Treat what is already committed as read: a restarted query reports only its own
        micro-batches."""
        for batch, entry in self._entries():
            self.logs_read.add(batch)
            for line in entry.read_text(encoding="utf-8").splitlines()[1:]:
                self.seen_files.add(json.loads(line).get("path", ""))

    def _entries(self) -> list[tuple[int, Path]]:
        log = self.path / "_spark_metadata"
        if not log.is_dir():
            return []
        entries = []
        for entry in log.iterdir():
            number = entry.name.split(".", 1)[0]
            if number.isdigit() and not entry.name.endswith((".tmp", ".crc")):
                entries.append((int(number), entry))
        return sorted(entries)

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
            name = local.parent.name.removeprefix(f"{OUTPUT}=")
            if name == METRICS:
                continue
            found.append((name, _rows(pq.read_table(local).to_pylist(), name == "main")))
        return found

    def _read(self, name: str, batch: int, rows: list[dict[str, Any]]) -> None:
        self.counts[name] = self.counts.get(name, 0) + len(rows)
        for row in rows[-(self.recent.maxlen or 1):]:
            self.recent.append((batch, name, row))
            if name not in self.columns:
                self.columns[name] = list(row)
        if self.on_rows is not None:
            self.on_rows(name, batch, rows)


def _rows(rows: list[dict[str, Any]], main: bool) -> list[dict[str, Any]]:
    if main:
        return [{k: v for k, v in row.items() if k not in RESERVED} for row in rows]
    return [json.loads(row[PAYLOAD]) if row.get(PAYLOAD) else {} for row in rows]
