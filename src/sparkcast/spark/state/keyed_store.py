"""Keyed state of the micro-batch engine by subtask: SQLite on the worker's disk, a delta file
per micro-batch in the checkpoint.

The micro-batch engine by subtask (``execution/partitioned.py``) runs each subtask's main rows in a
task of its ``foreachBatch`` job, so there is no Spark state store to keep its keyed state. Each
subtask keeps it here instead, as Spark's own HDFS-backed store does, with SQLite (the standard
library's binding) in place of an in-memory map, so state larger than memory stays on disk:

* **durable**: micro-batch N's changes (every key written or removed, and the engine's blobs:
  timers, held elements) go to ``<checkpoint>/sparkcast/keyed/<subtask>/<N>.delta`` before the
  batch's outputs commit; every ``SNAPSHOT_INTERVAL`` batches the whole state goes to
  ``<N>.snapshot`` instead, and files no replay can need are deleted. Incremental: a batch
  writes what it changed, never the whole state.
* **staged** where the pattern's tasks write ``sinks.kafka`` (``outputs/task_sinks.py``):
  each task attempt writes its file as ``<N>.delta.<attempt>`` instead, the part's Kafka
  transaction names that attempt in its marker, and the task then publishes the named
  attempt's file as ``<N>.delta`` (:func:`publish`): its own, or, when the part was already
  in, the attempt whose outputs Kafka holds. The state after batch N is then the state that
  produced its committed outputs, whatever a replay's attempt computes (a function that reads
  the clock or draws a random number, another cut of the scan).
* **seeded**: ``initial_state`` (and a ``rescale``) arrives as the snapshot of batch -1
  (``snapshots.SEED``), written by the driver before the first batch.
* **fast**: the state itself lives in a SQLite file in the worker's local folder, named by the
  checkpoint's store id and the subtask, and records the batch it reflects with that commit's
  **lineage token** (a random id each commit writes into its file in the checkpoint too). A
  task for batch N uses it when it reflects batch N-1 of the checkpoint's own line, the token of
  the checkpoint's file of that batch, catches it up from the deltas when it is older, and
  rebuilds it from the latest snapshot when it is ahead (a replay), missing (another host) or
  of another line (a rollback: offsets and commits removed, a backup restored, while this
  copy went on). The values a worker read or wrote stay decoded in its memory between
  micro-batches while the copy stays on that worker's line, the same token
  (``store_backend.py``).

So a replayed batch starts from the same state, the files of batches up to N-1, and writes the
same delta: exactly once, wherever the task runs. Rows are ``(name, key, value)``: ``name`` is a
keyed descriptor or ``META`` (the engine's blobs), ``key`` the key's stable bytes
(``backend.stable_key_bytes``, which read back as the typed key: ``store_backend.key_of``),
``value`` the value's bytes (``store_backend.value_bytes``); a removed row is a null value in a
delta.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pyarrow as pa

from sparkcast.errors import StateSerializationError
from sparkcast.spark.state import checkpoint_files, storage

KEYED = ("sparkcast", "keyed")
META = "\0meta"  # the engine's own blobs (timers, held elements, versions)
SNAPSHOT_INTERVAL = 10
STORE_ID = "store-id"
_SCHEMA = pa.schema([("name", pa.string()), ("key", pa.binary()), ("value", pa.binary())])
#: the schema metadata of a state file that holds its commit's lineage token
_TOKEN = b"lineage"

Change = tuple[str, bytes, bytes | None]


def folder(checkpoint_location: str) -> str:
    """Where the keyed state of every subtask lives in the checkpoint."""
    return checkpoint_files.file(checkpoint_location, *KEYED)


def store_id(checkpoint_location: str) -> str:
    """The checkpoint's store id, written when first asked for: a worker's local copy belongs
    to one checkpoint, even if another is later made at the same path."""
    location = storage.join(folder(checkpoint_location), STORE_ID)
    found = storage.read_bytes(location)
    if found is None:
        storage.write_bytes(location, uuid.uuid4().hex.encode())
        found = storage.read_bytes(location)
    assert found is not None
    return found.decode()


def subtask_folder(location: str, subtask: int) -> str:
    return storage.join(location, str(subtask))


def versions(location: str) -> dict[int, str]:
    """Batch id -> kind (``delta`` or ``snapshot``) of the files in a subtask's folder; a batch
    with both counts as a snapshot."""
    found: dict[int, str] = {}
    for name in storage.list_files(location):
        batch, _, kind = name.partition(".")
        if batch.lstrip("-").isdigit() and kind in ("delta", "snapshot"):
            if found.get(int(batch)) != "snapshot":
                found[int(batch)] = kind
    return found


def local_root() -> str:
    """The worker's folder for local copies: Spark's local dirs when set, else the temp dir."""
    dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    return os.path.join(dirs.split(",")[0] if dirs else tempfile.gettempdir(), "sparkcast-keyed")


class SubtaskStore:
    """One subtask's keyed state, opened for one micro-batch."""

    def __init__(self, location: str, store: str, subtask: int, root: str | None = None,
                 attempt: str | None = None) -> None:
        self.location = subtask_folder(location, subtask)
        #: the task attempt whose file of the batch is staged under its name until a sink's
        #: commit names it (:func:`publish`); None: the file is written in place
        self.attempt = attempt
        directory = os.path.join(root or local_root(), store)
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{subtask}.sqlite")
        self.db: sqlite3.Connection | None = None
        self.batch = -1
        #: whether ``open`` found the local copy reflecting the batch before, on the
        #: checkpoint's line (a worker's warm state of the same token, ``store_backend``, is
        #: then still true)
        self.continued = False
        #: the lineage token of the commit the local copy reflects (None: a file written
        #: before tokens)
        self.token: str | None = None

    # ----------------------------------------------------------------------- opening
    def open(self, batch: int) -> None:
        """Make the local copy reflect the state after batch ``batch - 1``."""
        self.batch = batch
        files = {b: kind for b, kind in versions(self.location).items() if b < batch}
        db = self.db = _connect(self.path)
        have, self.token = _lineage(db)
        on_line = have < batch and (have < 0 or (
            have in files and self._file_token(have, files[have]) == self.token))
        self.continued = on_line and have == batch - 1
        needed = [b for b in sorted(files) if b > have]
        if not on_line or not _continues(have, needed, files):
            with _transaction(db):
                db.execute("DELETE FROM state")
                db.execute("UPDATE lineage SET batch = -1, token = NULL")
            self.token = None
            snapshots = [b for b, kind in files.items() if kind == "snapshot"]
            start = max(snapshots, default=-1)
            needed = [b for b in sorted(files) if b >= start]
        for version in needed:
            self._load(version, files[version])

    def _file_token(self, version: int, kind: str) -> str | None:
        """The lineage token in the checkpoint's file of ``version`` (its schema alone)."""
        return _token_at(storage.join(self.location, f"{version}.{kind}"))

    def _load(self, version: int, kind: str) -> None:
        data = storage.read_bytes(storage.join(self.location, f"{version}.{kind}"))
        if data is None:
            raise StateSerializationError(f"keyed state file {version}.{kind} of "
                                          f"{self.location} vanished while it was read")
        db = self._db()
        reader = pa.ipc.open_stream(data)
        self.token = _token_of(reader.schema)
        with _transaction(db):
            if kind == "snapshot":
                db.execute("DELETE FROM state")
            for batch in reader:
                columns = [batch.column(i).to_pylist() for i in range(3)]
                _apply(db, list(zip(*columns, strict=True)))
            db.execute("UPDATE lineage SET batch = ?, token = ?", (version, self.token))

    # ----------------------------------------------------------------------- reading
    def get(self, name: str, key: bytes) -> bytes | None:
        row = self._db().execute("SELECT value FROM state WHERE name = ? AND key = ?",
                                 (name, key)).fetchone()
        return None if row is None else row[0]

    def get_many(self, name: str, keys: list[bytes]) -> dict[bytes, bytes]:
        """The stored values of ``keys`` (missing keys left out), in few queries."""
        found: dict[bytes, bytes] = {}
        db = self._db()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(db.execute(f"SELECT key, value FROM state WHERE name = ? AND key IN "
                                    f"({marks})", (name, *chunk)).fetchall())
        return found

    def scan(self, name: str) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(key, value)`` of ``name``, in key order."""
        yield from self._db().execute("SELECT key, value FROM state WHERE name = ? ORDER BY key",
                                      (name,)).fetchall()

    def scan_from(self, name: str, start: bytes, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` rows of ``name`` from key ``start`` on (wrapping to the first)."""
        db = self._db()
        rows = db.execute("SELECT key, value FROM state WHERE name = ? AND key >= ? ORDER BY key "
                          "LIMIT ?", (name, start, limit)).fetchall()
        if len(rows) < limit:
            rows += db.execute("SELECT key, value FROM state WHERE name = ? AND key < ? "
                               "ORDER BY key LIMIT ?", (name, start, limit - len(rows))).fetchall()
        return rows

    def names(self) -> list[str]:
        """The names that hold rows (keyed descriptors and ``META``)."""
        return [row[0] for row in self._db().execute("SELECT DISTINCT name FROM state ORDER BY "
                                                     "name").fetchall()]

    def count(self, name: str) -> int:
        return int(self._db().execute("SELECT count(*) FROM state WHERE name = ?",
                                      (name,)).fetchone()[0])

    # ----------------------------------------------------------------------- writing
    def commit(self, changes: list[Change]) -> int:
        """Apply batch ``self.batch``'s ``changes`` to the local copy, then make them durable:
        a delta (or, every ``SNAPSHOT_INTERVAL`` batches, a snapshot) in the checkpoint. A
        failure between the two leaves the local copy ahead, which the next ``open`` of this
        batch rebuilds. Returns the bytes written to the checkpoint."""
        db = self._db()
        batch = self.batch
        self.token = self.attempt or uuid.uuid4().hex
        with _transaction(db):
            _apply(db, changes)
            db.execute("UPDATE lineage SET batch = ?, token = ?", (batch, self.token))
        name = f"{batch}.{kind_of(batch)}" + (f".{self.attempt}" if self.attempt else "")
        if kind_of(batch) == "snapshot":
            cursor = db.execute("SELECT name, key, value FROM state ORDER BY name, key")
            written = self._write(name, iter(lambda: cursor.fetchmany(65536), []))
            if self.attempt is None:
                _forget_before(self.location, batch)
            return written
        return self._write(name, [sorted(changes, key=lambda c: (c[0], c[1]))])

    def _write(self, name: str, chunks: Iterable[list[Change]]) -> int:
        sink = pa.BufferOutputStream()
        schema = _SCHEMA.with_metadata({_TOKEN: (self.token or "").encode()})
        with pa.ipc.new_stream(sink, schema) as writer:
            for rows in chunks:
                writer.write_batch(pa.record_batch(
                    [pa.array([r[0] for r in rows], pa.string()),
                     pa.array([r[1] for r in rows], pa.binary()),
                     pa.array([r[2] for r in rows], pa.binary())], schema=schema))
        data = sink.getvalue().to_pybytes()
        storage.write_bytes(storage.join(self.location, name), data)
        return len(data)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def _db(self) -> sqlite3.Connection:
        assert self.db is not None, "open() first"
        return self.db


def kind_of(batch: int) -> str:
    """The kind of file batch ``batch`` writes: every ``SNAPSHOT_INTERVAL``-th a snapshot."""
    return "snapshot" if batch % SNAPSHOT_INTERVAL == SNAPSHOT_INTERVAL - 1 else "delta"


def attempt_token(nonce: str) -> str:
    """This task attempt's name in the files it stages: the driver's ``nonce`` for the batch's
    job and Spark's task attempt id, which, unlike the attempt number, no other attempt of any
    stage attempt shares (the nonce tells the applications of a checkpoint apart)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"{nonce}-{context.taskAttemptId() if context is not None else 0}"


def publish(location: str, subtask: int, batch: int, attempt: str) -> bool:
    """Make ``attempt``'s staged file of ``batch`` the subtask's file of the batch (replacing
    one an earlier attempt published), and delete what attempts staged for earlier batches
    (settled: batch N runs once N-1 is committed). Returns False when the attempt's file is
    neither staged nor the one published.

    Other attempts' files of ``batch`` stay: one of them may still be the attempt a sink's
    commit names (a zombie beside its retry), and that attempt publishes its own."""
    folder = subtask_folder(location, subtask)
    published = f"{batch}.{kind_of(batch)}"
    names = storage.list_files(folder)
    if f"{published}.{attempt}" in names:
        storage.move(storage.join(folder, f"{published}.{attempt}"),
                     storage.join(folder, published))
    elif _token_at(storage.join(folder, published)) != attempt:
        return False
    for name in names:
        version, _, staged = name.partition(".")
        if staged.count(".") == 1 and version.lstrip("-").isdigit() and int(version) < batch:
            storage.delete(storage.join(folder, name))
    if kind_of(batch) == "snapshot":
        _forget_before(folder, batch)
    return True


def _forget_before(location: str, batch: int) -> None:
    """After snapshot ``batch`` of the subtask folder ``location``: keep the snapshot before it
    and the deltas since (a replay of ``batch`` starts there), delete everything older."""
    files = versions(location)
    older = [b for b, kind in files.items() if kind == "snapshot" and b < batch]
    keep_from = max(older, default=min(files, default=batch))
    for version, kind in files.items():
        if version < keep_from:
            for suffix in ("delta", "snapshot"):
                storage.delete(storage.join(location, f"{version}.{suffix}"))
        elif version == keep_from and kind == "snapshot":
            storage.delete(storage.join(location, f"{version}.delta"))


def _token_at(location: str) -> str | None:
    """The lineage token in the state file at ``location`` (its schema alone)."""
    fs, path = storage.resolve(location)
    try:
        with fs.open_input_stream(path) as stream:
            return _token_of(pa.ipc.open_stream(stream).schema)
    except (FileNotFoundError, pa.ArrowInvalid):
        return "\0unreadable"  # never a local copy's token: the copy is rebuilt


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = OFF")  # the checkpoint's files are the durable copy
    db.execute("PRAGMA cache_size = -65536")  # 64 MiB of pages: the hot keys stay in memory
    db.execute("CREATE TABLE IF NOT EXISTS state (name TEXT NOT NULL, key BLOB NOT NULL, "
               "value BLOB NOT NULL, PRIMARY KEY (name, key)) WITHOUT ROWID")
    # a copy made before lineage tokens has only a ``version`` table: it is rebuilt once
    db.execute("CREATE TABLE IF NOT EXISTS lineage (batch INTEGER NOT NULL, token TEXT)")
    if db.execute("SELECT count(*) FROM lineage").fetchone()[0] == 0:
        db.execute("INSERT INTO lineage VALUES (-1, NULL)")
    return db


def _lineage(db: sqlite3.Connection) -> tuple[int, str | None]:
    """The batch the local copy reflects and its commit's lineage token."""
    batch, token = db.execute("SELECT batch, token FROM lineage").fetchone()
    return int(batch), token


def _token_of(schema: pa.Schema) -> str | None:
    token = (schema.metadata or {}).get(_TOKEN)
    return token.decode() if token else None


def _continues(have: int, needed: list[int], files: dict[int, str]) -> bool:
    """Whether the files after ``have`` are all deltas and leave no batch out."""
    if have < 0:
        return not files
    expected = have + 1
    for batch in needed:
        if files[batch] != "delta" or batch != expected:
            return False
        expected += 1
    return not needed or needed[-1] == max(files)


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """All or nothing: the local copy and its batch change together."""
    db.execute("BEGIN")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _apply(db: sqlite3.Connection, changes: list[Change]) -> None:
    db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?, ?)",
                   [c for c in changes if c[2] is not None])
    db.executemany("DELETE FROM state WHERE name = ? AND key = ?",
                   [(c[0], c[1]) for c in changes if c[2] is None])
