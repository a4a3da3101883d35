"""Where ``ProcessResult.write_stream`` puts the outputs, and how to read them back.

One query writes the operator's tagged frame with Spark's own file sink, partitioned by output
(``<path>/_output=main/``, ``_output=<tag>/``, ``_output=dead_letters/``). Spark's file sink is
exactly-once (its ``_spark_metadata`` log commits each micro-batch's files atomically; readers see
only committed files) and costs one Spark job per micro-batch. A manifest beside the data records
the side outputs' schemas, so ``read_output`` returns typed columns.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.api.output_tag import OutputTag
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.compatibility import check_checkpoint

if TYPE_CHECKING:
    from sparkcast.spark.result import ProcessResult

MANIFEST = "_sparkcast_outputs.json"
INTERNAL = ("_tag", "_ts", "_payload", "_output")


def start_file_sink(result: ProcessResult, path: str, checkpoint_location: str, format: str,
                    trigger: dict[str, Any] | None, query_name: str | None) -> Any:
    check_checkpoint(result.plan, checkpoint_location)  # refuses before anything is written
    write_manifest(result, path)
    plan = result.plan
    if not plan.blob_store_chosen and "://" not in checkpoint_location:
        plan.blob_store = os.path.join(checkpoint_location.removeprefix("file:"), "blobs")
        result.reset()
    frame = result.tagged.withColumn(
        "_output", F.coalesce(F.col("_tag"), F.lit("main"))).drop("_tag")
    stream = (frame.writeStream.format(format).partitionBy("_output").outputMode("append")
              .option("path", path).option("checkpointLocation", checkpoint_location))
    if query_name:
        stream = stream.queryName(query_name)
    if trigger:
        stream = stream.trigger(**trigger)
    return stream.start()


def write_manifest(result: ProcessResult, path: str) -> None:
    plan = result.plan
    manifest = {
        "main": plan.output_schema.simpleString(),
        "side_outputs": {tag: (None if schema is None else schema.simpleString())
                         for tag, schema in plan.side_schemas.items()},
    }
    if "://" not in path or path.startswith("file:"):
        local = path.removeprefix("file:")
        os.makedirs(local, exist_ok=True)
        with open(os.path.join(local, MANIFEST), "w", encoding="utf-8") as out:
            json.dump(manifest, out, indent=1)


def read_output(spark: Any, path: str, output: str | OutputTag = "main",
                format: str = "parquet") -> DataFrame:
    """Read one output written by ``write_stream``: ``"main"``, ``"dead_letters"``, a side
    output's tag or its name (typed by the tag's schema, else a JSON ``value`` column)."""
    from sparkcast.spark.result import DEAD_LETTER_SCHEMA

    name = output.tag_id if isinstance(output, OutputTag) else output
    rows = spark.read.format(format).load(path).filter(F.col("_output") == F.lit(name))
    if name == "main":
        return rows.select(*[F.col(f"`{c}`") for c in rows.columns if c not in INTERNAL])
    schema = _side_schema(path, name, output)
    if name == DEAD_LETTERS.tag_id:
        schema = DEAD_LETTER_SCHEMA
    if schema is None:
        return rows.select(F.col("_payload").alias("value"))
    return rows.select(F.from_json("_payload", schema).alias("v")).select("v.*")


def _side_schema(path: str, name: str, output: str | OutputTag) -> str | None:
    if isinstance(output, OutputTag) and output.schema is not None:
        return output.schema
    manifest = os.path.join(path.removeprefix("file:"), MANIFEST)
    if not os.path.exists(manifest):
        return None
    with open(manifest, encoding="utf-8") as source:
        return json.load(source)["side_outputs"].get(name)
