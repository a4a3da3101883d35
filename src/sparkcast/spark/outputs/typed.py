"""The tagged frame (``layout.py``) as the user's typed outputs: the main rows, each side output
parsed with its schema, the dead letters. ``ProcessResult``'s accessors and the per-batch
frames of ``foreach_batch`` and ``write_stream(sinks=...)`` are built here, one way, and which
of a batch's outputs its observed counts show to be empty.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructType

from sparkcast.api.options import HOLD_OVERFLOW
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import MissingKeyError
from sparkcast.spark.execution.encoding import tagged_schema
from sparkcast.spark.layout import DEAD_LETTER_SCHEMA, MAIN, PAYLOAD, TAG
from sparkcast.spark.plan import RuntimePlan

_DEAD_LETTER_FIELDS = [column.split()[0] for column in DEAD_LETTER_SCHEMA.split(", ")]


def typed_row(plan: RuntimePlan, name: str) -> tuple[Column, list[Column]]:
    """Which rows of the tagged frame are output ``name``'s, and its typed columns over them:
    the main fields; a side output parsed with its schema (without one, a JSON column
    ``value``); the dead letters' ``DEAD_LETTER_SCHEMA``."""
    if name == MAIN:
        return F.col(TAG).isNull(), [F.col(f"`{f}`") for f in plan.output_schema.fieldNames()]
    rows = F.col(TAG) == F.lit(name)
    if name == DEAD_LETTERS.tag_id:
        letter = F.from_json(PAYLOAD, DEAD_LETTER_SCHEMA)
        return rows, [letter.getField(f).alias(f) for f in _DEAD_LETTER_FIELDS]
    schema = plan.side_schemas.get(name)
    if schema is None:
        return rows, [F.col(PAYLOAD).alias("value")]
    parsed = F.from_json(PAYLOAD, schema)
    return rows, [parsed.getField(f).alias(f) for f in schema.fieldNames()]


def output_names(plan: RuntimePlan) -> list[str]:
    """Every output a plan can emit: ``"main"``, the side outputs' tag ids (the overflow of
    ``hold_until_ready`` only when it holds), ``"dead_letters"``."""
    sides = [tag for tag in plan.side_schemas
             if tag != HOLD_OVERFLOW.tag_id or plan.options.hold_until_ready]
    return [MAIN, *sides, DEAD_LETTERS.tag_id]


class Outputs(Mapping[str, DataFrame]):
    """Every output of a plan as its typed frame over ``tagged`` (one micro-batch's rows),
    each built when first read: building one asks the JVM to analyse a plan over the
    pattern's (~0.1 s on the driver per output and batch), which a consumer that reads only
    ``"main"``, or skips empty outputs, need not pay for the others."""

    def __init__(self, tagged: DataFrame, plan: RuntimePlan) -> None:
        self._tagged = tagged
        self._plan = plan
        self._names = output_names(plan)
        self._built: dict[str, DataFrame] = {}

    def __getitem__(self, name: str) -> DataFrame:
        if name not in self._names:
            raise MissingKeyError(f"no output {name!r}; this pipeline's are {self._names}")
        if name not in self._built:
            self._built[name] = typed_frame(self._tagged, self._plan, name)
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"Outputs({', '.join(self._names)})"


def typed_frame(tagged: DataFrame, plan: RuntimePlan, name: str) -> DataFrame:
    """Output ``name`` of ``plan`` as its typed frame over ``tagged``."""
    rows, columns = typed_row(plan, name)
    return tagged.filter(rows).select(*columns)


def empty_outputs(counts: Mapping[str, Any], plan: RuntimePlan) -> frozenset[str]:
    """The outputs that a micro-batch's observed counts (``observe/observation.py``) show to
    hold no rows, so a sink need not run a Spark job to write them: the main output, the dead
    letters, and every side output when the side outputs together have none."""
    empty = set()
    if counts.get("main_rows") == 0:
        empty.add(MAIN)
    if counts.get("dead_letters") == 0:
        empty.add(DEAD_LETTERS.tag_id)
    if counts.get("side_output_rows") == 0:
        empty.update(output_names(plan)[1:-1])
    return frozenset(empty)


def schemas(plan: RuntimePlan) -> dict[str, StructType]:
    """Each output's schema, from an empty tagged frame (analysis only, nothing runs)."""
    assert plan.spark is not None
    empty = plan.spark.createDataFrame([], tagged_schema(plan.output_schema, LongType()))
    return {name: frame.schema for name, frame in Outputs(empty, plan).items()}


def missing_columns(schema: StructType, columns: list[str]) -> list[str]:
    """The output's columns a table of ``columns`` lacks (in any case, as SQL matches names)."""
    have = {c.lower() for c in columns}
    return [n for n in schema.fieldNames() if n.lower() not in have]
