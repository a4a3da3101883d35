"""What a run came to, said at its end: rows written against dead letters.

A run whose every output became a dead letter otherwise ends like a good one (the query stops,
the command exits 0), and a WARN line per micro-batch scrolls by unnoticed. So the listener
(``spark/observe/listener.py``) adds each micro-batch's record here, and when the query ends
logs one warning naming the first reason if the dead letters were at least as many as the main
rows written; ``sparkcast run`` prints it and exits non-zero when no row (main or side) was
written at all.

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

    main_rows: int = 0
    side_rows: int = 0
    dead_letters: int = 0
    first_reason: str | None = None
    batches: int = 0

    def add(self, record: dict[str, Any]) -> None:
        """One micro-batch's record (``progress.batch_record``)."""
        self.batches += 1
        for operator in record.get("operators", {}).values():
            self.main_rows += int(operator.get("main_rows") or 0)
            self.side_rows += int(operator.get("side_output_rows") or 0)
            letters = int(operator.get("dead_letters") or 0)
            self.dead_letters += letters
            if letters and self.first_reason is None:
                self.first_reason = operator.get("first_dead_letter")

    @property
    def all_failed(self) -> bool:
        """Dead letters and not one row written, main or side."""
        return self.dead_letters > 0 and self.main_rows + self.side_rows == 0

    def warning(self, query: str) -> str | None:
        """The end-of-run warning when the dead letters were at least as many as the main
        rows written, else None."""
        if not self.dead_letters or self.dead_letters < self.main_rows:
            return None
        share = "all" if self.main_rows == 0 else "mostly"
        return (f"sparkcast: query {query} ended with its main output {share} dead letters: "
                f"{self.dead_letters} dead letter(s) against {self.main_rows} main row(s) "
                f"({self.side_rows} side output row(s)); the first reason: "
                f"{self.first_reason}; read them with result.dead_letters or "
                "read_output(spark, path, 'dead_letters')")
