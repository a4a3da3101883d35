"""Prepared state of one subtask: what a bootstrap (``initial_state=``) or a rescale writes into
a subtask before its first element, on the harness and on Spark by the same code.

A ``Seed`` holds state in its stored form (what the backends keep): broadcast entries, keyed
records per descriptor (a value, a list, a dict; ``[value, expires_at]`` with TTL), timers
``[timestamp, key]`` per time domain, held elements ``[value, timestamp, key]`` and the
broadcast version. A rescale moves each keyed record, timer and held element to the subtask of
its key and copies the broadcast state to every subtask, as Flink restores a savepoint at a new
parallelism (key groups; broadcast state to every task).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkcast.api.declared_types import accepts, type_label
from sparkcast.api.descriptors import StateDescriptor
from sparkcast.api.timers import TimeDomain
from sparkcast.core import codec
from sparkcast.core.converters import stored_converter
from sparkcast.core.scope import NO_KEY
from sparkcast.errors import PipelineError


@dataclass
class Seed:
    """State of one subtask in stored form (see the module docstring)."""

    broadcast: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    keyed: dict[str, list[tuple[Any, Any]]] = field(default_factory=dict)
    timers: dict[str, list[list[Any]]] = field(default_factory=dict)
    held: list[list[Any]] = field(default_factory=list)
    broadcast_version: str = ""

    def is_empty(self) -> bool:
        return not (self.broadcast or self.keyed or any(self.timers.values()) or self.held)

    def to_bytes(self) -> bytes:
        return codec.encode([self.broadcast, self.keyed, self.timers, self.held,
                             self.broadcast_version])

    @classmethod
    def from_bytes(cls, data: bytes, types: codec.Resolver | None = None) -> Seed:
        """A seed written by ``to_bytes``; stored objects as the classes ``types`` resolves
        them to (``codec.KEEP_NAMES`` to pass them on unchanged)."""
        broadcast, keyed, timers, held, version = codec.decode(data, types)
        return cls({n: [(codec.hashable(k), v) for k, v in e] for n, e in broadcast.items()},
                   {n: [(codec.hashable(k), v) for k, v in e] for n, e in keyed.items()},
                   {d: [list(t) for t in e] for d, e in timers.items()},
                   [list(h) for h in held], version)


def apply_seed(engine: Any, seed: Seed) -> None:
    """Write ``seed`` into a ``SubtaskEngine``'s state (its backend is bound), then let held
    elements see the new broadcast state. The broadcast entries go in as if they were the first
    broadcast elements; the version chain moves on by their content, equally on every subtask."""
    for name, entries in seed.broadcast.items():
        view = engine.read_write_view(_broadcast_descriptor(engine, name))
        for key, value in entries:
            view.put(key, value)
    if seed.broadcast_version:
        engine.broadcast_version = seed.broadcast_version
    elif seed.broadcast:
        chain = f"{engine.broadcast_version}|seed|{codec.fingerprint(seed.broadcast)}"
        engine.broadcast_version = hashlib.blake2b(chain.encode(), digest_size=12).hexdigest()
    known = {d.name: d for d in engine.keyed_descriptors()}
    for name, records in seed.keyed.items():
        descriptor = known.get(name)
        decode = None if descriptor is None else stored_converter(descriptor)
        table = engine.backend.keyed_table(name, decode)
        for key, record in records:
            table[key] = record if decode is None else decode(record)
    for domain, timers in seed.timers.items():
        queue = engine.timers[TimeDomain[domain]]
        for timestamp, key in timers:
            queue.register(timestamp, codec.hashable(key))
    for value, timestamp, *key in seed.held:
        engine.hold.items.append((value, timestamp, codec.hashable(key[0]) if key else NO_KEY))
        engine.hold.changed = True
    engine.hold.refresh(engine.broadcast.tables)


def _broadcast_descriptor(engine: Any, name: str) -> Any:
    known = engine.broadcast.descriptors
    descriptor = known.get(name)
    if descriptor is None:
        raise PipelineError(f"initial state for broadcast state {name!r}, which this function "
                            f"does not have; broadcast states: {sorted(known)}")
    return descriptor


def split_by_key(seed: Seed, subtask_of: Callable[[Any], int], parallelism: int,
                 broadcast_to_all: bool = True) -> dict[int, Seed]:
    """One seed per subtask: keyed records, timers and held elements to the subtask of their key
    (``subtask_of``), broadcast state and version to every subtask."""
    seeds = {i: Seed(broadcast=dict(seed.broadcast) if broadcast_to_all else {},
                     broadcast_version=seed.broadcast_version) for i in range(parallelism)}
    for name, records in seed.keyed.items():
        for key, record in records:
            seeds[subtask_of(key)].keyed.setdefault(name, []).append((key, record))
    for domain, entries in seed.timers.items():
        for timestamp, key in entries:
            seeds[subtask_of(codec.hashable(key))].timers.setdefault(domain, []).append(
                [timestamp, key])
    for held in seed.held:
        target = subtask_of(codec.hashable(held[2])) if len(held) > 2 else 0
        seeds[target].held.append(held)
    return seeds


def merged(seeds: Iterable[Seed]) -> Seed:
    """The state of several subtasks as one (keyed state, timers and held elements of all; the
    broadcast state of the first, since every subtask holds the same)."""
    result = Seed()
    for seed in seeds:
        if not result.broadcast and seed.broadcast:
            result.broadcast, result.broadcast_version = seed.broadcast, seed.broadcast_version
        for name, records in seed.keyed.items():
            result.keyed.setdefault(name, []).extend(records)
        for domain, entries in seed.timers.items():
            result.timers.setdefault(domain, []).extend(entries)
        result.held.extend(seed.held)
    for entries in result.timers.values():
        entries.sort(key=lambda t: (t[0], codec.canonical(t[1])))
    return result


def checked_record(descriptor: StateDescriptor, key: Any, value: Any) -> Any:
    """A user-given initial value as the stored record of ``descriptor`` (a value; a list for
    list state; a dict for map state), checked against the declared types."""
    if descriptor.ttl_config is not None:
        raise PipelineError(f"initial state for {descriptor.name!r}, which has a TTL: not "
                            "supported (the expiry would start at an arbitrary time); drop the "
                            "TTL or fill that state from the stream")
    kind = descriptor.kind
    if kind == "list":
        if not isinstance(value, (list, tuple)):
            raise PipelineError(f"initial list state {descriptor.name!r} of key {key!r}: give "
                                f"a list, not {type(value).__name__}")
        items = list(value)
    elif kind == "map":
        if not isinstance(value, dict):
            raise PipelineError(f"initial map state {descriptor.name!r} of key {key!r}: give a "
                                f"dict, not {type(value).__name__}")
        items = list(value.values())
    else:
        items = [value]
    declared = getattr(descriptor, "value_type_info", None) if kind == "map" else getattr(
        descriptor, "type_info", None)
    for item in items:
        if not accepts(declared, item):
            raise PipelineError(f"initial state {descriptor.name!r} of key {key!r}: "
                                f"{type(item).__name__} is not a {type_label(declared)}")
    codec.check_storable(value, f"initial state {descriptor.name!r}")
    return items if kind == "list" else value


def initial_seed(broadcast: Iterable[StateDescriptor], keyed: Iterable[StateDescriptor],
                 initial_state: Mapping[Any, Iterable[tuple[Any, Any]]]) -> Seed:
    """``initial_state`` ({descriptor or name: [(key, value), ...]}) as one checked ``Seed``: a
    broadcast descriptor's pairs are its entries, a keyed descriptor's are (user key, value)."""
    by_name = {d.name: ("broadcast", d) for d in broadcast}
    by_name.update({d.name: ("keyed", d) for d in keyed})
    seed = Seed()
    for target, pairs in initial_state.items():
        name = target if isinstance(target, str) else getattr(target, "name", None)
        if name not in by_name:
            raise PipelineError(f"initial_state names {name!r}, which is neither a broadcast "
                                f"state nor a keyed state that open() creates; known: "
                                f"{sorted(by_name)}")
        side, descriptor = by_name[name]
        if side == "broadcast":
            seed.broadcast[name] = [(codec.hashable(k), v) for k, v in pairs]
        else:
            seed.keyed[name] = [(codec.hashable(k), checked_record(descriptor, k, v))
                                for k, v in pairs]
    return seed
