"""Large broadcast values, stored once and content-addressed instead of once per subtask.

Every subtask keeps its own copy of broadcast state (as in Flink), so a 100 MB model would be
written P times into the state store and its checkpoints. A value whose encoding reaches
``LARGE_VALUE_BYTES`` is written once to ``<blob store>/<sha256>`` (atomically, through
``storage.py``: a path or a URI such as ``s3://``), and state holds only a reference. The
reference names the digest, not the folder, so the blob store can move (or be copied) and the
query restart with the new location. Readers verify the checksum and cache the decoded, frozen
value per Python worker by store and digest, so it is held once per worker. A writer that finds
the file already there verifies it too (once per worker) and rewrites it when it is corrupt: a
half-copied or damaged blob is never trusted.

The store is chosen on the driver (``planning/checks.py``): ``process(blob_store=...)``, else
``<checkpoint>/blobs`` with ``write_stream`` (``query_blob_store``), else a folder of its own
per pipeline under the local temporary directory (``prepare``; never one shared between jobs),
and on a remote master no default: a large value then fails with an error that says to pass a
store every executor can read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any

from sparkcast.core import codec
from sparkcast.core.frozen import freeze
from sparkcast.errors import PipelineError, StateSerializationError
from sparkcast.spark.state import storage
from sparkcast.spark.state.worker_cache import WORKER

LARGE_VALUE_BYTES = 1 << 20
NO_STORE = ""  # a remote master without blob_store or write_stream: large values fail clearly
_PREFIX = b'{"$blob":'
# (store, digest, the resolver it was decoded with; None: as written) -> frozen value: a restart
# in the same worker brings other classes, whose values must not come from the old ones
_CACHE = WORKER.section("blobs", "taken while its key (store, sha-256, classes) matches: "
                        "content-addressed")
_VERIFIED: set[tuple[str, str]] = set()  # (store, digest) written or checked by this worker


def default_blob_store(pipeline_id: str, local_master: bool) -> str:
    """A folder for this pipeline alone on a local master; no default on a remote one."""
    if not local_master:
        return NO_STORE
    return os.path.join(tempfile.gettempdir(), f"sparkcast-blobs-{pipeline_id}")


def blob_store_under(checkpoint_location: str) -> str:
    """The blob store of a query: beside its state, so both move and are shared together."""
    return storage.join(checkpoint_location, "blobs")


def forget_cached() -> None:
    """Drop this worker's decoded values and verified files: the next use reads the store."""
    _CACHE.clear()
    _VERIFIED.clear()


def store_value(value: Any, blob_store: str) -> bytes:
    """The bytes to keep in state for a value: its encoding, or a reference to a blob."""
    encoded = codec.encode(value)
    if len(encoded) < LARGE_VALUE_BYTES:
        return encoded
    digest = hashlib.sha256(encoded).hexdigest()
    if (blob_store, digest) not in _VERIFIED:
        _write_blob(blob_store, digest, encoded)
        _VERIFIED.add((blob_store, digest))
    _CACHE.put((blob_store, digest, None), freeze(value), len(encoded) >> 10)
    return json.dumps({"$blob": digest, "bytes": len(encoded)}).encode()


def load_value(stored: bytes, blob_store: str, types: codec.Resolver | None = None) -> Any:
    """A frozen value from state bytes, reading (and verifying) a blob if they refer to one;
    stored objects as the classes ``types`` resolves them to."""
    if not stored.startswith(_PREFIX):
        return codec.frozen_decode(stored, types)
    digest = json.loads(stored)["$blob"]
    cached = _CACHE.get((blob_store, digest, types))
    if cached is not None:
        return cached
    encoded = load_encoded(stored, blob_store)
    return _CACHE.put((blob_store, digest, types), codec.frozen_decode(encoded, types),
                      len(encoded) >> 10)


def load_encoded(stored: bytes, blob_store: str) -> bytes:
    """A value's encoding from state bytes: the bytes themselves, or the blob they refer to
    (read and verified)."""
    if not stored.startswith(_PREFIX):
        return stored
    digest = json.loads(stored)["$blob"]
    encoded = storage.read_bytes(storage.join(_require(blob_store), digest))
    if encoded is None:
        raise StateSerializationError(
            f"broadcast blob {digest} is missing from the blob store {blob_store}: restart with "
            f"the blob store (or checkpoint) the query used before")
    if hashlib.sha256(encoded).hexdigest() != digest:
        raise StateSerializationError(f"broadcast blob {digest} fails its checksum: the file "
                                      f"in {blob_store} was changed or truncated")
    return encoded


def _write_blob(blob_store: str, digest: str, encoded: bytes) -> None:
    """Write the blob unless an intact copy is there already (a corrupt one is replaced)."""
    location = storage.join(_require(blob_store), digest)
    existing = storage.read_bytes(location)
    if existing is not None and hashlib.sha256(existing).hexdigest() == digest:
        return
    storage.write_bytes(location, encoded)


def _require(blob_store: str) -> str:
    if blob_store == NO_STORE:
        raise PipelineError(
            "a broadcast value of 1 MiB or more needs a blob store that every executor reads, "
            "and the master is remote: pass process(blob_store='s3://...' or 'hdfs://...'), or "
            "use write_stream, which keeps blobs under its checkpoint")
    return blob_store

