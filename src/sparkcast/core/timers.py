"""Keyed timers of one subtask: a deduplicated set, fired in (timestamp, key) order.

Timers at the same timestamp fire in the order of their keys' canonical encoding, which is the
same in every process, so a restart or a different backend fires them in the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any

from sparkcast.api.timers import TimeDomain, TimerService
from sparkcast.core import codec
from sparkcast.core.scope import NO_KEY, KeyScope
from sparkcast.errors import TimerError

_Entry = tuple[int, bytes]  # (timestamp, canonical key)
#: keys of these exact types are encoded once per queue (``bool`` is not ``int`` here, and a
#: tuple may hold equal values of different types, so it is encoded each time); a plain dict
#: cleared when full, not an LRU: the lookup runs for every timer registered, once per event
_CACHED_TYPES = (str, int)
_CACHE_SIZE = 65_536


class TimerQueue:
    """Timers of one domain; ``snapshot``/``restore`` give a codec-friendly form."""

    def __init__(self) -> None:
        self._heap: list[_Entry] = []
        self._keys: dict[_Entry, Any] = {}
        self._canonical: dict[tuple[type, Any], bytes] = {}
        self.changed = False

    def _encoded(self, key: Any) -> bytes:
        """The key's canonical encoding; a session timer re-registered per event would
        otherwise encode its key with every event."""
        if type(key) not in _CACHED_TYPES:
            return codec.canonical(key)
        cached = self._canonical.get((type(key), key))
        if cached is None:
            if len(self._canonical) >= _CACHE_SIZE:
                self._canonical.clear()
            cached = self._canonical[(type(key), key)] = codec.canonical(key)
        return cached

    def __len__(self) -> int:
        return len(self._keys)

    def register(self, timestamp: int, key: Any) -> None:
        entry = (int(timestamp), self._encoded(key))
        if entry not in self._keys:
            self._keys[entry] = key
            heapq.heappush(self._heap, entry)
            self.changed = True

    def delete(self, timestamp: int, key: Any) -> None:
        if self._keys.pop((int(timestamp), self._encoded(key)), None) is not None:
            self.changed = True  # the heap entry is skipped when it surfaces

    def pop_due(self, upto: int) -> tuple[int, Any] | None:
        """The earliest live timer at or before ``upto``, removed; None when none is due."""
        heap = self._heap
        while heap and heap[0][0] <= upto:
            entry = heapq.heappop(heap)
            key = self._keys.pop(entry, _GONE)
            if key is not _GONE:
                self.changed = True
                return entry[0], key
        return None

    def next_timestamp(self) -> int | None:
        while self._heap and self._heap[0] not in self._keys:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def snapshot(self) -> list[list[Any]]:
        return [[ts, key] for (ts, _), key in sorted(self._keys.items(), key=lambda kv: kv[0])]

    def restore(self, entries: list[list[Any]]) -> None:
        self._heap, self._keys = [], {}
        for ts, key in entries:
            self.register(ts, codec.hashable(key))
        self.changed = False


_GONE: Any = object()


class KeyedTimerService(TimerService):
    """The timer service of the current key; the contexts hand it out."""

    def __init__(self, scope: KeyScope, queues: Mapping[TimeDomain, TimerQueue]) -> None:
        self._scope = scope
        self._processing = queues[TimeDomain.PROCESSING_TIME]
        self._event = queues[TimeDomain.EVENT_TIME]

    def current_processing_time(self) -> int:
        return self._scope.processing_time

    def current_watermark(self) -> int:
        return self._scope.watermark

    def _key(self) -> Any:
        key = self._scope.key
        if key is NO_KEY:
            raise TimerError("timers need a current key: register them in process_element or "
                             "on_timer of a KeyedBroadcastProcessFunction")
        return key

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._processing.register(timestamp, self._key())

    def register_event_time_timer(self, timestamp: int) -> None:
        self._event.register(timestamp, self._key())

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._processing.delete(timestamp, self._key())

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._event.delete(timestamp, self._key())
