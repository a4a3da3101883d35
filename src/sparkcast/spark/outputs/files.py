"""``write_stream``'s files (and ``sinks.files``, ``FilesSink``): the outputs partitioned by
``_output``, the manifest of their schemas and the progress log beside them, and
``read_output`` to read them back.

One query writes the tagged frame with ``_tag`` replaced by the partition column ``_output``
(``<path>/_output=main/``, ``_output=<tag>/``, ``_output=dead_letters/``, ``_output=_metrics/``;
``layout.py``). The manifest records the side outputs' schemas, so ``read_output`` returns typed
columns and refuses an output it cannot type. The driver's listener appends each micro-batch's
merged record to ``<path>/_sparkcast_progress.jsonl`` (for ``sparkcast view`` and ``report``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sparkcast.api.output_tag import OutputTag
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.errors import PipelineError
from sparkcast.spark.layout import (
    DEAD_LETTER_SCHEMA,
    MAIN,
    MANIFEST,
    OUTPUT,
    PAYLOAD,
    PROGRESS_LOG,
    RESERVED,
    TAG,
)
from sparkcast.spark.state import storage


@dataclass(frozen=True)
class FilesSink:
    """``files(path, format)``: today's layout, ``path/_output=<name>/``, read by ``read_output``;
    exactly once through the commit log."""

    path: str
    format: str = "parquet"

    def describe(self) -> str:
        return f"files({self.path!r}, format={self.format!r})"


def partitioned(tagged: DataFrame) -> DataFrame:
    """The tagged frame as written: ``_tag`` replaced by the partition column ``_output``."""
    return tagged.withColumn(OUTPUT, F.coalesce(F.col(TAG), F.lit(MAIN))).drop(TAG)


def read_output(spark: Any, path: str, output: str | OutputTag = "main",
                format: str = "parquet") -> DataFrame:
    """Read one output written by ``write_stream``: ``"main"``, ``"dead_letters"``, a side
    output's tag or its name, typed by the tag's schema (a tag declared without one gives a
    JSON ``value`` column); an output that was never declared is refused."""
    name = output.tag_id if isinstance(output, OutputTag) else output
    rows = spark.read.format(format).load(path).filter(F.col(OUTPUT) == F.lit(name))
    if name == MAIN:
        return rows.select(*[F.col(f"`{c}`") for c in rows.columns if c not in RESERVED])
    schema = DEAD_LETTER_SCHEMA if name == DEAD_LETTERS.tag_id else _side_schema(path, output)
    if schema is None:
        return rows.select(F.col(PAYLOAD).alias("value"))
    return rows.select(F.from_json(PAYLOAD, schema).alias("v")).select("v.*")


def _side_schema(path: str, output: str | OutputTag) -> str | None:
    if isinstance(output, OutputTag) and output.schema is not None:
        return output.schema
    name = output.tag_id if isinstance(output, OutputTag) else output
    manifest = read_manifest(path) or {"side_outputs": {}}
    known: dict[str, str | None] = manifest["side_outputs"]
    if name not in known:
        raise PipelineError(
            f"read_output cannot type output {name!r}: {path} records the outputs "
            f"{['main', 'dead_letters', *sorted(known)]}; pass an OutputTag with its schema "
            f"(OutputTag({name!r}, '<field type, ...>')), or declare it in side_outputs=[...]")
    return known[name]


def write_manifest(path: str, main: str, side_outputs: dict[str, str | None],
                   checkpoint: dict[str, str] | None = None) -> None:
    """Beside ``write_stream``'s data: the main and side-output schemas (DDL; None = untyped),
    so ``read_output`` types each output, and the checkpoint that writes the folder
    (``guarded.py``). Any location ``storage`` understands (paths, URIs)."""
    document: dict[str, Any] = {"main": main, "side_outputs": side_outputs}
    if checkpoint is not None:
        document["checkpoint"] = checkpoint
    storage.write_bytes(storage.join(path, MANIFEST), json.dumps(document, indent=1).encode())


def read_manifest(path: str) -> dict[str, Any] | None:
    data = storage.read_bytes(storage.join(path, MANIFEST))
    if data is None:
        return None
    found: dict[str, Any] = json.loads(data)
    return found


def progress_log_path(path: str) -> str | None:
    """Where a ``write_stream`` query's progress log goes (local paths only: it is appended
    to, which object stores cannot do)."""
    if not storage.is_local_path(path):
        return None
    local = urlsplit(path).path if storage.is_uri(path) else path
    os.makedirs(local, exist_ok=True)
    return os.path.join(local, PROGRESS_LOG)
