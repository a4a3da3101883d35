"""The kind of run a result takes, as the tests name it: ``"operator"``, or one of the
micro-batch engine's three shapes (``RuntimePlan.in_place``, ``per_batch_driver``,
``by_subtask``): ``"stateless"`` (one mapInArrow where the rows lie), ``"streamed"`` (one
foreachBatch, main rows where they lie) and ``"partitioned"`` (main rows by subtask)."""

from __future__ import annotations

from dataclasses import replace

from sparkcast.spark.datastream import ProcessResult
from sparkcast.spark.plan import Engine


def kind_of(result: ProcessResult, checkpoint: str | None = None) -> str:
    """What ``result.explain(checkpoint)`` says the query runs on, by the tests' names."""
    run = replace(result.plan, engine=result.explain(checkpoint).engine)
    if run.engine is Engine.OPERATOR:
        return "operator"
    if run.by_subtask:
        return "partitioned"
    return "streamed" if run.per_batch_driver else "stateless"
