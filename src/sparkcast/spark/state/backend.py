"""The engine's state backend over Spark's state store (transformWithState state variables).

Layout per subtask (the operator's grouping key), all under the query's checkpoint:

* ``meta``: MapState name -> encoded blob: timers, held elements, the broadcast version.
* ``b_<name>``: MapState per broadcast descriptor, bucket -> encoded [(key, insertion seq,
  value), ...]; a batch rewrites only the buckets its changes touched. A bucket of 1 MiB or more
  goes to the content-addressed blob store, and since every subtask holds the same entries, the
  P subtasks' equal buckets are written to disk once. Reads come from a per-worker cache keyed by
  the broadcast version (a hash chain over the applied broadcast elements, equal on every
  subtask): all subtasks in a Python worker share one frozen copy, and nothing is read from
  Spark while the version is unchanged.
* ``keyed``: ONE MapState for all keyed state, (descriptor name, bucket) -> encoded
  {user key: value}. A Spark state call costs about as much as processing a few hundred events
  in Python, so keys are grouped into a fixed number of buckets: a micro-batch reads and writes
  each touched bucket once. One variable for every descriptor, because Spark declares state
  variables in ``init``, before data arrives, and refuses them later (``getMapState`` outside
  ``init`` fails): keyed state that a function creates lazily, in ``process_element`` or
  ``on_timer`` as Flink users do, is not known then. (Layout version 2; version 1 had one
  ``k_<name>`` variable per descriptor found by opening the function on the driver.)

Typed values (dataclasses, enums, NamedTuples) are decoded generically by the codec and rebuilt
here through their descriptor's converter (``core/converters.py``), once per loaded bucket.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from sparkcast.core import codec
from sparkcast.core.backend import StateBackend
from sparkcast.core.converters import Convert
from sparkcast.errors import MissingKeyError
from sparkcast.spark.state.blobs import load_value, store_value
from sparkcast.spark.state.variables import SparkStates
from sparkcast.spark.state.worker_cache import WORKER

LAYOUT_VERSION = 2  # see the module docstring; a checkpoint's compatibility record names it
_SCALARS = (str, int, float, bool, bytes, type(None), tuple)
SWEEP_BUCKETS = 2  # extra buckets per TTL descriptor swept each micro-batch

# (pipeline id, descriptor name, broadcast version) -> (frozen entries, seq per key)
_BROADCAST_CACHE = WORKER.section(
    "operator broadcast", "taken while its key (pipeline, descriptor, broadcast version) matches",
    lambda found: len(found[0]))


class SparkStateBackend(StateBackend):
    """One subtask's state for one call of the processor (the grouping key is implicit)."""

    def __init__(self, states: SparkStates, pipeline_id: str, buckets: int, blob_dir: str
                 ) -> None:
        self._states = states
        self._pipeline_id = pipeline_id
        self._buckets = buckets
        self._blob_dir = blob_dir
        self._blobs: dict[str, Any] = {}
        self._broadcast: dict[str, BroadcastTable] = {}
        self._keyed: dict[str, BucketedTable] = {}
        #: per keyed descriptor, what the last ``flush`` wrote (``keys_written``,
        #: ``bytes_written``): the monitoring's view of keyed state, at no extra read
        self.written: dict[str, dict[str, int]] = {}

    def load(self, name: str, default: Any) -> Any:
        if name not in self._blobs:
            row = self._states.meta.getValue((name,))
            self._blobs[name] = default if row is None else codec.decode(bytes(row[0]),
                                                                        self.types)
        return self._blobs[name]

    def store(self, name: str, value: Any) -> None:
        if self._blobs.get(name, _ABSENT) != value:
            self._blobs[name] = value
            self._states.meta.updateValue((name,), (codec.encode(value),))

    def broadcast_table(self, name: str, decode: Convert | None = None
                        ) -> MutableMapping[Any, Any]:
        if name not in self._broadcast:
            version = self.load("broadcast_version", "")
            entries, seqs = self._cached_broadcast(name, version, decode)
            self._broadcast[name] = BroadcastTable(entries, seqs, self._buckets)
        return self._broadcast[name]

    def keyed_table(self, name: str, decode: Convert | None = None) -> MutableMapping[Any, Any]:
        if name not in self._keyed:
            self._keyed[name] = BucketedTable(self._states.keyed, name, self._buckets, decode,
                                              self.types)
        return self._keyed[name]

    def flush(self) -> None:
        version = self._blobs.get("broadcast_version", "")
        for name, broadcast in self._broadcast.items():
            broadcast.write_changes(self._states.broadcast[name], self._blob_dir)
            _BROADCAST_CACHE.put((self._pipeline_id, name, version),
                                 (broadcast.entries(), broadcast.seqs))
        for name, keyed in self._keyed.items():
            keys, size = keyed.write_changes()
            self.written[name] = {"keys_written": keys, "bytes_written": size}

    def _cached_broadcast(self, name: str, version: str, decode: Convert | None
                          ) -> tuple[dict, dict]:
        key = (self._pipeline_id, name, version)
        cached = _BROADCAST_CACHE.get(key)
        if cached is not None:
            return cached
        rows = [row for (_,), (blob,) in self._states.broadcast[name].iterator()
                for row in load_value(bytes(blob), self._blob_dir, self.types)]
        rows.sort(key=lambda row: row[1])
        entries = {codec.hashable(key): value for key, _, value in rows}
        seqs = {codec.hashable(key): seq for key, seq, _ in rows}
        if decode is not None:  # typed keys and values, rebuilt from the descriptor
            typed = decode(entries)
            seqs = dict(zip(typed, seqs.values(), strict=True))
            entries = typed
        _BROADCAST_CACHE.put(key, (entries, seqs))
        return entries, seqs


_ABSENT: Any = object()


class BroadcastTable(MutableMapping):
    """Copy-on-write over the shared frozen entries: the first write copies (values stay
    shared, they are frozen), changed keys are written to Spark at flush."""

    def __init__(self, shared: dict[Any, Any], seqs: dict[Any, int], buckets: int) -> None:
        self._shared = shared
        self._own: dict[Any, Any] | None = None
        self.seqs = seqs
        self._changed: set[Any] = set()
        self._buckets = buckets

    def entries(self) -> dict[Any, Any]:
        return self._shared if self._own is None else self._own

    def _writable(self) -> dict[Any, Any]:
        if self._own is None:
            self._own = dict(self._shared)
            self.seqs = dict(self.seqs)
        return self._own

    def __getitem__(self, key: Any) -> Any:
        return self.entries()[key]

    def get(self, key: Any, default: Any = None) -> Any:
        return self.entries().get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.entries()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self.entries())

    def __setitem__(self, key: Any, value: Any) -> None:
        own = self._writable()
        if key not in own:
            self.seqs[key] = max(self.seqs.values(), default=-1) + 1
        own[key] = value
        self._changed.add(key)

    def __delitem__(self, key: Any) -> None:
        del self._writable()[key]
        self.seqs.pop(key, None)
        self._changed.add(key)

    def clear(self) -> None:
        self._changed.update(self.entries())
        self._own, self.seqs = {}, {}

    def write_changes(self, map_state: Any, blob_dir: str) -> None:
        if not self._changed:
            return
        dirty = {bucket_of(key, self._buckets) for key in self._changed}
        contents: dict[int, list[tuple[Any, int, Any]]] = {index: [] for index in dirty}
        for key, value in self.entries().items():
            index = bucket_of(key, self._buckets)
            if index in contents:
                contents[index].append((key, self.seqs[key], value))
        for index in sorted(dirty):
            if contents[index]:
                map_state.updateValue((index,), (store_value(contents[index], blob_dir),))
            else:
                map_state.removeKey((index,))
        self._changed.clear()


class BucketedTable(MutableMapping):
    """Keyed state of one descriptor, read and written a bucket at a time."""

    def __init__(self, map_state: Any, name: str, buckets: int, decode: Convert | None = None,
                 types: codec.Resolver | None = None) -> None:
        self._state = map_state
        self._name = name
        self._decode = decode
        self._types = types
        self._buckets = buckets
        self._loaded: dict[int, dict[Any, Any]] = {}
        self._dirty: set[int] = set()
        self._all_loaded = False
        self._bucket_index: dict[Any, int] = {}

    def bucket_of(self, key: Any) -> int:
        index = self._bucket_index.get(key)
        if index is None:
            index = self._bucket_index[key] = bucket_of(key, self._buckets)
        return index

    def _bucket(self, index: int) -> dict[Any, Any]:
        entries = self._loaded.get(index)
        if entries is None:
            row = self._state.getValue((self._name, index))
            entries = {} if row is None else self._decode_bucket(row[0])
            self._loaded[index] = entries
        return entries

    def get(self, key: Any, default: Any = None) -> Any:
        index = self.bucket_of(key)
        value = self._bucket(index).get(key, default)
        if not isinstance(value, _SCALARS):
            self._dirty.add(index)  # the caller may mutate it in place
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise MissingKeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._bucket(self.bucket_of(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        index = self.bucket_of(key)
        self._bucket(index)[key] = value
        self._dirty.add(index)

    def __delitem__(self, key: Any) -> None:
        index = self.bucket_of(key)
        del self._bucket(index)[key]
        self._dirty.add(index)

    def _load_all(self) -> None:
        if not self._all_loaded:
            for (name, index), (blob,) in self._state.iterator():
                if name == self._name and index not in self._loaded:
                    self._loaded[index] = self._decode_bucket(blob)
            self._all_loaded = True

    def __iter__(self) -> Iterator[Any]:
        self._load_all()
        return (key for entries in list(self._loaded.values()) for key in list(entries))

    def __len__(self) -> int:
        self._load_all()
        return sum(len(entries) for entries in self._loaded.values())

    def sweep(self, is_dead: Callable[[Any], bool], clock: int) -> None:
        """Drop dead entries from the buckets this batch loaded and from ``SWEEP_BUCKETS`` more,
        rotating with the clock, so every bucket is swept now and then."""
        start = clock // 1000
        extra = {(start + i) % self._buckets for i in range(min(SWEEP_BUCKETS, self._buckets))}
        for index in sorted(set(self._loaded) | extra):
            entries = self._bucket(index)
            dead = [key for key, stored in entries.items() if is_dead(stored)]
            for key in dead:
                del entries[key]
            if dead:
                self._dirty.add(index)

    def write_changes(self) -> tuple[int, int]:
        """Write the changed buckets; (keys in them, bytes written)."""
        keys = size = 0
        for index in sorted(self._dirty):
            entries = self._loaded[index]
            if entries:
                blob = codec.encode(list(entries.items()))
                self._state.updateValue((self._name, index), (blob,))
                keys += len(entries)
                size += len(blob)
            else:
                self._state.removeKey((self._name, index))
        self._dirty.clear()
        return keys, size

    def _decode_bucket(self, blob: Any) -> dict[Any, Any]:
        decode = self._decode
        pairs = codec.decode(bytes(blob), self._types)
        if decode is None:
            return {codec.hashable(k): v for k, v in pairs}
        return {codec.hashable(k): decode(v) for k, v in pairs}


def bucket_of(key: Any, buckets: int) -> int:
    """The bucket of a key: fixed for a checkpoint, equal in every process."""
    digest = hashlib.blake2b(stable_key_bytes(key), digest_size=4).digest()
    return int.from_bytes(digest, "little") % buckets


def stable_key_bytes(key: Any) -> bytes:
    """Bytes of a key that every process and version agrees on (they place keys in buckets
    stored in checkpoints); strings and ints skip the codec."""
    kind = type(key)
    if kind is str:
        return b"s" + key.encode("utf-8")
    if kind is int:
        return b"i" + str(key).encode("ascii")
    return b"c" + codec.canonical(key)

