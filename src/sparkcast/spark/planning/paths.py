"""Which execution path a plan takes (``plan.ExecutionPath``), decided once, by the planner.

A path other than the operator's is taken only where its results equal the operator's (the
differential tests run the same programs through each):

* ``STATELESS``: a static broadcast side and nothing that needs state (no keyed state, no
  ``hold_until_ready``, and applying the static rows on the driver emitted nothing, since
  outputs of ``process_broadcast_element`` would otherwise repeat in every task);
* ``STREAMED``: both sides streamed, not keyed (keyed state lives with its key's subtask), no
  ``hold_until_ready`` (held elements are per-subtask state), ``time_alignment="batch"`` (event
  alignment interleaves broadcast and main elements inside a batch), no ``initial_state`` (it
  has no per-subtask state to seed), and not on Spark Connect (whose
  ``foreachBatch`` runs on the server);
* ``PARTITIONED``: both sides streamed and state per subtask (keyed state,
  ``hold_until_ready``, event-time alignment), not a ``KeyedProcessFunction`` or
  ``KeyedCoProcessFunction`` (no broadcast side), no timers (``on_timer``: Spark fires them in
  the stateful operator's no-data micro-batches, which a ``foreachBatch`` query without one
  never runs, so a timer due at the last watermark would wait for more data), and not on Spark
  Connect; ``initial_state`` is written into its stores before the first batch;
* ``OPERATOR`` otherwise.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from sparkcast.spark.environment import is_connect
from sparkcast.spark.execution.stateless import needs_no_state
from sparkcast.spark.plan import ExecutionPath, RuntimePlan


def static_path(plan: RuntimePlan) -> ExecutionPath:
    """The path of a plan whose broadcast rows are static (``plan.static_broadcast``)."""
    return ExecutionPath.STATELESS if needs_no_state(plan) else ExecutionPath.OPERATOR


def streamed_path(plan: RuntimePlan, main: DataFrame, broadcast: DataFrame, seeded: bool
                  ) -> ExecutionPath:
    """The path of a plan whose broadcast side is a stream (``seeded``: initial state given)."""
    if not main.isStreaming or not broadcast.isStreaming or is_connect(main.sparkSession):
        return ExecutionPath.OPERATOR
    stateful = (plan.keyed or bool(plan.keyed_descriptors) or bool(plan.options.hold_until_ready)
                or plan.options.time_alignment != "batch")
    if not stateful:
        return ExecutionPath.OPERATOR if seeded else ExecutionPath.STREAMED
    if plan.time_mode != "None" or not plan.broadcast_descriptors:
        return ExecutionPath.OPERATOR
    return ExecutionPath.PARTITIONED
