"""The demos' input, step by step: the fraud demo on PostgreSQL and on Kafka feed the same way
and report the same way (:class:`DemoReport`).

A :class:`Feeder` writes the generated transactions one step at a time, each step once the
previous one is decided (so the rule update lands between two known steps, however slow the
machine), and changes the rules before the middle step. Where a step goes (files, a topic),
how decisions are counted (a table, a ``read_committed`` consumer) and how rules change (an
``UPDATE``, a produced record) are the demo's callables.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from sparkcast.apps.base import Drop, steps


@dataclass
class DemoReport:
    """The summary's lines, whether every transaction was decided once, the run's seconds."""

    lines: list[str]
    ok: bool
    seconds: float


class Feeder:
    """Feeds ``drops`` step by step on a thread of its own (``run``); ``done`` is set after
    the last step, ``stop`` ends it early."""

    def __init__(self, drops: list[Drop], write: Callable[[Drop], object],
                 decided: Callable[[], int], update_rules: Callable[[], None],
                 step_seconds: float, timeout: float) -> None:
        self.drops, self.write, self.decided = drops, write, decided
        self.update_rules = update_rules
        self.step_seconds, self.timeout = step_seconds, timeout
        self.done, self.stop = threading.Event(), threading.Event()

    def start(self) -> Feeder:
        threading.Thread(target=self.run, name="sparkcast-demo-feeder", daemon=True).start()
        return self

    def run(self) -> None:
        groups = steps(self.drops)
        written = 0
        for number, group in enumerate(groups):
            if number:
                self._until(written)
                if self.stop.wait(self.step_seconds):
                    return
            if number == len(groups) // 2:
                self.update_rules()
            for drop in group:
                self.write(drop)
                written += len(drop.rows)
        self.done.set()

    def drive(self, query: Any, expected: int, began: float, out: TextIO) -> Any:
        """Feed on a thread of its own while the query runs, until ``expected`` transactions
        are decided (or the query stops, or the timeout); stop both; the query's exception."""
        self.start()
        try:
            wait_for(query, lambda: self.done.is_set() and self.decided() >= expected, began,
                     self.timeout, out, lambda: f"{self.decided()}/{expected} transactions decided")
            if query.isActive and self.decided() >= expected:
                # the last micro-batch's other outputs (rejected rules, reviews) commit after
                # its decisions: let it end before stopping, or they are lost to the summary
                with contextlib.suppress(Exception):  # a failure is query.exception()'s
                    query.processAllAvailable()
        finally:
            self.stop.set()
            query.stop()
        return query.exception()

    def _until(self, count: int) -> None:
        """Wait until ``count`` transactions are decided (or the timeout, or a stop)."""
        deadline = time.monotonic() + self.timeout
        while (self.decided() < count and time.monotonic() < deadline
               and not self.stop.wait(0.5)):
            pass


def wait_for(query: Any, done: Callable[[], bool], began: float, timeout: float, out: TextIO,
             status: Callable[[], str]) -> None:
    """Until ``done()``, the query stops, or ``timeout`` seconds after ``began``, printing
    ``status()`` whenever it changes."""
    shown = ""
    while query.isActive and not done():
        if time.monotonic() - began > timeout:
            out.write("demo timeout reached\n")
            return
        query.awaitTermination(1.0)
        if status() != shown:
            shown = status()
            out.write(f"  {shown}\n")
            out.flush()
