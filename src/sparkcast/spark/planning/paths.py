"""The facts of a plan the engine choice reads (``plan.PlanFacts``), taken off its inputs and
function on the driver, and the checkpoint's record a query's choice reads; the choice itself
is pure (``choice.py``)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from sparkcast.spark.environment import is_connect
from sparkcast.spark.plan import BroadcastSide, PlanFacts, ProcessSpec, RuntimePlan, recorded_engine
from sparkcast.spark.planning.choice import Choice, Consumer, choose
from sparkcast.spark.state.compatibility import read_layout


def broadcast_facts(plan: RuntimePlan, main: DataFrame, broadcast: DataFrame,
                    spec: ProcessSpec, static: bool) -> PlanFacts:
    """The facts of a broadcast plan; ``static``: its broadcast rows were collected and applied
    into ``plan.static`` (whose outputs would repeat in every task of a plan without state)."""
    side = (BroadcastSide.STATIC if static else
            BroadcastSide.STREAMED if broadcast.isStreaming else BroadcastSide.BATCH)
    stateful = plan.keyed or bool(plan.keyed_descriptors) or bool(plan.options.hold_until_ready)
    return PlanFacts(
        function=_kind(plan), main_streaming=main.isStreaming, broadcast=side, keyed=plan.keyed,
        keyed_state=bool(plan.keyed_descriptors),
        hold_until_ready=bool(plan.options.hold_until_ready),
        event_aligned=plan.options.time_alignment != "batch", timers=plan.time_mode != "None",
        event_time=plan.event_time is not None,
        seeded=spec.seeded, connect=is_connect(main.sparkSession),
        static_emits=(static and not stateful and plan.static is not None
                      and plan.static.emits))


def keyed_facts(plan: RuntimePlan, main: DataFrame, spec: ProcessSpec) -> PlanFacts:
    """The facts of a ``KeyedProcessFunction`` or ``KeyedCoProcessFunction`` plan."""
    return PlanFacts(
        function="KeyedCoProcessFunction" if plan.second_fields else "KeyedProcessFunction",
        main_streaming=main.isStreaming,
        broadcast=BroadcastSide.NONE, keyed=True, keyed_state=bool(plan.keyed_descriptors),
        timers=plan.time_mode != "None", event_time=plan.event_time is not None,
        seeded=spec.seeded,
        connect=is_connect(main.sparkSession), second_input=bool(plan.second_fields))


def _kind(plan: RuntimePlan) -> str:
    return "KeyedBroadcastProcessFunction" if plan.keyed else "BroadcastProcessFunction"


def query_choice(plan: RuntimePlan, checkpoint_location: str | None) -> Choice:
    """The engine of a query of ours over ``checkpoint_location`` (None: a new one): the plan's
    facts and requested engine with what the checkpoint's layout record says it was written by."""
    assert plan.facts is not None
    layout = read_layout(checkpoint_location) if checkpoint_location else None
    return choose(plan.facts, plan.requested, recorded_engine((layout or {}).get("path")))


def dataframe_choice(plan: RuntimePlan) -> Choice:
    """The engine of ``result.main`` and the side-output DataFrames."""
    assert plan.facts is not None
    return choose(plan.facts, plan.requested, consumer=Consumer.DATAFRAME)
