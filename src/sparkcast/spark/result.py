"""``ProcessResult``: the outputs of ``process(...)`` as DataFrames, and one query writing all.

The operator emits one tagged frame (``layout.py``): main rows in typed columns (``_tag`` null),
side outputs and dead letters as JSON in ``_payload`` (low volume, any schema), observed for the
dead-letter counts (``observe.py``) before each accessor filters and parses it.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.api.output_tag import OutputTag
from sparkcast.core.output_check import no_schema_reason
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import PipelineError
from sparkcast.spark.layout import DEAD_LETTER_SCHEMA, PAYLOAD, TAG, TS
from sparkcast.spark.observe import next_name, observed
from sparkcast.spark.plan import RuntimePlan, parse_schema

# re-exported: sparkcast.spark.DEAD_LETTER_SCHEMA
__all__ = ["DEAD_LETTER_SCHEMA", "ProcessResult"]


class ProcessResult:
    """Flink's ``SingleOutputStreamOperator`` of a broadcast ``process``, as Spark DataFrames."""

    def __init__(self, plan: RuntimePlan) -> None:
        self.plan = plan
        self._tagged: DataFrame | None = None
        #: the name of this result's dead-letter counts in ``observedMetrics`` (observe.py)
        self.observation: str | None = None

    @property
    def tagged(self) -> DataFrame:
        """The operator's raw output: ``_tag``, ``_ts``, ``_payload`` and the main fields."""
        if self._tagged is None:
            tagged = _operator(self.plan)
            if tagged.isStreaming:
                if self.observation is None:  # a rebuilt operator (reset) keeps its name
                    self.observation = next_name(tagged.sparkSession)
                tagged = observed(tagged, self.observation)
            self._tagged = tagged
        return self._tagged

    def reset(self) -> None:
        """Rebuild the operator at next use (after the plan changed, e.g. a new side output)."""
        self._tagged = None

    @property
    def main(self) -> DataFrame:
        """The main output, with the ``output_schema`` columns."""
        fields = [F.col(f"`{f}`") for f in self.plan.output_schema.fieldNames()]
        return self.tagged.filter(F.col(TAG).isNull()).select(*fields)

    def side_output(self, tag: OutputTag) -> DataFrame:
        """One side output, typed by its schema (declared in ``side_outputs=[...]`` or carried
        by the tag); a tag declared without a schema gives one JSON column ``value``."""
        if not isinstance(tag, OutputTag):
            raise PipelineError(f"side_output takes an OutputTag, not {type(tag).__name__}")
        if tag.tag_id == DEAD_LETTERS.tag_id:
            return self.dead_letters
        schema = self._register(tag)
        rows = self.tagged.filter(F.col(TAG) == F.lit(tag.tag_id))
        if schema is None:
            return rows.select(F.col(PAYLOAD).alias("value"))
        return rows.select(F.from_json(PAYLOAD, schema).alias("v")).select("v.*")

    get_side_output = side_output  # PyFlink's name, so ported code reads the same

    # ---- chaining: the main output is a stream for the next step, as in Flink's DataStream

    def stream(self) -> Any:
        """The main output as a ``Stream`` (the same as ``Stream(result.main)``)."""
        from sparkcast.spark.stream import Stream

        return Stream(self.main)

    def connect(self, other: Any) -> Any:
        """Chain a step: ``result.connect(Stream(models).broadcast(MODELS)).process(...)``."""
        return self.stream().connect(other)

    def key_by(self, *columns: str) -> Any:
        return self.stream().key_by(*columns)

    def broadcast(self, *descriptors: Any, order_by: str | None = None) -> Any:
        return self.stream().broadcast(*descriptors, order_by=order_by)

    @property
    def dead_letters(self) -> DataFrame:
        """Inputs and outputs that failed, with the reason (``callback``, ``error``)."""
        rows = self.tagged.filter(F.col(TAG) == F.lit(DEAD_LETTERS.tag_id))
        return rows.select(F.from_json(PAYLOAD, DEAD_LETTER_SCHEMA).alias("v")).select("v.*")

    def write_stream(self, path: str, checkpoint_location: str, *, format: str = "parquet",
                     trigger: dict[str, Any] | None = None, query_name: str | None = None,
                     metrics_port: int | None = None) -> Any:
        """Start ONE streaming query that writes the main output, every side output and the
        dead letters under ``path`` (one checkpoint, no recomputation), exactly once through
        Spark's file sink; read them with ``read_output(spark, path, "main" | tag)``.
        ``metrics_port`` serves the Prometheus endpoint on 127.0.0.1 (docs/monitoring.md)."""
        if not self.tagged.isStreaming:
            raise PipelineError("write_stream needs a streaming input; for batch DataFrames "
                                "write result.main and result.side_output(tag) directly")
        from sparkcast.spark.sink import start_sink

        if metrics_port is not None:
            from sparkcast.spark.prometheus import serve_metrics

            serve_metrics(self.tagged.sparkSession, metrics_port)
        return start_sink(self, path, checkpoint_location, format, trigger, query_name)

    def _register(self, tag: OutputTag) -> StructType | None:
        known = self.plan.side_schemas
        if tag.tag_id == HOLD_OVERFLOW.tag_id and tag.tag_id not in known:
            return None
        if tag.tag_id not in known:
            if tag.schema is None or self.plan.spark is None:
                raise PipelineError(no_schema_reason(tag.tag_id))
            # the workers check outputs against the tag's schema, so they must know it: later
            # accessors (and write_stream) use an operator built with the new tag
            known[tag.tag_id] = parse_schema(self.plan.spark, tag.schema, f"{tag} schema")
            self._tagged = None
        return known[tag.tag_id]


def _operator(plan: RuntimePlan) -> DataFrame:
    from sparkcast.spark.processor import BroadcastProcessor
    from sparkcast.spark.stateless import stateless_operator

    assert plan.tagged_input is not None
    schema = plan.tagged_input.schema
    broadcast_types = [schema[f"b_{i}"].dataType for i in range(len(plan.broadcast_fields))
                       if f"b_{i}" in schema.fieldNames()]
    output = tagged_schema(plan, schema[TS].dataType)
    if plan.stateless:
        tagged = stateless_operator(plan, output)
    else:
        initial = None
        if plan.initial_seeds:
            from sparkcast.spark.bootstrap import initial_state_frame

            initial = initial_state_frame(plan)
        shipped = plan.for_workers()
        shipped.streamed = False  # a streamed plan's DataFrames are the operator's
        tagged = plan.tagged_input.groupBy("_subtask").transformWithStateInPandas(
            statefulProcessor=BroadcastProcessor(shipped, broadcast_types),
            outputStructType=output, outputMode="Append", timeMode=plan.time_mode,
            initialState=initial)
    if plan.corrupt_input is not None:
        from sparkcast.spark.corrupt import corrupt_letters

        tagged = tagged.unionByName(corrupt_letters(plan.corrupt_input, plan.output_schema,
                                                    schema[TS].dataType))
    return tagged


def tagged_schema(plan: RuntimePlan, ts_type: Any) -> StructType:
    """The tagged frame's schema (``layout.py``): ``_tag``, ``_ts``, ``_payload``, main fields."""
    return StructType([StructField(TAG, StringType()), StructField(TS, ts_type),
                       StructField(PAYLOAD, StringType()), *plan.output_schema.fields])
