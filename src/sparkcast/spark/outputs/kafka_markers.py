"""The marker topic each Kafka output of a query writes, and its record in the checkpoint.

A ``read_committed`` read of a topic ends at the first transaction still open in it
(librdkafka's end of a partition is the last stable offset). Each run
reads its markers that way as it starts, so when every query shared one marker topic
(``_sparkcast_markers``), a killed query's open transaction, until the broker aborted it
(``transaction.timeout.ms`` later), hid from every other query's restart the markers committed
behind it, and the restart wrote those parts of its replayed batch again. Reads now wait for
the transactions before the high watermark instead (``read_markers``), and a query's default
marker topic is its own, ``_sparkcast_markers-<query id>`` (the id in the checkpoint's
``metadata``: the same across restarts, new with a new checkpoint), with a partition per part,
so its reads wait on nothing but its own parts, which it fences first (``kafka.py``).

The checkpoint records each output's marker topic (``sparkcast/kafka-markers.json``) before the
first marker goes to it, and a restart reads its markers from the recorded topic. An output
with no record (a checkpoint written before per-query topics, whose markers are in the shared
topic) keeps the shared topic when that topic holds a marker of the output: its keys are read
with ``read_uncommitted``, which waits for no transaction. A ``marker_topic`` given to the sink
is used as given.

A copy of a checkpoint (``sparkcast state copy``) is a job of its own, with a query id of its
own: ``relocate`` moves the original's record aside (``kafka-markers-inherited.json``), so the
copy's outputs get marker topics of their own; a copy whose sink names the original's
``transactional_id_prefix`` is refused (the two would fence each other's producers and read
each other's markers), and so is any query that finds another query's markers under its prefix
(``kafka.py``).
"""

from __future__ import annotations

from typing import Any

from sparkcast.errors import SinkError
from sparkcast.spark.outputs.kafka_client import client
from sparkcast.spark.outputs.kafka_marker_reads import marker_prefix, read_markers
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
        self.inherited: dict[str, str] = checkpoint_files.read_json(
            checkpoint, checkpoint_files.KAFKA_INHERITED_FILE) or {}

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


    def refuse_inherited_prefix(self, output: str, prefix: str | None,
                                settings: dict[str, Any], where: str) -> None:
        """A copy's sink that names a ``transactional_id_prefix`` its original wrote markers
        under is refused (a copy's default prefix holds its own query id)."""
        topic = self.inherited.get(output)
        if prefix is None or topic is None or topic == self.recorded.get(output):
            return
        if _holds_markers(settings, marker_prefix(prefix, output), topic):
            raise SinkError(
                f"{where}: this checkpoint is a copy of another (sparkcast state copy), whose "
                f"output {output!r} wrote under transactional_id_prefix {prefix!r}: the copy "
                "and its original would fence each other's producers; give the copy's sink a "
                "transactional_id_prefix of its own (or none: the default holds the query id)")


def _holds_markers(settings: dict[str, Any], key_prefix: str,
                   topic: str = SHARED_TOPIC) -> bool:
    """Whether ``topic`` exists and holds a marker (committed or not) under ``key_prefix``."""
    admin = client().admin.AdminClient(settings)
    if topic not in admin.list_topics(timeout=30).topics:
        return False
    keys = read_markers(settings, topic, committed=False)
    return any(key.startswith(key_prefix) for key in keys)


def ensure_topic(settings: dict[str, Any], topic: str, parts: int, where: str) -> int:
    """The marker topic's partitions; the topic is created (compacted, a partition per part,
    so that the read of one part's marker waits on no other part's transaction) unless it
    exists. An existing topic keeps its partitions: markers already in it stay where they
    are (a read of one of several parts sharing a partition waits for their transactions)."""
    kafka = client()
    admin = kafka.admin.AdminClient(settings)
    found = admin.list_topics(timeout=30).topics
    if topic in found:
        return len(found[topic].partitions)
    made = kafka.admin.NewTopic(topic, parts, -1, config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([made])[topic].result(timeout=60)
    except kafka.KafkaException as error:
        if error.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            raise SinkError(f"{where}: cannot create the marker topic {topic!r} "
                            f"({error.args[0].str()}); create it (compacted, {parts} "
                            "partitions) or allow topic creation") from error
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions) or parts
