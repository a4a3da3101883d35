"""The Protobuf schemas of the tests, built as ``FileDescriptorProto`` in Python (what ``protoc
--descriptor_set_out`` writes, without needing protoc), and their message classes for
Confluent's serializers, made from the descriptors (never by importing a generated module).

``shop/money.proto`` defines ``shop.Money``; ``shop/rules.proto`` imports it and defines
``shop.Note`` (message index ``[0]``) and ``shop.Rule`` (``[1]``: so the header's indexes are
not the one-byte ``[0]``), with a string, a double, a repeated string, an enum and the imported
message; version 2 adds ``source``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def money() -> Any:
    file = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop",
                                              syntax="proto3")
    message = file.message_type.add(name="Money")
    message.field.add(name="currency", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="cents", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    return file


def rules(version: int = 1, with_rule: bool = True) -> Any:
    file = descriptor_pb2.FileDescriptorProto(name="shop/rules.proto", package="shop",
                                              syntax="proto3", dependency=["shop/money.proto"])
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="BLOCK", number=0)
    kind.value.add(name="REVIEW", number=1)
    file.message_type.add(name="Note").field.add(name="text", number=1, type=F.TYPE_STRING,
                                                 label=F.LABEL_OPTIONAL)
    if not with_rule:
        return file
    rule = file.message_type.add(name="Rule")
    rule.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    rule.field.add(name="limit", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    rule.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    rule.field.add(name="kind", number=4, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                   type_name=".shop.Kind")
    rule.field.add(name="price", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                   type_name=".shop.Money")
    if version >= 2:
        rule.field.add(name="source", number=6, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    return file


def descriptor_set(*files: Any) -> bytes:
    """The files as one ``FileDescriptorSet``, as ``protoc --include_imports`` writes it."""
    return bytes(descriptor_pb2.FileDescriptorSet(file=list(files)).SerializeToString())


def write_set(path: Path, *files: Any) -> str:
    path.write_bytes(descriptor_set(*files))
    return str(path)


def message_class(name: str, *files: Any) -> Any:
    """The message class of ``name`` in the files (imports first), in a pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
