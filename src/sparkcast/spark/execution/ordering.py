"""The order a subtask runs its main rows in: their source order, as Flink delivers a key's
records from one source partition.

Each main row carries its source position as ``_seq``: Spark's ``monotonically_increasing_id()``
of the row where the source read it, ``(input partition << 33) + row index in the partition``.
A Kafka source reads one topic partition per input partition in offset order, a file source a
file's rows in line order, so sorting by it keeps each source partition's order. Rows of
different source partitions interleave by partition index, as Flink interleaves its input
channels.

A replay must get the same positions. A file source cuts a replayed batch as before when its
split settings are the checkpoint's (``planning/file_splits.py``). Spark's Kafka source does
not number a batch's ranges the same way twice: in the order of a map of its topic partitions,
the broker's when the batch first runs, the offset log's when a restart replays it (seen here:
partitions 1, 0 and then 0, 1), so a key's rows of two topic partitions would run in another
order in the replay. :class:`SourcePositions` numbers the micro-batch engine's rows by the rank
of their input partition's range, sorted by topic, partition and first offset, which is one
order however Spark numbered the ranges and however ``minPartitions`` split them.

Spark refuses ``monotonically_increasing_id()`` on a streaming frame, so the operator engine's
packing computes the same number in Python (:func:`positions`, from the task's partition id,
which a task cannot map to its Kafka range: the operator engine keeps Spark's numbering); the
micro-batch engine's ``foreachBatch`` frame is a batch frame and takes Spark's column. Event
time does not reorder rows (``docs/semantics.md``); a co-function merges its two inputs with
``core/keyed_process.merged_by_time``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkcast.spark.layout import SEQ

_PARTITION_SHIFT = 33  # Spark's MonotonicallyIncreasingID: the partition in the upper 31 bits


class SourcePositions:
    """A query's column of source positions for its ``foreachBatch`` frames (refused by Spark
    on a streaming frame); whether they hold Kafka ranges is found at the first batch."""

    def __init__(self) -> None:
        self.kafka: bool | None = None

    def column(self, batch: DataFrame) -> Column:
        position = F.monotonically_increasing_id()
        ranks = None if self.kafka is False else kafka_ranks(batch)
        if self.kafka is None:
            self.kafka = ranks is not None
        if ranks is None:
            return position
        partition = F.spark_partition_id().cast("long")
        rank = F.element_at(F.array(*[F.lit(r) for r in ranks]), partition.cast("int") + 1)
        return (F.shiftleft(rank.cast("long"), _PARTITION_SHIFT)
                + (position - F.shiftleft(partition, _PARTITION_SHIFT)))


def kafka_ranks(batch: DataFrame) -> list[int] | None:
    """For each input partition of a ``foreachBatch`` frame, its rank in the canonical order:
    Kafka ranges by topic, partition and first offset, the other partitions in place; None
    when no partition reads Kafka (or the frame's lineage is not at hand: Spark Connect)."""
    try:
        leaves = batch._jdf.queryExecution().analyzed().collectLeaves()
        keys = [key for i in range(leaves.size()) if leaves.apply(i).nodeName() == "LogicalRDD"
                for key in _partition_keys(leaves.apply(i).rdd(), (i,))]
    except Exception:  # noqa: BLE001 - no JVM plan here: Spark's numbering stands
        return None
    if not any(isinstance(part, str) for key in keys for part in key):  # no topic named
        return None
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = [0] * len(keys)
    for rank, index in enumerate(order):
        ranks[index] = rank
    return ranks


def _partition_keys(rdd: Any, path: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """One sort key per partition of ``rdd``: where it lies among unions, then its Kafka range
    (topic, partition, first offset) or its index."""
    while True:
        name = rdd.getClass().getSimpleName()
        if name == "DataSourceRDD":
            inputs = rdd.inputPartitions()  # one py4j call per batch, not one per partition
            found = [_range_of(inputs.apply(i)) for i in range(inputs.size())]
            if len(found) == rdd.getNumPartitions():
                return [(*path, *(key or (i,))) for i, key in enumerate(found)]
        if name == "UnionRDD":
            parents = rdd.rdds()
            return [key for j in range(parents.size())
                    for key in _partition_keys(parents.apply(j), (*path, j))]
        dependencies = rdd.dependencies()
        parent = dependencies.head().rdd() if dependencies.size() == 1 else None
        if parent is None or parent.getNumPartitions() != rdd.getNumPartitions():
            return [(*path, i) for i in range(rdd.getNumPartitions())]
        rdd = parent


def _range_of(partition: Any) -> tuple[str, int, int] | None:
    """A Kafka input partition's range start; None for another source's partition."""
    found = partition.get() if partition.getClass().getSimpleName() == "Some" else partition
    if found.getClass().getSimpleName() != "KafkaBatchInputPartition":
        return None
    offsets = found.offsetRange()
    return (str(offsets.topic()), int(offsets.partition()), int(offsets.fromOffset()))


def positions(partition: int, start: int, count: int) -> pa.Array:
    """The source positions of rows ``start … start+count-1`` of input partition ``partition``,
    as :func:`source_position` numbers them."""
    first = (partition << _PARTITION_SHIFT) + start
    return pa.array(np.arange(first, first + count, dtype=np.int64))


def in_order(table: pa.Table) -> pa.Table:
    """``table``'s rows in source-position order: one order whatever order the shuffle
    delivered them in."""
    order = np.argsort(table.column(SEQ).to_numpy(), kind="stable")
    return table.take(pa.array(order))
