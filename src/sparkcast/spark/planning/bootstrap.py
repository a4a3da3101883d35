"""Start a job from prepared state: ``process(..., initial_state=...)``.

``initial_state`` maps descriptors (or their names) to batch DataFrames: a broadcast
descriptor's frame has columns ``key, value`` (its entries, applied as if they were the first
broadcast elements: every subtask gets them), a keyed descriptor's frame has the key (column
``key``, or the ``key_by`` column names) and ``value`` (a value; a list for list state; a dict for
map state). Or it names a checkpoint prepared by ``rescale`` (``tools/rescale.py``).

The frames are collected and checked on the driver by the harness's code (``core/seed.py``),
each key is sent to subtask ``pmod(hash(key), P)`` computed by Spark on the key columns (the very
expression that routes main rows, so the types must match), and the result travels to the
operator as transformWithState's ``initialState``: one row per subtask, grouped like the input.
Spark applies it in the first micro-batch of a new checkpoint only (``handleInitialState``,
called for every subtask in it, with or without input), so a restart never applies it twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from sparkcast.core import codec
from sparkcast.core.seed import Seed, initial_seed, split_by_key
from sparkcast.errors import PipelineError
from sparkcast.spark.execution.routing import hash_columns
from sparkcast.spark.layout import SUBTASK
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import checkpoint_files, storage

MAX_INITIAL_ROWS = 1_000_000
SEED_SCHEMA = f"{SUBTASK} long, seed binary"


def attach_initial_state(plan: RuntimePlan, initial_state: Mapping[Any, DataFrame] | str
                         ) -> None:
    """Check ``initial_state`` and give the plan one seed per subtask."""
    seeds = (prepared_seeds(initial_state, plan) if isinstance(initial_state, str)
             else _seeds_of_frames(plan, initial_state))
    if plan.in_place:
        raise PipelineError("initial_state needs state, and this plan has none (a non-keyed "
                            "function with a static broadcast side): the static side is "
                            "already its broadcast state")
    if plan.static_broadcast and any(seed.broadcast for seed in seeds.values()):
        raise PipelineError("initial broadcast state with a static broadcast side: the static "
                            "rows already are the initial broadcast state; put the entries "
                            "into the static DataFrame instead")
    plan.initial_seeds = {i: seed.to_bytes() for i, seed in seeds.items() if not seed.is_empty()}


def prepared_seeds(checkpoint_location: str, plan: RuntimePlan) -> dict[int, Seed]:
    """The seeds ``rescale`` wrote into ``checkpoint_location``, checked against the plan."""
    prepared_file = checkpoint_files.file(checkpoint_location, *checkpoint_files.PREPARED_FILE)
    data = storage.read_bytes(prepared_file)
    if data is None:
        raise PipelineError(f"initial_state={checkpoint_location!r} holds no prepared state "
                            f"({'/'.join(checkpoint_files.PREPARED_FILE)}): run sparkcast state "
                            "rescale first")
    prepared = codec.decode(data)
    for item in ("parallelism", "state_buckets"):
        if getattr(plan, item) != prepared[item]:
            raise PipelineError(f"{checkpoint_location} was prepared for {item}="
                                f"{prepared[item]}, this pipeline has {item}="
                                f"{getattr(plan, item)}: pass {item}={prepared[item]}, or "
                                "rescale again")
    # passed on to the workers as stored: they decode the objects with the job's classes
    return {int(i): Seed.from_bytes(blob, codec.KEEP_NAMES)
            for i, blob in prepared["seeds"].items()}


def initial_state_frame(plan: RuntimePlan) -> Any:
    """transformWithState's ``initialState``: one (grouping key, seed) row per subtask."""
    spark = plan.spark
    assert spark is not None
    group_of = {subtask: group for group, subtask in plan.subtask_of_group.items()}
    rows = [(group_of[subtask], blob) for subtask, blob in sorted(plan.initial_seeds.items())]
    return spark.createDataFrame(rows, SEED_SCHEMA).groupBy(SUBTASK)


def _seeds_of_frames(plan: RuntimePlan, frames: Mapping[Any, DataFrame]) -> dict[int, Seed]:
    broadcast_names = {d.name for d in plan.broadcast_descriptors}
    pairs: dict[Any, list[tuple[Any, Any]]] = {}
    subtask_of: dict[Any, int] = {}
    for target, frame in frames.items():
        name = target if isinstance(target, str) else getattr(target, "name", target)
        if not isinstance(frame, DataFrame) or frame.isStreaming:
            raise PipelineError(f"initial_state[{name!r}] must be a batch DataFrame")
        if name in broadcast_names:
            pairs[target] = [(_plain(r["key"]), _plain(r["value"]))
                             for r in _collect(frame, ["key", "value"], name)]
            continue
        located = _located(plan, frame, name)
        pairs[target] = [(key, value) for key, value, _ in located]
        subtask_of.update((key, subtask) for key, _, subtask in located)
    seed = initial_seed(plan.broadcast_descriptors, plan.keyed_descriptors, pairs)
    return split_by_key(seed, lambda key: subtask_of[key], plan.parallelism)


def _located(plan: RuntimePlan, frame: DataFrame, name: str) -> list[tuple[Any, Any, int]]:
    """(user key, value, subtask) of a keyed descriptor's frame; Spark hashes the key columns
    as it hashes the main stream's."""
    if not plan.keyed:
        raise PipelineError(f"initial_state[{name!r}]: keyed state needs a keyed stream")
    names = [plan.main_fields[p] for p in plan.key_positions]
    columns = ["key"] if len(names) == 1 and "key" in frame.columns else names
    missing = [c for c in [*columns, "value"] if c not in frame.columns]
    if missing:
        raise PipelineError(f"initial_state[{name!r}] lacks columns {missing}: give the key "
                            f"(column 'key' or {names}) and 'value'")
    types = [frame.schema[c].dataType.simpleString() for c in columns]
    if types != list(plan.key_types):
        raise PipelineError(f"initial_state[{name!r}]: key columns {columns} are {types}, the "
                            f"stream's key {names} is {list(plan.key_types)}; a key goes to "
                            "the subtask of its hash, which depends on the type: cast them")
    subtask = F.pmod(F.hash(*hash_columns(frame, columns)), F.lit(plan.parallelism))
    rows = _collect(frame.select(*columns, "value", subtask.alias("_to")),
                    [*columns, "value", "_to"], name)
    return [(_key([r[c] for c in columns]), _plain(r["value"]), int(r["_to"])) for r in rows]


def subtasks_of_keys(spark: SparkSession, keys: Iterable[Any], key_columns: list[str],
                     parallelism: int) -> dict[Any, int]:
    """Each key's subtask at ``parallelism``; ``key_columns`` as in the layout record
    (``"name type"``). Spark computes it, as it routes the main rows."""
    keys = list(keys)
    if not keys:
        return {}
    frame = spark.createDataFrame([k if isinstance(k, tuple) else (k,) for k in keys],
                                  ", ".join(key_columns))
    names = frame.columns
    subtask = F.pmod(F.hash(*hash_columns(frame, names)), F.lit(parallelism))
    rows = frame.select(*names, subtask.alias("_to")).collect()
    return {_key([r[c] for c in names]): int(r["_to"]) for r in rows}


def _collect(frame: DataFrame, columns: list[str], name: str) -> list[Row]:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise PipelineError(f"initial_state[{name!r}] lacks columns {missing}")
    rows = frame.select(*columns).limit(MAX_INITIAL_ROWS + 1).collect()
    if len(rows) > MAX_INITIAL_ROWS:
        raise PipelineError(f"initial_state[{name!r}] has more than {MAX_INITIAL_ROWS} rows: "
                            "the initial state is collected on the driver")
    return rows


def _key(parts: list[Any]) -> Any:
    return codec.hashable(parts[0] if len(parts) == 1 else tuple(parts))


def _plain(value: Any) -> Any:
    """A collected Spark value as plain Python: structs and maps become dicts."""
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
