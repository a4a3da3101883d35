"""Holding a killed pipeline at its moment, and waking the killer by a file event.

A SIGKILL test names a moment in a micro-batch's life (in flight, between the sink's commit and
the checkpoint's). Racing a 40-80 ms window with a 2 ms poll takes CPU from Spark and still
misses on a loaded machine, so the pipeline holds itself there instead: a ``Hold`` (a user
function or sink hook calls ``hold.at(name)``) sleeps once it reaches the moment, in the first
attempt only (the test's marker file ``<folder>/<name>`` is up; the first caller claims
``<name>.reached``, later callers and retries go on). The test waits for the claims with
``FileEvents`` (Linux inotify: the killer sleeps until a file appears, then checks), SIGKILLs
the process group, checks the moment still holds, and takes the markers down, so the restart
runs through.

A killed pipeline's query that Spark failed for a reason of the machine (a Python worker that did
not connect back within Spark's fixed 10 s, on a loaded 2-core machine) is restarted from its
checkpoint in the same process by ``await_restarting``, saying so in the run's log.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: how long a hold sleeps at most (it only bounds a test that failed to kill)
HOLD_SECONDS = 600.0
REACHED = ".reached"


@dataclass(frozen=True)
class Hold:
    """Sleeps at ``at(name)`` while the marker ``folder/name`` is up, the first time only;
    ``folder=None`` (the harness, the last unkilled run) never holds."""

    folder: str | None = None

    def at(self, name: str) -> None:
        if self.folder is None:
            return
        marker = Path(self.folder) / name
        if not marker.exists():
            return
        try:  # the first caller claims the moment; retries and other subtasks go on
            os.close(os.open(marker.with_name(name + REACHED), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        parent, deadline = os.getppid(), time.monotonic() + HOLD_SECONDS
        while marker.exists() and time.monotonic() < deadline and os.getppid() == parent:
            time.sleep(0.05)


def arm(folder: Path, *names: str) -> None:
    """Put up the markers: the next run holds at each of ``names``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).touch()
        (folder / (name + REACHED)).unlink(missing_ok=True)


def disarm(folder: Path) -> None:
    """Take every marker down: a process still holding (not killed) goes on, a restart runs
    through."""
    for marker in folder.glob("*") if folder.is_dir() else ():
        if not marker.name.endswith(REACHED):
            marker.unlink(missing_ok=True)


def reached(folder: Path, name: str) -> bool:
    return (folder / (name + REACHED)).exists()


#: Spark's failure when a Python worker it started did not connect back within 10 s
CONNECT_BACK = "Python worker failed to connect back"


def await_restarting(start: Callable[[], Any], query: Any, tries: int = 3) -> None:
    """Await ``query`` (``start()`` started it); start it again from its checkpoint when it
    failed with ``CONNECT_BACK``, at most ``tries`` times in all; any other failure raises."""
    from pyspark.errors import StreamingQueryException

    for attempt in range(1, tries + 1):
        try:
            query.awaitTermination()
            return
        except StreamingQueryException as error:
            if CONNECT_BACK not in str(error) or attempt == tries:
                raise
            print(f"holds: query {query.name} failed ({CONNECT_BACK}); restarting it from "
                  "its checkpoint", flush=True)
            query = start()


_IN_CREATE, _IN_MOVED_TO, _IN_CLOSE_WRITE, _IN_CLOEXEC = 0x100, 0x80, 0x8, 0o2000000


class FileEvents:
    """Sleeps until a condition on some folders holds, woken by their file events (inotify)
    and at the latest every ``check`` seconds (a folder made after ``watch`` is missed)."""

    def __init__(self, folders: Iterable[Path]) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(_IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            mask = _IN_CREATE | _IN_MOVED_TO | _IN_CLOSE_WRITE
            if self._libc.inotify_add_watch(self._fd, os.fsencode(folder), mask) < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")

    def wait(self, condition: Callable[[], bool], alive: Callable[[], bool],
             timeout: float, check: float = 1.0) -> bool:
        """True once ``condition()`` holds; False when ``alive()`` stops or at ``timeout``."""
        deadline = time.monotonic() + timeout
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0 or not alive():
                return False
            ready, _, _ = select.select([self._fd], [], [], min(check, left))
            if ready:
                os.read(self._fd, 64 * (struct.calcsize("iIII") + 256))  # drain; then look
        return True

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> FileEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
