"""The files of a query's checkpoint, by path or URI: Spark's logs and sparkcast's own.

Spark keeps ``offsets/<batch>`` (a batch planned) and ``commits/<batch>`` (a batch done) and the
operator's state under ``state/``; sparkcast adds, under ``sparkcast/``, the layout record
(``compatibility.py``), the micro-batch engine's broadcast snapshots (``snapshots.py``) and keyed
stores (``keyed_store.py``), the state a rescale prepared (``tools/rescale.py``) and the marker
topic of each Kafka output and, in a copy, those of its original (``outputs/kafka_markers.py``).
Every reader of
a checkpoint finds these here, through ``storage.py``, so a local path, ``file:`` URI or
object-store URI all work the same way.

The checkpoint's identity (``sparkcast/id.json``, a random id written once) names it in the
manifest of the output folders it writes (``outputs/guarded.py``), so the identity survives a
move to another folder (``tools/relocate.py``) where a path would not.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sparkcast.spark.state import storage

LAYOUT_FILE = ("sparkcast", "layout.json")
PREPARED_FILE = ("sparkcast", "prepared-state.bin")
SNAPSHOTS = ("sparkcast", "broadcast")
ID_FILE = ("sparkcast", "id.json")
KAFKA_MARKERS_FILE = ("sparkcast", "kafka-markers.json")
#: a copy's record of the marker topics of the checkpoint it was copied from
KAFKA_INHERITED_FILE = ("sparkcast", "kafka-markers-inherited.json")


def file(checkpoint: str, *parts: str) -> str:
    """The location of ``parts`` under ``checkpoint``."""
    return storage.join(checkpoint, *parts)


def committed_batches(checkpoint: str) -> list[int]:
    """The batches Spark committed, ascending."""
    return _logged(checkpoint, "commits")


def committed(checkpoint: str, batch: int) -> bool:
    """Whether Spark committed ``batch`` (its file in the commits log)."""
    return storage.read_bytes(file(checkpoint, "commits", str(batch))) is not None


def last_planned(checkpoint: str) -> int | None:
    """The last batch Spark logged offsets for (the one running, in a running query)."""
    return max(_logged(checkpoint, "offsets"), default=None)


def _logged(checkpoint: str, log: str) -> list[int]:
    return sorted(int(n) for n in storage.list_files(file(checkpoint, log)) if n.isdigit())


def query_id(checkpoint: str) -> str:
    """Spark's id of the checkpoint's query (``<checkpoint>/metadata``, the same across
    restarts). A new checkpoint's is written here first, as Spark writes it (Spark keeps a
    ``metadata`` file it finds), so the id is known before the query starts: what the query
    does with its sinks is decided then (``outputs/sinks_in_tasks.py``)."""
    found = read_json(checkpoint, ("metadata",))
    return new_query_id(checkpoint) if found is None else str(found["id"])


def new_query_id(checkpoint: str) -> str:
    """Give the checkpoint a new Spark query id, in Spark's ``metadata`` format (a new
    checkpoint, or a copy that is a job of its own); returns it."""
    made = str(uuid.uuid4())
    storage.write_bytes(file(checkpoint, "metadata"), json.dumps({"id": made}).encode())
    storage.delete(file(checkpoint, ".metadata.crc"))  # Hadoop's checksum of the old one
    return made


def identity(checkpoint: str, create: bool = False) -> str | None:
    """The checkpoint's id (None when it has none and ``create`` is false)."""
    found = read_json(checkpoint, ID_FILE)
    if found is None and create:
        found = {"id": uuid.uuid4().hex}
        write_json(checkpoint, ID_FILE, found)
    return None if found is None else str(found["id"])


def last_committed(checkpoint: str) -> int | None:
    return max(committed_batches(checkpoint), default=None)


def in_use(checkpoint: str) -> bool:
    """Whether a query has started in ``checkpoint`` (it logged offsets or commits)."""
    return any(storage.is_dir(file(checkpoint, log)) for log in ("commits", "offsets"))


def holds_operator_state(checkpoint: str) -> bool:
    """Whether a stateful operator (the operator engine's, or a query's clock) wrote state here."""
    return storage.is_dir(file(checkpoint, "state"))


def end_offsets(checkpoint: str, batch: int) -> list[Any]:
    """The sources' end offsets of ``batch`` (the offsets log: a version line, the batch's
    metadata, then one offset per source, in the order the query lists its sources)."""
    data = storage.read_bytes(file(checkpoint, "offsets", str(batch)))
    lines = [] if data is None else data.decode("utf-8").splitlines()[2:]
    return [None if line == "-" else json.loads(line) for line in lines]


def batch_metadata(checkpoint: str, batch: int) -> dict[str, Any]:
    """Spark's metadata of a planned batch (its offsets log's second line): the watermark
    (``batchWatermarkMs``) and the batch's processing time (``batchTimestampMs``), the same
    when the batch is replayed."""
    data = storage.read_bytes(file(checkpoint, "offsets", str(batch)))
    lines = [] if data is None else data.decode("utf-8").splitlines()
    return json.loads(lines[1]) if len(lines) > 1 else {}


def read_json(checkpoint: str, parts: tuple[str, ...]) -> Any | None:
    """The JSON document at ``parts`` (None when there is none); ``ValueError`` when it does
    not parse."""
    data = storage.read_bytes(file(checkpoint, *parts))
    return None if data is None else json.loads(data)


def write_json(checkpoint: str, parts: tuple[str, ...], document: Any) -> None:
    storage.write_bytes(file(checkpoint, *parts),
                        json.dumps(document, indent=1, sort_keys=True).encode())
