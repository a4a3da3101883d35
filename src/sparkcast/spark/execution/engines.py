"""The one place an engine is made, and the one cache of engines in a Python worker.

Both engines run the engine core (``core/engine.py``) over one subtask: the operator engine's
processor over Spark's state store; the micro-batch engine's runners in the tasks (over the
plan's static side or a micro-batch's broadcast snapshot, and by subtask over the subtask's
keyed store) and its driver once per micro-batch; and the planner once to find the function's
keyed state and once to apply a static side (``static_side.py``). Each gets its engine from
:func:`new_engine`, opened (so ``open`` runs, and a broken ``open`` fails there).

Workers keep their engines (``open`` once per subtask, not once per micro-batch) in the
``engines`` section of the worker's one cache (``state/worker_cache.py``, least recently used
first out under its one bound; :class:`EngineCache`), keyed by pipeline, engine and subtask: a
plan's operator (``result.main``) and its ``write_stream`` runner may share a worker, and bind
their engines to different state. Each entry carries what its engine was last bound to (the
per-batch driver's snapshot, ``streamed.SnapshotBinder``; the static side,
``static_side.StaticBinder``), so an engine and what it reads are evicted together: an
engine made again after an eviction is bound again, never taken for one that holds the state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction
from sparkcast.api.options import ProcessOptions
from sparkcast.core.backend import DictBackend, StateBackend
from sparkcast.core.engine import SubtaskEngine, fresh_function, order_broadcast
from sparkcast.core.records import BroadcastElement
from sparkcast.spark.plan import RuntimePlan, WorkerPlan
from sparkcast.spark.state.worker_cache import ENGINE_WEIGHT, WORKER, WorkerCache

Backend = TypeVar("Backend", bound=StateBackend)


def new_engine(function: BaseBroadcastProcessFunction,
               broadcast_descriptors: Iterable[MapStateDescriptor], options: ProcessOptions,
               parallelism: int, *, subtask: int = 0, backend: StateBackend | None = None
               ) -> SubtaskEngine:
    """An opened engine over a fresh copy of ``function`` (in-memory state by default)."""
    engine = SubtaskEngine(fresh_function(function), tuple(broadcast_descriptors),
                           DictBackend() if backend is None else backend, options=options,
                           subtask_index=subtask, parallelism=parallelism)
    engine.open()
    return engine


def plan_engine(plan: RuntimePlan | WorkerPlan, subtask: int = 0,
                backend: StateBackend | None = None) -> SubtaskEngine:
    """:func:`new_engine` for one subtask of ``plan``."""
    return new_engine(plan.function, plan.broadcast_descriptors, plan.options, plan.parallelism,
                      subtask=subtask, backend=backend)


def apply_elements(engine: SubtaskEngine, elements: Iterable[BroadcastElement]) -> None:
    """Broadcast ``elements`` (a static side's rows), in the deterministic broadcast order."""
    for element in order_broadcast(list(elements)):
        engine.process_broadcast_element(element.value, element.timestamp)


class BroadcastState(Protocol):
    """Broadcast state to bind: a snapshot (``state/snapshots.py``) or a static side's."""

    @property
    def version(self) -> str: ...

    @property
    def tables(self) -> dict[str, dict[Any, Any]]: ...


def bind_snapshot(engine: SubtaskEngine, state: BroadcastState,
                  backend_of: Callable[[dict[str, dict[Any, Any]]], Backend]) -> Backend:
    """Bind ``engine`` to broadcast ``state``: its tables and version over the backend
    ``backend_of`` makes from the tables (``in_memory`` shares them: a main side only reads
    them); the one way every engine of the micro-batch engine gets its broadcast state."""
    backend = backend_of(dict(state.tables))
    backend.store("broadcast_version", state.version)
    engine.bind(backend)
    return backend


def in_memory(tables: dict[str, dict[Any, Any]]) -> DictBackend:
    """An in-memory backend over ``tables`` as they are (shared, not copied)."""
    backend = DictBackend()
    backend.broadcast.update(tables)
    return backend


def writable_in_memory(tables: dict[str, dict[Any, Any]]) -> DictBackend:
    """An in-memory backend over copies of ``tables``, for an engine that applies elements."""
    backend = DictBackend()
    for name, table in tables.items():
        backend.broadcast_table(name).update(table)
    return backend


@dataclass
class CachedEngine:
    """A worker's engine for one subtask and the broadcast state it was last bound to (a
    snapshot file, ``""`` for none; None: not bound since it was made)."""

    engine: SubtaskEngine
    bound: str | None = None


ENGINES_RULE = ("taken while its key (pipeline, engine, subtask) matches; it carries what its "
                "engine is bound to, and the binder binds again when that differs")


class EngineCache:
    """The engines of a Python worker, in the worker's cache (least recently used first out
    under its bound; ``capacity``: a cache of this many engines alone, for a test); an engine
    leaves with what it is bound to (:class:`CachedEngine`)."""

    def __init__(self, capacity: int | None = None) -> None:
        cache = WORKER if capacity is None else WorkerCache(capacity * ENGINE_WEIGHT)
        self._entries = cache.section("engines", ENGINES_RULE, lambda _: ENGINE_WEIGHT)

    def entry(self, plan: WorkerPlan, subtask: int, make: Callable[[], SubtaskEngine]
              ) -> CachedEngine:
        """The entry of ``plan``'s subtask on its engine, its engine made by ``make`` the first
        time (or again after an eviction); the engine's pending outputs are dropped (a failed
        task's, which Spark retries)."""
        key = (plan.pipeline_id, plan.engine, subtask)
        cached = self._entries.get(key)
        if cached is None:
            cached = self._entries.put(key, CachedEngine(make()))
        cached.engine.take_outputs()
        return cached

    def __len__(self) -> int:
        return len(self._entries)


#: this worker's engines
ENGINES = EngineCache()


def cached_engine(plan: WorkerPlan, subtask: int, make: Callable[[], SubtaskEngine]
                  ) -> SubtaskEngine:
    """This worker's engine for ``plan``'s subtask (``ENGINES.entry``), for a caller that binds
    it to its state on every call."""
    return ENGINES.entry(plan, subtask, make).engine
