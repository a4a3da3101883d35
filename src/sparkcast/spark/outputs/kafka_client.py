"""The Kafka client library as the sink's driver and tasks use it: confluent-kafka loaded (or
the error that names the extra), the user's options as librdkafka settings, librdkafka's log
lines on the ``sparkcast.kafka`` logger (a fenced producer's fatal-error lines at DEBUG: the
part writer handles them), and one admin client per process and settings.

Imported in the tasks: it imports confluent-kafka only.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from sparkcast.errors import MissingDependencyError
from sparkcast.spark.state.worker_cache import WORKER

#: librdkafka's own log lines (a broker that went away, retries) go to Python's logging here,
#: not to the worker's stderr; its errors surface as exceptions where they matter
LOG = logging.getLogger("sparkcast.kafka")


class HandledFencing(logging.Filter):
    """librdkafka logs a producer that a newer one of its ``transactional.id`` fenced as a fatal
    error. It happens whenever another Python worker took a part in a later batch, and the
    part writer handles it (``write_once``), so librdkafka's lines go to DEBUG; the part
    writer's own WARNING says when two attempts of one part fought."""

    SIGNS = ("fenced by a newer instance", "with an old epoch")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and any(s in record.getMessage() for s in self.SIGNS):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return LOG.isEnabledFor(logging.DEBUG)
        return True


LOG.addFilter(HandledFencing())


def client() -> Any:
    """confluent-kafka (its ``admin`` module loaded too), or the error naming the extra."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401  (not loaded by the package itself)
    except ImportError as error:
        raise MissingDependencyError(
            "the Kafka sink needs confluent-kafka: pip install 'sparkcast[kafka]'") from error
    return confluent_kafka


def librdkafka_settings(options: dict[str, str]) -> dict[str, Any]:
    """The user's client settings; Spark's ``kafka.`` prefix (as on Spark's Kafka source) is
    accepted and dropped. librdkafka's log lines go to the ``sparkcast.kafka`` logger."""
    return {"logger": LOG, **{key.removeprefix("kafka."): value for key, value in
                              options.items()}}


#: settings' digest -> this process's admin client of them
_ADMINS = WORKER.section("admin clients", "taken while its settings are the same (it holds "
                         "connections, no state of a part); dropped when its partitions' "
                         "leaders moved (forget_admin)")


def admin(settings: dict[str, Any]) -> Any:
    """This process's admin client of ``settings``, made once: a new one's first answers wait
    for its connections (a marker read's offsets took 1-3 s in one read of five, 0.01 s on a
    client already connected)."""
    key = _admin_key(settings)
    found = _ADMINS.get(key)
    return found if found is not None else _ADMINS.put(key, client().admin.AdminClient(settings))


def forget_admin(settings: dict[str, Any], stale: Any) -> None:
    """Drop ``stale``, this process's admin client of ``settings`` unless another thread has
    replaced it already: one that outlived its partitions' leaders (a broker restarted) answers
    every offsets request with FENCED_LEADER_EPOCH from then on, where a new one asks for the
    leaders again. A caller holds its own reference while it waits for an answer (a client
    collected meanwhile never answers)."""
    key = _admin_key(settings)
    if _ADMINS.get(key) is stale:
        _ADMINS.pop(key)


def _admin_key(settings: dict[str, Any]) -> str:
    return hashlib.sha256(repr(sorted((k, str(v)) for k, v in settings.items()
                                      if k != "logger")).encode()).hexdigest()
