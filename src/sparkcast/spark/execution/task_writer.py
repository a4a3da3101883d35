"""``write_stream``'s Parquet files written by the Python tasks themselves, with ``pyarrow``.

Written by Spark, a micro-batch's tagged rows go Arrow → JVM rows → a sort by ``_output`` (what
``partitionBy`` needs) → Spark's Parquet encoder: in the micro-batch engine's ``foreachBatch`` query
that was most of the write job. A :class:`TaskWriter` wraps any ``mapInArrow`` runner that yields
the tagged frame (``layout.py``): it splits each Arrow batch by output and writes one Parquet file
per output and task attempt into the micro-batch's staging folder, in the layout Spark's
``partitionBy(OUTPUT)`` gives (``_output=<name>/part-<partition>-<uuid>.c000.snappy.parquet``,
the data columns without ``_tag``). It returns only small rows (:data:`WRITTEN`): one per file
(output, path under the staging folder, rows) and one per task with what the observation would
count (dead letters per callback, the first one, the ``_metrics`` payloads). The driver commits
the files the successful attempts reported (``state/commit_log.py``), so a failed or
speculative attempt's files are never published. The files of one attempt
(:class:`OutputFiles`), the split by output (``by_output``) and the counts (:class:`Tally`)
also serve ``sinks.files`` where the pattern's tasks write the sinks (``outputs/task_sinks.py``).

Each file's footer carries the Spark schema (``org.apache.spark.sql.parquet.row.metadata``) and
the writing Spark version, as Spark's own writer puts them: Spark's reader (and so
``read_output``) then types the columns exactly as before, and reads dates and timestamps as
the proleptic Gregorian values pyarrow writes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.layout import MAIN, METRICS, PAYLOAD, TAG, output_folder
from sparkcast.spark.state import storage

Runner = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

#: what a task returns: a row per file (``output``, ``file``, ``rows``) and one per task
#: (``summary``: JSON of :class:`Tally`)
WRITTEN = "output string, file string, rows long, summary string"
_WRITTEN = pa.schema([pa.field("output", pa.string()), pa.field("file", pa.string()),
                      pa.field("rows", pa.int64()), pa.field("summary", pa.string())])
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
SPARK_VERSION_KEY = b"org.apache.spark.version"
#: Spark's name of a compression codec -> (pyarrow's name, the file name's infix)
CODECS = {"snappy": ("snappy", ".snappy"), "zstd": ("zstd", ".zstd"), "gzip": ("gzip", ".gz"),
          "none": ("none", ""), "uncompressed": ("none", "")}
#: rows a writer buffers per output before it writes a row group (Spark's Arrow batches are
#: 10k rows; row groups that small read slowly and compress badly)
ROW_GROUP_ROWS = 262_144


@dataclass(frozen=True)
class FileLayout:
    """How each output's files are written: the data columns (the tagged frame without
    ``_tag``) as Arrow types, with the Spark schema and version in the footer, and the codec."""

    schema: pa.Schema
    codec: str = "snappy"

    @staticmethod
    def of(arrow: pa.Schema, spark_schema_json: str, spark_version: str, codec: str
           ) -> FileLayout:
        metadata = {SPARK_SCHEMA_KEY: spark_schema_json.encode(),
                    SPARK_VERSION_KEY: spark_version.encode()}
        return FileLayout(arrow.with_metadata(metadata), codec)

    def file_name(self, partition: int) -> str:
        return f"part-{partition:05d}-{uuid.uuid4()}.c000{CODECS[self.codec][1]}.parquet"


@dataclass
class Tally:
    """What the observation counts over the rows a task wrote, beyond the rows per file."""

    letters: dict[str, int] = field(default_factory=dict)  # dead letters per callback
    first_letter: str | None = None  # the least "callback: error", as Spark's min gives it
    reports: list[str] = field(default_factory=list)  # the ``_metrics`` payloads

    def count(self, output: str, rows: pa.RecordBatch) -> None:
        """Count what the observation would of ``output``'s tagged ``rows``."""
        if output == DEAD_LETTERS.tag_id:
            self.count_letters(rows.column(PAYLOAD))
        elif output == METRICS:
            self.reports.extend(rows.column(PAYLOAD).to_pylist())

    def count_letters(self, payloads: pa.Array) -> None:
        for text in payloads.to_pylist():
            letter = _json_object(text)
            callback, error = _text(letter.get("callback")), _text(letter.get("error"))
            if callback is not None:
                self.letters[callback] = self.letters.get(callback, 0) + 1
            line = ": ".join(part for part in (callback, error) if part is not None)
            if self.first_letter is None or line < self.first_letter:
                self.first_letter = line

    def encode(self) -> str:
        return json.dumps({"letters": self.letters, "first_letter": self.first_letter,
                           "reports": self.reports}, ensure_ascii=False)

    @staticmethod
    def decode(text: str) -> Tally:
        found = json.loads(text)
        return Tally(found["letters"], found["first_letter"], found["reports"])


class TaskWriter:
    """The ``mapInArrow`` body that writes: ``runner`` (None: the input is the tagged frame
    already) runs over the partition, and its tagged batches become Parquet files under
    ``staging``; yields the :data:`WRITTEN` rows."""

    def __init__(self, runner: Runner | None, staging: str, layout: FileLayout) -> None:
        self.runner = runner
        self.staging = staging
        self.layout = layout

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        source = batches if self.runner is None else self.runner(batches)
        rows = self.write(source, task_partition())
        yield pa.RecordBatch.from_pylist(rows, schema=_WRITTEN)

    def write(self, batches: Iterable[pa.RecordBatch], partition: int) -> list[dict[str, Any]]:
        """Write the tagged ``batches`` (also the driver's: what ``process_broadcast_element``
        emitted); the :data:`WRITTEN` rows, files first, the tally last."""
        files = OutputFiles(self.staging, self.layout, partition)
        tally = Tally()
        for batch in batches:
            for name, rows in by_output(batch):
                tally.count(name, rows)
                files.add(name, rows)
        return [*files.close(), {"output": None, "file": None, "rows": None,
                                 "summary": tally.encode()}]


class OutputFiles:
    """One task attempt's Parquet files under ``staging``: one per output, opened at its first
    rows."""

    def __init__(self, staging: str, layout: FileLayout, partition: int) -> None:
        self.staging = staging
        self.layout = layout
        self.partition = partition
        self.files: dict[str, _OutputFile] = {}

    def add(self, output: str, rows: pa.RecordBatch) -> None:
        """``output``'s tagged ``rows`` (columns beyond the layout's are left out)."""
        if output not in self.files:
            self.files[output] = _OutputFile(self.staging, output_folder(output), self.layout,
                                             self.partition)
        self.files[output].add(rows.select(self.layout.schema.names))

    def close(self) -> list[dict[str, Any]]:
        """Close every file; a :data:`WRITTEN` row for each."""
        return [{"output": name, "file": f.close(), "rows": f.rows, "summary": None}
                for name, f in self.files.items()]


class _OutputFile:
    """One output's Parquet file of one task attempt, opened at its first rows."""

    def __init__(self, staging: str, folder: str, layout: FileLayout, partition: int) -> None:
        self.relative = f"{folder}/{layout.file_name(partition)}"
        self.layout = layout
        self.location = storage.join(staging, self.relative)
        self.pending: list[pa.RecordBatch] = []
        self.buffered = 0
        self.rows = 0
        self.writer: pq.ParquetWriter | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.buffered += batch.num_rows
        self.rows += batch.num_rows
        if self.buffered >= ROW_GROUP_ROWS:
            self._flush()

    def close(self) -> str:
        """Write what is buffered, close the file; its path under the staging folder."""
        self._flush()
        assert self.writer is not None
        self.writer.close()
        return self.relative

    def _flush(self) -> None:
        if self.writer is None:
            fs, path = storage.resolve(self.location)
            fs.create_dir(path.rpartition("/")[0], recursive=True)
            self.writer = pq.ParquetWriter(path, self.layout.schema, filesystem=fs,
                                           compression=CODECS[self.layout.codec][0])
        if self.pending:
            table = pa.Table.from_batches(self.pending).cast(self.layout.schema)
            self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.pending, self.buffered = [], 0


def by_output(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
    """The batch's rows per output (``_tag`` null: the main output), without copying the
    common case: a batch of main rows only (the runners keep main rows in batches of their
    own)."""
    if batch.num_rows == 0:
        return
    tags = batch.column(TAG)
    if tags.null_count == batch.num_rows:
        yield MAIN, batch
        return
    if tags.null_count:
        yield MAIN, batch.filter(pc.is_null(tags))
    for name in pc.unique(tags.drop_null()).to_pylist():
        yield name, batch.filter(pc.equal(tags, name))


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        found = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _text(value: Any) -> str | None:
    """A JSON value as Spark's ``get_json_object`` gives it: strings as they are, other
    values as their JSON text."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def task_partition() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.partitionId() if context is not None else 0
