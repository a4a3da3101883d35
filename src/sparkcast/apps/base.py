"""What every application declares, and how its generated data is laid out on disk.

An :class:`App` is pure data: the function, its descriptors, the schemas of its two input
folders and of its outputs, and a seeded data generator. The Spark wiring
(:mod:`sparkcast.apps.wiring`), the CLI and the demo read nothing else, so an application is one
module of pure logic plus one ``App(...)`` value.

Generated data is a list of :class:`Drop` values, each one file for one folder at one *step*:
``sparkcast generate`` writes all of them at once, the demo writes them step by step so that
files appear while the query runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.spark.state import storage

EVENTS = "events"
BROADCAST = "broadcast"
ARTIFACTS = "artifacts"


@dataclass(frozen=True)
class Drop:
    """One generated file: JSON lines (``rows``) or raw bytes (``data``, e.g. model weights)."""

    step: int
    folder: str
    name: str
    rows: tuple[dict[str, Any], ...] = ()
    data: bytes | None = None


@dataclass(frozen=True)
class App:
    """One application of the broadcast state pattern, Spark-free.

    ``version_column`` names the output column that says which broadcast state version made
    each output (the demo shows when every subtask switches); ``per_event_outputs`` are the
    outputs that together hold exactly one row per input event (how the demo proves nothing was
    lost; empty when outputs are not one per event, as for pattern matches).
    ``generate(seed, scale, files)`` gives ``files`` event files (the demo's steps),
    ``scale`` sizing each, the broadcast update midway; ``drops`` asks for the app's own
    number of files unless ``--files`` says otherwise."""

    name: str
    title: str
    make_function: Callable[[], BaseBroadcastProcessFunction]
    descriptors: tuple[MapStateDescriptor, ...]
    events_schema: str
    broadcast_schema: str
    output_schema: str
    generate: Callable[[int, int, int], list[Drop]]
    side_outputs: tuple[OutputTag, ...] = ()
    key_by: tuple[str, ...] = ()
    order_by: str | None = "seq"
    hold_until_ready: tuple[Any, ...] = ()
    version_column: str = "version"
    per_event_outputs: tuple[str, ...] = ("main",)
    show_columns: tuple[str, ...] = ()
    update_note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    files: int = 6

    def drops(self, seed: int, scale: int, files: int | None = None) -> list[Drop]:
        """The generated inputs, in ``files`` event files (None: the app's ``files``)."""
        return self.generate(seed, scale, files or self.files)

    def output_names(self) -> list[str]:
        return ["main", *[t.tag_id for t in self.side_outputs], "dead_letters"]


def write_json_lines(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write a file atomically: the file source must never see it half-written (``storage``
    writes a temporary file whose name starts with a dot, which Spark skips, and renames it)."""
    return write_bytes(path, "".join(json.dumps(row, sort_keys=True) + "\n"
                                     for row in rows).encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> Path:
    storage.write_bytes(str(path), data)
    return path


def write_drop(root: Path, drop: Drop) -> Path:
    target = Path(root) / drop.folder / drop.name
    if drop.data is not None:
        return write_bytes(target, drop.data)
    return write_json_lines(target, drop.rows)


def write_drops(root: Path, drops: Sequence[Drop]) -> dict[str, int]:
    """Write every drop (artifacts first, so no broadcast row names a missing file); returns
    the number of rows written per folder."""
    counts: dict[str, int] = {}
    ordered = sorted(drops, key=lambda d: (d.step, d.folder != ARTIFACTS, d.folder, d.name))
    start = time.time() - len(ordered) - 60
    for index, drop in enumerate(ordered):
        path = write_drop(root, drop)
        # Spark's file source reads the oldest files first, and files written within one clock
        # tick tie: in step order, the update could be read before the rules it updates
        os.utime(path, (start + index, start + index))
        counts[drop.folder] = counts.get(drop.folder, 0) + len(drop.rows)
    return counts


def steps(drops: Sequence[Drop]) -> list[list[Drop]]:
    """Drops grouped by step, in step order (the demo writes one group at a time)."""
    by_step: dict[int, list[Drop]] = {}
    for drop in drops:
        by_step.setdefault(drop.step, []).append(drop)
    return [sorted(by_step[s], key=lambda d: (d.folder != ARTIFACTS, d.folder, d.name))
            for s in sorted(by_step)]


def event_count(drops: Sequence[Drop]) -> int:
    return sum(len(d.rows) for d in drops if d.folder == EVENTS)


def stable_bucket(*parts: Any, buckets: int = 10_000) -> int:
    """A bucket in ``[0, buckets)`` that is the same in every process and every run (Python's
    ``hash`` of a str is salted per process, so it cannot be used to split users)."""
    text = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") % buckets


def next_version(state: Any, key: str = "version") -> int:
    """Bump a counter kept in a broadcast state (the broadcast side only)."""
    version = int(state.get(key) or 0) + 1
    state.put(key, version)
    return version
