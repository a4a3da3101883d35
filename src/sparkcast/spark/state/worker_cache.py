"""What a Python worker keeps between the tasks Spark sends it: one owner, one memory bound.

A worker keeps what is costly to make again: the subtasks' engines (``open`` once, not once per
micro-batch), their decoded keyed state after a commit, decoded broadcast state, Kafka
producers whose transactional ids it initialised and an admin client, the schemas a registry
gave for ids the plan did not know. Each kind is a :class:`Section` of the one
:data:`WORKER` cache, and each section states its invalidation rule (``Section.rule``), which
the module that owns the values carries out where it reads them:

========================  ====================================================================
section (module)          an entry is taken only while
========================  ====================================================================
engines (``engines``)     its key (pipeline, engine, subtask) matches; it carries what its
                          engine is bound to, and the binder binds again when that differs
warm state                the store this worker committed is still on the checkpoint's line:
(``store_backend``)       same lineage token, same classes, the local copy continued, no
                          failed attempt since (a batch holds it until its commit)
snapshots (``snapshots``) its key (file, classes) matches: a snapshot file is written once per
                          batch id with the content a replay writes again (a rollback that
                          rewrites one with other content is not told apart yet: issue 50)
static sides              its key (digest of the state, classes) matches
(``static_side``)
operator broadcast        its key (pipeline, descriptor, broadcast version) matches
(``backend``)
blobs (``blobs``)         its key (store, sha-256, classes) matches: content-addressed
kept producers            its transactional id was not initialised again, and its last write
(``kafka_transactions``)  did not fail (either drops it); tried only when used in the batch
                          before or made ready for this one
admin clients             its settings are the same: it holds connections, no state of a part
(``kafka_client``)
registry schemas          its key (registry, type, reader, id) matches: a registry never gives
(``registry_lookup``)     an id another schema
Avro readers              its key (the reader schema's JSON) matches
(``avro_late``)
========================  ====================================================================

The bound (``WORKER_BOUND``; ``SPARKCAST_WORKER_CACHE`` sets it) counts weights, not entries:
a decoded table weighs its entries (keys, values known absent), a blob its size in KiB, an
engine ``ENGINE_WEIGHT`` (its function may hold a model), a producer or client 1. When the
total passes the bound, the least recently used entries of any section go first; an entry
that alone weighs more than the bound is not kept. Dropping an entry is always safe, as each
section's rule makes it again from its source: an engine is made and bound again, warm state
is read from the store, a snapshot, static side or blob is decoded again, a producer is
initialised again (the path a new worker takes), a client made again.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

Value = TypeVar("Value")

#: the weight a worker keeps: about 2M decoded entries (a few hundred MB of small values)
WORKER_BOUND = int(os.environ.get("SPARKCAST_WORKER_CACHE", "2000000"))
#: an engine's weight: the engines alone stay under 250 (the engine cache's own bound before)
ENGINE_WEIGHT = 8000


class WorkerCache:
    """Entries of every section in one least-recently-used order, under one bound."""

    def __init__(self, bound: int = WORKER_BOUND) -> None:
        self.bound = bound
        self.sections: dict[str, Section[Any]] = {}
        self._entries: OrderedDict[tuple[str, Hashable], tuple[Any, int]] = OrderedDict()
        self._weight = 0

    def section(self, name: str, rule: str,
                weigh: Callable[[Any], int] = lambda value: 1) -> Section[Any]:
        """The section ``name`` (made once); ``rule``: when an entry may be taken."""
        if name not in self.sections:
            self.sections[name] = Section(self, name, rule, weigh)
        return self.sections[name]

    @property
    def weight(self) -> int:
        """The weight of every entry kept."""
        return self._weight

    def get(self, name: str, key: Hashable) -> Any:
        found = self._entries.get((name, key))
        if found is None:
            return None
        self._entries.move_to_end((name, key))
        return found[0]

    def put(self, name: str, key: Hashable, value: Any, weight: int) -> bool:
        """Keep ``value`` (the most recent entry); whether it is kept."""
        self.pop(name, key)
        if weight > self.bound:
            return False
        self._entries[(name, key)] = (value, weight)
        self._weight += weight
        while self._weight > self.bound:
            _, (_, dropped) = self._entries.popitem(last=False)  # least recent
            self._weight -= dropped
        return True

    def pop(self, name: str, key: Hashable) -> Any:
        found = self._entries.pop((name, key), None)
        if found is None:
            return None
        self._weight -= found[1]
        return found[0]

    def count(self, name: str) -> int:
        return sum(1 for section, _ in self._entries if section == name)

    def clear(self, name: str) -> None:
        for entry in [e for e in self._entries if e[0] == name]:
            self.pop(*entry)


class Section(Generic[Value]):
    """One kind of entry of a :class:`WorkerCache`, weighed by ``weigh`` when it is put."""

    def __init__(self, cache: WorkerCache, name: str, rule: str,
                 weigh: Callable[[Value], int]) -> None:
        self.cache = cache
        self.name = name
        self.rule = rule
        self.weigh = weigh

    def get(self, key: Hashable) -> Value | None:
        """The entry of ``key`` (now the most recent), or None."""
        value: Value | None = self.cache.get(self.name, key)
        return value

    def put(self, key: Hashable, value: Value, weight: int | None = None) -> Value:
        """``value`` kept for ``key`` if the bound allows, weighing ``weight`` (default: weighed
        now, so put it again when it has grown); returns it."""
        weight = self.weigh(value) if weight is None else weight
        self.cache.put(self.name, key, value, max(1, weight))
        return value

    def pop(self, key: Hashable) -> Value | None:
        value: Value | None = self.cache.pop(self.name, key)
        return value

    def clear(self) -> None:
        self.cache.clear(self.name)

    def __len__(self) -> int:
        return self.cache.count(self.name)


#: this Python worker's cache
WORKER = WorkerCache()
