"""The engine a plan runs on: one pure function of the plan's facts, the engine asked for, the
checkpoint's record and how the result is consumed, called before any query starts.

The micro-batch engine (broadcast applied once per micro-batch on the driver, main rows through
Python once) is taken wherever its results equal the operator's; the differential tests run
the same programs through both. The plan's facts shape its query (``RuntimePlan``): a static
broadcast side and no state (and applying the static rows emitted nothing: those outputs would
repeat in every task) is one ``mapInArrow`` where the rows lie, also a plain streaming
DataFrame; a streamed broadcast side is one ``foreachBatch`` whose driver applies each
micro-batch's elements; state per subtask repartitions the main rows by subtask.

State per subtask may come with a streamed broadcast side, a static one (its rows applied once
on the driver when the plan is built, their state written as snapshot -1 when a query starts on
a new checkpoint) or none (``KeyedProcessFunction``, ``KeyedCoProcessFunction``);
timers fire without more input through the query's clock (``tagging.clock``).

The operator engine takes the rest (batch inputs with state, Spark Connect, ``initial_state``
with a static side), and ``result.main`` (a streaming DataFrame) of a plan whose driver works
per micro-batch: nothing runs on the driver between a micro-batch's two sides there, and keyed
state needs Spark's state store.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sparkcast.errors import PipelineError
from sparkcast.spark.plan import AUTO, BroadcastSide, Engine, PlanFacts


class Consumer(StrEnum):
    """How a plan's outputs are consumed."""

    QUERY = "query"  # write_stream, write_stream(sinks=...), foreach_batch: one query of ours
    DATAFRAME = "dataframe"  # result.main, side_output, dead_letters: DataFrames for any query


@dataclass(frozen=True)
class Choice:
    """An engine and why it was taken."""

    engine: Engine
    reason: str


RECORDED_OPERATOR = ("the checkpoint was written by the operator engine (sparkcast 0.3 ran "
                     "every keyed function there): it restarts as it was written, since the "
                     "micro-batch engine cannot read Spark's state store")
DATAFRAME_REASON = ("result.main and the side-output DataFrames are streaming DataFrames, in "
                    "which nothing runs on the driver between a micro-batch's broadcast and "
                    "main sides; write_stream, sinks= or foreach_batch run on the micro-batch "
                    "engine")


def choose(facts: PlanFacts, requested: str = AUTO, recorded: Engine | None = None,
           consumer: Consumer = Consumer.QUERY) -> Choice:
    """The engine of a plan with ``facts``; ``recorded`` is the engine the checkpoint's layout
    record names (None for a new checkpoint). Raises ``PipelineError`` where ``requested``
    cannot serve."""
    asked = engine_named(requested)
    fresh = _fresh(facts, consumer)
    if recorded is not None and asked is not None and recorded is not asked:
        raise PipelineError(f"engine={asked.value!r}: the checkpoint was written by the "
                            f"{recorded.value} engine, whose state the other cannot read; start "
                            "a new checkpoint, or leave engine='auto'")
    if asked is Engine.OPERATOR:
        return Choice(Engine.OPERATOR, "engine='operator' was asked for")
    if isinstance(fresh, str):
        if asked is Engine.MICRO_BATCH:
            raise PipelineError(f"engine='micro_batch' cannot run this plan: {fresh}; leave "
                                "engine='auto' (or 'operator')")
        return Choice(Engine.OPERATOR, fresh)
    if recorded is Engine.OPERATOR and facts.driver_per_batch:
        return Choice(Engine.OPERATOR, RECORDED_OPERATOR)
    return fresh


def engine_named(name: str) -> Engine | None:
    """The engine ``process(..., engine=name)`` asks for; None for ``"auto"``."""
    if name == AUTO:
        return None
    try:
        return Engine(name)
    except ValueError:
        raise PipelineError(f"engine must be one of {[AUTO, *(e.value for e in Engine)]}, "
                            f"not {name!r}") from None


def _fresh(facts: PlanFacts, consumer: Consumer) -> Choice | str:
    """The micro-batch engine's choice for a new checkpoint, or why it cannot serve."""
    if facts.broadcast is BroadcastSide.STATIC and not facts.per_subtask_state:
        return _in_place(facts)
    why_not = _why_not_micro_batch(facts)
    if why_not:
        return why_not
    if consumer is Consumer.DATAFRAME:
        return DATAFRAME_REASON if facts.broadcast is BroadcastSide.STREAMED else STATE_REASON
    side = _side_of(facts)
    if facts.timers and facts.event_time:
        return Choice(Engine.MICRO_BATCH, f"{side} and event-time timers: {_work(facts)}, "
                      "main rows repartitioned by subtask; a no-op aggregate in the query "
                      "makes Spark run a micro-batch when the watermark moves, so due timers "
                      "fire without more input")
    if facts.timers:
        return Choice(Engine.MICRO_BATCH, f"{side} and processing-time timers: "
                      f"{_work(facts)}, main rows repartitioned by subtask; a no-op "
                      "transformWithState in ProcessingTime mode in the query makes Spark run "
                      "a micro-batch at every trigger, as the operator's does, so due timers "
                      "fire without more input (and an availableNow query never ends)")
    if not facts.per_subtask_state:
        return Choice(Engine.MICRO_BATCH, f"{side} and no state per subtask: "
                      f"{_work(facts)}, main rows read where they lie")
    return Choice(Engine.MICRO_BATCH, f"{side} and state per subtask "
                  f"({_state_of(facts)}): {_work(facts)}, main rows repartitioned by subtask")


STATE_REASON = ("result.main and the side-output DataFrames are streaming DataFrames, whose "
                "keyed state only Spark's state store (the operator's) can keep; write_stream, "
                "sinks= or foreach_batch run on the micro-batch engine")


def _side_of(facts: PlanFacts) -> str:
    """The plan's broadcast side in words."""
    if facts.broadcast is BroadcastSide.NONE:
        kind = "KeyedCoProcessFunction" if facts.second_input else "KeyedProcessFunction"
        return f"a {kind} (no broadcast side)"
    return f"a {facts.broadcast.value} broadcast side"


def _work(facts: PlanFacts) -> str:
    """What the driver does per micro-batch."""
    if facts.broadcast is BroadcastSide.NONE:
        return "no broadcast work on the driver"
    if facts.broadcast is BroadcastSide.STATIC:
        return ("the static rows applied once on the driver when the plan is built, their "
                "state written as broadcast snapshot -1 when a query starts on a new "
                "checkpoint, which every subtask reads; nothing per micro-batch")
    return "broadcast applied once per micro-batch on the driver"


def _in_place(facts: PlanFacts) -> Choice | str:
    """A static broadcast side and no state per subtask."""
    if facts.static_emits:
        return ("process_broadcast_element emits outputs for the static rows, which every "
                "task of the micro-batch engine would emit again")
    return Choice(Engine.MICRO_BATCH, "a static broadcast side and no state: one "
                  "mapInArrow where the main rows lie, no shuffle")


def _why_not_micro_batch(facts: PlanFacts) -> str:
    """Why a plan with a streamed broadcast side, none, or a static one and state per subtask
    cannot take the micro-batch engine."""
    if facts.broadcast is BroadcastSide.BATCH or not facts.main_streaming:
        return ("batch inputs with state per subtask or event-time alignment run once through "
                "the operator")
    if facts.connect:
        return "Spark Connect runs foreachBatch on the server, where the driver's work cannot"
    if facts.seeded and not facts.per_subtask_state:
        return "initial_state for a function without state per subtask has nothing to seed"
    if facts.seeded and facts.broadcast is BroadcastSide.STATIC:
        return ("initial_state with a static broadcast side: the operator applies the static "
                "rows to each subtask's seeded state; the micro-batch engine would apply them "
                "on the driver, before any keyed state")
    return ""


def _state_of(facts: PlanFacts) -> str:
    kinds = [name for name, has in (("keyed", facts.keyed or facts.keyed_state),
                                    ("timers", facts.timers),
                                    ("hold_until_ready", facts.hold_until_ready),
                                    ("event-time alignment", facts.event_aligned)) if has]
    return ", ".join(kinds)
