"""The wiring API: PyFlink's stream-construction calls over Spark DataFrames, and their result.

As PyFlink's ``data_stream.py`` holds ``DataStream``, ``KeyedStream``, ``BroadcastStream`` and
the operator they build, this holds ``Stream`` and its kin and ``ProcessResult``:

Examples:
    >>> rule_stream = Stream(rules_df).broadcast(RULES)
    >>> result = (Stream(items_df).key_by("color")
    ...           .connect(rule_stream)
    ...           .process(MatchRules(), output_schema="rule string, first string, second string"))
    >>> result.main, result.side_output(REVIEW), result.dead_letters

``process`` checks the session's workers, builds and checks the plan (``planning``) and returns
a ``ProcessResult``; its DataFrames filter the operator's one tagged frame (``layout.py``): main
rows in typed columns, side outputs and dead letters parsed from JSON, the counts observed
before any filter (``observe/observation.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction, KeyedBroadcastProcessFunction
from sparkcast.api.keyed_functions import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.api.output_tag import OutputTag
from sparkcast.core.engine import check_broadcast
from sparkcast.core.output_check import no_schema_reason
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import PipelineError
from sparkcast.spark.launch.workers import check_workers
from sparkcast.spark.layout import MAIN
from sparkcast.spark.observe.observation import next_name, observed
from sparkcast.spark.observe.prometheus import serve_metrics
from sparkcast.spark.outputs.batch_outputs import start as start_batches
from sparkcast.spark.outputs.sinks import start_sink
from sparkcast.spark.outputs.targets import start as start_sinks
from sparkcast.spark.outputs.typed import typed_frame
from sparkcast.spark.plan import ProcessSpec, RuntimePlan
from sparkcast.spark.planning.bootstrap import attach_initial_state
from sparkcast.spark.planning.checks import prepare
from sparkcast.spark.planning.choice import Choice
from sparkcast.spark.planning.explain import Explanation, explanation
from sparkcast.spark.planning.frames import tagged_output
from sparkcast.spark.planning.paths import dataframe_choice, query_choice
from sparkcast.spark.planning.planner import build_keyed_plan, build_plan, parse_schema

# {descriptor or name: batch DataFrame}, or a checkpoint prepared by rescale (docs/state.md)
InitialState = Mapping[Any, DataFrame] | str


class Stream:
    """A Spark DataFrame (streaming or batch) as the input of a broadcast pattern."""

    def __init__(self, df: DataFrame) -> None:
        if not isinstance(df, DataFrame):
            raise PipelineError(f"Stream takes a Spark DataFrame, not {type(df).__name__}")
        self.df = df

    def broadcast(self, *descriptors: MapStateDescriptor, order_by: str | None = None
                  ) -> BroadcastStream:
        """Replicate this stream to every subtask, as broadcast state ``descriptors``.

        ``order_by`` names a column that orders the broadcast rows of one micro-batch (a
        version or sequence number); without it, event time then content decide."""
        return BroadcastStream(self.df, descriptors, order_by)

    def key_by(self, *columns: str) -> KeyedStream:
        """Partition by the values of ``columns`` (the key is one value, or a tuple of them)."""
        if not columns or not all(isinstance(c, str) for c in columns):
            raise PipelineError("key_by takes column names on Spark, e.g. key_by('user_id'); "
                                "compute a key column first with df.withColumn(...)")
        missing = [c for c in columns if c not in self.df.columns]
        if missing:
            raise PipelineError(f"key_by: no column {missing} in {self.df.columns}")
        return KeyedStream(self.df, tuple(columns))

    def connect(self, broadcast_stream: BroadcastStream) -> BroadcastConnectedStream:
        """Connect this (non-keyed) stream to a broadcast stream, for a
        ``BroadcastProcessFunction``."""
        return BroadcastConnectedStream(self, broadcast_stream)


class KeyedStream(Stream):
    """Flink's ``KeyedStream``: ``process`` runs a ``KeyedProcessFunction``; ``connect`` takes
    a broadcast stream, or another keyed stream for a ``KeyedCoProcessFunction``."""

    def __init__(self, df: DataFrame, key_columns: tuple[str, ...]) -> None:
        super().__init__(df)
        self.key_columns = key_columns

    def connect(self, other: Any) -> Any:
        """Connect to a broadcast stream (a ``BroadcastConnectedStream``, for a
        ``KeyedBroadcastProcessFunction``) or to another keyed stream (a
        ``ConnectedKeyedStreams``, for a ``KeyedCoProcessFunction``)."""
        if isinstance(other, KeyedStream):
            return ConnectedKeyedStreams(self, other)
        return BroadcastConnectedStream(self, other)

    def process(self, function: KeyedProcessFunction, output_schema: Any, *,
                parallelism: int | None = None, event_time: str | None = None,
                side_outputs: Iterable[OutputTag] = (), on_error: str = "dead_letter",
                job_parameters: dict[str, Any] | None = None, state_buckets: int = 64,
                initial_state: InitialState | None = None, engine: str = "auto"
                ) -> ProcessResult:
        """Run a ``KeyedProcessFunction`` over this keyed stream (options as for the broadcast
        ``process``)."""
        if not isinstance(function, KeyedProcessFunction):
            raise PipelineError("KeyedStream.process takes a KeyedProcessFunction; a broadcast "
                                "function needs .connect(broadcast_stream) first")
        spec = _keyed_spec(function, output_schema, parallelism, event_time, side_outputs,
                           on_error, job_parameters, state_buckets, bool(initial_state),
                           engine)
        return _prepared(self.df, lambda: build_keyed_plan(self.df, self.key_columns, None, spec),
                         initial_state)


class ConnectedKeyedStreams:
    """Flink's ``ConnectedStreams`` of two keyed streams; ``process`` runs a
    ``KeyedCoProcessFunction`` (``process_element1`` for this stream, ``2`` for the other)."""

    def __init__(self, first: KeyedStream, second: KeyedStream) -> None:
        self.first = first
        self.second = second

    def process(self, function: KeyedCoProcessFunction, output_schema: Any, *,
                parallelism: int | None = None, event_time: str | None = None,
                side_outputs: Iterable[OutputTag] = (), on_error: str = "dead_letter",
                job_parameters: dict[str, Any] | None = None, state_buckets: int = 64,
                initial_state: InitialState | None = None, engine: str = "auto"
                ) -> ProcessResult:
        """Run a ``KeyedCoProcessFunction`` over both keyed streams (options as for the
        broadcast ``process``)."""
        if not isinstance(function, KeyedCoProcessFunction):
            raise PipelineError("two connected keyed streams take a KeyedCoProcessFunction")
        spec = _keyed_spec(function, output_schema, parallelism, event_time, side_outputs,
                           on_error, job_parameters, state_buckets, bool(initial_state),
                           engine)
        second = (self.second.df, self.second.key_columns)
        return _prepared(self.first.df, lambda: build_keyed_plan(
            self.first.df, self.first.key_columns, second, spec), initial_state)


def _keyed_spec(function: Any, output_schema: Any, parallelism: int | None,
                event_time: str | None, side_outputs: Iterable[OutputTag], on_error: str,
                job_parameters: dict[str, Any] | None, state_buckets: int, seeded: bool,
                engine: str) -> ProcessSpec:
    return ProcessSpec(function=function, output_schema=output_schema, parallelism=parallelism,
                       hold_until_ready=None, hold_capacity=0, time_alignment="batch",
                       event_time=event_time, side_outputs=tuple(side_outputs),
                       on_error=on_error, job_parameters=dict(job_parameters or {}),
                       state_buckets=state_buckets, seeded=seeded, engine=engine)


class BroadcastStream:
    """Flink's ``BroadcastStream``: the low-throughput side and its state descriptors."""

    def __init__(self, df: DataFrame, descriptors: Iterable[MapStateDescriptor],
                 order_by: str | None) -> None:
        self.df = df
        self.descriptors = tuple(check_broadcast(tuple(descriptors)))
        if order_by is not None and order_by not in df.columns:
            raise PipelineError(f"order_by: no column {order_by!r} in {df.columns}")
        self.order_by = order_by


class BroadcastConnectedStream:
    """Flink's ``BroadcastConnectedStream``; ``process`` builds the Spark plan."""

    def __init__(self, main: Stream, broadcast: BroadcastStream) -> None:
        if not isinstance(broadcast, BroadcastStream):
            raise PipelineError("connect() takes a stream made by .broadcast(descriptor)")
        self.main = main
        self.broadcast_stream = broadcast

    def process(
        self,
        function: BaseBroadcastProcessFunction,
        output_schema: Any,
        *,
        parallelism: int | None = None,
        hold_until_ready: Iterable[Any] | None = None,
        hold_capacity: int = 100_000,
        time_alignment: str = "batch",
        event_time: str | None = None,
        side_outputs: Iterable[OutputTag] = (),
        on_error: str = "dead_letter",
        job_parameters: dict[str, Any] | None = None,
        state_buckets: int = 64,
        blob_store: str | None = None,
        initial_state: InitialState | None = None,
        engine: str = "auto",
    ) -> ProcessResult:
        """Run ``function`` over both streams; see docs/api.md for every option.

        ``parallelism`` is the number of virtual subtasks (fixed for a checkpoint; default the
        session's shuffle partitions). ``event_time`` names a timestamp or epoch-ms column of
        both inputs: element timestamps, watermark-driven timers, ``time_alignment="event"``.
        ``blob_store`` is where broadcast values of 1 MiB or more are stored once (default: the
        checkpoint with ``write_stream``; on a cluster, a path every executor can read).
        ``initial_state``: ``{descriptor: batch DataFrame}`` the job starts from, or a checkpoint
        prepared by ``rescale`` (docs/state.md). ``engine``: ``"auto"`` (the choice
        ``result.explain()`` shows), ``"micro_batch"`` or ``"operator"``; a choice that cannot
        serve the plan fails here with the reason."""
        keyed = isinstance(self.main, KeyedStream)
        if keyed != isinstance(function, KeyedBroadcastProcessFunction):
            raise PipelineError(
                "a KeyedBroadcastProcessFunction needs key_by(...) before connect(), and a "
                "BroadcastProcessFunction a stream without key_by"
            )
        spec = ProcessSpec(
            function=function,
            output_schema=output_schema,
            parallelism=parallelism,
            hold_until_ready=hold_until_ready,
            hold_capacity=hold_capacity,
            time_alignment=time_alignment,
            event_time=event_time,
            side_outputs=tuple(side_outputs),
            on_error=on_error,
            job_parameters=dict(job_parameters or {}),
            state_buckets=state_buckets,
            blob_store=blob_store,
            seeded=bool(initial_state),
            engine=engine,
        )
        key_columns = self.main.key_columns if isinstance(self.main, KeyedStream) else ()
        return _prepared(self.main.df, lambda: build_plan(
            self.main.df, key_columns, self.broadcast_stream, spec), initial_state)


def _prepared(main: DataFrame, build: Callable[[], RuntimePlan],
              initial_state: InitialState | None = None) -> ProcessResult:
    """The result of a plan built after the workers' Python is checked (the plan captures it)
    and prepared for its session (state store, shuffle partitions, default blob store)."""
    check_workers(main.sparkSession)
    plan = build()
    prepare(plan)
    if initial_state:
        attach_initial_state(plan, initial_state)
    return ProcessResult(plan)


class ProcessResult:
    """Flink's ``SingleOutputStreamOperator`` of a broadcast ``process``, as Spark DataFrames."""

    def __init__(self, plan: RuntimePlan) -> None:
        self.plan = plan
        self._tagged: DataFrame | None = None
        #: the name of this result's counts in the monitoring (``observe/observation.py``)
        self.observation: str | None = None

    @property
    def tagged(self) -> DataFrame:
        """The operator's raw output: ``_tag``, ``_ts``, ``_payload`` and the main fields."""
        if self._tagged is None:
            tagged = tagged_output(self.plan)
            if tagged.isStreaming:
                if self.observation is None:  # a frame rebuilt for a new side output keeps it
                    self.observation = next_name(tagged.sparkSession)
                tagged = observed(tagged, self.observation)
            self._tagged = tagged
        return self._tagged

    def with_plan(self, plan: RuntimePlan) -> ProcessResult:
        """A result over another plan (a query's own copy), whose counts carry this result's
        name in the monitoring (named here, so ``result.observation`` names the query's)."""
        if self.observation is None:
            assert self.plan.spark is not None
            self.observation = next_name(self.plan.spark)
        other = ProcessResult(plan)
        other.observation = self.observation
        return other

    @property
    def main(self) -> DataFrame:
        """The main output, with the ``output_schema`` columns."""
        return typed_frame(self.tagged, self.plan, MAIN)

    def side_output(self, tag: OutputTag) -> DataFrame:
        """One side output, typed by its schema (declared in ``side_outputs=[...]`` or carried
        by the tag); a tag declared without a schema gives one JSON column ``value``."""
        if not isinstance(tag, OutputTag):
            raise PipelineError(f"side_output takes an OutputTag, not {type(tag).__name__}")
        if tag.tag_id == DEAD_LETTERS.tag_id:
            return self.dead_letters
        self._register(tag)
        return typed_frame(self.tagged, self.plan, tag.tag_id)

    get_side_output = side_output  # PyFlink's name, so ported code reads the same

    # ---- chaining: the main output is a stream for the next step, as in Flink's DataStream

    def stream(self) -> Stream:
        """The main output as a ``Stream`` (the same as ``Stream(result.main)``)."""
        return Stream(self.main)

    def connect(self, other: Any) -> Any:
        """Chain a step: ``result.connect(Stream(models).broadcast(MODELS)).process(...)``."""
        return self.stream().connect(other)

    def key_by(self, *columns: str) -> Any:
        """Key the main output for the next step (``Stream.key_by``)."""
        return self.stream().key_by(*columns)

    def broadcast(self, *descriptors: Any, order_by: str | None = None) -> Any:
        """Broadcast the main output to the next step (``Stream.broadcast``)."""
        return self.stream().broadcast(*descriptors, order_by=order_by)

    @property
    def dead_letters(self) -> DataFrame:
        """Inputs and outputs that failed, with the reason (``callback``, ``error``)."""
        return typed_frame(self.tagged, self.plan, DEAD_LETTERS.tag_id)

    def write_stream(self, path: str | None = None, checkpoint_location: str | None = None, *,
                     sinks: Mapping[Any, Any] | None = None, format: str = "parquet",
                     trigger: dict[str, Any] | None = None, query_name: str | None = None,
                     metrics_port: int | None = None) -> StreamingQuery:
        """Start ONE streaming query that writes the main output, every side output and the
        dead letters (one checkpoint, no recomputation): under ``path`` exactly once, read with
        ``read_output(spark, path, "main" | tag)``; or into ``sinks`` (``{"main": ..., tag:
        ..., "dead_letters": ...}`` from ``sparkcast.sinks``; docs/sinks.md says which
        guarantee each gives). ``metrics_port`` serves the Prometheus endpoint on 127.0.0.1
        (docs/monitoring.md)."""
        if checkpoint_location is None or (path is None) == (sinks is None):
            raise PipelineError("write_stream takes a checkpoint_location and either a path or "
                                "sinks={output: sink}")
        self._streaming("write_stream")
        outputs = self._for_query(checkpoint_location)
        if metrics_port is not None:
            assert self.plan.spark is not None
            serve_metrics(self.plan.spark, metrics_port)
        if sinks is not None:
            return start_sinks(outputs, dict(sinks), checkpoint_location, trigger, query_name)
        assert path is not None
        return start_sink(outputs, path, checkpoint_location, format, trigger, query_name)

    def foreach_batch(self, fn: Callable[[Mapping[str, DataFrame], int], None],
                      checkpoint_location: str, *, trigger: dict[str, Any] | None = None,
                      query_name: str | None = None) -> StreamingQuery:
        """Start ONE streaming query calling ``fn(outputs, batch_id)`` per micro-batch, where
        ``outputs`` maps ``"main"``, each side output's tag id and ``"dead_letters"`` to the
        batch's rows as typed batch DataFrames (Spark's ``foreachBatch`` contract: a replayed
        ``batch_id`` gives identical frames). As with Spark's, each action on a frame computes
        it: persist them if ``fn`` acts on them more than once (docs/sinks.md)."""
        self._streaming("foreach_batch")
        return start_batches(self._for_query(checkpoint_location),
                             lambda _tagged, frames, batch_id, _empty: fn(frames, batch_id),
                             checkpoint_location, trigger, query_name, count=False,
                             persist=False)

    def explain(self, checkpoint_location: str | None = None) -> Explanation:
        """Print and return the engine this plan takes, why, how each side and output is read
        and written, and what it costs; with ``checkpoint_location``, for a query restarting
        from it (a checkpoint keeps the engine it was written by)."""
        try:
            frames: Choice | str = dataframe_choice(self.plan)
        except PipelineError as refused:  # engine="micro_batch" of a plan that needs the driver
            frames = str(refused)
        explained = explanation(self.plan, query_choice(self.plan, checkpoint_location), frames)
        print(explained)
        return explained

    def _for_query(self, checkpoint_location: str) -> ProcessResult:
        """This result as a query over ``checkpoint_location`` runs it: a copy of the plan on
        the engine the checkpoint was written by (this plan is never changed)."""
        choice = query_choice(self.plan, checkpoint_location)
        return self.with_plan(replace(self.plan, engine=choice.engine, reason=choice.reason))

    def _streaming(self, method: str) -> None:
        assert self.plan.tagged_input is not None
        if not self.plan.tagged_input.isStreaming:
            raise PipelineError(f"{method} needs a streaming input; for batch DataFrames write "
                                "result.main and result.side_output(tag) directly")

    def _register(self, tag: OutputTag) -> StructType | None:
        known = self.plan.side_schemas
        if tag.tag_id == HOLD_OVERFLOW.tag_id and tag.tag_id not in known:
            return None
        if tag.tag_id not in known:
            if tag.schema is None or self.plan.spark is None:
                raise PipelineError(no_schema_reason(tag.tag_id))
            # the workers check outputs against the tag's schema, so they must know it: later
            # accessors (and write_stream) use an operator built over a plan with the new tag
            schema = parse_schema(self.plan.spark, tag.schema, f"{tag} schema")
            self.plan = replace(self.plan, side_schemas={**known, tag.tag_id: schema})
            self._tagged = None
            return schema
        return known[tag.tag_id]
