"""Where a row goes: the column expressions that give main rows their subtask, the same on the
operator engine (``planning/tagging.py``), the micro-batch engine by subtask
(``partitioned.py``) and in ``initial_state`` (``planning/bootstrap.py``), so a key lands in one
subtask on either engine."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType


def group_column(groups: list[int], index: Any) -> Any:
    """The grouping value of subtask ``index`` (a column): the balanced keys that spread the
    subtasks over shuffle partitions (``tagging.balanced_group_keys``)."""
    return F.element_at(F.array(*[F.lit(g).cast("long") for g in groups]), index + 1)


def hash_columns(df: DataFrame, names: Iterable[str]) -> list[Any]:
    """The columns ``names`` as Spark's hash functions take them: Spark cannot hash a map
    (DATATYPE_MISMATCH.HASH_MAP_TYPE), and feature-flag configs are naturally maps, so a column
    with a map anywhere inside is hashed as its JSON text (the same text on every replay)."""
    return [F.to_json(F.col(f"`{n}`")) if _has_map(df.schema[n].dataType) else F.col(f"`{n}`")
            for n in names]


def _has_map(kind: DataType) -> bool:
    if isinstance(kind, MapType):
        return True
    if isinstance(kind, ArrayType):
        return _has_map(kind.elementType)
    if isinstance(kind, StructType):
        return any(_has_map(f.dataType) for f in kind.fields)
    return False
