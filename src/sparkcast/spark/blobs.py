"""Large broadcast values, stored once and content-addressed instead of once per subtask.

Every subtask keeps its own copy of broadcast state (as in Flink), so a 100 MB model would be
written P times into the state store and its checkpoints. A value whose encoding reaches
``LARGE_VALUE_BYTES`` is written once to ``<blob dir>/<sha256>`` (atomically; equal content is
never written twice), and state holds only a reference. Readers verify the checksum and cache the
decoded, frozen value per Python worker by hash, so it is held once per worker.

The blob directory defaults to the query's checkpoint (``write_stream``) or a local temporary
directory; on a cluster, pass a path every executor can read (``process(blob_store=...)``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import OrderedDict
from typing import Any

from sparkcast.core import codec
from sparkcast.errors import StateSerializationError

LARGE_VALUE_BYTES = 1 << 20
_PREFIX = b'{"$blob":'
_CACHE: OrderedDict[str, Any] = OrderedDict()
_CACHE_ENTRIES = 8


def default_blob_dir() -> str:
    return os.path.join(tempfile.gettempdir(), "sparkcast-blobs")


def store_value(value: Any, blob_dir: str) -> bytes:
    """The bytes to keep in state for a value: its encoding, or a reference to a blob."""
    encoded = codec.encode(value)
    if len(encoded) < LARGE_VALUE_BYTES:
        return encoded
    digest = hashlib.sha256(encoded).hexdigest()
    path = os.path.join(blob_dir, digest)
    if not os.path.exists(path):
        os.makedirs(blob_dir, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=blob_dir, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(encoded)
        os.replace(temporary, path)
    _remember(digest, value)
    return json.dumps({"$blob": digest, "bytes": len(encoded), "dir": blob_dir}).encode()


def load_value(stored: bytes) -> Any:
    """A frozen value from state bytes, reading (and verifying) a blob if they refer to one."""
    if not stored.startswith(_PREFIX):
        return codec.frozen_decode(stored)
    reference = json.loads(stored)
    digest = reference["$blob"]
    cached = _CACHE.get(digest)
    if cached is not None:
        _CACHE.move_to_end(digest)
        return cached
    with open(os.path.join(reference["dir"], digest), "rb") as source:
        encoded = source.read()
    if hashlib.sha256(encoded).hexdigest() != digest:
        raise StateSerializationError(f"broadcast blob {digest} fails its checksum: the file "
                                      f"in {reference['dir']} was changed or truncated")
    return _remember(digest, codec.frozen_decode(encoded))


def _remember(digest: str, value: Any) -> Any:
    from sparkcast.core.frozen import freeze

    frozen = freeze(value)
    _CACHE[digest] = frozen
    _CACHE.move_to_end(digest)
    while len(_CACHE) > _CACHE_ENTRIES:
        _CACHE.popitem(last=False)
    return frozen
