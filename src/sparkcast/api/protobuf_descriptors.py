"""Protobuf descriptor sets, read on the driver: the messages a set defines, the message indexes
Confluent's header names one by, the registry's schemas as a set and a set as registry schemas.

A set (``FileDescriptorSet``) is what ``protoc --include_imports --descriptor_set_out`` writes
and what the workers build their message classes from (``spark/outputs/protobuf_rows.py``).
Only Google's well-known files (``google/protobuf/*.proto``) may be left out of one:
``completed`` adds them from Python's protobuf runtime, as Confluent's clients skip them in a
schema's references.

A message is found among the top-level messages of the set's files, by full name;
Confluent's indexes name it by its place in its file (``[0]``: the first, written as the single
byte 0). Nothing here runs per record, imports a module a descriptor names, or evaluates data.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sparkcast.errors import MissingDependencyError, PipelineError

#: the files Confluent's clients and registry treat as built in (never a reference)
BUILT_IN = ("google/protobuf/", "google/type/", "confluent/")


def _descriptor_pb2() -> Any:
    try:
        from google.protobuf import descriptor_pb2
    except ImportError as error:
        raise MissingDependencyError(f"Protobuf values need Google's protobuf runtime: pip "
                                     f"install 'sparkcast[spark]' ({error})") from error
    return descriptor_pb2


class DescriptorSet:
    """A parsed ``FileDescriptorSet`` (``data``: its bytes); refused with the fix when it is
    not one."""

    def __init__(self, data: bytes, where: str = "the descriptor set") -> None:
        proto = _descriptor_pb2().FileDescriptorSet()
        try:
            proto.ParseFromString(data)
        except Exception as error:  # noqa: BLE001 - protobuf's DecodeError and its kin
            raise PipelineError(f"{where} is not a Protobuf FileDescriptorSet ({error}): write "
                                "one with protoc --include_imports --descriptor_set_out"
                                ) from error
        if not proto.file:
            raise PipelineError(f"{where} holds no .proto file")
        self.proto = proto

    @classmethod
    def read(cls, source: str | os.PathLike[str] | bytes) -> DescriptorSet:
        """The set in the file at ``source``, or in ``source``'s bytes."""
        if isinstance(source, bytes):
            return cls(source)
        try:
            return cls(Path(source).read_bytes(), f"descriptor set {os.fspath(source)!r}")
        except OSError as error:
            raise PipelineError(f"the descriptor set {os.fspath(source)!r} cannot be read "
                                f"({error.strerror})") from error

    @property
    def data(self) -> bytes:
        return bytes(self.proto.SerializeToString())

    def messages(self) -> list[str]:
        """The full names of the top-level messages, the ones a ``Protobuf`` may name."""
        return [_full_name(f, m.name) for f in self.proto.file for m in f.message_type]

    def fields(self, message: str) -> dict[str, Any]:
        """``message``'s fields by name (``FieldDescriptorProto``)."""
        file, index = self._located(message)
        return {f.name: f for f in file.message_type[index].field}

    def file_of(self, message: str) -> Any:
        """The ``FileDescriptorProto`` that defines ``message``."""
        return self._located(message)[0]

    def file_named(self, name: str) -> Any:
        """The set's file ``name`` (an import of another of its files)."""
        found = [f for f in self.proto.file if f.name == name]
        if not found:
            raise PipelineError(f"the descriptor set imports {name} without holding it: write "
                                "it with protoc --include_imports")
        return found[0]

    def indexes(self, message: str) -> bytes:
        """Confluent's message indexes of ``message``, as its header writes them."""
        return message_indexes(self._located(message)[1])

    def completed(self) -> DescriptorSet:
        """This set with the well-known files its files import and it lacks."""
        have = {f.name for f in self.proto.file}
        wanted = {d for f in self.proto.file for d in f.dependency if d not in have}
        known = _well_known()
        missing = sorted(wanted - known.keys())
        if missing:
            raise PipelineError(f"the descriptor set imports {', '.join(missing)} without "
                                "holding them: write it with protoc --include_imports")
        done = _descriptor_pb2().FileDescriptorSet()
        done.file.extend([*[known[n] for n in sorted(wanted)], *self.proto.file])
        return DescriptorSet(done.SerializeToString())

    def _located(self, message: str) -> tuple[Any, int]:
        found = _find(self.proto, message)
        if found is None:
            names = ", ".join(self.messages()) or "none"
            raise PipelineError(f"message {message} is not a top-level message of the "
                                f"descriptor set (its top-level messages: {names}); name one "
                                "by its full name, package included")
        return found


def _find(proto: Any, message: str) -> tuple[Any, int] | None:
    """The file of ``proto`` (a set) that defines the top-level ``message``, and its index."""
    for file in proto.file:
        for index, found in enumerate(file.message_type):
            if _full_name(file, found.name) == message:
                return file, index
    return None


def message_indexes(index: int) -> bytes:
    """Confluent's encoding of the indexes ``[index]``: zigzag varints, the count first; ``[0]``
    is the single byte 0."""
    if index == 0:
        return b"\x00"
    return _varint(2) + _varint(2 * index)  # zigzag of 1 and of a non-negative index


def shown_indexes(data: bytes) -> str:
    """Confluent's message indexes ``data`` as a list (``[0]``, ``[1]``), for messages."""
    values, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            values.append((value >> 1) ^ -(value & 1))  # zigzag
            value, shift = 0, 0
    return "[0]" if values == [0] else str(values[1:])


def leading_indexes(data: bytes) -> bytes | None:
    """The message indexes at the start of ``data`` (what follows Confluent's header), as
    written; None when ``data`` ends before they do."""
    at, count = 0, None
    while count is None or count > 0:
        value, shift = 0, 0
        while True:
            if at >= len(data):
                return None
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if count is None:
            count = (value >> 1) ^ -(value & 1)  # zigzag; [0] is the count 0 alone
            if count < 0:
                return None
        else:
            count -= 1
    return data[:at]


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _full_name(file: Any, name: str) -> str:
    return f"{file.package}.{name}" if file.package else name


def built_in(name: str) -> bool:
    """Whether the file ``name`` is one Confluent's clients never register as a reference."""
    return name.startswith(BUILT_IN)


def _well_known() -> dict[str, Any]:
    """Google's well-known files as ``FileDescriptorProto``, from Python's protobuf runtime (a
    fixed list: nothing a descriptor says chooses a module)."""
    from google.protobuf import (
        any_pb2,
        api_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )

    descriptor_pb2 = _descriptor_pb2()
    found = {}
    for module in (any_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2, field_mask_pb2,
                   source_context_pb2, struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2):
        file = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(file)
        found[file.name] = file
    return found


def from_registry(schema: Any, referenced: Callable[[str, int], Any], where: str
                  ) -> DescriptorSet:
    """The set of a registry's Protobuf ``schema`` (Confluent's ``Schema``, serialized) and of
    the schemas it references, each fetched once by ``referenced(subject, version)``; the
    well-known ones come from the runtime (``completed``)."""
    files: dict[str, Any] = {}

    def add(found: Any, name: str | None) -> None:
        file = _serialized_file(found.schema_str, where)
        if name is not None:
            file.name = name
        for reference in found.references or []:
            if not built_in(reference.name) and reference.name not in files:
                add(referenced(reference.subject, reference.version), reference.name)
        files.setdefault(file.name or "default.proto", file)

    add(schema, None)
    proto = _descriptor_pb2().FileDescriptorSet()
    proto.file.extend(files.values())
    return DescriptorSet(proto.SerializeToString(), where).completed()


def _serialized_file(text: str, where: str) -> Any:
    file = _descriptor_pb2().FileDescriptorProto()
    try:
        file.ParseFromString(base64.b64decode(text, validate=True))
    except Exception as error:  # noqa: BLE001 - binascii's and protobuf's
        raise PipelineError(f"{where} is not a serialized FileDescriptorProto (the registry's "
                            f"format=serialized answer): {type(error).__name__}") from error
    return file


def serialized(file: Any) -> str:
    """A ``FileDescriptorProto`` as the registry takes it: base64 text (Confluent's clients
    register a Protobuf schema so)."""
    return base64.b64encode(file.SerializeToString()).decode("ascii")
