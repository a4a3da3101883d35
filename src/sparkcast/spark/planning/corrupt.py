"""Malformed input, on either side: rows Spark's reader could not parse go to the dead letters.

A JSON or CSV source in ``PERMISSIVE`` mode with a ``_corrupt_record`` column in its schema keeps
unparsable lines (bad JSON, a string where a number belongs) as rows whose parsed fields are null
and whose ``_corrupt_record`` holds the raw text. The user function must never see them — it would
fail on the nulls, or worse, compute with them (a broadcast row of nulls would become broadcast
state on every subtask) — yet none may vanish: they become dead letters (callback ``"input"``)
with the raw record as value, in the same tagged output (so ``write_stream`` writes them too;
``execution/dead_letters.py`` shapes them).

A JSON or CSV file source *without* that column turns a malformed line into a row of nulls that
nothing can tell from data (5 events and one bad line give 6 main rows, no dead letter): such a
source is found in the DataFrame's plan when the pipeline is built and warned about, with the
one-line fix (add ``_corrupt_record string`` to its schema). A dead letter's error names the
file the line came from.

A static (batch) broadcast side is read once, when the pipeline is built: a malformed line there
is refused at ``process()`` with the first bad lines, since a one-off table can be fixed.

>>> events = spark.readStream.schema("user string, amount double, _corrupt_record string")...
>>> result.dead_letters  # callback "input", error "malformed input: ...", value: the raw line
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sparkcast.errors import PipelineError, warn
from sparkcast.spark.layout import ERROR, RAW

CORRUPT_COLUMN = "_corrupt_record"


def split_corrupt(df: DataFrame, side: str = "main") -> tuple[DataFrame, DataFrame | None]:
    """The parsable rows without the corrupt-record column, and the unparsable ones as
    ``(_raw, _error)`` (the same columns for both sides, so they union), or None when the source
    has no such column."""
    if CORRUPT_COLUMN not in df.columns:
        warn_without_corrupt_column(df, side)
        return df, None
    bad, raw, error = letter_columns(df, side)
    return df.filter(~bad).drop(CORRUPT_COLUMN), df.filter(bad).select(raw.alias(RAW),
                                                                       error.alias(ERROR))


def letter_columns(df: DataFrame, side: str) -> tuple[Column, Column, Column]:
    """Over a frame with the corrupt-record column: whether a row is malformed, its raw text and
    its dead letter's error (naming the file). ``split_corrupt`` filters by them; the
    micro-batch engine's input tags each row by them in one pass over the source
    (``tagging.streamed_input``): two filtered branches would scan the source twice, and
    Spark's progress would count its rows twice."""
    marker = F.col(f"`{CORRUPT_COLUMN}`")
    fields = ", ".join(c for c in df.columns if c != CORRUPT_COLUMN)
    # Spark refuses queries of raw JSON/CSV that reference only the corrupt-record column:
    # the coalesce names every column (the raw text is never null on these rows)
    raw = F.coalesce(marker, F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns])))
    file = F.input_file_name()
    where = F.when(file != F.lit(""), F.concat(F.lit(" in "), file)).otherwise(F.lit(""))
    error = F.concat(F.lit("malformed input"), where, F.lit(
        f": the record does not parse as the {side} schema ({fields})"))
    return marker.isNotNull(), raw, error


#: a JSON or CSV file scan in a plan's text: streaming (``UnresolvedDataSource format: json`` in
#: the logical plan; ``DataSource(..., json, ...)`` in older Sparks) or batch (``Relation [...]
#: json``)
_TEXT_SCAN = re.compile(r"format: (json|csv)\b|DataSource\(.*?,\s*(json|csv)\s*,"
                        r"|Relation \[.*?\] (json|csv)\b")


def text_file_format(df: DataFrame) -> str | None:
    """``"json"`` or ``"csv"`` when ``df`` reads such files: from its plans' text, and from the
    streaming file sources among its plan's leaves (a derived frame's text names no format);
    None when it does not, or the plan is not at hand (Spark Connect)."""
    try:
        execution = df._jdf.queryExecution()
        analyzed = execution.analyzed()
        plan = f"{execution.logical().toString()}\n{analyzed.toString()}"
        leaves = analyzed.collectLeaves()
        for index in range(leaves.size()):
            leaf = leaves.apply(index)
            if leaf.nodeName() == "StreamingRelation":
                plan += f"\nformat: {leaf.dataSource().className()}"
    except Exception:  # noqa: BLE001 - Spark Connect has no JVM plan here: nothing to warn about
        return None
    found = _TEXT_SCAN.search(plan)
    return None if found is None else next(g for g in found.groups() if g)


def warn_without_corrupt_column(df: DataFrame, side: str) -> None:
    """Warn, when the pipeline is built, that a JSON/CSV source without a corrupt-record column
    turns a malformed line into a row of nulls; the message gives the one-line fix."""
    kind = text_file_format(df)
    if kind is None:
        return
    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields)
    warn(
        f"the {side} input reads {kind.upper()} files without a {CORRUPT_COLUMN} column: Spark "
        "turns a malformed line into a row of nulls, which the function sees as data. Add the "
        f"column to its schema, e.g. .schema(\"{schema}, {CORRUPT_COLUMN} string\"), and "
        "malformed lines become dead letters with the raw line and its file")


def split_broadcast_corrupt(df: DataFrame) -> tuple[DataFrame, DataFrame | None]:
    """``split_corrupt`` for the broadcast side; a static side with malformed lines is refused."""
    good, bad = split_corrupt(df, "broadcast")
    if bad is None or df.isStreaming:
        return good, bad
    first = [row[RAW] for row in bad.limit(3).collect()]
    if first:
        raise PipelineError(
            f"the static broadcast DataFrame has malformed lines (first: {first}); fix the "
            "source, or read it with mode DROPMALFORMED to skip them")
    return good, None


def union_corrupt(*frames: DataFrame | None) -> DataFrame | None:
    present = [f for f in frames if f is not None]
    if not present:
        return None
    union = present[0]
    for frame in present[1:]:
        union = union.unionByName(frame)
    return union
