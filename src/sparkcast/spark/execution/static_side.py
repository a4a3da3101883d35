"""A static broadcast side, applied once on the driver into the state every engine binds.

A static DataFrame on the broadcast side is broadcast state fixed for the life of the query.
The operator engine's subtasks once applied its rows at their first call, and the micro-batch
engine's in-place tasks in every worker, each subtask opening the function and applying up to
a million rows. Here the planner applies them once, in the deterministic broadcast order, and
ships the resulting state (codec bytes, values inline) with the plan (``plan.StaticSide``): the
in-place runner binds it (decoded once per worker, shared by its subtasks), the operator's
subtasks seed their state with it, and the by-subtask shape's driver writes it as snapshot
``SEED``, which its workers read (they are shipped no static side, ``RuntimePlan.for_workers``).
What applying the rows emitted goes out once, as each subtask of the operator engine would
emit it. Rows whose application reached keyed state (``apply_to_keyed_state``) stay with the
side, for each of the operator's subtasks to apply to its own keys (by subtask, a new
checkpoint has no keys yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkcast.core import codec
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.frozen import freeze
from sparkcast.core.seed import Seed
from sparkcast.spark.execution.engines import (
    CachedEngine,
    apply_elements,
    bind_snapshot,
    in_memory,
    plan_engine,
)
from sparkcast.spark.plan import RuntimePlan, StaticSide
from sparkcast.spark.state.worker_cache import WORKER

# (digest, the resolver its objects were decoded with) -> (version, tables): a worker decodes a
# static side once and its subtasks share the frozen tables (a main side only reads them)
_DECODED = WORKER.section(
    "static sides", "taken while its key (digest of the state, classes) matches",
    lambda found: sum(len(table) for table in found[1].values()))


def static_side(plan: RuntimePlan) -> StaticSide:
    """``plan.static_broadcast`` applied once, to empty state, by subtask 0's engine (and by
    every subtask's where the function asks which subtask it is: their outputs may differ)."""
    first = _applied(plan, 0)
    outputs = [tuple(first.take_outputs())]
    if first.reads_subtask:
        for subtask in range(1, plan.parallelism):
            other = _applied(plan, subtask)
            outputs.append(tuple(other.take_outputs()))
            other.close()
    state = codec.encode([first.broadcast_version, {
        name: [[key, value] for key, value in table.items()]
        for name, table in first.broadcast.tables.items()}])
    keyed = first.keyed_states.applied
    first.close()
    return StaticSide(state, tuple(outputs), tuple(plan.static_broadcast) if keyed else ())


def _applied(plan: RuntimePlan, subtask: int) -> SubtaskEngine:
    engine = plan_engine(plan, subtask)
    engine.take_outputs()
    engine.keyed_states.applied = False
    apply_elements(engine, plan.static_broadcast)
    engine.meter.take_pending()  # an update's latency is the streamed sides' to measure
    return engine


def static_tables(static: StaticSide, types: codec.Resolver | None
                  ) -> tuple[str, dict[str, dict[Any, Any]]]:
    """The side's broadcast version and tables, decoded once per worker (``types``: the job's
    classes, as the engine resolves them)."""
    key = (static.digest, types)
    found = _DECODED.get(key)
    if found is None:
        version, tables = codec.decode(static.state, types)
        found = _DECODED.put(key, (version, {
            name: {codec.hashable(k): freeze(v) for k, v in entries}
            for name, entries in tables.items()}))
    return found


def static_seed(static: StaticSide, types: codec.Resolver | None) -> Seed:
    """The side as a seed of a subtask's own state (the operator engine's)."""
    version, tables = static_tables(static, types)
    return Seed({name: list(table.items()) for name, table in tables.items()},
                broadcast_version=version)


@dataclass(frozen=True)
class _State:
    version: str
    tables: dict[str, dict[Any, Any]]


class StaticBinder:
    """The in-place runner's binder: a worker's cached engine bound to the plan's static side
    (empty state without one) unless its cache entry says it is bound to it already, as
    ``streamed.SnapshotBinder`` binds a micro-batch's snapshot."""

    def __init__(self, static: StaticSide | None) -> None:
        self.static = static

    def __call__(self, cached: CachedEngine) -> None:
        wanted = "" if self.static is None else self.static.digest
        if cached.bound == wanted:
            return
        engine = cached.engine
        version, tables = (("", {}) if self.static is None
                           else static_tables(self.static, engine.types))
        bind_snapshot(engine, _State(version, tables), in_memory)
        cached.bound = wanted
