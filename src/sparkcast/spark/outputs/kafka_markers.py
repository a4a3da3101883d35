"""The marker topic each Kafka output of a query writes, and its record in the checkpoint.

A ``read_committed`` read of a topic ends at the first transaction still open in it
(librdkafka's end of a partition is the last stable offset). The
first batch of a run reads its markers that way, so when every query shared one marker topic
(``_sparkcast_markers``), a killed query's open transaction, until the broker aborted it
(``transaction.timeout.ms`` later), hid from every other query's restart the markers committed
behind it, and the restart wrote those parts of its replayed batch again. A query's default
marker topic is therefore its own, ``_sparkcast_markers-<query id>`` (the id in the
checkpoint's ``metadata``: the same across restarts, new with a new checkpoint), and the query
fences all of its parts before it reads (``kafka.py``): nothing is left open in it.

The checkpoint records each output's marker topic (``sparkcast/kafka-markers.json``) before the
first marker goes to it, and a restart reads its markers from the recorded topic. An output
with no record (a checkpoint written before per-query topics, whose markers are in the shared
topic) keeps the shared topic when that topic holds a marker of the output: its keys are read
with ``read_uncommitted``, which waits for no transaction. A ``marker_topic`` given to the sink
is used as given.
"""

from __future__ import annotations

from typing import Any

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.kafka_transactions import client, marker_prefix, read_markers
from sparkcast.spark.state import checkpoint_files

#: the marker topic every query shared before per-query topics (its old checkpoints keep it)
SHARED_TOPIC = "_sparkcast_markers"


def own_topic(query_id: str) -> str:
    """A query's default marker topic."""
    return f"{SHARED_TOPIC}-{query_id}"


class MarkerTopics:
    """The checkpoint's record of its outputs' marker topics (``output → topic``)."""

    def __init__(self, checkpoint: str, query_id: str) -> None:
        self.checkpoint = checkpoint
        self.query_id = query_id
        self.recorded: dict[str, str] = checkpoint_files.read_json(
            checkpoint, checkpoint_files.KAFKA_MARKERS_FILE) or {}

    def topic(self, output: str, given: str | None, settings: dict[str, Any],
              prefix: str) -> str:
        """The output's marker topic: ``given``, else the recorded one, else the shared topic
        when it holds the output's markers, else the query's own; recorded before use."""
        chosen = given or self.recorded.get(output) or (
            SHARED_TOPIC if _holds_markers(settings, marker_prefix(prefix, output))
            else own_topic(self.query_id))
        if self.recorded.get(output) != chosen:
            self.recorded[output] = chosen
            checkpoint_files.write_json(self.checkpoint, checkpoint_files.KAFKA_MARKERS_FILE,
                                        self.recorded)
        return chosen


def _holds_markers(settings: dict[str, Any], key_prefix: str) -> bool:
    """Whether the shared topic exists and holds a marker (committed or not) under
    ``key_prefix``."""
    admin = client().admin.AdminClient(settings)
    if SHARED_TOPIC not in admin.list_topics(timeout=30).topics:
        return False
    keys = read_markers(settings, SHARED_TOPIC, committed=False)
    return any(key.startswith(key_prefix) for key in keys)


def ensure_topic(settings: dict[str, Any], topic: str, where: str) -> None:
    """Create the marker topic (compacted, one partition) unless it exists."""
    kafka = client()
    admin = kafka.admin.AdminClient(settings)
    if topic in admin.list_topics(timeout=30).topics:
        return
    made = kafka.admin.NewTopic(topic, 1, -1, config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([made])[topic].result(timeout=60)
    except kafka.KafkaException as error:
        if error.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            raise SinkError(f"{where}: cannot create the marker topic {topic!r} "
                            f"({error.args[0].str()}); create it (compacted, one partition) "
                            "or allow topic creation") from error
