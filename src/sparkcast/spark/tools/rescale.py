"""Rescale a job's state to a new parallelism (and number of state buckets).

What PySpark 4.3 allows (docs/state.md, found by running it): the state of a transformWithState
operator lives in RocksDB files that only Spark's state store writes, and Spark refuses to
restart a checkpoint whose offsets exist without its state
(``STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY``), while ``initialState`` is applied
only in the first micro-batch of a new checkpoint. So source offsets cannot be carried into a
checkpoint with new state. The exact route is Flink's stop-with-savepoint, in three steps:

1. stop the job at a batch boundary (an ``availableNow`` run, or ``query.stop()`` after
   ``processAllAvailable()``);
2. ``rescale(spark, OLD, NEW, parallelism=P)``: read every subtask's state at the last
   committed batch, send each keyed value, timer and held element to the subtask of its key at
   P (Spark's hash of the key columns, as the main rows are routed), copy the broadcast state to
   every subtask, and write it under ``NEW/sparkcast/`` with the new layout record;
3. start the job with ``process(..., parallelism=P, initial_state=NEW)`` and
   ``write_stream(NEW_OUTPUT, NEW)`` over the input that follows (a new folder for file
   sources; ``startingOffsets`` = the recorded end offsets for Kafka), so nothing is read twice
   or skipped.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sparkcast.core import codec
from sparkcast.core.seed import Seed, merged, split_by_key
from sparkcast.errors import PipelineError
from sparkcast.spark.plan import Engine, recorded_engine
from sparkcast.spark.planning.bootstrap import subtasks_of_keys
from sparkcast.spark.state import checkpoint_files, storage
from sparkcast.spark.state.compatibility import read_layout
from sparkcast.spark.tools.state_reader import read_subtasks


def rescale(spark: SparkSession, checkpoint: str, new_checkpoint: str, parallelism: int,
            state_buckets: int | None = None, *, batch_id: int | None = None,
            blob_store: str | None = None) -> dict[str, Any]:
    """Write the state of ``checkpoint`` (at ``batch_id``, default the last committed batch),
    redistributed over ``parallelism`` subtasks, as a new checkpoint a job starts from with
    ``initial_state=new_checkpoint``. Returns a summary: counts, the batch and the source end
    offsets the state corresponds to (where the new job's input must start)."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise PipelineError(f"parallelism must be an integer of at least 1, not {parallelism!r}")
    if checkpoint_files.in_use(new_checkpoint):
        raise PipelineError(f"{new_checkpoint} is a checkpoint already in use: rescale into a "
                            "new, empty folder")
    # class names kept: the values are written back as they were stored
    layout, seeds = read_subtasks(spark, checkpoint, batch_id, blob_store,
                                  types=codec.KEEP_NAMES)
    versions = {s.broadcast_version for s in seeds.values() if s.broadcast_version}
    if len(versions) > 1:
        raise PipelineError(f"the subtasks of {checkpoint} hold different broadcast versions "
                            f"{sorted(versions)}: read them at a committed batch")
    whole = merged(seeds.values())
    subtask_of = _placement(spark, layout, whole, parallelism)
    new = split_by_key(whole, subtask_of, parallelism)
    buckets = layout["state_buckets"] if state_buckets is None else state_buckets
    batch = checkpoint_files.last_committed(checkpoint) if batch_id is None else batch_id
    summary = {"source": checkpoint, "batch_id": batch, "parallelism": parallelism,
               "state_buckets": buckets, "from_parallelism": layout["parallelism"],
               "offsets": [] if batch is None else checkpoint_files.end_offsets(checkpoint, batch),
               "keyed": {n: len(r) for n, r in sorted(whole.keyed.items())},
               "timers": sum(len(t) for t in whole.timers.values()), "held": len(whole.held),
               "broadcast": {n: len(e) for n, e in sorted(whole.broadcast.items())}}
    prepared = {**summary, "seeds": {str(i): s.to_bytes() for i, s in new.items()}}
    storage.write_bytes(checkpoint_files.file(new_checkpoint, *checkpoint_files.PREPARED_FILE),
                        codec.encode(prepared))
    new_layout = {**layout, "parallelism": parallelism, "state_buckets": buckets,
                  "subtask_groups": []}  # the new job's first start records its groups
    checkpoint_files.write_json(new_checkpoint, checkpoint_files.LAYOUT_FILE, new_layout)
    return summary


def _placement(spark: SparkSession, layout: dict[str, Any], whole: Seed, parallelism: int
               ) -> Any:
    if not layout["keyed"]:
        return lambda key: 0  # non-keyed: only unkeyed held elements, any subtask serves them
    keys = {k for records in whole.keyed.values() for k, _ in records}
    keys.update(codec.hashable(t[1]) for entries in whole.timers.values() for t in entries)
    keys.update(codec.hashable(h[2]) for h in whole.held if len(h) > 2)
    found = subtasks_of_keys(spark, keys, layout["key_columns"], parallelism)
    return found.__getitem__


def rescale_in_place(spark: SparkSession, checkpoint: str, partitions: int) -> dict[str, Any]:
    """Move the operator's state of ``checkpoint`` to ``partitions`` Spark partitions in the
    same checkpoint, with Spark's own offline repartition (PySpark 4.2+, experimental): it
    writes batch N+1 holding the moved state, so the offsets stay and the job restarts on its
    own checkpoint and input. The virtual subtasks stay (``parallelism`` is fixed, as Flink's
    max-parallelism): useful partitions are 1..parallelism. The query must be stopped."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise PipelineError(f"partitions must be an integer of at least 1, not {partitions!r}")
    layout = read_layout(checkpoint)
    # the micro-batch engine's timers keep a clock's state there too (tagging.clock): not this
    if (layout is None or recorded_engine(layout.get("path", "operator")) is not Engine.OPERATOR
            or not checkpoint_files.holds_operator_state(checkpoint)):
        raise PipelineError(
            f"{checkpoint} holds no operator state written by write_stream (path "
            f"{None if layout is None else layout.get('path')!r}): the micro-batch engine keeps no "
            "per-partition state (its keyed state lives per subtask), so its partitions change "
            "with spark.sql.shuffle.partitions alone")
    before = _state_partitions(spark, checkpoint)
    batch = checkpoint_files.last_committed(checkpoint)
    try:
        spark._streamingCheckpointManager.repartition(checkpoint, partitions)
    except Exception as exc:  # py4j carries Spark's error class in its message
        raise PipelineError(f"Spark's repartition of {checkpoint} to {partitions} partitions "
                            f"failed: {str(exc).splitlines()[0]}") from exc
    groups = layout["subtask_groups"]
    placed = spark.createDataFrame([(g,) for g in groups], "g long").select(
        F.pmod(F.hash("g"), F.lit(partitions)).alias("p")).collect()
    return {"checkpoint": checkpoint, "batch_id": checkpoint_files.last_committed(checkpoint),
            "after_batch": batch, "from_partitions": before, "partitions": partitions,
            "parallelism": layout["parallelism"],
            "partition_of_subtask": [row["p"] for row in placed]}


def _state_partitions(spark: SparkSession, checkpoint: str) -> int | None:
    rows = spark.read.format("state-metadata").load(checkpoint).select("numPartitions").collect()
    return rows[0][0] if rows else None
