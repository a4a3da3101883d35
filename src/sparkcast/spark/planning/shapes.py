"""Which work a micro-batch of a plan's ``foreachBatch`` query runs, by the plan's shape.

The engines share one subtask runner (``execution/subtask.py``); what differs between the
micro-batch engine's shapes is the query around it (``RuntimePlan.in_place``,
``per_batch_driver``, ``by_subtask``; the table in docs/architecture.md), and this is where
the driver's per-batch work is picked for it, so that no room after the planner asks.
"""

from __future__ import annotations

from sparkcast.spark.execution.partitioned import PartitionedOutputs
from sparkcast.spark.execution.streamed import MicroBatchOutputs
from sparkcast.spark.plan import RuntimePlan


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
