"""``result.explain()``: the engine a plan takes, why, how each side and output is read and
written, and what it costs, in words a user can check against docs/architecture.md."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.plan import BroadcastSide, Engine, RuntimePlan
from sparkcast.spark.planning.choice import Choice
from sparkcast.spark.planning.shapes import outputs_in_tasks

_OPERATOR_MAIN = ("packed into Arrow blobs by a mapInArrow, shuffled by subtask, run by one "
                  "transformWithStateInPandas operator")
_OPERATOR_COST = ("main rows cross to Python twice (packing, then the operator) and are "
                  "shuffled; {broadcast}; state in Spark's state store, committed every "
                  "micro-batch")


@dataclass(frozen=True)
class Explanation:
    """What ``ProcessResult.explain()`` returns; ``str()`` of it is what it prints."""

    engine: Engine
    reason: str
    sides: tuple[tuple[str, str], ...]
    outputs: tuple[tuple[str, str], ...]
    cost: str
    #: the engine of result.main and the side-output DataFrames, or why the engine asked for
    #: cannot give them
    dataframes: Choice | str

    def __str__(self) -> str:
        lines = [f"engine: {self.engine.value}", f"why: {self.reason}"]
        lines += [f"{name}: {how}" for name, how in self.sides]
        lines += [f"output {name}: {how}" for name, how in self.outputs]
        lines.append(f"cost: {self.cost}")
        frames = self.dataframes
        lines.append("result.main and side_output DataFrames: " + (
            frames if isinstance(frames, str) else f"{frames.engine.value}: {frames.reason}"))
        return "\n".join(lines)


def explanation(plan: RuntimePlan, query: Choice, dataframes: Choice | str) -> Explanation:
    """The explanation of ``plan`` run by a query of ours as ``query`` chose."""
    assert plan.facts is not None
    run = replace(plan, engine=query.engine)
    return Explanation(engine=query.engine, reason=query.reason, sides=_sides(run),
                       outputs=_outputs(run), cost=_cost(run), dataframes=dataframes)


def _main(plan: RuntimePlan) -> str:
    if plan.engine is Engine.OPERATOR:
        return _OPERATOR_MAIN
    if plan.by_subtask:
        return ("repartitioned by subtask inside the foreachBatch, then one mapInArrow over "
                "each subtask's keyed store")
    if plan.per_batch_driver:
        return "one mapInArrow where the rows lie inside the foreachBatch, no shuffle"
    return "one mapInArrow where the rows lie, no shuffle"


def _cost(plan: RuntimePlan) -> str:
    if plan.engine is Engine.OPERATOR:
        return _OPERATOR_COST.format(broadcast=_operator_broadcast(plan))
    if not plan.per_batch_driver:
        return ("main rows cross to Python once, no shuffle, no state; the static rows were "
                "applied once on the driver, and each Python worker decodes their state once")
    cost = "main rows cross to Python once"
    assert plan.facts is not None
    if plan.by_subtask:
        cost += (f" after one shuffle; {_DRIVER.get(plan.facts.broadcast, _PER_BATCH)}; "
                 "keyed state in SQLite per subtask, a delta per micro-batch in the checkpoint")
    else:
        cost += (f", no shuffle; {_PER_BATCH} (a snapshot in the checkpoint when it changed); "
                 "one extra job collects the broadcast rows")
    if plan.clocked and plan.time_mode == "EventTime":
        cost += ("; event-time timers: the clock (a no-op count) scans the main rows a second "
                 "time, and Spark runs a no-data micro-batch when the watermark moves")
    elif plan.clocked:
        cost += ("; processing-time timers: the clock (a no-op transformWithState) scans the "
                 "main rows a second time, and Spark runs a whole micro-batch at every "
                 "trigger, input or not (as on the operator engine)")
    return cost


def _operator_broadcast(plan: RuntimePlan) -> str:
    """What the operator's subtasks do with the broadcast side."""
    assert plan.facts is not None
    side, p = plan.facts.broadcast, plan.parallelism
    if side is BroadcastSide.NONE:
        return "no broadcast side"
    if side is BroadcastSide.STATIC:
        return f"each of the {p} subtasks seeds its new state with the static side's"
    return f"the broadcast side is applied by each of the {p} subtasks"


_PER_BATCH = "broadcast applied once per micro-batch on the driver"
#: the driver's work of a plan with state per subtask, by broadcast side (else ``_PER_BATCH``)
_DRIVER = {
    BroadcastSide.NONE: "no broadcast side: the driver's work per micro-batch is only reading "
                        "its clocks",
    BroadcastSide.STATIC: "the static rows applied once on the driver when the plan is built, "
                          "their state written as snapshot -1 when a query starts on a new "
                          "checkpoint, which every task reads; nothing per micro-batch",
}


def _sides(plan: RuntimePlan) -> tuple[tuple[str, str], ...]:
    facts = plan.facts
    assert facts is not None
    read = "a stream" if facts.main_streaming else "a batch DataFrame"
    sides = [("main side", f"{read} of {facts.function} input, {_main(plan)}")]
    if facts.second_input:
        sides.append(("second keyed side", "packed and shuffled as the main side, to the "
                                           "subtask of its key"))
    if facts.broadcast is not BroadcastSide.NONE:
        sides.append(("broadcast side", _broadcast(facts.broadcast, plan)))
    return tuple(sides)


def _broadcast(side: BroadcastSide, plan: RuntimePlan) -> str:
    if side is BroadcastSide.STATIC:
        return "static: its rows are collected once on the driver and " + _static(plan)
    if plan.engine is Engine.OPERATOR:
        return ("replicated to every subtask by a cross join and applied by each, in the same "
                "deterministic order")
    return ("collected on the driver every micro-batch and applied once there, in the "
            "deterministic broadcast order, into the snapshot every task reads")


def _static(plan: RuntimePlan) -> str:
    """Where the state of the static rows goes; each text names what the plan's workers are
    shipped (``RuntimePlan.for_workers``), which a test checks against the plan object."""
    if plan.in_place:
        return ("applied once there when the plan is built; their state travels with the plan "
                "(its static side), decoded once by each Python worker")
    if plan.engine is Engine.OPERATOR:
        return ("applied once there when the plan is built; their state travels with the plan "
                "(its static side) and seeds each subtask's new state (the rows themselves only "
                "where applying them reached keyed state: each subtask applies them to its "
                "keys)")
    return ("applied once there when the plan is built; their state is written as snapshot -1 "
            "when a query starts on a new checkpoint, and every subtask reads that file (the "
            "workers are shipped no static side; a restart keeps the snapshot)")


def _outputs(plan: RuntimePlan) -> tuple[tuple[str, str], ...]:
    if outputs_in_tasks(plan):
        how = ("write_stream: Parquet files written by the tasks, committed by batch id; "
               "sinks=: Kafka and files written by the pattern's tasks where every sink is "
               "one of them, else each micro-batch's typed frame, as foreach_batch")
    elif plan.per_batch_driver:
        how = ("write_stream: Parquet files written by the tasks, committed by batch id; "
               "sinks=/foreach_batch: each micro-batch's typed frame")
    else:
        how = ("write_stream: Spark's file sink over the tagged frame (its _spark_metadata "
               "log); sinks=/foreach_batch: each micro-batch's typed frame")
    names = ["main", *sorted(plan.side_schemas), DEAD_LETTERS.tag_id]
    if plan.options.hold_until_ready:
        names.insert(-1, HOLD_OVERFLOW.tag_id)
    return tuple((name, how) for name in names)
