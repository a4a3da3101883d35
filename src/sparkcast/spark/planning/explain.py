"""``result.explain()``: the engine a plan takes, why, how each side and output is read and
written, and what it costs, in words a user can check against docs/architecture.md."""

from __future__ import annotations

from dataclasses import dataclass

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.plan import BroadcastSide, Engine, ExecutionPath, PlanFacts, RuntimePlan
from sparkcast.spark.planning.choice import Choice

_MAIN = {
    ExecutionPath.OPERATOR: "packed into Arrow blobs by a mapInArrow, shuffled by subtask, run "
                            "by one transformWithStateInPandas operator",
    ExecutionPath.STATELESS: "one mapInArrow where the rows lie, no shuffle",
    ExecutionPath.STREAMED: "one mapInArrow where the rows lie inside the foreachBatch, no "
                            "shuffle",
    ExecutionPath.PARTITIONED: "repartitioned by subtask inside the foreachBatch, then one "
                               "mapInArrow over each subtask's keyed store",
}
_COST = {
    ExecutionPath.OPERATOR: "main rows cross to Python twice (packing, then the operator) and "
                            "are shuffled; the broadcast side is applied by each of the {p} "
                            "subtasks; state in Spark's state store, committed every "
                            "micro-batch",
    ExecutionPath.STATELESS: "main rows cross to Python once, no shuffle, no state; each Python "
                             "worker applies the static rows once",
    ExecutionPath.STREAMED: "main rows cross to Python once, no shuffle; broadcast applied once "
                            "per micro-batch on the driver (a snapshot in the checkpoint when "
                            "it changed); one extra job collects the broadcast rows",
    ExecutionPath.PARTITIONED: "main rows cross to Python once after one shuffle; {driver}; "
                               "keyed state in SQLite per subtask, a delta per micro-batch in "
                               "the checkpoint",
}


@dataclass(frozen=True)
class Explanation:
    """What ``ProcessResult.explain()`` returns; ``str()`` of it is what it prints."""

    engine: Engine
    path: ExecutionPath
    reason: str
    sides: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    cost: str
    dataframes: Choice  # the engine of result.main and the side-output DataFrames

    def __str__(self) -> str:
        lines = [f"engine: {self.engine.value} ({self.path.value})", f"why: {self.reason}"]
        lines += [f"{name}: {how}" for name, how in self.sides]
        lines += [f"output {name}: {how}" for name, how in self.outputs]
        lines.append(f"cost: {self.cost}")
        lines.append(f"result.main and side_output DataFrames: {self.dataframes.engine.value} "
                     f"({self.dataframes.path.value}): {self.dataframes.reason}")
        return "\n".join(lines)


def explanation(plan: RuntimePlan, query: Choice, dataframes: Choice) -> Explanation:
    """The explanation of ``plan`` run by a query of ours as ``query`` chose."""
    assert plan.facts is not None
    return Explanation(
        engine=query.engine, path=query.path, reason=query.reason,
        sides=_sides(plan.facts, query.path), outputs=_outputs(plan, query.path),
        cost=_cost(plan, query.path), dataframes=dataframes)


#: the partitioned path's work on the driver, by broadcast side
_DRIVER = {
    BroadcastSide.NONE: "no broadcast side: the driver's work per micro-batch is only reading "
                        "its clocks",
    BroadcastSide.STATIC: "the static rows applied once on the driver, at the checkpoint's "
                          "first micro-batch, into snapshot -1 that every task reads",
}


def _cost(plan: RuntimePlan, path: ExecutionPath) -> str:
    assert plan.facts is not None
    driver = _DRIVER.get(plan.facts.broadcast,
                         "broadcast applied once per micro-batch on the driver")
    cost = _COST[path].format(p=plan.parallelism, driver=driver)
    if path is ExecutionPath.PARTITIONED and plan.time_mode == "EventTime":
        cost += ("; event-time timers: the clock (a no-op count) scans the main rows a second "
                 "time, and Spark runs a no-data micro-batch when the watermark moves")
    if path is ExecutionPath.PARTITIONED and plan.time_mode == "ProcessingTime":
        cost += ("; processing-time timers: the clock (a no-op transformWithState) scans the "
                 "main rows a second time, and Spark runs a whole micro-batch at every "
                 "trigger, input or not (as on the operator engine)")
    return cost


def _sides(facts: PlanFacts, path: ExecutionPath) -> tuple[tuple[str, str], ...]:
    read = "a stream" if facts.main_streaming else "a batch DataFrame"
    sides = [("main side", f"{read} of {facts.function} input, {_MAIN[path]}")]
    if facts.second_input:
        sides.append(("second keyed side", "packed and shuffled as the main side, to the "
                                           "subtask of its key"))
    if facts.broadcast is not BroadcastSide.NONE:
        sides.append(("broadcast side", _broadcast(facts.broadcast, path)))
    return tuple(sides)


def _broadcast(side: BroadcastSide, path: ExecutionPath) -> str:
    if side is BroadcastSide.STATIC:
        return ("static: its rows are collected once on the driver and "
                + _STATIC_APPLIED.get(path, "travel with the plan; every subtask applies them "
                                            "before its first main element"))
    if path is ExecutionPath.OPERATOR:
        return ("replicated to every subtask by a cross join and applied by each, in the same "
                "deterministic order")
    return ("collected on the driver every micro-batch and applied once there, in the "
            "deterministic broadcast order, into the snapshot every task reads")


_STATIC_APPLIED = {
    ExecutionPath.STATELESS: "travel with the plan; each Python worker applies them once",
    ExecutionPath.PARTITIONED: "applied once there, at the checkpoint's first micro-batch, "
                               "into the snapshot every subtask reads (a restart keeps it)",
}


def _outputs(plan: RuntimePlan, path: ExecutionPath) -> tuple[tuple[str, str], ...]:
    if path in (ExecutionPath.STREAMED, ExecutionPath.PARTITIONED):
        how = ("write_stream: Parquet files written by the tasks, committed by batch id; "
               "sinks=/foreach_batch: each micro-batch's typed frame")
    else:
        how = ("write_stream: Spark's file sink over the tagged frame (its _spark_metadata "
               "log); sinks=/foreach_batch: each micro-batch's typed frame")
    names = ["main", *sorted(plan.side_schemas), DEAD_LETTERS.tag_id]
    if plan.options.hold_until_ready:
        names.insert(-1, HOLD_OVERFLOW.tag_id)
    return tuple((name, how) for name in names)
