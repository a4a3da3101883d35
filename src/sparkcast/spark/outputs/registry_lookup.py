"""A schema id the query's plan did not know, looked up in a Python worker (``kafka_topic``'s
Avro and Protobuf values with a registry): once per id and process, the answer cached, never
per record.

``looked_up`` asks the registry for the id (``SchemaRegistry.schema_by_id``, Confluent's
client), hands the answer (the schema, or None when the registry has no such id) to the
caller's ``derive`` (Avro: the writer schema resolved against the reader, or why not;
Protobuf: the message indexes of its version, or why not) and keeps what ``derive`` made for
the process's later batches. A registry that cannot answer (down, a timeout, a 5xx, a refused
credential) is asked again, after 0.5 s, then twice as long each time up to 30 s, for as long
as it takes, each failed attempt a WARNING in the worker's log naming the registry by
``describe()`` (no credential): the record waits in its task, so it is neither lost nor taken
out of its partition's order, and the query does not fail. docs/sources.md ("A registry that
cannot answer") gives the reasons against a dead letter or a failed batch. Only a record of an
id no worker process has looked up waits: the plan's ids need no registry, and an id once
answered is cached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sparkcast.api.registry import SchemaRegistry
from sparkcast.errors import PipelineError
from sparkcast.spark.state.worker_cache import WORKER

#: the first wait after a failed attempt, and the longest (the wait doubles in between)
FIRST_WAIT, LONGEST_WAIT = 0.5, 30.0

_LOG = logging.getLogger(__name__)
_FOUND = WORKER.section(
    "registry schemas", "taken while its key (registry, type, reader, id) matches: a registry "
    "never gives an id another schema")

Derived = TypeVar("Derived")


def looked_up(registry: SchemaRegistry, schema_id: int, schema_type: str,
              derive: Callable[[Any | None], Derived], key: tuple[Any, ...]) -> Derived:
    """What ``derive`` makes of the registry's schema ``schema_id`` (of ``schema_type``:
    ``AVRO``, ``PROTOBUF``; None when the registry has no such id), asked once per process
    and ``key`` (what else ``derive`` depends on: the reader schema, the message)."""
    cached = (registry.describe(), schema_type, key, schema_id)
    found: Derived | None = _FOUND.get(cached)
    if found is None:
        found = _FOUND.put(cached, derive(_answer(registry, schema_id, schema_type)))
    return found


def _answer(registry: SchemaRegistry, schema_id: int, schema_type: str) -> Any | None:
    """The registry's answer for ``schema_id``, waiting while it cannot give one."""
    return waited(lambda: registry.schema_by_id(schema_id, schema_type))


Answer = TypeVar("Answer")


def waited(ask: Callable[[], Answer]) -> Answer:
    """``ask()``'s answer, asked again while it raises a ``PipelineError`` (the registry's
    failures, worded without credentials by ``SchemaRegistry``): the waits above, a WARNING
    per failed attempt."""
    wait, attempt = FIRST_WAIT, 1
    while True:
        try:
            return ask()
        except PipelineError as error:
            _LOG.warning("%s (attempt %d); asking again in %.1f s: the record waits in its "
                         "task, nothing is lost", error, attempt, wait)
        time.sleep(wait)
        wait, attempt = min(wait * 2, LONGEST_WAIT), attempt + 1
