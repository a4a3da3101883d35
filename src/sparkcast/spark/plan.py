"""Build the Spark plan of one ``process(...)`` call, on the driver, checking everything early.

Both inputs become one tagged DataFrame (DESIGN.md §4)::

    main      ─ select(_subtask, _ts, _seq, m_0 … m_k) ─ mapInArrow(one blob per subtask) ─┐
    broadcast ─ select(_side 1, _ts, _seq, _order, b_0 … b_j) × subtasks ───────────────┴ union

grouped by ``_subtask`` into one ``transformWithStateInPandas`` operator, unless the function
needs no state (non-keyed, static broadcast side): then ``stateless.py``'s one ``mapInArrow``.
``_subtask`` values are chosen so that Spark's hash partitioning sends the P subtasks to
distinct partitions (otherwise two subtasks can share a task while a core idles). ``_seq`` is a
content hash that orders rows with equal timestamps the same way in every run.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction, defines
from sparkcast.api.options import ProcessOptions, ready_conditions
from sparkcast.api.output_tag import OutputTag
from sparkcast.core.backend import DictBackend
from sparkcast.core.engine import SubtaskEngine, check_broadcast, fresh_function
from sparkcast.errors import PipelineError
from sparkcast.spark.blobs import NO_STORE
from sparkcast.spark.checks import default_parallelism
from sparkcast.spark.corrupt import split_broadcast_corrupt, split_corrupt, union_corrupt
from sparkcast.spark.layout import check_reserved
from sparkcast.spark.packing import PACKED_SCHEMA, pack_main
from sparkcast.spark.stateless import needs_no_state

MAX_STATIC_BROADCAST_ROWS = 1_000_000


@dataclass(frozen=True)
class ProcessSpec:
    """The arguments of ``process(...)``."""

    function: BaseBroadcastProcessFunction
    output_schema: str
    parallelism: int | None
    hold_until_ready: Iterable[Any] | None
    hold_capacity: int
    time_alignment: str
    event_time: str | None
    side_outputs: tuple[OutputTag, ...]
    on_error: str
    job_parameters: dict[str, Any]
    state_buckets: int
    blob_store: str | None = None


@dataclass
class RuntimePlan:
    """Everything the Python workers need; shipped to them with the processor."""

    pipeline_id: str
    function: BaseBroadcastProcessFunction
    broadcast_descriptors: tuple[MapStateDescriptor, ...]
    keyed_descriptors: tuple[StateDescriptor, ...]
    options: ProcessOptions
    parallelism: int
    subtask_of_group: dict[int, int]
    main_fields: tuple[str, ...]
    main_types: tuple[DataType, ...]
    broadcast_fields: tuple[str, ...]
    key_positions: tuple[int, ...]
    key_types: tuple[str, ...]
    output_schema: StructType
    side_schemas: dict[str, StructType | None]
    event_time: str | None
    time_mode: str
    state_buckets: int
    blob_store: str
    blob_store_chosen: bool = False
    static_broadcast: list[tuple[Any, int | None, Any]] = field(default_factory=list)
    stateless: bool = False  # the shuffle-free path (stateless.py)
    time_zone: str = "UTC"  # the session's: pandas hands broadcast timestamps over naive in it
    # the tagged input and the session, driver-side only (not shipped)
    tagged_input: DataFrame | None = None
    corrupt_input: DataFrame | None = None
    spark: SparkSession | None = None

    @property
    def keyed(self) -> bool:
        return bool(self.key_positions)

    def for_workers(self) -> RuntimePlan:
        shipped = copy.copy(self)
        shipped.tagged_input = None
        shipped.corrupt_input = None
        shipped.spark = None
        return shipped


def build_plan(main: DataFrame, key_columns: tuple[str, ...], broadcast: Any,
               spec: ProcessSpec) -> RuntimePlan:
    spark = main.sparkSession
    main, corrupt = split_corrupt(main)
    broadcast, corrupt_broadcast = _without_corrupt(broadcast)
    corrupt = union_corrupt(corrupt, corrupt_broadcast)
    descriptors = tuple(check_broadcast(broadcast.descriptors))
    _check_counts(spec)
    options = ProcessOptions(
        hold_until_ready=ready_conditions(spec.hold_until_ready, descriptors),
        hold_capacity=spec.hold_capacity,
        time_alignment=spec.time_alignment,  # type: ignore[arg-type]
        on_error=spec.on_error,  # type: ignore[arg-type]
        job_parameters=spec.job_parameters,
    )
    _check_event_time(main, broadcast.df, spec, options)
    parallelism = (default_parallelism(spark) if spec.parallelism is None
                   else spec.parallelism)
    keyed_descriptors = discover_keyed_state(spec.function, descriptors, options, parallelism)
    output_schema = parse_schema(spark, spec.output_schema, "output_schema")
    check_reserved(output_schema.fieldNames())
    groups = balanced_group_keys(spark, parallelism)
    plan = RuntimePlan(
        pipeline_id=uuid.uuid4().hex,
        function=spec.function,
        broadcast_descriptors=descriptors,
        keyed_descriptors=keyed_descriptors,
        options=options,
        parallelism=parallelism,
        subtask_of_group={g: i for i, g in enumerate(groups)},
        main_fields=tuple(main.columns),
        main_types=tuple(f.dataType for f in main.schema.fields),
        broadcast_fields=tuple(broadcast.df.columns),
        key_positions=tuple(main.columns.index(c) for c in key_columns),
        key_types=tuple(main.schema[c].dataType.simpleString() for c in key_columns),
        output_schema=output_schema,
        side_schemas={t.tag_id: tag_schema(spark, t) for t in spec.side_outputs},
        event_time=spec.event_time,
        time_mode=_time_mode(spec),
        state_buckets=spec.state_buckets,
        blob_store=spec.blob_store or NO_STORE,  # checks.prepare picks the default
        blob_store_chosen=spec.blob_store is not None,
        corrupt_input=corrupt,
        spark=spark,
        time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC",
    )
    if broadcast.df.isStreaming and not main.isStreaming:
        raise PipelineError("a streaming broadcast stream needs a streaming main stream")
    if not broadcast.df.isStreaming and (main.isStreaming or _may_skip_state(plan, broadcast)):
        plan.static_broadcast = _collect_static(broadcast, spec.event_time)
        plan.stateless = needs_no_state(plan)
    if plan.stateless:
        plan.tagged_input = main.select(
            _millis(main, spec.event_time).alias("_ts"),
            *[F.col(f"`{c}`").alias(f"m_{i}") for i, c in enumerate(main.columns)])
        return plan
    main_tagged = _tag_main(main, key_columns, groups, spec.event_time)
    if main.isStreaming and not broadcast.df.isStreaming:
        plan.tagged_input = main_tagged
        return plan
    plan.static_broadcast = []
    bcast = _tag_broadcast(spark, broadcast, groups, spec.event_time)
    plan.tagged_input = _pad_main(main_tagged, broadcast.df, broadcast.order_by).unionByName(bcast)
    return plan


def _without_corrupt(broadcast: Any) -> tuple[Any, DataFrame | None]:
    """The broadcast stream without its malformed rows (and corrupt-record column)."""
    good, bad = split_broadcast_corrupt(broadcast.df)
    if bad is None and good is broadcast.df:
        return broadcast, None
    clean = copy.copy(broadcast)
    clean.df = good
    return clean, bad


def _check_counts(spec: ProcessSpec) -> None:
    """Counts are refused, never replaced: ``parallelism=0`` once meant "the session default"
    silently, and a checkpoint is then tied to a number the user never chose."""
    for name, value, least in (("parallelism", spec.parallelism, 1),
                               ("state_buckets", spec.state_buckets, 1),
                               ("hold_capacity", spec.hold_capacity, 0)):
        if value is None and name == "parallelism":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise PipelineError(f"{name} must be an integer of at least {least}, not {value!r}"
                                + (" (leave it out for the session's shuffle partitions)"
                                   if name == "parallelism" else ""))


def _may_skip_state(plan: RuntimePlan, broadcast: Any) -> bool:
    """Batch inputs: a small broadcast side applied before all main rows (batch alignment) is a
    static one, and may take the shuffle-free path."""
    return (not plan.keyed and plan.options.time_alignment == "batch"
            and broadcast.df.count() <= MAX_STATIC_BROADCAST_ROWS)


def discover_keyed_state(function: BaseBroadcastProcessFunction,
                         descriptors: tuple[MapStateDescriptor, ...], options: ProcessOptions,
                         parallelism: int) -> tuple[StateDescriptor, ...]:
    """Open a copy of the function on the driver: Spark declares state variables before data
    arrives, so keyed state must be known now, and a broken ``open`` fails here, not in a
    worker."""
    engine = SubtaskEngine(fresh_function(function), descriptors, DictBackend(), options=options,
                           parallelism=parallelism)
    engine.open()
    engine.close()
    return engine.keyed_descriptors()


def parse_schema(spark: SparkSession, ddl: str | StructType, what: str) -> StructType:
    if isinstance(ddl, StructType):
        return ddl
    try:
        schema = spark.createDataFrame([], ddl).schema
    except Exception as exc:  # noqa: BLE001 - Spark's parse errors have many types
        raise PipelineError(f"{what} {ddl!r} is not a valid DDL schema: {exc}") from exc
    if not schema.fields:
        raise PipelineError(f"{what} must have at least one field")
    return schema


def tag_schema(spark: SparkSession, tag: OutputTag) -> StructType | None:
    return None if tag.schema is None else parse_schema(spark, tag.schema, f"{tag} schema")


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


def _time_mode(spec: ProcessSpec) -> str:
    """Spark's timer mode. ``ProcessingTime`` makes Spark schedule empty micro-batches without
    end (an ``availableNow`` query never stops), so it is used only for functions with timers."""
    if not uses_timers(spec.function):
        return "None"
    return "EventTime" if spec.event_time else "ProcessingTime"


def _check_event_time(main: DataFrame, bcast: DataFrame, spec: ProcessSpec,
                      options: ProcessOptions) -> None:
    if spec.event_time is None:
        if options.time_alignment == "event":
            raise PipelineError('time_alignment="event" needs event_time="<column>"')
        return
    for name, df in (("main", main), ("broadcast", bcast)):
        if spec.event_time not in df.columns:
            raise PipelineError(f"event_time column {spec.event_time!r} is missing from the "
                                f"{name} stream ({df.columns})")
        kind = df.schema[spec.event_time].dataType
        if not isinstance(kind, (TimestampType, TimestampNTZType, LongType)):
            raise PipelineError(f"event_time column {spec.event_time!r} must be a timestamp or "
                                f"epoch milliseconds (long), not {kind.simpleString()}")


def _millis(df: DataFrame, event_time: str | None) -> Any:
    if event_time is None:
        return F.lit(None).cast("long")
    kind: DataType = df.schema[event_time].dataType
    column = F.col(f"`{event_time}`")
    return column.cast("long") if isinstance(kind, LongType) else F.unix_millis(column)


def _group_column(groups: list[int], index: Any) -> Any:
    return F.element_at(F.array(*[F.lit(g).cast("long") for g in groups]), index + 1)


def hash_columns(df: DataFrame, names: Iterable[str]) -> list[Any]:
    """The columns ``names`` as Spark's hash functions take them: Spark cannot hash a map
    (DATATYPE_MISMATCH.HASH_MAP_TYPE), and feature-flag configs are naturally maps, so a column
    with a map anywhere inside is hashed as its JSON text (the same text on every replay)."""
    return [F.to_json(F.col(f"`{n}`")) if _has_map(df.schema[n].dataType) else F.col(f"`{n}`")
            for n in names]


def _has_map(kind: DataType) -> bool:
    if isinstance(kind, MapType):
        return True
    if isinstance(kind, ArrayType):
        return _has_map(kind.elementType)
    if isinstance(kind, StructType):
        return any(_has_map(f.dataType) for f in kind.fields)
    return False


def _tag_main(main: DataFrame, key_columns: tuple[str, ...], groups: list[int],
              event_time: str | None) -> DataFrame:
    columns = [F.col(f"`{c}`") for c in main.columns]
    content = F.xxhash64(*hash_columns(main, main.columns))
    hashed = F.hash(*hash_columns(main, key_columns)) if key_columns else content
    # xxhash64 is a long and element_at takes an int index: non-keyed plans failed to resolve
    subtask = F.pmod(hashed, F.lit(len(groups))).cast("int")
    return main.select(
        _group_column(groups, subtask).alias("_subtask"),
        _millis(main, event_time).alias("_ts"),
        content.alias("_seq"),
        *[c.alias(f"m_{i}") for i, c in enumerate(columns)],
    ).mapInArrow(pack_main, PACKED_SCHEMA)


def _pad_main(main_tagged: DataFrame, bcast: DataFrame, order_by: str | None) -> DataFrame:
    """Packed main rows get null broadcast columns (and order), so the union lines up."""
    order_type = bcast.schema[order_by].dataType if order_by else LongType()
    pads = [F.lit(None).cast(order_type).alias("_order")] + [
        F.lit(None).cast(f.dataType).alias(f"b_{i}") for i, f in enumerate(bcast.schema.fields)
    ]
    return main_tagged.select("*", *pads)


def _tag_broadcast(spark: SparkSession, broadcast: Any, groups: list[int],
                   event_time: str | None) -> DataFrame:
    df: DataFrame = broadcast.df
    columns = [F.col(f"`{c}`") for c in df.columns]
    order = F.col(f"`{broadcast.order_by}`") if broadcast.order_by else F.lit(None).cast("long")
    subtasks = spark.createDataFrame([(g,) for g in groups], "_subtask long")
    return df.select(
        F.lit(1).cast("byte").alias("_side"),
        _millis(df, event_time).alias("_ts"),
        F.xxhash64(*hash_columns(df, df.columns)).alias("_seq"),
        F.lit(None).cast("binary").alias("_blob"),
        order.alias("_order"),
        *[c.alias(f"b_{i}") for i, c in enumerate(columns)],
    ).crossJoin(subtasks)


def _collect_static(broadcast: Any, event_time: str | None) -> list[tuple[Any, int | None, Any]]:
    """A static broadcast side with a streaming main side: Spark cannot union the two, so its
    rows travel with the plan and every subtask applies them before its first main element."""
    df: DataFrame = broadcast.df
    if df.count() > MAX_STATIC_BROADCAST_ROWS:
        raise PipelineError(f"a static broadcast DataFrame may have at most "
                            f"{MAX_STATIC_BROADCAST_ROWS} rows; stream it instead")
    from sparkcast.spark.rows import row_from_spark
    from sparkcast.spark.values import convert_rows, converters

    fields = tuple(df.columns)
    found = converters([f.dataType for f in df.schema.fields], None)  # collect: local time
    elements = []
    for row in df.collect():
        (value,) = convert_rows([row_from_spark(fields, tuple(row))], fields, found)
        ts = _to_millis(row[event_time]) if event_time else None
        order = row[broadcast.order_by] if broadcast.order_by else None
        elements.append((value, ts, order))
    return elements


def _to_millis(value: Any) -> int | None:
    if value is None or isinstance(value, int):
        return value
    return int(value.timestamp() * 1000)


def uses_timers(function: BaseBroadcastProcessFunction) -> bool:
    return defines(function, "on_timer")
