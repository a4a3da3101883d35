"""Malformed main-side input: rows Spark's reader could not parse go to the dead letters.

A JSON or CSV source in ``PERMISSIVE`` mode with a ``_corrupt_record`` column in its schema keeps
unparsable lines (bad JSON, a string where a number belongs) as rows whose parsed fields are null
and whose ``_corrupt_record`` holds the raw text. The user function must never see them — it would
fail on the nulls, or worse, compute with them — yet none may vanish: they become dead letters
with the raw record as value, in the same tagged output (so ``write_stream`` writes them too).

>>> events = spark.readStream.schema("user string, amount double, _corrupt_record string")...
>>> result.dead_letters  # callback "input", error "malformed input: ...", value: the raw line
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.layout import PAYLOAD, TAG, TS

CORRUPT_COLUMN = "_corrupt_record"


def split_corrupt(main: DataFrame) -> tuple[DataFrame, DataFrame | None]:
    """The parsable rows without the corrupt-record column, and the unparsable rows (or None
    when the source has no such column)."""
    if CORRUPT_COLUMN not in main.columns:
        return main, None
    marker = F.col(f"`{CORRUPT_COLUMN}`")
    return main.filter(marker.isNull()).drop(CORRUPT_COLUMN), main.filter(marker.isNotNull())


def corrupt_letters(bad: DataFrame, output_schema: StructType, ts_type: DataType) -> DataFrame:
    """Unparsable rows shaped like the operator's tagged output (``_tag`` = dead letters)."""
    fields = ", ".join(c for c in bad.columns if c != CORRUPT_COLUMN)
    # Spark refuses queries of raw JSON/CSV that reference only the corrupt-record column:
    # the coalesce names every column (the raw text is never null on these rows)
    raw = F.coalesce(F.col(f"`{CORRUPT_COLUMN}`"),
                     F.to_json(F.struct(*[F.col(f"`{c}`") for c in bad.columns])))
    letter = F.struct(
        F.lit("input").alias("callback"),
        F.lit(f"malformed input: the record does not parse as the main schema ({fields})")
        .alias("error"),
        F.lit(None).cast("string").alias("key"),
        raw.alias("value"),
        F.lit(None).cast("long").alias("timestamp"),
        F.lit(None).cast("int").alias("subtask"),
    )
    return bad.select(
        F.lit(DEAD_LETTERS.tag_id).alias(TAG),
        F.lit(None).cast(ts_type).alias(TS),
        F.to_json(letter).alias(PAYLOAD),
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in output_schema.fields],
    )
