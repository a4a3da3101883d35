"""The inputs as the runtime takes them: tagged, renamed and hashed, on the driver.

Both inputs become one tagged DataFrame on the operator engine (DESIGN.md §4)::

    main      ─ select(_subtask, _ts, m_0 … m_k) ─ mapInArrow(one blob per subtask) ─┐
    broadcast ─ select(_side 1, _ts, _order, b_0 … b_j) × subtasks ───────────┴ union

``_subtask`` values are chosen so that Spark's hash partitioning sends the P subtasks to
distinct partitions (otherwise two subtasks can share a task while a core idles). The packing
adds each main row's source position (``_seq``, ``execution/ordering.py``), the order its
subtask runs it in. The micro-batch engine in place takes ``_ts, m_0 …`` as they are
(:func:`stateless_input`); its ``foreachBatch`` query one union of the inputs (their malformed
rows tagged in the same pass) and the clock, told apart by ``_side`` (:func:`streamed_input`).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, LongType

from sparkcast.spark.execution.clock import CLOCK_SCHEMA, ClockProcessor
from sparkcast.spark.execution.packing import PACKED_SCHEMA, pack_main
from sparkcast.spark.execution.routing import group_column, subtask_hash, subtask_rows
from sparkcast.spark.layout import (
    BLOB,
    BROADCAST_SIDE,
    CLOCK_SIDE,
    CORRUPT_SIDE,
    ERROR,
    MAIN_SIDE,
    ORDER,
    RAW,
    SECOND_SIDE,
    SEQ,
    SIDE,
    SUBTASK,
    TS,
    broadcast_column,
    main_column,
    second_column,
)
from sparkcast.spark.plan import Engine, RuntimePlan
from sparkcast.spark.planning.corrupt import CORRUPT_COLUMN, letter_columns
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.compatibility import read_layout


def stateless_input(main: DataFrame, event_time: str | None) -> DataFrame:
    """The input of the micro-batch engine in place: ``_ts, m_0 …``, where the rows lie."""
    return main.select(millis(main, event_time).alias(TS),
                       *[F.col(f"`{c}`").alias(main_column(i))
                         for i, c in enumerate(main.columns)])


def streamed_input(main: DataFrame, broadcast: Any | None, event_time: str | None,
                   clocked: bool = False, second: DataFrame | None = None) -> DataFrame:
    """The micro-batch engine's input: every input in one streaming frame, told apart by
    ``_side``: the main rows, the broadcast rows of a streamed broadcast side (None: a static
    side or none), a co-function's ``second`` keyed input; ``clocked``: with the ``clock`` of
    timers (event-time ones with ``event_time``, else processing-time). The inputs come with
    their corrupt-record column, if any: a malformed row is tagged ``CORRUPT_SIDE`` with its
    ``_raw`` and ``_error`` in the same pass over the source (``_side_frame``)."""
    frames = [_side_frame(main, MAIN_SIDE, main_column, event_time)]
    if broadcast is not None:
        df: DataFrame = broadcast.df
        order = (F.col(f"`{broadcast.order_by}`") if broadcast.order_by
                 else F.lit(None).cast("long"))
        frames.append(_side_frame(df, BROADCAST_SIDE, broadcast_column, event_time,
                                  order.alias(ORDER), what="broadcast"))
    if second is not None:
        frames.append(_side_frame(second, SECOND_SIDE, second_column, event_time))
    if clocked:  # the processing-time clock needs no watermark: the broadcast side's few rows
        source = broadcast.df if event_time is None and broadcast is not None else main
        frames.append(clock(source, processing_time=event_time is None))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union


def _side_frame(df: DataFrame, side: int, column: Any, event_time: str | None,
                *extra: Any, what: str = "main") -> DataFrame:
    """``df`` as ``_side, _ts, [extra], <column(0)> …``: its fields renamed by position. With a
    corrupt-record column, a malformed row's side is ``CORRUPT_SIDE`` and it carries ``_raw``
    and ``_error`` (null on the other rows): one scan of the source for both."""
    tag: Column = F.lit(side)
    columns = [c for c in df.columns if c != CORRUPT_COLUMN]
    if len(columns) < len(df.columns):
        bad, raw, error = letter_columns(df, what)
        tag = F.when(bad, F.lit(CORRUPT_SIDE)).otherwise(tag)
        extra = (*extra, F.when(bad, raw).alias(RAW), F.when(bad, error).alias(ERROR))
    return df.select(tag.cast("byte").alias(SIDE), millis(df, event_time).alias(TS),
                     *extra, *[F.col(f"`{c}`").alias(column(i)) for i, c in enumerate(columns)])


def clock(source: DataFrame, processing_time: bool = False) -> DataFrame:
    """A no-op stateful operator over ``source``: Spark runs a no-data micro-batch only for a
    query with a stateful operator that asks for one, and a ``foreachBatch`` query has none,
    so a timer due would wait for more input. It reads no row (``rand() < -1`` is never true,
    and the optimizer cannot prune it), but Spark still scans ``source`` for it and counts the
    rows in ``numInputRows``; its one row (``CLOCK_SIDE``) is ignored.

    * Event time: a global count under the main stream's watermark (``source`` is the main
      stream), which asks for a batch when the watermark moved. Only a watermark node that sees
      the main rows carries their watermark: Spark's tracker takes one that saw no row as 0
      under the default ``min`` policy, so this costs a second scan of the main rows and one
      tiny state commit per micro-batch. The query runs in ``update`` mode
      (``shapes.input_writer``): Spark refuses, in append mode, an aggregation whose keys hold
      no watermark.
    * Processing time: ``execution/clock.py``'s operator, which asks for a batch at every
      trigger and needs no watermark, so ``source`` is a streamed broadcast side where there
      is one (its few rows scanned again, the main rows once), else the main stream."""
    never = source.where(F.rand(0) < -1.0)
    if processing_time:
        ticks = (never.select(F.lit(0).alias("_clock")).groupBy("_clock")
                 .transformWithStateInPandas(ClockProcessor(), CLOCK_SCHEMA, "Update",
                                             "ProcessingTime"))
    else:
        ticks = never.groupBy().count()
    return ticks.select(F.lit(CLOCK_SIDE).cast("byte").alias(SIDE))


def balanced_group_keys(spark: SparkSession, parallelism: int) -> list[int]:
    """Grouping-key values whose hash partitions are as spread as Spark's partitioning allows:
    subtask i lands in shuffle partition i mod N."""
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or "4")
    candidates = spark.range(0, 64 * max(parallelism, partitions)).select(
        "id", F.pmod(F.hash(F.col("id")), F.lit(partitions)).alias("p")).collect()
    by_partition: dict[int, list[int]] = {}
    for row in candidates:
        by_partition.setdefault(row["p"], []).append(row["id"])
    keys = []
    for i in range(parallelism):
        pool = by_partition.get(i % partitions) or by_partition[min(by_partition)]
        keys.append(pool.pop(0))
    return keys


def adopted_groups(plan: RuntimePlan, groups: list[int]) -> RuntimePlan | None:
    """A copy of an operator plan with the grouping keys a checkpoint's state was written under
    (its layout record's ``subtask_groups``), the tagged input's ``_subtask`` remapped; None
    when the plan cannot take them (another path, another parallelism) or has them. The
    groups only balance subtasks over shuffle partitions; the state is keyed by them, and
    Spark keeps a checkpoint's partition count whatever the session says, so a restart keeps
    them."""
    current = sorted(plan.subtask_of_group, key=plan.subtask_of_group.__getitem__)
    if (plan.tagged_input is None or len(groups) != len(current) or current == groups
            or SUBTASK not in plan.tagged_input.columns):
        return None
    old = F.array(*[F.lit(g).cast("long") for g in current])
    position = F.array_position(old, F.col(SUBTASK).cast("long")).cast("int")
    tagged = plan.tagged_input.withColumn(
        SUBTASK, F.element_at(F.array(*[F.lit(g).cast("long") for g in groups]), position)
        .cast(plan.tagged_input.schema[SUBTASK].dataType))
    return replace(plan, tagged_input=tagged,
                   subtask_of_group={g: i for i, g in enumerate(groups)})


def recorded_groups(plan: RuntimePlan, checkpoint_location: str) -> RuntimePlan:
    """A restart keeps the grouping keys its state was written under: Spark keeps the
    checkpoint's shuffle partitions (also after ``rescale_in_place``), whatever the session's
    setting, and the keys were balanced for those (docs/state.md, "Rescale in place")."""
    if plan.engine is not Engine.OPERATOR or not checkpoint_files.committed_batches(
            checkpoint_location):
        return plan
    layout = read_layout(checkpoint_location)
    if not layout or layout.get("parallelism") != plan.parallelism:
        return plan
    return adopted_groups(plan, list(layout.get("subtask_groups") or [])) or plan


def millis(df: DataFrame, event_time: str | None) -> Any:
    """The event-time column as epoch milliseconds (null without one)."""
    if event_time is None:
        return F.lit(None).cast("long")
    kind: DataType = df.schema[event_time].dataType
    column = F.col(f"`{event_time}`")
    return column.cast("long") if isinstance(kind, LongType) else F.unix_millis(column)


def tag_main(main: DataFrame, key_columns: tuple[str, ...], groups: list[int],
             event_time: str | None, side: int = MAIN_SIDE) -> DataFrame:
    """Main rows by subtask, packed (``pack_main`` adds each row's source position): a key's
    subtask is ``routing.subtask_hash`` of it."""
    columns = [F.col(f"`{c}`") for c in main.columns]
    hashed = subtask_hash(main, main.columns, list(key_columns))
    # xxhash64 is a long and element_at takes an int index: non-keyed plans failed to resolve
    subtask = F.pmod(hashed, F.lit(len(groups))).cast("int")
    return main.select(
        group_column(groups, subtask).alias(SUBTASK),
        millis(main, event_time).alias(TS),
        *[c.alias(main_column(i)) for i, c in enumerate(columns)],
    ).mapInArrow(functools.partial(pack_main, side=side), PACKED_SCHEMA)


def pad_main(main_tagged: DataFrame, bcast: DataFrame, order_by: str | None) -> DataFrame:
    """Packed main rows get null broadcast columns (and order), so the union lines up."""
    order_type = bcast.schema[order_by].dataType if order_by else LongType()
    pads = [F.lit(None).cast(order_type).alias(ORDER)] + [
        F.lit(None).cast(f.dataType).alias(broadcast_column(i))
        for i, f in enumerate(bcast.schema.fields)
    ]
    return main_tagged.select("*", *pads)


def tag_broadcast(spark: SparkSession, broadcast: Any, groups: list[int],
                  event_time: str | None) -> DataFrame:
    df: DataFrame = broadcast.df
    columns = [F.col(f"`{c}`") for c in df.columns]
    order = F.col(f"`{broadcast.order_by}`") if broadcast.order_by else F.lit(None).cast("long")
    subtasks = subtask_rows(spark, groups)
    return df.select(
        F.lit(BROADCAST_SIDE).cast("byte").alias(SIDE),
        millis(df, event_time).alias(TS),
        F.lit(None).cast("long").alias(SEQ),  # broadcast elements have their own order
        F.lit(None).cast("binary").alias(BLOB),
        order.alias(ORDER),
        *[c.alias(broadcast_column(i)) for i, c in enumerate(columns)],
    ).crossJoin(subtasks)
