"""The wiring API: PyFlink's stream-construction calls, over Spark DataFrames.

>>> rule_stream = Stream(rules_df).broadcast(RULES)
>>> result = (Stream(items_df).key_by("color")
...           .connect(rule_stream)
...           .process(MatchRules(), output_schema="rule string, first string, second string"))
>>> result.main, result.side_output(REVIEW), result.dead_letters
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction, KeyedBroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.errors import PipelineError
from sparkcast.spark.checks import check_workers, prepare
from sparkcast.spark.plan import ProcessSpec, build_plan
from sparkcast.spark.result import ProcessResult


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
        return BroadcastConnectedStream(self, broadcast_stream)


class KeyedStream(Stream):
    def __init__(self, df: DataFrame, key_columns: tuple[str, ...]) -> None:
        super().__init__(df)
        self.key_columns = key_columns


class BroadcastStream:
    """Flink's ``BroadcastStream``: the low-throughput side and its state descriptors."""

    def __init__(self, df: DataFrame, descriptors: Iterable[MapStateDescriptor],
                 order_by: str | None) -> None:
        self.df = df
        self.descriptors = tuple(descriptors)
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
        output_schema: str,
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
    ) -> ProcessResult:
        """Run ``function`` over both streams; see docs/api.md for every option.

        ``parallelism`` is the number of virtual subtasks (fixed for a checkpoint; default the
        session's shuffle partitions). ``event_time`` names a timestamp or epoch-ms column of
        both inputs: element timestamps, watermark-driven timers, ``time_alignment="event"``.
        ``blob_store`` is where broadcast values of 1 MiB or more are stored once (default: the
        checkpoint with ``write_stream``; on a cluster, a path every executor can read)."""
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
        )
        key_columns = self.main.key_columns if isinstance(self.main, KeyedStream) else ()
        check_workers(self.main.df.sparkSession)  # before the plan captures their Python
        plan = build_plan(self.main.df, key_columns, self.broadcast_stream, spec)
        prepare(plan)  # the session's state store, shuffle partitions; default blob store
        return ProcessResult(plan)
