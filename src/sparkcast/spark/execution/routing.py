"""Where a row goes: the column expressions that give main rows their subtask, the same on the
operator engine (``planning/tagging.py``), the micro-batch engine by subtask
(``partitioned.py``) and in ``initial_state`` (``planning/bootstrap.py``), so a key lands in one
subtask on either engine; the one row per subtask that both engines join their inputs
with (the micro-batch engine's ticks, the operator's copy of each broadcast row); and the shuffle
partition a grouping value goes to (``partition_of``), as Spark's ``repartition`` puts it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from sparkcast.spark.layout import SUBTASK


def group_column(groups: list[int], index: Any) -> Any:
    """The grouping value of subtask ``index`` (a column): the balanced keys that spread the
    subtasks over shuffle partitions (``tagging.balanced_group_keys``)."""
    return F.element_at(F.array(*[F.lit(g).cast("long") for g in groups]), index + 1)


def subtask_rows(spark: SparkSession, groups: list[int]) -> DataFrame:
    """One row per subtask, its grouping value as ``_subtask``, made in the JVM in ONE partition
    (a frame from a Python list is ``spark.default.parallelism`` partitions that the JVM
    unpickles: four tasks of ~60 ms in every micro-batch that reads it)."""
    return spark.range(0, len(groups), numPartitions=1).select(
        group_column(groups, F.col("id").cast("int")).alias(SUBTASK))


def subtask_hash(df: DataFrame, columns: list[str], key_columns: list[str]) -> Any:
    """The hash whose ``pmod`` by P is a row's subtask, the same on both engines: Spark's
    Murmur3 of the key columns (stable across runs and versions), a non-keyed row's xxhash64 of
    all its columns (a long: cast the ``pmod`` to int for ``element_at``)."""
    if key_columns:
        return F.hash(*hash_columns(df, key_columns))
    return F.xxhash64(*hash_columns(df, columns))


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


_MASK = 0xFFFFFFFF


def partition_of(group: int, partitions: int) -> int:
    """The shuffle partition of a long ``group`` under ``repartition(partitions, column)``:
    Spark's Murmur3 x86_32 (seed 42) of its eight bytes, low word first, modulo the partitions
    (``pmod``). Computed here, not asked of Spark: no job, and py4j cannot pass a small int
    where Java wants a long."""
    h1 = 42
    for word in (group & _MASK, (group >> 32) & _MASK):
        k1 = (word * 0xCC9E2D51) & _MASK
        k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
        k1 = (k1 * 0x1B873593) & _MASK
        h1 ^= k1
        h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
        h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    signed = h1 - (1 << 32) if h1 & 0x80000000 else h1
    return signed % partitions
