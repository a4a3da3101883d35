"""Where ``result.write_stream(checkpoint_location=..., sinks={...})`` writes each output.

>>> from sparkcast import sinks
>>> result.write_stream(checkpoint_location="ckpt", sinks={
...     "main": sinks.jdbc("jdbc:postgresql://db/app", "alerts", properties={"user": "app"}),
...     REVIEW: sinks.table("reviews", format="parquet"),
...     "dead_letters": sinks.files("out/dead")})

Every output needs a sink except the dead letters, which default to ``files`` beside the
checkpoint. The guarantee of each sink is in docs/sinks.md: ``files`` and ``jdbc`` exactly once,
``table`` at-least-once with a stable row id (Delta: idempotent), a user's own sink (any object
with ``write(frame, output, batch_id)``, optionally ``check(output, schema, spark)``)
at-least-once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkcast.spark.outputs.targets import FilesSink, JdbcSink, Sink, TableSink

__all__ = ["FilesSink", "JdbcSink", "Sink", "TableSink", "files", "jdbc", "table"]


def files(path: str, format: str = "parquet") -> FilesSink:
    """sparkcast's own layout under ``path`` (``_output=<name>/``), read by ``read_output``;
    exactly once by the commit log. Outputs given the same ``files`` share its folder."""
    return FilesSink(path, format)


def table(name: str | None = None, format: str | None = None,
          options: Mapping[str, Any] | None = None, *, row_id: bool = True) -> TableSink:
    """Append to a catalog table ``name`` or, with ``options={"path": ...}`` and no name, to any
    Spark batch format (``format``: ``"parquet"``, ``"delta"``, ``"kafka"``, ...). At-least-once:
    each row carries ``_sparkcast_batch`` and ``_sparkcast_row`` (stable across a replay) to
    deduplicate on (``row_id=False`` leaves them out); Delta writes are idempotent instead
    (``txnAppId``/``txnVersion``)."""
    return TableSink(name, format, {k: str(v) for k, v in (options or {}).items()}, row_id)


def jdbc(url: str, table: str, properties: Mapping[str, Any] | None = None, *,
         ledger: str = "sparkcast_ledger") -> JdbcSink:
    """Insert into ``table`` of the database at ``url``, exactly once: rows are staged in
    ``<table>_sparkcast_staging`` and each micro-batch is moved, for every JDBC output of that
    database, in one transaction that records it in the ``ledger`` table. The table must exist
    with the output's columns; the driver's jar must be in ``spark.jars``."""
    return JdbcSink(url, table, {k: str(v) for k, v in (properties or {}).items()}, ledger)
