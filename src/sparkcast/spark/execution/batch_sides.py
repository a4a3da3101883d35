"""Which partitions of a ``foreachBatch`` micro-batch come from which side of the union.

``foreachBatch`` hands the micro-batch engine its micro-batch as an opaque ``LogicalRDD``: a filter
on ``_side`` cannot prune the main branch, so collecting the few broadcast rows would scan every
main row (and the sources' scan metrics would count them twice in ``numInputRows``). But each
partition of a union comes from one of its children, in order: the batch's RDD is a
``UnionRDD`` whose parents are the children of the ``Union`` in the query's executed plan, and
each child's projection names its side (``1 AS _side``). Reading both gives the broadcast
partitions, and a job over only those reads only the broadcast rows.

Classic Spark only (the micro-batch engine's ``foreachBatch`` query is), through the JVM objects
PySpark itself uses; when the shapes are not the expected ones the answer is None and the caller
takes the slower safe way.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from sparkcast.spark.layout import CLOCK_SIDE

_SIDE = re.compile(r"\b(\d+) AS _side#")
_AGGREGATE_STATE = "StateStoreSave"


def side_partitions(batch: DataFrame, query: StreamingQuery | None
                    ) -> dict[int, list[int]] | None:
    """``{side: [partition index, ...]}`` of the micro-batch ``batch`` of ``query``, or None."""
    try:
        rdd = _rdd(batch)
        execution = query._jsq.streamingQuery().lastExecution() if query else None
        if execution is None or execution.toRdd().id() != rdd.id():
            return None
        sides = [_side_of(child) for child in _union_children(execution.executedPlan())]
        parts = _union_parts(rdd)
        total = len(rdd.partitions())
    except Exception:  # noqa: BLE001 - any JVM shape we do not know: the safe way
        return None
    if None in sides or len(sides) != len(parts) or sum(parts) != total:
        return None
    found: dict[int, list[int]] = {}
    start = 0
    for side, count in zip(sides, parts, strict=True):
        assert side is not None
        found.setdefault(side, []).extend(range(start, start + count))
        start += count
    return found


def query_of(batch: DataFrame, spark: SparkSession) -> StreamingQuery | None:
    """The active query of ``spark`` (the session that started it: the batch's own session is
    the query's clone, which lists no queries) whose micro-batch ``batch`` is: ``foreachBatch``
    wraps the result of the query's last execution (``toRdd``, computed once)."""
    try:
        rdd = _rdd(batch)
        for query in spark.streams.active:
            execution = query._jsq.streamingQuery().lastExecution()
            if execution is not None and execution.toRdd().id() == rdd.id():
                return query
    except Exception:  # noqa: BLE001 - not classic Spark as we know it
        return None
    return None


def _rdd(batch: DataFrame) -> Any:
    return batch._jdf.queryExecution().analyzed().rdd()


def _union_children(plan: Any) -> list[Any]:
    """The children of the plan's union (under single-child wrappers such as whole-stage
    codegen), or the plan itself when a side had no rows and the optimizer dropped the union."""
    node = plan
    while node.getClass().getSimpleName() != "UnionExec":
        if node.children().size() != 1:
            return [plan]
        node = node.children().head()
    children = node.children()
    return [children.apply(i) for i in range(children.size())]


def _union_parts(rdd: Any) -> list[int]:
    """The partition count of each parent of the RDD's union (one entry without a union)."""
    node = rdd
    while node.getClass().getSimpleName() != "UnionRDD":
        dependencies = node.dependencies()
        if dependencies.size() != 1:
            return [len(rdd.partitions())]
        node = dependencies.head().rdd()
    parents = node.rdds()
    return [len(parents.apply(i).partitions()) for i in range(parents.size())]


def _side_of(node: Any) -> int | None:
    tree = node.treeString()
    sides = set(_SIDE.findall(tree))
    if not sides and _AGGREGATE_STATE in tree:
        return CLOCK_SIDE  # ``tagging.clock``: its side literal is folded into the aggregate
    return int(sides.pop()) if len(sides) == 1 else None
