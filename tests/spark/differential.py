"""Run one corpus program on the harness and on Spark, outputs as comparable multisets.

The harness plays Spark's micro-batches with ``process_micro_batch``: one call per batch with the
same rows, main rows in their source order (each batch is one file or one frame on Spark, so
the order its rows are listed in) and, for
programs with timers, the watermark Spark computes: the largest main ``ts`` of the earlier
batches (a zero delay), plus the no-data batch Spark runs when the watermark moved last.

On Spark, every program of a run shares one query (their tagged outputs unioned): one query per
parallelism instead of one per program keeps the suite within its time budget.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.api.pyflink_types import output_ddl
from sparkcast.api.row import Row, row_type
from sparkcast.core.ddl import parse_ddl
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark import Stream
from sparkcast.spark.execution.payloads import to_jsonable
from sparkcast.spark.layout import METRICS
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness
from tests.conftest import write_json_lines
from tests.spark.corpus import Program

Outputs = dict[str, Counter]


# ---------------------------------------------------------------------------------- harness side


def harness_outputs(program: Program, batches: list[tuple[list, list]] | None = None,
                    *, streaming: bool = True) -> Outputs:
    """What the engine gives when fed ``batches`` (default: the program's) one at a time."""
    batches = list(program.batches if batches is None else batches)
    if not streaming:  # a batch DataFrame is one micro-batch
        batches = [([r for b, _ in batches for r in b], [r for _, m in batches for r in m])]
    h = _harness(program)
    h.open()
    main_fields = _fields(program.main_schema)
    bcast_fields = _fields(program.broadcast_schema)
    seen: list[int] = []
    for bcast, main in batches:
        watermark = max(seen) if program.timers and streaming and seen else None
        h.process_micro_batch(
            [_row(main_fields, r) for r in main], [_row(bcast_fields, r) for r in bcast],
            main_timestamps=[r["ts"] for r in main],
            broadcast_timestamps=[r["ts"] for r in bcast],
            watermark=0 if program.timers and watermark is None else watermark)
        seen += [r["ts"] for r in main]
    if program.timers and streaming and seen:
        h.process_micro_batch(watermark=max(seen))  # Spark's no-data batch
    return _harness_collect(program, h)


def _harness(program: Program) -> Any:
    options = {k: v for k, v in program.options.items() if k in ("hold_until_ready",)}
    # the schemas Spark's process() gets: the harness checks outputs against them, as Spark does
    options.update(output_schema=program.output_schema, side_outputs=program.side_outputs)
    if program.key:
        return KeyedBroadcastHarness(program.make(), lambda v: v[program.key],
                                     list(program.descriptors), on_error="dead_letter", **options)
    return BroadcastHarness(program.make(), list(program.descriptors), on_error="dead_letter",
                            **options)


def _harness_collect(program: Program, h: Any) -> Outputs:
    fields = _fields(program.output_schema)
    out: Outputs = {"main": Counter(canon(_as_record(v, fields)) for v in h.output())}
    for tag in program.side_outputs:
        names = _fields(tag.schema) if tag.schema else None
        out[tag.tag_id] = Counter(canon(_side_record(v, names)) for v in h.side_output(tag))
    out[DEAD_LETTERS.tag_id] = Counter(canon({"callback": d.callback, "error": d.error})
                                       for d in h.dead_letters())
    return out


def _side_record(value: Any, names: list[str] | None) -> Any:
    """A side output's value as Spark's payload holds it: a one-column tag's bare value (an
    ``OutputTag("side", Types.INT())``) under its column's name."""
    record = to_jsonable(value, names)
    if names is not None and len(names) == 1 and not isinstance(record, dict):
        return {names[0]: record}
    return record


def _as_record(value: Any, fields: list[str]) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, Row) and value.__fields__:  # PyFlink's named Row: by name
        return to_jsonable(value)
    if isinstance(value, (tuple, list)):
        return dict(zip(fields, value, strict=True))
    return {fields[0]: value}


# ------------------------------------------------------------------------------------ Spark side


def spark_outputs(spark: Any, programs: list[Program], parallelism: int, *,
                  stream_dir: Path | None = None) -> dict[str, Outputs]:
    """Run ``programs`` in one Spark job (batch DataFrames) or one streaming query (file
    sources under ``stream_dir``, one file per micro-batch and source, ``availableNow``)."""
    inputs = {p.name: (_stream_inputs(spark, p, stream_dir / p.name) if stream_dir
                       else _batch_inputs(spark, p)) for p in programs}
    union = tagged_union(programs, inputs, parallelism)
    rows = collect_stream(spark, union, stream_dir) if stream_dir else union.collect()
    return split_outputs(programs, rows)


def tagged_union(programs: list[Program], inputs: dict[str, tuple[DataFrame, DataFrame]],
                 parallelism: int) -> DataFrame:
    """Every program's tagged outputs in one frame (``inputs``: its main and broadcast
    DataFrames by program name), a ``program`` column telling them apart."""
    frames = [_tagged(p, *inputs[p.name], parallelism) for p in programs]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def split_outputs(programs: list[Program], rows: list[Any]) -> dict[str, Outputs]:
    """The collected rows of ``tagged_union`` as each program's comparable outputs."""
    return {p.name: _spark_collect(p, [r for r in rows if r["program"] == p.name])
            for p in programs}


def process(program: Program, main: DataFrame, bcast: DataFrame, parallelism: int, **extra: Any
            ) -> Any:
    """``program`` wired the way a user would, on Spark."""
    stream = Stream(main).key_by(program.key) if program.key else Stream(main)
    options = {"event_time": "ts", **program.options, **extra}
    return stream.connect(Stream(bcast).broadcast(*program.descriptors)).process(
        program.make(), program.output_schema, parallelism=parallelism,
        side_outputs=program.side_outputs, **options)


def _tagged(program: Program, main: DataFrame, bcast: DataFrame, parallelism: int) -> DataFrame:
    result = process(program, main, bcast, parallelism)
    fields = [F.col(f"`{f}`") for f in result.plan.output_schema.fieldNames()]
    main = F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})
    outputs = result.tagged.filter(F.col("_tag").isNull() | (F.col("_tag") != F.lit(METRICS)))
    return outputs.select(F.lit(program.name).alias("program"), "_tag", main.alias("main"),
                          "_payload")


def _batch_inputs(spark: Any, program: Program) -> tuple[DataFrame, DataFrame]:
    bcast = [r for b, _ in program.batches for r in b]
    main = [r for _, m in program.batches for r in m]
    return (_frame(spark, program.main_schema, main),
            _frame(spark, program.broadcast_schema, bcast))


def _frame(spark: Any, schema: str, rows: list[dict]) -> DataFrame:
    fields = _fields(schema)
    return spark.createDataFrame([tuple(r.get(f) for f in fields) for r in rows], schema)


def _stream_inputs(spark: Any, program: Program, base: Path) -> tuple[DataFrame, DataFrame]:
    for index, (bcast, main) in enumerate(program.batches):
        write_batch_file(base / "main", index, main)
        write_batch_file(base / "bcast", index, bcast)
    main_df = read_stream(spark, program.main_schema, base / "main")
    if program.timers:
        main_df = with_watermark(main_df)
    return main_df, read_stream(spark, program.broadcast_schema, base / "bcast")


def with_watermark(df: DataFrame, column: str = "ts") -> DataFrame:
    """Spark's watermark (zero delay) on an epoch-ms column, without changing the columns."""
    return (df.withColumn("_wm", F.timestamp_millis(F.col(column)))
            .withWatermark("_wm", "0 seconds").drop("_wm"))


def write_batch_file(directory: Path, index: int, rows: list[Any]) -> Path:
    """File ``index`` of a source, its mtime ordered by index: with ``maxFilesPerTrigger=1`` the
    source reads it in micro-batch ``index`` (Spark takes files oldest first)."""
    path = write_json_lines(directory, f"part-{index:04d}.json", rows)
    stamp = time.time() - 3_600 + index
    os.utime(path, (stamp, stamp))
    return path


def read_stream(spark: Any, schema: str, directory: Path) -> DataFrame:
    directory.mkdir(parents=True, exist_ok=True)
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(directory))


def collect_stream(spark: Any, frame: DataFrame, base: Path) -> list[Any]:
    """Run ``frame`` to the end of its input (``availableNow``, checkpoint under ``base``)."""
    name = f"diff_{uuid.uuid4().hex[:8]}"
    query = (frame.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(base / "_checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    rows = spark.table(name).collect()
    spark.catalog.dropTempView(name)
    return rows


def _spark_collect(program: Program, rows: list[Any]) -> Outputs:
    out: Outputs = {"main": Counter(canon(json.loads(r["main"])) for r in rows
                                    if r["_tag"] is None)}
    for tag in program.side_outputs:
        out[tag.tag_id] = Counter(canon(json.loads(r["_payload"])) for r in rows
                                  if r["_tag"] == tag.tag_id)
    letters = [json.loads(r["_payload"]) for r in rows if r["_tag"] == DEAD_LETTERS.tag_id]
    out[DEAD_LETTERS.tag_id] = Counter(canon({"callback": d["callback"], "error": d["error"]})
                                       for d in letters)
    return out


# --------------------------------------------------------------------------------------- helpers


def _fields(schema: Any) -> list[str]:
    """The field names of a DDL field list or a PyFlink output type (``Types.ROW_NAMED``)."""
    ddl = schema if isinstance(schema, str) else output_ddl(schema)[0]
    return parse_ddl(ddl).names


def _row(fields: list[str], record: dict) -> Any:
    return row_type(tuple(fields))._make(record.get(f) for f in fields)


def canon(value: Any) -> str:
    """One JSON text per value; integral floats as ints (JSON and pandas disagree on 5 vs 5.0)."""
    return json.dumps(_normal(value), sort_keys=True)


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "item"):  # numpy scalars
        return _normal(value.item())
    return value
