"""Guarded output folders: one checkpoint per folder, and no file a reader sees that no
committed micro-batch lists.

A folder's commit log (``_spark_metadata``) numbers its micro-batches as the checkpoint that
wrote them does. A new checkpoint writing into it starts again at batch 0, and both Spark's
file sink and ``state/commit_log.py`` take every batch the log already holds as written: the
new job's rows would never be written, while the run looked fine. So the manifest names the
checkpoint that writes the folder (its id, ``checkpoint_files.identity``, and where it was), and
:func:`guard_output` refuses another checkpoint before the query starts, as
``compatibility.py`` refuses another job's checkpoint.

A micro-batch killed after its files reached the ``_output=`` folders and before its log file
was written leaves files that Spark's reader (and ``read_output``) skip, but that pandas,
pyarrow or DuckDB reading a folder count twice once the batch is replayed. The writer that is
about to start is the only one, so :func:`remove_orphans` deletes them first; it reads the log's
files by the names they have (a ``.compact`` file wherever the log's own interval put one), so a
committed batch's files are never taken for orphans whatever the session's ``compactInterval``.

A log keeps its own ``compactInterval`` (``state/commit_log.py``); a session whose setting
contradicts a log that has no ``.compact`` file yet is refused before the query starts, as
Spark's file sink would fail on that log later.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow.fs as pafs

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.layout import OUTPUT
from sparkcast.spark.outputs.files import read_manifest
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state import checkpoint_files, storage
from sparkcast.spark.state.commit_log import CommitLog, session_interval


def guard_output(plan: RuntimePlan, path: str, checkpoint_location: str) -> None:
    """Refuse to write ``path`` from ``checkpoint_location`` when the folder holds committed
    micro-batches of another checkpoint (or of an unrecorded one, when this checkpoint is new),
    or a commit log that the session's ``compactInterval`` contradicts
    (``CommitLog.check_interval``)."""
    log = CommitLog(path, session_interval(plan.spark))
    log.check_interval()
    batches = log.batches()
    if not batches:
        return  # nothing committed: nothing that could hide this job's rows
    manifest = read_manifest(path) or {}
    owner: dict[str, Any] = manifest.get("checkpoint") or {}
    mine = checkpoint_files.identity(checkpoint_location)
    if (owner.get("id") == mine if owner
            else bool(checkpoint_files.committed_batches(checkpoint_location))):
        return  # its own folder (one written before owners were recorded: its batches go on)
    writer = owner.get("location") or "a checkpoint it does not record"
    raise IncompatibleCheckpointError(
        f"the output folder {path} belongs to another job: write to a new folder, or restart "
        f"the checkpoint that wrote it ({writer}); delete the folder if its rows are no longer "
        f"needed. Nothing was run. The folder holds committed micro-batches up to "
        f"{batches[-1]} of main output {manifest.get('main', 'unknown')}; this "
        f"pipeline's checkpoint {checkpoint_location}, of main output "
        f"{plan.output_schema.simpleString()}, has batches, numbered from "
        f"{_next_batch(checkpoint_location)}, would be taken for those already written and "
        "never written")


def _next_batch(checkpoint_location: str) -> int:
    last = checkpoint_files.last_committed(checkpoint_location)
    return 0 if last is None else last + 1


def owner_record(checkpoint_location: str) -> dict[str, str]:
    """What the manifest keeps of the checkpoint writing the folder (its id, made if new)."""
    identity = checkpoint_files.identity(checkpoint_location, create=True)
    assert identity is not None
    where = (checkpoint_location if storage.is_uri(checkpoint_location)
             else os.path.abspath(checkpoint_location))
    return {"id": identity, "location": where}


def remove_orphans(path: str) -> list[str]:
    """Delete the data files under ``path``'s ``_output=`` folders that no logged micro-batch
    lists (with their checksum files); their paths under ``path``. Only in a folder with a
    manifest: one sparkcast writes."""
    if read_manifest(path) is None:
        return []
    logged = CommitLog(path).logged_files()
    fs, root = storage.resolve(path)
    removed = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        relative = info.path[len(root):].lstrip("/")
        folder, _, name = relative.rpartition("/")
        if (info.type != pafs.FileType.File or not folder.startswith(OUTPUT + "=")
                or "/" in folder or name.startswith(("_", ".")) or relative in logged):
            continue
        fs.delete_file(info.path)
        checksum = f"{root}/{folder}/.{name}.crc"
        if fs.get_file_info(checksum).type == pafs.FileType.File:
            fs.delete_file(checksum)
        removed.append(relative)
    return sorted(removed)
