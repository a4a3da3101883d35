"""Which execution path a plan takes (``plan.ExecutionPath``), decided once, by the planner.

A path other than the operator's is taken only where its results equal the operator's (the
differential tests run the same programs through each):

* ``STATELESS``: a static broadcast side and nothing that needs state (no keyed state, no
  ``hold_until_ready``, and applying the static rows on the driver emitted nothing, since
  outputs of ``process_broadcast_element`` would otherwise repeat in every task);
* ``STREAMED``: both sides streamed, not keyed (keyed state lives with its key's subtask), no
  ``hold_until_ready`` (held elements are per-subtask state), ``time_alignment="batch"`` (event
  alignment interleaves broadcast and main elements inside a batch), no ``initial_state`` (it
  reaches state through the operator's ``initialState``), and not on Spark Connect (whose
  ``foreachBatch`` runs on the server);
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
    fits = (main.isStreaming and broadcast.isStreaming and not plan.keyed
            and not plan.keyed_descriptors and not plan.options.hold_until_ready
            and plan.options.time_alignment == "batch" and not seeded
            and not is_connect(main.sparkSession))
    return ExecutionPath.STREAMED if fits else ExecutionPath.OPERATOR
