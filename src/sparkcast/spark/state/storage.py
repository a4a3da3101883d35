"""Files sparkcast keeps in and beside the checkpoint, by path or URI: the one way to reach them.

The layout record, broadcast snapshots, prepared state, broadcast blobs, the commit log and the
outputs' manifest all go through here (``checkpoint_files.py`` names the checkpoint's files),
and so do the applications' generated input files (``write_bytes`` is the one atomic writer).

On a cluster these must sit where every executor (and a restarted driver) reads them, so they go
through ``pyarrow.fs`` instead of ``open``: a local path or ``file://`` URI (one machine, or a
shared mount), ``s3://`` (``s3a://`` and ``s3n://``, Hadoop's names, mean the same bucket),
``gs://``, ``hdfs://`` (needs libhdfs and a JVM on every host). Object-store options ride on the
URI's query, as pyarrow reads them: ``s3://bucket/job?endpoint_override=host:9000&scheme=http``;
credentials come from the usual environment (``AWS_ACCESS_KEY_ID`` ...) of every host, or
``s3://key:secret@bucket/...``.

Writes are atomic: a reader never sees half a file (a temporary file renamed on file systems,
one PUT on object stores, which have no rename but never show a partial object).
"""

from __future__ import annotations

import os
import uuid
from functools import lru_cache
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from sparkcast.errors import PipelineError

HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}
OBJECT_STORES = ("s3", "gs", "gcs")


def is_uri(location: str) -> bool:
    """Whether ``location`` names its scheme (``file:///x``, ``s3://b/x``), not a bare path."""
    scheme = urlsplit(location).scheme
    return len(scheme) > 1  # "C:" on Windows is a drive, not a scheme


def is_local_path(location: str) -> bool:
    """A bare path or ``file:`` URI: only the machine that wrote it can read it (unless it is a
    shared mount, which a ``file://`` URI states on purpose)."""
    return not is_uri(location) or urlsplit(location).scheme == "file"


def join(location: str, *parts: str) -> str:
    """``location`` with path ``parts`` appended, keeping a URI's query (``?endpoint_override``)."""
    base, sep, query = location.partition("?")
    return "/".join([base.rstrip("/"), *parts]) + sep + query


def read_bytes(location: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    fs, path = resolve(location)
    try:
        with fs.open_input_stream(path) as source:
            return bytes(source.read())
    except FileNotFoundError:
        return None


def write_bytes(location: str, data: bytes) -> None:
    """Write ``data`` atomically, creating parent folders as needed."""
    fs, path = resolve(location)
    parent = path.rsplit("/", 1)[0]
    if parent and parent != path:
        fs.create_dir(parent, recursive=True)
    if fs.type_name in OBJECT_STORES:
        with fs.open_output_stream(path) as out:
            out.write(data)
        return
    temporary = f"{parent}/.tmp-{uuid.uuid4().hex}"
    with fs.open_output_stream(temporary) as out:
        out.write(data)
    fs.move(temporary, path)


def move(source: str, target: str) -> None:
    """Move the file ``source`` to ``target``, replacing it: a rename on a file system (HDFS,
    which renames onto no file, has ``target`` deleted first), a copy then a delete on an
    object store; either way ``target`` appears whole."""
    fs, path = resolve(source)
    destination = resolve(target)[1]
    if fs.type_name == "hdfs" and fs.get_file_info(destination).type == pafs.FileType.File:
        fs.delete_file(destination)
    fs.move(path, destination)


def list_files(location: str) -> list[str]:
    """The names of the files directly in the folder ``location`` (none when it is missing)."""
    fs, path = resolve(location)
    found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [f.base_name for f in found if f.type == pafs.FileType.File]


def is_dir(location: str) -> bool:
    fs, path = resolve(location)
    return bool(fs.get_file_info(path).type == pafs.FileType.Directory)


def delete(location: str) -> None:
    """Delete a file or a folder with its contents; nothing when it is missing."""
    fs, path = resolve(location)
    kind = fs.get_file_info(path).type
    if kind == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif kind == pafs.FileType.File:
        fs.delete_file(path)


def resolve(location: str) -> tuple[pafs.FileSystem, str]:
    """The ``pyarrow`` file system of ``location`` and the path within it."""
    if not is_uri(location):
        return _local(), os.path.abspath(location)
    if location.startswith("file:"):  # file:///tmp/x, and Spark's file:/tmp/x
        return _local(), "/" + location.removeprefix("file:").lstrip("/")
    scheme, _, rest = location.partition("://")
    base, _, query = rest.partition("?")
    root, _, inner = base.partition("/")
    fs = _file_system(HADOOP_SCHEMES.get(scheme, scheme), root, query)
    bucket = root.rpartition("@")[2]  # s3://key:secret@bucket/... as pyarrow reads it
    return fs, (f"{bucket}/{inner}".rstrip("/") if fs.type_name in OBJECT_STORES else "/" + inner)


@lru_cache(maxsize=1)
def _local() -> pafs.FileSystem:
    return pafs.LocalFileSystem()


@lru_cache(maxsize=32)
def _file_system(scheme: str, root: str, query: str) -> pafs.FileSystem:
    """One client per store and worker process (creating an S3 client costs milliseconds)."""
    uri = f"{scheme}://{root}/" + (f"?{query}" if query else "")
    try:
        fs, _ = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError) as exc:
        raise PipelineError(f"cannot open the storage {scheme}://{root}: {exc}") from exc
    return fs
