"""Main rows travel to the operator packed: one Spark row per (Arrow batch, subtask).

PySpark's transformWithStateInPandas regroups its input row by row in Python (``itertuples``
and a ``DataFrame`` per group) before the processor sees it; measured here that capped the
operator near 30k rows/s whatever the processor did. Packing the main rows of each Arrow batch
into one Arrow IPC blob per subtask, before the shuffle, leaves it a few rows per micro-batch to
regroup; the processor unpacks the blobs with Arrow, at memory speed. Broadcast rows are few and
stay unpacked.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sparkcast.spark.layout import BLOB, SEQ, SIDE, SUBTASK, TS

PACKED_SCHEMA = f"{SUBTASK} long, {SIDE} byte, {TS} long, {SEQ} long, {BLOB} binary"
_OUT = pa.schema([(SUBTASK, pa.int64()), (SIDE, pa.int8()), (TS, pa.int64()),
                  (SEQ, pa.int64()), (BLOB, pa.binary())])


def pack_main(batches: Iterator[pa.RecordBatch], side: int = 0) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows ``(_subtask, _ts, _seq, m_0 … m_k)`` → one blob per subtask.
    ``side`` tags the blobs: 0 the main input, 2 a co-function's second keyed input."""
    for batch in batches:
        if batch.num_rows == 0:
            continue
        subtasks = batch.column(0)
        body = batch.select(list(range(1, batch.num_columns)))
        groups, blobs = [], []
        for group in pc.unique(subtasks).to_pylist():
            groups.append(group)
            blobs.append(_ipc(body.filter(pc.equal(subtasks, group))))
        count = len(groups)
        yield pa.RecordBatch.from_arrays(
            [pa.array(groups, pa.int64()), pa.array([side] * count, pa.int8()),
             pa.nulls(count, pa.int64()), pa.nulls(count, pa.int64()),
             pa.array(blobs, pa.binary())], schema=_OUT)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def unpack_main(blobs: list[bytes], ordered: bool) -> pa.Table:
    """The main rows of one subtask: ``_ts``, ``_seq``, ``m_0 …``. With ``ordered``, in (event
    time, content hash) order: the order Spark's shuffle delivers rows in varies between runs,
    and keyed state sees that order. A non-keyed function's main side reads only read-only
    state, so its outputs do not depend on row order and the sort (~0.4 µs a row) is skipped."""
    tables = [pa.ipc.open_stream(blob).read_all() for blob in blobs]
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return in_order(table) if ordered else table


def in_order(table: pa.Table) -> pa.Table:
    """``table``'s rows in (event time, content hash) order, nulls first: one order whatever
    order the shuffle delivered them in."""
    seq = table.column(SEQ).to_numpy()
    ts = table.column(TS)
    if ts.null_count == len(ts):  # no event time: one key (a two-key Arrow sort costs ~8x)
        order = np.argsort(seq, kind="stable")
    else:
        order = np.lexsort((seq, ts.fill_null(np.iinfo(np.int64).min).to_numpy()))
    return table.take(pa.array(order))
