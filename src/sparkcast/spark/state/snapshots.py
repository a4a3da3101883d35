"""Broadcast state versioned by micro-batch id, in the checkpoint: the micro-batch engine's.

Where the micro-batch engine's driver works per micro-batch (``execution/streamed.py``), it applies
a micro-batch's broadcast elements once, to the state the previous micro-batches left, and writes
the result as one snapshot file ``<checkpoint>/sparkcast/broadcast/<batch id>`` before any main row
of the batch runs. Only batches with broadcast elements write one; the state a batch's main rows
read is the latest snapshot up to its id. So a replayed batch (after a crash, Spark reruns it with
the same input) starts from the same base, the snapshots of earlier batches, and writes the same
file: the broadcast state is exactly-once without Spark's state store.

A snapshot is one header line (the checkpoint's layout, the version chain) and one line per
entry, each a ``blobs.store_value`` of ``[descriptor, key, value]`` (large values go to the blob
store, so a model is stored once, not once per snapshot). Workers read a snapshot once per
process and share the decoded, frozen tables between subtasks (``load``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sparkcast.core import codec
from sparkcast.errors import StateSerializationError
from sparkcast.spark.state import checkpoint_files, storage
from sparkcast.spark.state.blobs import load_value, store_value
from sparkcast.spark.state.worker_cache import WORKER

# (file, the resolver its objects were decoded with) -> snapshot; a restart in the same worker
# brings other classes, whose objects must not come from the old ones
_CACHE = WORKER.section(
    "snapshots", "taken while its key (file, classes) matches: a snapshot file is written once "
    "per batch id, with the content a replay writes again",
    lambda snapshot: sum(len(table) for table in snapshot.tables.values()))


@dataclass(frozen=True)
class Snapshot:
    """Broadcast state after some micro-batch: descriptor -> {key: frozen value}."""

    layout: dict[str, Any]
    version: str
    tables: dict[str, dict[Any, Any]]


EMPTY = Snapshot({}, "", {})


SEED = -1  #: the "batch" of the initial state (``initial_state``), before batch 0


def folder(checkpoint_location: str) -> str:
    return checkpoint_files.file(checkpoint_location, *checkpoint_files.SNAPSHOTS)


def batches(location: str) -> list[int]:
    """The batch ids that have a snapshot under ``location``, ascending (``SEED``: the initial
    state a job started with, before its first batch)."""
    return sorted(int(n) for n in storage.list_files(location) if n.lstrip("-").isdigit())


def name(location: str, batch: int) -> str:
    return storage.join(location, str(batch))


def write(location: str, batch: int, snapshot: Snapshot, blob_store: str,
          types: codec.Resolver | None = None) -> None:
    """Write the snapshot of ``batch`` atomically (a replay writes the same content);
    ``types``: the resolver its objects are of (they are cached as read with it)."""
    header = json.dumps({"layout": snapshot.layout, "version": snapshot.version,
                         "batch": batch}, sort_keys=True).encode()
    lines = [header]
    for descriptor, table in snapshot.tables.items():
        lines.extend(store_value([descriptor, key, value], blob_store)
                     for key, value in table.items())
    storage.write_bytes(name(location, batch), b"\n".join(lines))
    _CACHE.put((name(location, batch), types), snapshot)


def delete(location: str, batch: int) -> None:
    storage.delete(name(location, batch))


def read_or_empty(file: str | None, blob_store: str, types: codec.Resolver | None = None
                  ) -> Snapshot:
    """``read(file)``, or the empty state where there is no snapshot file (None)."""
    return EMPTY if file is None else read(file, blob_store, types)


def read(file: str, blob_store: str, types: codec.Resolver | None = None) -> Snapshot:
    """The snapshot in ``file``, decoded and frozen (objects as the classes ``types`` resolves
    them to), cached per process by file name."""
    cached = _CACHE.get((file, types))
    if cached is not None:
        return cached
    data = storage.read_bytes(file)
    if data is None:
        raise StateSerializationError(
            f"the broadcast state snapshot {file} is missing: the checkpoint was changed or "
            "partly deleted; restore it, or start a new checkpoint")
    header, *entries = data.split(b"\n")
    meta = json.loads(header)
    tables: dict[str, dict[Any, Any]] = {}
    for line in entries:
        descriptor, key, value = load_value(line, blob_store, types)
        tables.setdefault(descriptor, {})[codec.hashable(key)] = value
    snapshot = _CACHE.put((file, types), Snapshot(meta["layout"], meta["version"], tables))
    return snapshot

