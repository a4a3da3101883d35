"""The query around the runner, by the plan's shape: the one place after the planner that asks
for it.

The engines share one subtask runner (``execution/subtask.py``); what differs between shapes
is the query around it (``RuntimePlan.in_place``, ``per_batch_driver``, ``by_subtask``,
``clocked``; the table in docs/architecture.md). The tagged frame Spark computes for the
operator and the micro-batch engine in place is built in ``frames.py``; here are the rest:
which of two ways a query of ours runs, the driver's per-batch work of a ``foreachBatch``
query, whether the pattern's tasks can write its sinks, the writer of its input, whether
computing the frame commits state, and the state its checkpoint may hold.
"""

from __future__ import annotations

from typing import TypeVar

from pyspark.sql.streaming import DataStreamWriter

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.execution.partitioned import PartitionedOutputs
from sparkcast.spark.execution.streamed import MicroBatchOutputs
from sparkcast.spark.plan import Engine, RuntimePlan
from sparkcast.spark.state import checkpoint_files, keyed_store, storage

T = TypeVar("T")


def by_shape(plan: RuntimePlan, *, tagged: T, per_batch: T) -> T:
    """Of the two ways a query of ours runs, the plan's: ``tagged`` where Spark computes the
    tagged frame (the operator engine, the micro-batch engine in place), ``per_batch`` where
    the driver builds each micro-batch's (``batch_outputs``)."""
    return per_batch if plan.per_batch_driver else tagged


def state_in_frame(plan: RuntimePlan) -> bool:
    """Whether computing the tagged frame commits the batch's state (the operator engine): a
    ``foreachBatch`` query then persists each batch's frame and runs it once, whatever its
    consumer reads."""
    return plan.engine is Engine.OPERATOR


def batch_outputs(plan: RuntimePlan, checkpoint_location: str) -> MicroBatchOutputs | None:
    """The per-micro-batch work of the plan's ``foreachBatch`` query: broadcast elements
    applied once on the driver, main rows where they lie (per-batch driver) or by subtask
    into each subtask's keyed store; None where the query consumes the tagged frame Spark
    computes (the operator engine, the micro-batch engine in place)."""
    if not plan.per_batch_driver:
        return None
    if plan.by_subtask:
        return PartitionedOutputs(plan, checkpoint_location)
    return MicroBatchOutputs(plan, checkpoint_location)


def outputs_in_tasks(plan: RuntimePlan) -> bool:
    """Whether the pattern's tasks can write the sinks' outputs themselves
    (``outputs/sinks_in_tasks.py``): each task runs whole subtasks, so a part of an output is a
    subtask's rows, the same in a replay (the micro-batch engine by subtask)."""
    return plan.per_batch_driver and plan.by_subtask


def input_writer(plan: RuntimePlan) -> DataStreamWriter:
    """The writer of the one query over the plan's input: in ``update`` mode when the input
    holds the clock of timers (``tagging.clock``: an aggregation or a transformWithState)."""
    assert plan.streamed_input is not None
    writer = plan.streamed_input.writeStream
    return writer.outputMode("update") if plan.clocked else writer


def refuse_other_state(plan: RuntimePlan, checkpoint_location: str) -> None:
    """A checkpoint with Spark operator state was written by the operator engine (perhaps by a
    query the user started on ``result.main``, which records no layout file; a clocked plan's
    own clock keeps state there too, and its layout record tells the engines apart). One with
    keyed stores kept state per subtask, which a plan without such state would drop (a plan
    that gains it starts from empty stores, as the operator starts from empty state)."""
    held = None
    if not plan.clocked and checkpoint_files.holds_operator_state(checkpoint_location):
        held = ("the checkpoint holds the stateful operator's state, this pipeline runs on "
                "the micro-batch engine")
    elif not plan.by_subtask and storage.is_dir(keyed_store.folder(checkpoint_location)):
        held = ("the checkpoint keeps state per subtask (keyed state, timers or held "
                "elements), this pipeline has none and would drop it")
    if held:
        raise IncompatibleCheckpointError(
            f"this pipeline cannot restart from checkpoint {checkpoint_location}; nothing was "
            f"run. state: {held}: start a new checkpoint, or keep the function's state. See "
            "docs/operations.md, 'What may change between restarts'.")
