"""How a file source cuts a micro-batch into tasks, fixed for the life of a checkpoint.

A subtask runs its main rows in source order (``execution/ordering.py``): by input partition,
then row. For a file source the input partitions are Spark's file splits: the batch's files
cut into blocks of at most ``min(maxPartitionBytes, max(openCostInBytes, batch bytes /
minPartitionNum))`` bytes (``minPartitionNum`` is the session's cores unless set), sorted
largest first. Cut with other values, a replay of a micro-batch orders a key's rows of two files
differently, and an order-dependent function computes state that is not the state whose outputs
a sink already committed; an executor lost on a cluster changes the cores, so the next replay
would do it with no setting touched.

So a query that reads files records the four values at its first start
(``<checkpoint>/sparkcast/file-splits.json``) and runs with them ever after. Spark's file
source cuts each micro-batch with the settings of the session that made the reader, as they
are when the batch runs (not the query's copy of them), so the cores are pinned there:
``minPartitionNum`` left unset is set on the session to the recorded cores, and stays set. A
session whose ``maxPartitionBytes``, ``openCostInBytes``, ``maxPartitionNum`` or a
``minPartitionNum`` the user set differ is refused with both values, as a changed layout is
(``state/compatibility.py``). One session serves one pin at a time: a query whose checkpoint
recorded other cores re-pins it once the queries that needed the old one have stopped, and is
refused while one runs. A Kafka source's ranges are ordered where the rows get their
positions (``execution/ordering.py``), so ``minPartitions`` may change. On Spark Connect the
client has no plan to look into, and nothing is checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.environment import is_connect
from sparkcast.spark.state import checkpoint_files

RECORD = ("sparkcast", "file-splits.json")
MIN_PARTITIONS = "spark.sql.files.minPartitionNum"
#: each setting and the getter of Spark's SQLConf that reads it as a number
SETTINGS = {"spark.sql.files.maxPartitionBytes": "filesMaxPartitionBytes",
            "spark.sql.files.openCostInBytes": "filesOpenCostInBytes",
            "spark.sql.files.maxPartitionNum": "filesMaxPartitionNum",
            MIN_PARTITIONS: "filesMinPartitionNum"}


@dataclass
class _Pin:
    """The cores a session's file sources are cut for, and the started queries that need them."""

    cores: int
    queries: list[Any] = field(default_factory=list)


#: each session's pin, set by its queries' starts (``minPartitionNum``)
_PINS: dict[Any, _Pin] = {}


def fix_splits(frame: DataFrame, checkpoint_location: str) -> Callable[[Any], None]:
    """Before the start of a query over ``frame``: its file splits as the checkpoint recorded
    them (recorded now at its first start); refuses a session that would cut them otherwise.
    Returns what to tell of the started query (it holds the pin while it runs)."""
    spark = frame.sparkSession
    if is_connect(spark) or not reads_files(frame):
        return _ignore
    now = splits_of(spark)
    recorded = checkpoint_files.read_json(checkpoint_location, RECORD)
    if recorded is None:
        checkpoint_files.write_json(checkpoint_location, RECORD, now)
        recorded = now
    given, pin = spark.conf.get(MIN_PARTITIONS, None), _PINS.get(spark)
    by_user = given is not None and (pin is None or int(given) != pin.cores)
    changed = [key for key in SETTINGS if recorded.get(key) != now[key]
               and (key != MIN_PARTITIONS or by_user)]
    if changed:
        raise _refusal(changed, recorded, now, checkpoint_location, pinned=False)
    cores = recorded.get(MIN_PARTITIONS)
    if by_user or not isinstance(cores, int):
        return _ignore
    if pin is not None and pin.cores != cores:
        if any(query.isActive for query in pin.queries):
            raise _refusal([MIN_PARTITIONS], recorded, now, checkpoint_location, pinned=True)
        pin = None
    if pin is None:
        pin = _PINS[spark] = _Pin(cores)
    spark.conf.set(MIN_PARTITIONS, str(cores))
    return pin.queries.append


def _ignore(query: Any) -> None:
    """A query that needs no pin."""


def reads_files(frame: DataFrame) -> bool:
    """Whether a streaming file source is among ``frame``'s inputs."""
    leaves = frame._jdf.queryExecution().analyzed().collectLeaves()
    return any(leaves.apply(i).nodeName() == "StreamingRelation"
               and str(leaves.apply(i).sourceName()).startswith("FileSource[")
               for i in range(leaves.size()))


def splits_of(spark: Any) -> dict[str, int | None]:
    """The session's values in bytes and counts (Spark's parse of ``64m`` and the like);
    ``minPartitionNum`` unset is the cores it stands for."""
    conf = spark._jsparkSession.sessionState().conf()
    values = {key: _number(getattr(conf, getter)()) for key, getter in SETTINGS.items()}
    if values[MIN_PARTITIONS] is None:
        leaf = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
        values[MIN_PARTITIONS] = int(leaf or spark.sparkContext.defaultParallelism)
    return values


def _number(value: Any) -> int | None:
    """A SQLConf value: a number, or Scala's ``Option`` of one."""
    if isinstance(value, int):
        return value
    return int(value.get()) if value.isDefined() else None


def _refusal(changed: list[str], recorded: dict[str, Any], now: dict[str, Any],
             checkpoint_location: str, pinned: bool) -> IncompatibleCheckpointError:
    """``pinned``: the session's ``minPartitionNum`` is a running query's pin, not the user's."""
    lines = "".join(f"  {key}: the checkpoint has {recorded.get(key)}, this session {now[key]}"
                    f"{' (pinned by a running query)' if pinned else ''}\n" for key in changed)
    fixes = ("run it in a session of its own, or after the running query stops" if pinned
             else f"set {', '.join(changed)} back in the session")
    return IncompatibleCheckpointError(
        f"this query cannot restart from checkpoint {checkpoint_location} with this session's "
        f"file splits: {fixes}, or give it a new checkpoint; nothing was run. "
        "How a file source cuts a micro-batch decides the order a subtask runs its rows in, "
        "and a replay must cut it as the first attempt did.\n"
        + lines + "See docs/operations.md, 'What may change between restarts'.")
