"""A batch-id-idempotent file writer for ``foreachBatch``, read like Spark's file sink.

Spark calls a ``foreachBatch`` function at least once per micro-batch: a crash between the
writes and the checkpoint's commit replays the batch. Writing its rows straight into the output
would then duplicate them. So each micro-batch is written where readers do not look (a staging
folder starting with ``_``), its files are moved beside the file sink's
(``<path>/_output=<name>/<batch>-part-…``) and the batch is committed by one atomic file,
``<path>/_spark_metadata/<batch>``, in the format of Spark's own file sink log. A batch whose
log file exists is skipped when replayed; files of an interrupted attempt are in no log file.

Because the log is Spark's, ``spark.read.parquet(path)`` (and so ``read_output``) reads only
committed files, whichever sink wrote them; like Spark's sink, every ``compactInterval``-th log
file (``spark.sql.streaming.fileSink.log.compactInterval``, 10) is a ``.compact`` file holding
every file so far, the form Spark's reader expects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow.fs as pafs
from pyspark.sql import DataFrame

from sparkcast.errors import SinkError
from sparkcast.spark.layout import OUTPUT
from sparkcast.spark.state import storage

LOG = "_spark_metadata"
STAGING = "_sparkcast_staging"
_VERSION = b"v1"
_BLOCK_SIZE = 32 * 1024 * 1024


class CommitLog:
    """The committed micro-batches of one output path."""

    def __init__(self, path: str, compact_interval: int = 10) -> None:
        self.path = path
        self.compact_interval = compact_interval
        self.log = storage.join(path, LOG)

    def committed(self, batch: int) -> bool:
        return any(storage.read_bytes(self._file(batch, compact)) is not None
                   for compact in (False, True))

    def write(self, batch: int, frame: DataFrame, format: str) -> bool:
        """Write ``frame`` (partitioned by ``_output``) as micro-batch ``batch``, exactly once;
        False when it was committed before."""
        if self.committed(batch):
            return False  # a replay of a batch that committed before the crash
        self.commit(batch, self.stage(batch, frame, format))
        return True

    def stage(self, batch: int, frame: DataFrame, format: str) -> str:
        """Write ``frame`` where readers do not look; ``commit`` publishes it (the two halves of
        ``write``, for a writer that commits several sinks after staging all of them)."""
        staging = self.staging(batch)
        frame.write.format(format).partitionBy(OUTPUT).mode("overwrite").save(staging)
        return staging

    def staging(self, batch: int) -> str:
        """Where micro-batch ``batch`` is written before ``commit`` (readers skip it)."""
        return storage.join(self.path, STAGING, str(batch))

    def commit(self, batch: int, staging: str, files: Iterable[str] | None = None) -> None:
        """Move the staged files of ``batch`` into the output and log them in one atomic file;
        ``files`` (paths under ``staging``): only these, the ones writers reported (a failed
        task attempt may have left others)."""
        entries = self._publish(batch, staging, None if files is None else set(files))
        compact = self._compacts(batch)
        if compact:
            entries = self._entries_since_compact(batch) + entries
        storage.write_bytes(self._file(batch, compact),
                            b"\n".join([_VERSION, *[json.dumps(e).encode() for e in entries]]))
        storage.delete(staging)

    def batches(self) -> list[int]:
        """The logged micro-batches, ascending (a compact file's batch included)."""
        return sorted(int(n.split(".")[0]) for n in storage.list_files(self.log)
                      if n.split(".")[0].isdigit())

    def logged_files(self) -> set[str]:
        """Every data file a logged micro-batch lists, as its path under the output
        (``_output=main/3-part-….parquet``): the last compact file and the batches after it
        (Spark may delete the log files a compact file holds)."""
        batches = self.batches()
        compacts = [b for b in batches if self._compacts(b)
                    and storage.read_bytes(self._file(b, True)) is not None]
        start = max(compacts, default=-1)
        files: set[str] = set()
        for batch in [b for b in batches if b >= start]:
            data = storage.read_bytes(self._file(batch, batch == start))
            for line in (data or b"").split(b"\n")[1:]:
                if line.strip():
                    files.add(_under_output(json.loads(line)["path"]))
        return files

    def fill(self, batches: list[int]) -> list[int]:
        """Log the given batches that have no log file, after the last logged one, as batches
        that wrote nothing: the batch Spark's offline state repartition adds to a checkpoint
        writes no output, and Spark's reader refuses a log with a gap (``.../_spark_metadata/N
        doesn't exist``). Returns the batches filled."""
        logged = self.batches()
        if not logged:
            return []
        filled = [b for b in sorted(batches) if b > max(logged) and not self.committed(b)]
        for batch in filled:
            self.log_empty(batch)
        return filled

    def start(self, batches: list[int]) -> list[int]:
        """A log that has no batch yet, for a checkpoint that committed ``batches`` before
        (a copied checkpoint, or one given a new output folder): those batches logged as
        batches that wrote nothing here, since Spark's reader refuses a log that starts after
        batch 0. Returns the batches logged."""
        if self.batches():
            return []
        for batch in sorted(batches):
            self.log_empty(batch)
        return sorted(batches)

    def log_empty(self, batch: int) -> None:
        """Log ``batch`` as a micro-batch that wrote no file here."""
        compact = self._compacts(batch)
        entries = self._entries_since_compact(batch) if compact else []
        storage.write_bytes(self._file(batch, compact),
                            b"\n".join([_VERSION, *[json.dumps(e).encode() for e in entries]]))

    def _publish(self, batch: int, staging: str, only: set[str] | None
                 ) -> list[dict[str, Any]]:
        """Move the staged data files (``only`` these, when given) into the output; their log
        entries."""
        fs, root = storage.resolve(staging)
        _, target_root = storage.resolve(self.path)
        entries = []
        moved: set[str] = set()
        for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
            relative = info.path[len(root):].lstrip("/")
            if (info.type != pafs.FileType.File or _hidden(relative)
                    or (only is not None and relative not in only)):
                continue
            folder, _, file_name = relative.rpartition("/")
            target = f"{target_root}/{folder}/{batch}-{file_name}"
            fs.create_dir(target.rpartition("/")[0], recursive=True)
            fs.move(info.path, target)
            moved.add(relative)
            done = fs.get_file_info(target)
            entries.append({"path": _qualified(self.path, f"{folder}/{batch}-{file_name}"),
                            "size": done.size, "isDir": False,
                            "modificationTime": int(done.mtime_ns // 1_000_000),
                            "blockReplication": 1, "blockSize": _BLOCK_SIZE,
                            "action": "add"})
        missing = sorted((only or set()) - moved)
        if missing:
            raise SinkError(f"micro-batch {batch}: files its writers reported are missing from "
                            f"{staging}: {missing[:5]}")
        return entries

    def _compacts(self, batch: int) -> bool:
        return (batch + 1) % self.compact_interval == 0

    def _entries_since_compact(self, batch: int) -> list[dict[str, Any]]:
        """The entries of every batch before ``batch`` (the last compact file and after it)."""
        first = batch - self.compact_interval
        entries: list[dict[str, Any]] = []
        for earlier in range(max(first, 0), batch):
            data = storage.read_bytes(self._file(earlier, earlier == first))
            if data is None:
                continue  # batches before the first sparkcast write, never committed here
            entries.extend(json.loads(line) for line in data.split(b"\n")[1:] if line.strip())
        return entries

    def _file(self, batch: int, compact: bool) -> str:
        return storage.join(self.log, f"{batch}.compact" if compact else str(batch))


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) and "=" not in part
               for part in relative.split("/"))


def _under_output(logged: str) -> str:
    """A logged file's path from its ``_output=`` folder on, as the file system names it."""
    path = unquote(urlsplit(logged).path)
    return path[path.rfind("/" + OUTPUT + "=") + 1:]


def _qualified(path: str, relative: str) -> str:
    """The file's URI as Spark's file sink writes it in its log (Hadoop's ``Path.toUri``:
    what a URI path may not hold is %-escaped, so an output folder with an escaped tag,
    ``_output=late%2Fevents``, is logged as ``_output=late%252Fevents``)."""
    if storage.is_uri(path):
        return storage.join(path.partition("?")[0], _quoted(relative))
    return "file://" + _quoted(os.path.abspath(path) + "/" + relative)


def _quoted(path: str) -> str:
    return quote(path, safe="/-_.!~*'();:@&=+$,")

