"""The tagged output frame (``layout.py``) of a plan as one streaming (or batch) DataFrame.

The operator engine groups the tagged input by subtask into one ``transformWithStateInPandas``
operator (``execution/processor.py``), seeded with prepared state when the plan has some; the
micro-batch engine in place maps it with one ``mapInArrow`` (``execution/stateless.py``). A
plan whose micro-batch driver works per micro-batch gets the operator's frame here, where
``dataframe_choice`` allows it: its queries of ours run through the ``foreachBatch`` driver
(``outputs/batch_driver.py``, with ``shapes.batch_outputs``), but ``result.main`` and the side
outputs are DataFrames any query may consume. Malformed input lines join as dead letters.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from sparkcast.spark.execution.dead_letters import corrupt_letters
from sparkcast.spark.execution.encoding import tagged_schema
from sparkcast.spark.execution.processor import BroadcastProcessor
from sparkcast.spark.execution.stateless import StatelessRunner
from sparkcast.spark.layout import SUBTASK, TS, broadcast_column
from sparkcast.spark.plan import Engine, RuntimePlan
from sparkcast.spark.planning.bootstrap import initial_state_frame
from sparkcast.spark.planning.paths import dataframe_choice
from sparkcast.spark.state.compatibility import layout_json


def tagged_output(plan: RuntimePlan) -> DataFrame:
    """The tagged output frame of ``plan`` (streaming when its inputs are); where the plan's
    driver works per micro-batch, the operator's, or the reason ``engine="micro_batch"`` cannot
    serve a DataFrame."""
    assert plan.tagged_input is not None
    if plan.per_batch_driver:
        dataframe_choice(plan)
    schema = plan.tagged_input.schema
    output = tagged_schema(plan.output_schema, schema[TS].dataType)
    if plan.in_place:
        tagged = plan.tagged_input.mapInArrow(stateless_runner(plan), output)
    else:
        tagged = _stateful(plan, output)
    if plan.corrupt_input is not None:
        tagged = tagged.unionByName(corrupt_letters(plan.corrupt_input, plan.output_schema,
                                                    schema[TS].dataType))
    return tagged


def stateless_runner(plan: RuntimePlan) -> StatelessRunner:
    """What the micro-batch engine in place ships to the workers: the ``mapInArrow`` body."""
    return StatelessRunner(plan.for_workers())


def operator_processor(plan: RuntimePlan) -> BroadcastProcessor:
    """What the operator engine ships to the workers: the stateful processor."""
    assert plan.tagged_input is not None
    schema = plan.tagged_input.schema
    names = schema.fieldNames()
    broadcast_types = [schema[broadcast_column(i)].dataType
                       for i in range(len(plan.broadcast_fields))
                       if broadcast_column(i) in names]
    return BroadcastProcessor(plan.for_workers(Engine.OPERATOR),
                              layout_json(replace(plan, engine=Engine.OPERATOR)),
                              broadcast_types)


def _stateful(plan: RuntimePlan, output: StructType) -> DataFrame:
    assert plan.tagged_input is not None
    # the streams manager registers Spark's state store coordinator, which RocksDB state reports
    # to: the operator over a batch frame, in a session (any, the user's own too) that started
    # no stream yet, fails without it ("Cannot find endpoint: StateStoreCoordinator"); a call,
    # not an attribute, so that it reaches the server's session on Spark Connect
    _ = plan.tagged_input.sparkSession.streams.active
    return plan.tagged_input.groupBy(SUBTASK).transformWithStateInPandas(
        statefulProcessor=operator_processor(plan), outputStructType=output, outputMode="Append",
        timeMode=plan.time_mode,
        initialState=initial_state_frame(plan) if plan.initial_seeds else None)
