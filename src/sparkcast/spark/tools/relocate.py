"""Move or copy a checkpoint to another folder or bucket (``sparkcast state move|copy``).

A checkpoint does not survive a plain copy: Spark's operator-state metadata
(``state/<operator>/_metadata/v2/<batch>``, the transformWithState path) records its
``_stateSchema`` files by absolute URI, and a restart from the copy reads (or misses) the old
folder's. Everything else Spark and sparkcast keep names files relative to the checkpoint
(offsets, commits, RocksDB's zips, the keyed store's deltas, broadcast snapshots, blobs by
digest), and the sources' logs name the input files, which stay where they are.

:func:`relocate` copies every file, then rewrites each text file that names the old location
(in any of the forms Spark writes it: ``file:/x``, ``file:///x``, ``/x``, a URI) to name the
new one, and drops the Hadoop checksum (``.<name>.crc``) of a rewritten file, which Hadoop's
local file system would otherwise check against the old bytes. A binary file that still names
the old location is refused (its bytes cannot be rewritten in place).

``move`` keeps the job's identity (Spark's query id, sparkcast's checkpoint id and keyed store
id): the moved checkpoint goes on writing its outputs and its sinks' ledgers as before, and the
old folder is deleted once the new one is complete. ``copy`` leaves the old folder untouched and
makes the copy a job of its own (new ids, Kafka marker topics of its own): both may run, each
into its own output folder, and exactly-once sinks (JDBC, Kafka, Delta) take the copy's batches
for a new query's.
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow.fs as pafs

from sparkcast.errors import PipelineError
from sparkcast.spark.state import checkpoint_files, keyed_store, storage

#: files too large to be a metadata record are left alone (state data is binary anyway)
_LARGEST_TEXT = 1 << 20


def relocate(old: str, new: str, keep_old: bool) -> dict[str, Any]:
    """Copy checkpoint ``old`` to ``new`` (missing or empty), rewriting where it names itself;
    ``keep_old`` false (``move``) deletes ``old`` afterwards, true (``copy``) gives the copy new
    ids. Returns what was done: files copied and rewritten."""
    if not checkpoint_files.in_use(old):
        raise PipelineError(f"{old} is not a checkpoint (it has no offsets or commits log): "
                            "name the folder given as checkpoint_location")
    source_fs, source = storage.resolve(old)
    target_fs, target = storage.resolve(new)
    if source_fs.type_name == target_fs.type_name and (
            f"{target}/".startswith(f"{source}/") or f"{source}/".startswith(f"{target}/")):
        raise PipelineError(f"{new} and {old} are inside one another: name a folder outside "
                            "the checkpoint")
    if target_fs.get_file_info(pafs.FileSelector(target, allow_not_found=True)):
        raise PipelineError(f"{new} exists and is not empty: name a new folder")
    pafs.copy_files(source, target, source_filesystem=source_fs,
                    destination_filesystem=target_fs)
    rewritten = _rewrite(target_fs, target, _renames(old, new))
    if keep_old:
        _new_identity(new)
    else:
        storage.delete(old)
    files = [i for i in target_fs.get_file_info(pafs.FileSelector(target, recursive=True))
             if i.type == pafs.FileType.File]
    return {"from": old, "to": new, "files": len(files), "rewritten": rewritten,
            "old_folder": "kept" if keep_old else "deleted"}


def _forms(location: str) -> list[str]:
    """How files may name ``location``: Spark's qualified form first."""
    if storage.is_uri(location) and not location.startswith("file:"):
        return [location.partition("?")[0].rstrip("/")]
    _, path = storage.resolve(location)
    return [f"file://{path}", f"file:{path}", path]


def _renames(old: str, new: str) -> list[tuple[str, str]]:
    """Each form of ``old`` and what replaces it (the same form of ``new`` where it has one),
    longest first, so ``file:///x`` is not rewritten as ``file://`` + the new ``/x``."""
    before, after = _forms(old), _forms(new)
    pairs = (list(zip(before, after, strict=True)) if len(before) == len(after)
             else [(form, after[0]) for form in before])
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def _rewrite(fs: pafs.FileSystem, root: str, renames: list[tuple[str, str]]) -> list[str]:
    """Rewrite every text file under ``root`` that names the old location; their paths under
    it."""
    done = []
    found = [i for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
             if i.type == pafs.FileType.File and not i.base_name.endswith(".crc")]
    for info in found:
        relative = info.path[len(root):].lstrip("/")
        if info.size > _LARGEST_TEXT:
            continue
        with fs.open_input_stream(info.path) as stream:
            data = bytes(stream.read())
        if not any(form.encode() in data for form, _ in renames):
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise PipelineError(f"{relative} names the old location in binary data, which "
                                "cannot be rewritten: the checkpoint cannot be relocated; "
                                "nothing was deleted") from None
        for form, replacement in renames:
            text = _replace_location(text, form, replacement)
        with fs.open_output_stream(info.path) as out:
            out.write(text.encode("utf-8"))
        folder, _, name = info.path.rpartition("/")
        checksum = f"{folder}/.{name}.crc"
        if fs.get_file_info(checksum).type == pafs.FileType.File:
            fs.delete_file(checksum)
        done.append(relative)
    return sorted(done)


def _replace_location(text: str, old: str, new: str) -> str:
    """``old`` replaced where it is the whole location or a folder above a file in it (not
    ``/data/ck`` inside ``/data/ck2``)."""
    parts = text.split(old)
    out = [parts[0]]
    for part in parts[1:]:
        whole = not part or part[0] in '/"\n,]'
        out.append((new if whole else old) + part)
    return "".join(out)


def _new_identity(checkpoint: str) -> None:
    """A copy is a job of its own: a new Spark query id, checkpoint id and keyed store id, and
    Kafka marker topics of its own (the original's recorded aside, ``kafka_markers.py``)."""
    checkpoint_files.new_query_id(checkpoint)
    if checkpoint_files.read_json(checkpoint, checkpoint_files.ID_FILE) is not None:
        checkpoint_files.write_json(checkpoint, checkpoint_files.ID_FILE,
                                    {"id": uuid.uuid4().hex})
    topics = checkpoint_files.read_json(checkpoint, checkpoint_files.KAFKA_MARKERS_FILE)
    if topics is not None:
        inherited = checkpoint_files.read_json(checkpoint,
                                               checkpoint_files.KAFKA_INHERITED_FILE) or {}
        checkpoint_files.write_json(checkpoint, checkpoint_files.KAFKA_INHERITED_FILE,
                                    {**inherited, **topics})
        storage.delete(checkpoint_files.file(checkpoint, *checkpoint_files.KAFKA_MARKERS_FILE))
    store = storage.join(keyed_store.folder(checkpoint), keyed_store.STORE_ID)
    if storage.read_bytes(store) is not None:
        storage.write_bytes(store, uuid.uuid4().hex.encode())


