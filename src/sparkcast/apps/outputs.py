"""What a running application wrote, for its live view and summary: ``monitoring.outputs``
reads the committed micro-batches; this adds the application's own view of them (which
broadcast version each subtask used, from the application's version column).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from sparkcast.apps.base import App
from sparkcast.monitoring.outputs import OutputFolder


class OutputTracker:
    """Counts per output, per subtask, per broadcast version; first micro-batch of each version
    on each subtask; the most recent main rows."""

    def __init__(self, app: App, path: Path | str) -> None:
        self.app = app
        self.folder = OutputFolder(path, on_rows=self._read)
        self.path = self.folder.path
        self.counts = self.folder.counts
        self.first_seen: dict[Any, dict[int, int]] = {}  # version → subtask → batch
        self.latest: dict[int, tuple[int, Any]] = {}  # subtask → (batch, version)
        self.rows_by_batch: dict[int, int] = {}
        self.recent: deque[tuple[int, dict[str, Any]]] = deque(maxlen=6)
        self.recent_side: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=4)

    def scan(self, upto_batch: int | None = None) -> None:
        self.folder.scan(upto_batch)

    def skip_existing(self) -> None:
        self.folder.skip_existing()

    def _read(self, name: str, batch: int, rows: list[dict[str, Any]]) -> None:
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
