"""What a run came to, said at its end: rows written against dead letters.

A run whose every output became a dead letter otherwise ends like a good one (the query stops,
the command exits 0), and a WARN line per micro-batch scrolls by unnoticed. So the listener
(``spark/observe/listener.py``) adds each micro-batch's record here, and when the query ends
logs one warning naming the first reason if the dead letters were at least as many as the rows
written (main and side outputs); ``sparkcast run`` prints it and exits non-zero when no row
was written at all.

>>> outcome = RunOutcome()
>>> outcome.add({"operators": {"sparkcast": {"main_rows": 0, "side_output_rows": 0,
...     "dead_letters": 5, "first_dead_letter": "output 'main' does not match ..."}}})
>>> outcome.all_failed
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class RunOutcome:
    """The sums of one query's micro-batches, and the first dead letter's reason."""

    rows: int = 0  # main and side output rows written
    dead_letters: int = 0
    first_reason: str | None = None
    batches: int = 0

    def add(self, record: dict[str, Any]) -> None:
        """One micro-batch's record (``progress.batch_record``)."""
        self.batches += 1
        for operator in record.get("operators", {}).values():
            self.rows += int(operator.get("main_rows") or 0)
            self.rows += int(operator.get("side_output_rows") or 0)
            letters = int(operator.get("dead_letters") or 0)
            self.dead_letters += letters
            if letters and self.first_reason is None:
                self.first_reason = operator.get("first_dead_letter")

    @property
    def all_failed(self) -> bool:
        """Dead letters and not one row written."""
        return self.dead_letters > 0 and self.rows == 0

    def warning(self, query: str) -> str | None:
        """The end-of-run warning when the dead letters were at least as many as the rows
        written, else None."""
        if not self.dead_letters or self.dead_letters < self.rows:
            return None
        share = "every output" if self.all_failed else "most outputs"
        return (f"sparkcast: query {query} ended with {share} dead letters: "
                f"{self.dead_letters} dead letter(s) against {self.rows} row(s) written; the "
                f"first reason: {self.first_reason}; read them with result.dead_letters or "
                "read_output(spark, path, 'dead_letters')")
