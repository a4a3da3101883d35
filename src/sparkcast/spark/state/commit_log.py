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
file is a ``.compact`` file holding every file so far, the form Spark's reader expects. The
interval is the log's own, found as Spark's ``CompactibleFileStreamLog`` finds it (the distance
between its last two ``.compact`` files; with one, the session's setting
``spark.sql.streaming.fileSink.log.compactInterval`` made a divisor of it; with none, the
setting): a log keeps the interval it was started with whatever the session says later, and its
files are read by the names they have. A log whose plain and ``.compact`` files contradict the
interval found (the setting changed before the first ``.compact`` file) is refused by
:meth:`CommitLog.check_interval`: Spark's sink and reader would fail on it or miss its files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from functools import cached_property
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession

from sparkcast.errors import IncompatibleCheckpointError, SinkError
from sparkcast.spark.layout import OUTPUT
from sparkcast.spark.state import storage

LOG = "_spark_metadata"
STAGING = "_sparkcast_staging"
_VERSION = b"v1"
_BLOCK_SIZE = 32 * 1024 * 1024
_COMPACT = ".compact"
#: Spark's setting of every how many batches a file sink's log compacts (for a new log)
COMPACT_INTERVAL = "spark.sql.streaming.fileSink.log.compactInterval"
DEFAULT_INTERVAL = 10


def session_interval(spark: SparkSession | None) -> int:
    """The session's ``compactInterval`` (Spark's default, 10, without a session)."""
    value = spark.conf.get(COMPACT_INTERVAL, None) if spark is not None else None
    return int(value or DEFAULT_INTERVAL)


class CommitLog:
    """The committed micro-batches of one output path; ``default_interval``: the session's
    ``compactInterval``, which a log without ``.compact`` files takes."""

    def __init__(self, path: str, default_interval: int = DEFAULT_INTERVAL) -> None:
        self.path = path
        self.default_interval = default_interval
        self.log = storage.join(path, LOG)

    @cached_property
    def compact_interval(self) -> int:
        """Every how many batches this log compacts, found from its ``.compact`` files as
        Spark's ``CompactibleFileStreamLog`` finds it (once, as Spark does at a query's start)."""
        compacts = sorted((b for b, compact in self._logged().items() if compact), reverse=True)
        if len(compacts) >= 2:
            return compacts[0] - compacts[1]
        if compacts:
            return derive_interval(self.default_interval, compacts[0])
        return self.default_interval

    def check_interval(self) -> None:
        """Refuse a log whose file names, from its last ``.compact`` file on (all Spark reads),
        contradict its interval: the session's setting changed before the log's first
        ``.compact`` file, and Spark's sink and reader would look for files that are not there
        (or take a batch's files for missing)."""
        interval = self.compact_interval
        logged = sorted(self._logged().items())
        start = max((b for b, compact in logged if compact), default=0)
        wrong = [b for b, compact in logged
                 if b >= start and compact != ((b + 1) % interval == 0)]
        if not wrong:
            return
        found = [f"{b}{_COMPACT}" if c else str(b) for b, c in logged]
        raise IncompatibleCheckpointError(
            f"{COMPACT_INTERVAL} is {self.default_interval} in this session, but the commit log "
            f"of the output folder {self.path} was written with another: with "
            f"{interval}, batch {wrong[0]}'s log file would be "
            f"{'a plain' if (wrong[0] + 1) % interval else 'a .compact'} one, and Spark's "
            "file sink and reader would fail on the log or miss files. Set "
            f"{COMPACT_INTERVAL} back to the value the folder was written with (Spark's "
            f"default is {DEFAULT_INTERVAL}), or write to a new folder. Nothing was run. The "
            f"log holds {', '.join(found[:12])}{' …' if len(found) > 12 else ''}")

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
        return sorted(self._logged())

    def logged_files(self) -> set[str]:
        """Every data file a logged micro-batch lists, as its path under the output
        (``_output=main/3-part-….parquet``): the last compact file and the batches after it
        (Spark may delete the log files a compact file holds), read by the names they have."""
        logged = self._logged()
        return {_under_output(entry["path"])
                for entry in self._entries_from_last_compact(logged, max(logged, default=-1) + 1)}

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
        batches that wrote nothing here, from the last compact batch at or before the last
        of them on (Spark's reader reads a log from there, and refuses one that lacks it: the
        checkpoint keeps only its last ``spark.sql.streaming.minBatchesToRetain`` commits).
        Returns the batches logged."""
        if self.batches() or not batches:
            return []
        last = max(batches)
        compacted = max(0, (last + 1) // self.compact_interval * self.compact_interval - 1)
        logged = list(range(min(compacted, min(batches)), last + 1))
        for batch in logged:
            self.log_empty(batch)
        return logged

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
        return self._entries_from_last_compact(self._logged(), batch)

    def _entries_from_last_compact(self, logged: dict[int, bool], before: int
                                   ) -> list[dict[str, Any]]:
        """The entries of the logged batches before ``before``: the last ``.compact`` file
        among them and the batches after it (a gap is a batch never committed here: before
        the first sparkcast write, or of a copied checkpoint)."""
        start = max((b for b, compact in logged.items() if compact and b < before), default=0)
        entries: list[dict[str, Any]] = []
        for batch in sorted(b for b in logged if start <= b < before):
            data = storage.read_bytes(self._file(batch, logged[batch]))
            entries.extend(json.loads(line) for line in (data or b"").split(b"\n")[1:]
                           if line.strip())
        return entries

    def _logged(self) -> dict[int, bool]:
        """Each logged batch and whether its file is a ``.compact`` one (Spark's temporary and
        checksum files are hidden: ``.3.crc``)."""
        logged: dict[int, bool] = {}
        for name in storage.list_files(self.log):
            number = name.removesuffix(_COMPACT)
            if number.isdigit():
                logged[int(number)] = logged.get(int(number), False) or name != number
        return logged

    def _file(self, batch: int, compact: bool) -> str:
        return storage.join(self.log, f"{batch}{_COMPACT}" if compact else str(batch))


def derive_interval(default: int, last_compact: int) -> int:
    """The interval of a log whose one ``.compact`` file is ``last_compact``'s, as Spark derives
    it: the smallest divisor of ``last_compact + 1`` not below ``default`` (``last_compact + 1``
    when none is)."""
    batches = last_compact + 1
    if batches <= default or default >= batches // 2:
        return batches
    return next((i for i in range(default, batches // 2 + 1) if batches % i == 0), batches)


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

