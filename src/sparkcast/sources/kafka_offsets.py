"""``kafka_topic(..., commit_offsets=True)``: each committed micro-batch's end offsets of the
topic committed to a Kafka consumer group, so Kafka's own tools (``kafka-consumer-groups``,
lag exporters, a cluster UI) see the job's position and lag. Flink's
``commit.offsets.on.checkpoint``.

For monitoring only: Spark's checkpoint (its offset log) stays the truth, and a restart goes on
from it, whatever the group holds. The hook is the session's ``StreamingQueryListener``:
``onQueryProgress`` comes after Spark has committed the batch to the checkpoint, and each of
its ``sources`` has the batch's ``endOffset`` per topic and partition (the next offset to read,
what a consumer group commits too). The offsets of the topics asked for are committed with
confluent-kafka's ``Consumer.commit(offsets=..., asynchronous=False)`` for the group, off the
listener's thread (one thread: a slow or absent broker never holds up Spark's listener bus;
while a commit waits, only its group's newest offsets are kept for the next). The group has no
members (the job's consumers are Spark's, assigned, never subscribed), so the commit is a
simple consumer's, and the tools show the group as having no active members, with its offsets
and lag.

The group is ``group_id``, or ``sparkcast-<query name>`` (``sparkcast-<query id>`` for a query
without a name: the id in the checkpoint, the same across restarts). A commit that fails (no
ACL on the group, a Java-only setting such as a JKS truststore: librdkafka's reason names the
fix) is one WARNING per group, naming the group and the reason with every setting's value
blanked, never a failed query; later commits are still tried. The settings are the ``kafka.*``
options' security ones (``security.*``, ``sasl.*``, ``ssl.*``, as librdkafka names them), a
JAAS ``PlainLoginModule`` or ``ScramLoginModule`` configuration turned into
``sasl.username``/``sasl.password``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

from sparkcast.monitoring.progress import plain
from sparkcast.spark.outputs.kafka_client import LOG, client

log = logging.getLogger("sparkcast")
#: the options' prefixes that reach the committer: what it takes to connect and authenticate
_SECURITY = ("security.", "sasl.", "ssl.")
_JAAS = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


@dataclass(frozen=True)
class OffsetCommits:
    """What ``kafka_topic`` asked for one topic: where its cluster is, how to log in, which
    group (None: the query's)."""

    bootstrap_servers: str
    settings: dict[str, str] = field(repr=False, hash=False)  # secrets: never in a message
    group_id: str | None = None

    def group(self, progress: Mapping[str, Any]) -> str:
        return self.group_id or f"sparkcast-{progress.get('name') or progress.get('id')}"


#: topic -> what its ``kafka_topic`` asked (the progress names a source by its topics only)
_WANTED: dict[str, OffsetCommits] = {}
_LISTENING: set[int] = set()
_WARNED: set[str] = set()
#: group -> the newest offsets not yet committed
_PENDING: dict[str, tuple[OffsetCommits, dict[str, dict[int, int]]]] = {}
_LOCK = threading.Lock()
_COMMITS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sparkcast-offsets")


def commit_to_group(spark: Any, topic: str, bootstrap_servers: str,
                   options: Mapping[str, str], group_id: str | None) -> None:
    """Commit ``topic``'s end offsets of every committed micro-batch of the session's queries
    that read it to a consumer group (the module's docstring)."""
    with _LOCK:
        _WANTED[topic] = OffsetCommits(bootstrap_servers, client_settings(options), group_id)
        if id(spark) not in _LISTENING:
            spark.streams.addListener(OffsetsListener())
            _LISTENING.add(id(spark))


def client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options a consumer needs to log in, as librdkafka names them."""
    settings = {key.removeprefix("kafka."): value for key, value in options.items()
                if key.removeprefix("kafka.").startswith(_SECURITY)}
    jaas = settings.pop("sasl.jaas.config", None)
    if jaas is not None and ("PlainLoginModule" in jaas or "ScramLoginModule" in jaas):
        found = dict(_JAAS.findall(jaas))
        settings.update({f"sasl.{name}": value for name, value in found.items()
                         if f"sasl.{name}" not in settings})
    return settings


def end_offsets(progress: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """``topic → partition → end offset`` of the progress's Kafka sources."""
    found: dict[str, dict[int, int]] = {}
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        if isinstance(end, str):
            try:
                end = json.loads(end)
            except ValueError:
                continue  # not a Kafka source's offset
        if not isinstance(end, dict):
            continue
        for topic, partitions in end.items():
            if isinstance(partitions, dict):
                found.setdefault(topic, {}).update(
                    {int(p): int(o) for p, o in partitions.items() if int(o) >= 0})
    return found


class OffsetsListener(StreamingQueryListener):
    """After each committed micro-batch: its end offsets of the wanted topics, committed off
    the listener's thread."""

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = plain(event.progress)
            for (wanted, group), offsets in _by_group(progress).items():
                _schedule(wanted, group, offsets)
        except Exception as error:  # never the query's failure, nor the listener bus's
            log.warning("sparkcast: offsets for Kafka's tools not committed (%s)",
                        type(error).__name__)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def _by_group(progress: Mapping[str, Any]
              ) -> dict[tuple[OffsetCommits, str], dict[str, dict[int, int]]]:
    found: dict[tuple[OffsetCommits, str], dict[str, dict[int, int]]] = {}
    for topic, partitions in end_offsets(progress).items():
        wanted = _WANTED.get(topic)
        if wanted is not None and partitions:
            found.setdefault((wanted, wanted.group(progress)), {})[topic] = partitions
    return found


def _schedule(wanted: OffsetCommits, group: str, offsets: dict[str, dict[int, int]]) -> None:
    """The group's newest offsets, to be committed by the commit thread; while an earlier
    commit of the group waits (a broker away), only the newest is kept."""
    with _LOCK:
        scheduled = group in _PENDING
        _PENDING[group] = (wanted, offsets)
    if not scheduled:
        _COMMITS.submit(_commit_pending, group)


def _commit_pending(group: str) -> None:
    with _LOCK:
        wanted, offsets = _PENDING.pop(group)
    _commit(wanted, group, offsets)


def _commit(wanted: OffsetCommits, group: str, offsets: dict[str, dict[int, int]]) -> None:
    """One synchronous commit of the group's offsets; a failure is one WARNING per group."""
    kafka = client()
    consumer = None
    try:
        consumer = kafka.Consumer({"logger": LOG, **wanted.settings,
                                   "bootstrap.servers": wanted.bootstrap_servers,
                                   "group.id": group, "enable.auto.commit": False})
        answered = consumer.commit(offsets=[kafka.TopicPartition(topic, partition, offset)
                                            for topic, partitions in offsets.items()
                                            for partition, offset in partitions.items()],
                                   asynchronous=False)
        failed = [tp for tp in answered or [] if tp.error is not None]
        if failed:
            raise kafka.KafkaException(failed[0].error)
    except Exception as error:
        _warn_once(group, sorted(offsets), redacted_reason(error, wanted.settings))
    finally:
        if consumer is not None:
            consumer.close()


def _warn_once(group: str, topics: list[str], reason: str) -> None:
    with _LOCK:
        if group in _WARNED:
            return
        _WARNED.add(group)
    log.warning("sparkcast: the offsets of %s for Kafka's tools were not committed to consumer "
                "group %r (%s); the query goes on (its checkpoint holds its offsets), later "
                "micro-batches try again without this warning", ", ".join(topics), group,
                reason)


def redacted_reason(error: BaseException, settings: Mapping[str, str]) -> str:
    """The error's first line, every setting's value blanked (a librdkafka message may quote
    the value it refused)."""
    first = error.args[0] if error.args else error
    text = first.str() if hasattr(first, "str") else str(first)
    text = (text.strip().splitlines() or [type(error).__name__])[0]
    for value in settings.values():
        if value:
            text = text.replace(str(value), "***")
    return text
