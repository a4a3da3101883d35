"""The one place an engine is made, and the one cache of engines in a Python worker.

Both engines run the engine core (``core/engine.py``) over one subtask: the operator engine's
processor over Spark's state store; the micro-batch engine's runners in the tasks (over the
static rows or a micro-batch's broadcast snapshot, and by subtask over the subtask's keyed
store) and its driver once per micro-batch; and the planner once to find the function's keyed
state. Each gets its engine from :func:`new_engine`, opened (so ``open`` runs,
and a broken ``open`` fails there).

Workers keep their engines (``open`` once per subtask, not once per micro-batch) in one LRU
cache keyed by pipeline, engine and subtask: a plan's operator (``result.main``) and its
``write_stream`` runner may share a worker, and bind their engines to different state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cachetools import LRUCache

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction
from sparkcast.api.options import ProcessOptions
from sparkcast.core.backend import DictBackend, StateBackend
from sparkcast.core.engine import SubtaskEngine, fresh_function, order_broadcast
from sparkcast.spark.plan import Engine, RuntimePlan

_ENGINES: LRUCache[tuple[str, Engine, int], SubtaskEngine] = LRUCache(maxsize=256)


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


def plan_engine(plan: RuntimePlan, subtask: int = 0, backend: StateBackend | None = None
                ) -> SubtaskEngine:
    """:func:`new_engine` for one subtask of ``plan``."""
    return new_engine(plan.function, plan.broadcast_descriptors, plan.options, plan.parallelism,
                      subtask=subtask, backend=backend)


def static_engine(plan: RuntimePlan, subtask: int) -> SubtaskEngine:
    """An engine holding the static broadcast state (what the operator engine's subtasks hold
    after their first batch), on an in-memory backend."""
    engine = plan_engine(plan, subtask)
    apply_static_broadcast(engine, plan)
    return engine


def apply_static_broadcast(engine: SubtaskEngine, plan: RuntimePlan) -> None:
    """The static broadcast rows, in the deterministic broadcast order (on either engine)."""
    for element in order_broadcast(plan.static_broadcast):
        engine.process_broadcast_element(element.value, element.timestamp)


def cached_engine(plan: RuntimePlan, subtask: int, make: Callable[[], SubtaskEngine]
                  ) -> SubtaskEngine:
    """This worker's engine for ``plan``'s subtask on its engine, made by ``make`` the first time;
    its pending outputs are dropped (a failed task's, which Spark retries)."""
    key = (plan.pipeline_id, plan.engine, subtask)
    engine = _ENGINES.get(key)
    if engine is None:
        engine = _ENGINES[key] = make()
    engine.take_outputs()
    return engine
