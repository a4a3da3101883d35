"""Build the runtime plan of one ``process(...)`` call, on the driver, checking everything early.

Arguments are checked (counts, event time, schemas, reserved names), the function is opened once
on a copy to find its keyed state, the engine chosen for a new checkpoint (``paths.py`` reads
the facts, ``choice.py`` chooses) and the inputs tagged for it (``tagging.py``), all before
any query starts, so a mistake fails here with a message that names the fix, not in a worker.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructType, TimestampNTZType, TimestampType

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction, defines
from sparkcast.api.options import ProcessOptions, ready_conditions
from sparkcast.api.output_tag import OutputTag
from sparkcast.core.engine import check_broadcast, user_function
from sparkcast.core.keyed_process import adapt
from sparkcast.core.records import BroadcastElement
from sparkcast.errors import PipelineError
from sparkcast.spark.environment import default_parallelism
from sparkcast.spark.execution.engines import new_engine
from sparkcast.spark.execution.static_side import static_side
from sparkcast.spark.execution.values import collect_elements
from sparkcast.spark.layout import ORDER, SECOND_SIDE, TS, check_reserved
from sparkcast.spark.plan import PlanFacts, ProcessSpec, RuntimePlan
from sparkcast.spark.planning.choice import choose
from sparkcast.spark.planning.corrupt import split_broadcast_corrupt, split_corrupt, union_corrupt
from sparkcast.spark.planning.paths import broadcast_facts, keyed_facts
from sparkcast.spark.planning.tagging import (
    balanced_group_keys,
    millis,
    pad_main,
    stateless_input,
    streamed_input,
    tag_broadcast,
    tag_main,
)
from sparkcast.spark.state.blobs import NO_STORE

MAX_STATIC_BROADCAST_ROWS = 1_000_000


def build_plan(main: DataFrame, key_columns: tuple[str, ...], broadcast: Any,
               spec: ProcessSpec) -> RuntimePlan:
    spark = main.sparkSession
    raw_main, raw_broadcast = main, broadcast  # the micro-batch engine tags malformed rows
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
        encoded=spec.encoded(),
        spark=spark,
        time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC",
    )
    if broadcast.df.isStreaming and not main.isStreaming:
        raise PipelineError("a streaming broadcast stream needs a streaming main stream")
    static = not broadcast.df.isStreaming and (main.isStreaming
                                               or _may_skip_state(plan, broadcast))
    if static:
        plan.static_broadcast = _collect_static(broadcast, spec.event_time)
        plan.static = static_side(plan)
    _choose(plan, broadcast_facts(plan, main, broadcast.df, spec, static), spec)
    if plan.in_place:
        plan.tagged_input = stateless_input(main, spec.event_time)
        return plan
    main_tagged = tag_main(main, key_columns, groups, spec.event_time)
    if main.isStreaming and not broadcast.df.isStreaming:
        plan.tagged_input = main_tagged
        if plan.per_batch_driver:  # the static rows travel with the plan, not the input
            plan.streamed_input = streamed_input(raw_main, None, spec.event_time,
                                                 plan.clocked)
        return plan
    plan.static_broadcast, plan.static = [], None
    bcast = tag_broadcast(spark, broadcast, groups, spec.event_time)
    plan.tagged_input = pad_main(main_tagged, broadcast.df, broadcast.order_by).unionByName(bcast)
    if plan.per_batch_driver:
        plan.streamed_input = streamed_input(raw_main, raw_broadcast, spec.event_time,
                                             plan.clocked)
    return plan


def build_keyed_plan(main: DataFrame, key_columns: tuple[str, ...],
                     second: tuple[DataFrame, tuple[str, ...]] | None, spec: ProcessSpec
                     ) -> RuntimePlan:
    """The plan of a ``KeyedProcessFunction`` (``second`` None) or ``KeyedCoProcessFunction``:
    the broadcast operator without a broadcast side. Both inputs are packed and shuffled by the
    same key hash, so equal keys of either input meet in subtask ``hash(key) mod P``."""
    spark = main.sparkSession
    raw_main, raw_other = main, second[0] if second else None
    main, corrupt = split_corrupt(main)
    other, other_corrupt = split_corrupt(second[0]) if second else (main, None)
    if second:
        _check_same_key_types(main, key_columns, other, second[1])
    options = ProcessOptions(on_error=spec.on_error,  # type: ignore[arg-type]
                             job_parameters=spec.job_parameters)
    _check_event_time(main, other, spec, options)
    _check_counts(spec)
    parallelism = (default_parallelism(spark) if spec.parallelism is None
                   else spec.parallelism)
    function = adapt(spec.function)
    keyed_descriptors = discover_keyed_state(function, (), options, parallelism)
    output_schema = parse_schema(spark, spec.output_schema, "output_schema")
    check_reserved(output_schema.fieldNames())
    groups = balanced_group_keys(spark, parallelism)
    tagged = tag_main(main, key_columns, groups, spec.event_time)
    if second:
        tagged = tagged.unionByName(tag_main(other, second[1], groups, spec.event_time,
                                             side=SECOND_SIDE))
    corrupt = union_corrupt(corrupt, other_corrupt)
    plan = RuntimePlan(
        pipeline_id=uuid.uuid4().hex, function=function, broadcast_descriptors=(),
        keyed_descriptors=keyed_descriptors, options=options, parallelism=parallelism,
        subtask_of_group={g: i for i, g in enumerate(groups)}, main_fields=tuple(main.columns),
        main_types=tuple(f.dataType for f in main.schema.fields),
        broadcast_fields=(), key_positions=tuple(main.columns.index(c) for c in key_columns),
        key_types=tuple(main.schema[c].dataType.simpleString() for c in key_columns),
        output_schema=output_schema,
        side_schemas={t.tag_id: tag_schema(spark, t) for t in spec.side_outputs},
        event_time=spec.event_time, time_mode=_time_mode(spec), state_buckets=spec.state_buckets,
        blob_store=spec.blob_store or NO_STORE, blob_store_chosen=spec.blob_store is not None,
        time_zone=spark.conf.get("spark.sql.session.timeZone") or "UTC", tagged_input=tagged,
        corrupt_input=corrupt, encoded=spec.encoded(), spark=spark,
        second_fields=tuple(other.columns) if second else (),
        second_types=tuple(f.dataType for f in other.schema.fields) if second else (),
        second_key_positions=tuple(other.columns.index(c) for c in second[1]) if second else (),
    )
    _choose(plan, keyed_facts(plan, main, spec), spec)
    if plan.per_batch_driver:
        plan.streamed_input = streamed_input(raw_main, None, spec.event_time, plan.clocked,
                                             raw_other)
    return plan


def _choose(plan: RuntimePlan, facts: PlanFacts, spec: ProcessSpec) -> None:
    """The one choice of the plan's engine, for a new checkpoint (``choice.choose``)."""
    choice = choose(facts, spec.engine)
    plan.facts, plan.requested = facts, spec.engine
    plan.engine, plan.reason = choice.engine, choice.reason


def _check_same_key_types(a: DataFrame, a_keys: tuple[str, ...], b: DataFrame,
                          b_keys: tuple[str, ...]) -> None:
    """Both inputs go to subtask ``hash(key) mod P``; Spark's hash depends on the type."""
    a_types = [a.schema[c].dataType.simpleString() for c in a_keys]
    b_types = [b.schema[c].dataType.simpleString() for c in b_keys]
    if a_types != b_types:
        raise PipelineError(f"connected keyed streams need keys of the same types, to meet in "
                            f"the same subtask: {list(a_keys)} {a_types} vs {list(b_keys)} "
                            f"{b_types}; cast one side (df.withColumn(c, F.col(c).cast(...)))")


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
    static one, and may run in place on the micro-batch engine."""
    return (not plan.keyed and plan.options.time_alignment == "batch"
            and broadcast.df.count() <= MAX_STATIC_BROADCAST_ROWS)


def discover_keyed_state(function: BaseBroadcastProcessFunction,
                         descriptors: tuple[MapStateDescriptor, ...], options: ProcessOptions,
                         parallelism: int) -> tuple[StateDescriptor, ...]:
    """Open a copy of the function on the driver: Spark declares state variables before data
    arrives, so keyed state must be known now, and a broken ``open`` fails here, not in a
    worker."""
    engine = new_engine(function, descriptors, options, parallelism)
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


def _collect_static(broadcast: Any, event_time: str | None) -> list[BroadcastElement]:
    """A static broadcast side with a streaming main side: Spark cannot union the two, so its
    rows travel with the plan and every subtask applies them before its first main element.
    Timestamps become millis in Spark, as for the other inputs (``millis``)."""
    df: DataFrame = broadcast.df
    if df.count() > MAX_STATIC_BROADCAST_ROWS:
        raise PipelineError(f"a static broadcast DataFrame may have at most "
                            f"{MAX_STATIC_BROADCAST_ROWS} rows; stream it instead")
    order = F.col(f"`{broadcast.order_by}`") if broadcast.order_by else F.lit(None).cast("long")
    return collect_elements(df.select(millis(df, event_time).alias(TS), order.alias(ORDER),
                                      *[F.col(f"`{c}`") for c in df.columns]), tuple(df.columns))


def uses_timers(function: Any) -> bool:
    return defines(user_function(function), "on_timer")
