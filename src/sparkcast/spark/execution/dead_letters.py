"""Dead letters that need the Spark side's help: malformed input lines, and broadcast failures
that every subtask meets alike.

Unparsable rows (``planning/corrupt.py`` splits them off each input) become dead letters with
callback ``"input"`` shaped like the tagged output, in the same frame as the operator's, so
``write_stream`` writes them too. A broadcast element that fails fails on every subtask (all
apply the same elements to the same state), so only subtask 0 reports it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from sparkcast.core.records import DEAD_LETTERS, OutputRecord
from sparkcast.spark.layout import ERROR, PAYLOAD, RAW, TAG, TS


def broadcast_letters_once(outputs: list[OutputRecord]) -> list[OutputRecord]:
    """The outputs of a subtask other than 0 without its broadcast dead letters that name no
    key. Every subtask applies the same broadcast elements to the same broadcast state, so such a
    failure happens on all P of them: subtask 0 reports it, once. A failure inside
    ``apply_to_keyed_state`` names the key (keyed state differs by subtask), and each subtask
    where one happens reports its own."""
    return [record for record in outputs
            if record[0] != DEAD_LETTERS or record[1].key is not None
            or record[1].callback != "process_broadcast_element"]


def subtask_share(outputs: list[list[OutputRecord]], subtask: int) -> list[OutputRecord]:
    """What ``subtask`` emits of the broadcast outputs the driver's engines made once for all:
    ``outputs`` holds one list for every subtask, or one per subtask (a function that asks
    which subtask it is); keyless broadcast dead letters on subtask 0 alone."""
    records = outputs[subtask] if len(outputs) > 1 else outputs[0]
    return broadcast_letters_once(records) if subtask else records


def corrupt_letters(bad: DataFrame, output_schema: StructType, ts_type: DataType) -> DataFrame:
    """Unparsable rows (``_raw``, ``_error``) shaped like the operator's tagged output."""
    letter = F.struct(
        F.lit("input").alias("callback"),
        F.col(ERROR).alias("error"),
        F.lit(None).cast("string").alias("key"),
        F.col(RAW).alias("value"),
        F.lit(None).cast("long").alias("timestamp"),
        F.lit(None).cast("int").alias("subtask"),
    )
    return bad.select(
        F.lit(DEAD_LETTERS.tag_id).alias(TAG),
        F.lit(None).cast(ts_type).alias(TS),
        F.to_json(letter).alias(PAYLOAD),
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in output_schema.fields],
    )
