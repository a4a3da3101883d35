"""Names for the Spark jobs the driver starts in a micro-batch, so that Spark's UI (and its
status store) shows which phase of the batch each job is: the broadcast rows' read, the
pattern, a sink's write. Spark's own name of such a job says nothing (it is the call site,
the Py4J callback that runs ``foreachBatch``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

#: the local property Spark's UI shows as a job's description (``SparkContext.setJobDescription``)
DESCRIPTION = "spark.job.description"
#: what precedes a phase's name in the description
PREFIX = "sparkcast: "


@contextmanager
def phase(spark: SparkSession | None, name: str) -> Iterator[None]:
    """Jobs started inside carry ``sparkcast: <name>`` in their description, after the
    streaming query's own (``id``, ``runId``, ``batch``); the description is restored after."""
    try:
        context = spark.sparkContext if spark is not None else None
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: jobs stay unnamed
        context = None
    if context is None:
        yield
        return
    before = context.getLocalProperty(DESCRIPTION)
    context.setLocalProperty(DESCRIPTION, f"{before}\n{PREFIX}{name}" if before
                             else f"{PREFIX}{name}")
    try:
        yield
    finally:
        context.setLocalProperty(DESCRIPTION, before)  # type: ignore[arg-type]
