"""The order a subtask runs its main rows in: their source order, as Flink delivers a key's
records from one source partition.

Each main row carries its source position as ``_seq``: Spark's ``monotonically_increasing_id()``
of the row where the source read it, ``(input partition << 33) + row index in the partition``.
A Kafka source reads one topic partition per input partition in offset order, a file source a
file's rows in line order, so sorting by it keeps each source partition's order, and a replay
of the micro-batch reads the same partitions and gets the same positions. Rows of different
source partitions interleave by partition index, as Flink interleaves its input channels.

Spark refuses ``monotonically_increasing_id()`` on a streaming frame, so the operator engine's
packing computes the same number in Python (:func:`positions`, from the task's partition id);
the micro-batch engine's ``foreachBatch`` frame is a batch frame and takes Spark's column
(:func:`source_position`). Event time does not reorder rows (``docs/semantics.md``); a
co-function merges its two inputs with ``core/keyed_process.merged_by_time``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from sparkcast.spark.layout import SEQ

_PARTITION_SHIFT = 33  # Spark's MonotonicallyIncreasingID: the partition in the upper 31 bits


def source_position() -> Any:
    """A batch frame's column of source positions (refused by Spark on a streaming frame)."""
    return F.monotonically_increasing_id()


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
