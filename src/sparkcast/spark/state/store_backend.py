"""The engine's state backend of the micro-batch engine by subtask: keyed state and the engine's
blobs in the subtask's keyed store (``keyed_store.py``), broadcast state from the micro-batch's
snapshot.

Keyed values are read a key at a time (or prefetched for the batch's keys) and stay decoded in
the worker's memory: at ``flush`` every key written, removed or handed out as a container (user
code may mutate it in place, as on every backend) becomes one change of the batch's delta, and
once the store committed it the values are kept as the subtask's **warm state**
(:class:`WarmState`) for its next micro-batch: a changed container as the bytes committed,
decoded when next read, never the live object, which a function may keep and mutate in a later
batch without ``update()`` (the store never sees that, nor may the warm state). The next batch
takes them only where nothing else can have moved the state: the same engine's classes, the
local copy still the one this worker's commit left, on the checkpoint's line
(``SubtaskStore.continued`` and the same lineage token: not a copy another worker moved on,
nor a line a rollback left), and no attempt since that failed before its commit (a batch that
takes the warm state holds it until it commits).
The warm states are a section of the worker's one cache (``worker_cache.py``), weighed by
their keys under its one bound; otherwise, and for one heavier than the bound or evicted, it
reads the store again: the store on disk stays
the truth for restarts, other workers and the state tools. Broadcast state is the driver's snapshot,
shared by the worker's subtasks; a subtask that applies broadcast elements itself (event-time
alignment, ``apply_to_keyed_state``) writes to its own copy, which nothing persists: the
driver's snapshot is the state of record, and the same elements give it the same entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from sparkcast.core import codec
from sparkcast.core.backend import StateBackend
from sparkcast.core.converters import Convert
from sparkcast.errors import MissingKeyError
from sparkcast.spark.state.backend import stable_key_bytes
from sparkcast.spark.state.keyed_store import META, Change, SubtaskStore
from sparkcast.spark.state.worker_cache import WORKER

_SCALARS = (str, int, float, bool, bytes, type(None), tuple)
#: values kept as they are after a commit: immutable, and decoded as the same type and value
_PLAIN = frozenset({str, int, float, bool, bytes, type(None)})
_ABSENT: Any = object()
SWEEP_ROWS = 1000  # stored keys per TTL descriptor checked each micro-batch, beyond those read


@dataclass
class WarmState:
    """A subtask's decoded keyed state after the commit whose lineage token is ``token``."""

    token: str | None  #: None while a batch holds it (until that batch commits)
    types: codec.Resolver | None  #: the classes its objects were decoded as
    tables: dict[str, dict[Any, Any]] = field(default_factory=dict)  # name -> {key: value}
    scanned: set[str] = field(default_factory=set)  # the tables holding every stored key
    holder: SubtaskStore | None = None


#: local copy path -> its warm state, in this worker, weighed by its decoded keys (values and
#: known-absent keys, all descriptors)
_WARM = WORKER.section(
    "warm state", "taken while the store this worker committed is still on the checkpoint's "
    "line: the same lineage token, the same classes, the local copy continued, no failed "
    "attempt since (a batch holds it until its commit)",
    lambda warm: sum(len(table) for table in warm.tables.values()))


def _take_warm(store: SubtaskStore, types: codec.Resolver | None) -> WarmState:
    """The warm state the batch ``store`` is open for may use (empty when none is true), held
    by it until its commit."""
    warm = _WARM.get(store.path)
    if warm is not None and warm.holder is store:
        return warm
    if (warm is None or warm.types is not types or warm.holder is not None
            or not store.continued or warm.token is None or warm.token != store.token):
        warm = WarmState(None, types)
    warm.token, warm.holder = None, store
    return _WARM.put(store.path, warm)


class StoreBackend(StateBackend):
    """One subtask's state for one micro-batch of the micro-batch engine by subtask."""

    def __init__(self, store: SubtaskStore, broadcast: dict[str, dict[Any, Any]],
                 writable_broadcast: bool = False, *, warm: bool = False) -> None:
        self._store = store
        self._warm = warm  # keep decoded state between batches (a worker's subtask)
        self._broadcast = broadcast
        self._copies: dict[str, dict[Any, Any]] = {}
        self._writable = writable_broadcast
        self._keyed: dict[str, StoredTable] = {}
        self._blobs: dict[str, Any] = {}
        self._changed_blobs: set[str] = set()
        #: per keyed descriptor, what the last ``flush`` wrote (the monitoring's view)
        self.written: dict[str, dict[str, int]] = {}

    def broadcast_table(self, name: str, decode: Convert | None = None
                        ) -> MutableMapping[Any, Any]:
        shared = self._broadcast.setdefault(name, {})
        if not self._writable:
            return shared
        if name not in self._copies:
            self._copies[name] = dict(shared)
        return self._copies[name]

    def keyed_table(self, name: str, decode: Convert | None = None) -> MutableMapping[Any, Any]:
        if name not in self._keyed:
            warm = _take_warm(self._store, self.types) if self._warm else WarmState(None, None)
            self._keyed[name] = StoredTable(self._store, name, decode, self.types,
                                            warm.tables.setdefault(name, {}),
                                            name in warm.scanned)
        return self._keyed[name]

    def prefetch(self, keys: list[Any]) -> None:
        """Read ``keys`` of every bound keyed table in a few queries (the batch's keys)."""
        for table in self._keyed.values():
            table.prefetch(keys)

    def load(self, name: str, default: Any) -> Any:
        if name not in self._blobs:
            blob = self._store.get(META, name.encode())
            self._blobs[name] = default if blob is None else codec.decode(blob, self.types)
        return self._blobs[name]

    def store(self, name: str, value: Any) -> None:
        if self._blobs.get(name, _ABSENT) != value:
            self._blobs[name] = value
            self._changed_blobs.add(name)

    def flush(self) -> None:
        changes: list[Change] = [(META, name.encode(), codec.encode(self._blobs[name]))
                                 for name in sorted(self._changed_blobs)]
        self._changed_blobs.clear()
        for name, table in self._keyed.items():
            written = table.take_changes()
            changes += written
            self.written[name] = {"keys_written": len(written),
                                  "bytes_written": sum(len(c[2] or b"") for c in written)}
        self._store.commit(changes)
        self._keep_warm()

    def _keep_warm(self) -> None:
        """The committed batch's decoded tables stay for the subtask's next batch."""
        warm = _WARM.get(self._store.path) if self._warm else None
        if warm is None or warm.holder is not self._store:
            return
        warm.token, warm.holder = self._store.token, None
        warm.scanned = {name for name, table in self._keyed.items() if table.scanned}
        _WARM.put(self._store.path, warm)  # weighed again: beyond the bound it is not kept


class StoredTable(MutableMapping):
    """One keyed descriptor's state: ``{user key: value}`` over the store, read on demand."""

    def __init__(self, store: SubtaskStore, name: str, decode: Convert | None,
                 types: codec.Resolver | None, cache: dict[Any, Any] | None = None,
                 scanned: bool = False) -> None:
        self._store = store
        self._name = name
        self._decode = decode
        self._types = types
        #: key -> value, or _ABSENT when not stored (the warm state's table, kept between
        #: batches)
        self.cache: dict[Any, Any] = {} if cache is None else cache
        self._dirty: set[Any] = set()
        #: whether the cache holds every stored key
        self.scanned = scanned

    def prefetch(self, keys: list[Any]) -> None:
        """Read ``keys`` in a few queries instead of one each (the batch's keys, known up
        front)."""
        wanted = {stable_key_bytes(k): k for k in keys if k not in self.cache}
        found = self._store.get_many(self._name, list(wanted))
        for raw, key in wanted.items():
            blob = found.get(raw)
            self.cache[key] = _ABSENT if blob is None else self._value(blob)

    def get(self, key: Any, default: Any = None) -> Any:
        value = self.cache.get(key, _MISSING)
        if value is _MISSING:
            blob = self._store.get(self._name, stable_key_bytes(key))
            value = self.cache[key] = _ABSENT if blob is None else self._value(blob)
        elif type(value) is Committed:
            value = self.cache[key] = self._value(value.blob)
        if value is _ABSENT:
            return default
        if not isinstance(value, _SCALARS):
            self._dirty.add(key)  # the caller may mutate it in place
        return value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise MissingKeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        found = self.cache.get(key, _MISSING)
        if found is _MISSING:
            return self.get(key, _ABSENT) is not _ABSENT
        return found is not _ABSENT

    def __setitem__(self, key: Any, value: Any) -> None:
        self.cache[key] = value
        self._dirty.add(key)

    def __delitem__(self, key: Any) -> None:
        if key not in self:
            raise MissingKeyError(key)
        self.cache[key] = _ABSENT
        self._dirty.add(key)

    def _load_all(self) -> None:
        if not self.scanned:
            for raw, blob in self._store.scan(self._name):
                self.cache.setdefault(key_of(raw), self._value(blob))
            self.scanned = True

    def __iter__(self) -> Iterator[Any]:
        self._load_all()
        return iter([key for key, value in self.cache.items() if value is not _ABSENT])

    def __len__(self) -> int:
        self._load_all()
        return sum(1 for value in self.cache.values() if value is not _ABSENT)

    def sweep(self, is_dead: Callable[[Any], bool], clock: int) -> None:
        """Drop dead entries among those read this batch and ``SWEEP_ROWS`` stored ones from a
        place that rotates with the clock, so every key is checked now and then."""
        start = bytes([(clock // 1000) % 256])
        for raw, blob in self._store.scan_from(self._name, start, SWEEP_ROWS):
            self.cache.setdefault(key_of(raw), self._value(blob))
        for key, value in list(self.cache.items()):
            if type(value) is Committed:
                value = self.cache[key] = self._value(value.blob)
            if value is not _ABSENT and is_dead(value):
                self.cache[key] = _ABSENT
                self._dirty.add(key)

    def take_changes(self) -> list[Change]:
        """The batch's changes as store rows; the table starts clean. A changed value that is
        not plain (a list, a dict, an object) stays in the table as the bytes committed
        (:class:`Committed`), decoded at its next read: user code may keep the object and
        mutate it in a later batch without ``update()``, which the store never sees, so the
        warm state must not see it either (a cold read decodes the committed bytes too)."""
        changes: list[Change] = []
        for key in self._dirty:
            value = self.cache[key]
            blob = None if value is _ABSENT else value_bytes(value)
            if blob is not None and type(value) not in _PLAIN:
                self.cache[key] = Committed(blob)
            changes.append((self._name, stable_key_bytes(key), blob))
        self._dirty.clear()
        return changes

    def _value(self, blob: bytes) -> Any:
        value = value_of(blob, self._types)
        return value if self._decode is None else self._decode(value)


class Committed:
    """A value as its batch committed it (``value_bytes``), in place of the live object."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes) -> None:
        self.blob = blob


def key_of(raw: bytes) -> Any:
    """A key back from its stable bytes (``backend.stable_key_bytes``): the store's key column
    is both the lookup key and the key itself."""
    kind, body = raw[:1], raw[1:]
    if kind == b"s":
        return body.decode("utf-8")
    if kind == b"i":
        return int(body)
    return codec.hashable(codec.decode(body))


def value_bytes(value: Any) -> bytes:
    """A stored value: the codec's bytes (an int's are its digits, written without the codec:
    counters are the commonest keyed state, and this is per key per micro-batch)."""
    return str(value).encode() if type(value) is int else codec.encode(value)


def value_of(blob: bytes, types: codec.Resolver | None = None) -> Any:
    """The value of ``value_bytes``, its objects as the classes ``types`` resolves them to."""
    if blob[:1] in _INT_START:
        try:
            return int(blob)
        except ValueError:
            pass  # a float, or another number
    return codec.decode(blob, types)


_INT_START = frozenset(b"-0123456789"[i:i + 1] for i in range(11))


_MISSING: Any = object()
