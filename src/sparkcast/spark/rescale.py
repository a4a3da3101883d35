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

import json
import os
from typing import Any

from pyspark.sql import SparkSession

from sparkcast.core import codec
from sparkcast.core.seed import Seed, merged, split_by_key
from sparkcast.errors import PipelineError
from sparkcast.spark.bootstrap import subtasks_of_keys
from sparkcast.spark.compatibility import LAYOUT_FILE
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state_reader import read_subtasks

PREPARED_FILE = os.path.join("sparkcast", "prepared-state.bin")


def rescale(spark: SparkSession, checkpoint: str, new_checkpoint: str, parallelism: int,
            state_buckets: int | None = None, *, batch_id: int | None = None,
            blob_store: str | None = None) -> dict[str, Any]:
    """Write the state of ``checkpoint`` (at ``batch_id``, default the last committed batch),
    redistributed over ``parallelism`` subtasks, as a new checkpoint a job starts from with
    ``initial_state=new_checkpoint``. Returns a summary: counts, the batch and the source end
    offsets the state corresponds to (where the new job's input must start)."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise PipelineError(f"parallelism must be an integer of at least 1, not {parallelism!r}")
    target = _local(new_checkpoint)
    if os.path.isdir(os.path.join(target, "commits")) or os.path.isdir(
            os.path.join(target, "offsets")):
        raise PipelineError(f"{new_checkpoint} is a checkpoint already in use: rescale into a "
                            "new, empty folder")
    layout, seeds = read_subtasks(spark, checkpoint, batch_id, blob_store)
    versions = {s.broadcast_version for s in seeds.values() if s.broadcast_version}
    if len(versions) > 1:
        raise PipelineError(f"the subtasks of {checkpoint} hold different broadcast versions "
                            f"{sorted(versions)}: read them at a committed batch")
    whole = merged(seeds.values())
    subtask_of = _placement(spark, layout, whole, parallelism)
    new = split_by_key(whole, subtask_of, parallelism)
    buckets = layout["state_buckets"] if state_buckets is None else state_buckets
    batch = _last_batch(checkpoint) if batch_id is None else batch_id
    summary = {"source": checkpoint, "batch_id": batch, "parallelism": parallelism,
               "state_buckets": buckets, "from_parallelism": layout["parallelism"],
               "offsets": _end_offsets(checkpoint, batch),
               "keyed": {n: len(r) for n, r in sorted(whole.keyed.items())},
               "timers": sum(len(t) for t in whole.timers.values()), "held": len(whole.held),
               "broadcast": {n: len(e) for n, e in sorted(whole.broadcast.items())}}
    prepared = {**summary, "seeds": {str(i): s.to_bytes() for i, s in new.items()}}
    _write(os.path.join(target, PREPARED_FILE), codec.encode(prepared))
    new_layout = {**layout, "parallelism": parallelism, "state_buckets": buckets,
                  "subtask_groups": []}  # the new job's first start records its groups
    _write(os.path.join(target, LAYOUT_FILE), json.dumps(new_layout, indent=1,
                                                         sort_keys=True).encode())
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


def prepared_seeds(checkpoint: str, plan: RuntimePlan) -> dict[int, Seed]:
    """The seeds ``rescale`` wrote into ``checkpoint``, checked against the plan."""
    path = os.path.join(_local(checkpoint), PREPARED_FILE)
    try:
        with open(path, "rb") as source:
            prepared = codec.decode(source.read())
    except FileNotFoundError:
        raise PipelineError(f"initial_state={checkpoint!r} holds no prepared state "
                            f"({PREPARED_FILE}): run sparkcast state rescale first") from None
    for item in ("parallelism", "state_buckets"):
        if getattr(plan, item) != prepared[item]:
            raise PipelineError(f"{checkpoint} was prepared for {item}={prepared[item]}, this "
                                f"pipeline has {item}={getattr(plan, item)}: pass "
                                f"{item}={prepared[item]}, or rescale again")
    return {int(i): Seed.from_bytes(blob) for i, blob in prepared["seeds"].items()}


def _local(checkpoint: str) -> str:
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        raise PipelineError(f"{checkpoint}: the state tools work on local checkpoints; copy it "
                            "to a local folder first")
    return checkpoint.removeprefix("file://").removeprefix("file:")


def _last_batch(checkpoint: str) -> int | None:
    commits = os.path.join(_local(checkpoint), "commits")
    done = [int(n) for n in os.listdir(commits) if n.isdigit()] if os.path.isdir(commits) else []
    return max(done, default=None)


def _end_offsets(checkpoint: str, batch: int | None) -> list[Any]:
    """The sources' end offsets of ``batch`` (the offsets log: a version line, the batch's
    metadata, then one offset per source, in the order the query lists its sources)."""
    if batch is None:
        return []
    path = os.path.join(_local(checkpoint), "offsets", str(batch))
    with open(path, encoding="utf-8") as source:
        lines = source.read().splitlines()[2:]
    return [None if line == "-" else json.loads(line) for line in lines]


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
