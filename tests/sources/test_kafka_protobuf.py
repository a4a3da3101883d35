"""Protobuf values on a REAL Kafka broker and real local Spark, with Confluent's own
``ProtobufSerializer``/``ProtobufDeserializer`` and the loopback registry
(``sparkcast.testing.schema_registry``).

Confluent's serializer writes versions 1 and 2 of ``shop.Rule`` (the second message of its file,
importing ``shop/money.proto``: a reference) to one topic; ``kafka_topic`` reads both with the
version 1 descriptors, each id's indexes known from the registry; a wrong magic byte, a header
cut short, an unknown id, indexes naming another message, a version without the message and a
body that does not parse are dead letters naming topic, partition, offset and why. The sink's
encoder registers the same file (the id Confluent's serializer got) and Confluent's deserializer
reads what it wrote; plain descriptor-file values go both ways. A query running when version 2
is registered and written reads it without a restart, as a new plan reads it. The password is
shown nowhere.

Both ways the bodies go through sparkcast's own codec (Google's protobuf runtime in the Python
workers, ``spark/outputs/protobuf_codec.py``): there is no stand-in anywhere.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, StringType, StructField, StructType

from sparkcast import Protobuf, SchemaRegistry, sinks
from sparkcast.api.protobuf_descriptors import serialized
from sparkcast.errors import SinkError
from sparkcast.sources import kafka_topic
from sparkcast.spark.outputs.kafka_values import encoded
from sparkcast.testing.schema_registry import LocalSchemaRegistry
from tests.protobuf_schemas import message_class, money, rules, write_set
from tests.sources.test_kafka_avro import (
    PASSWORD,
    confluent_client,
    read_all,
    replanned,
    rows_of,
    running,
)
from tests.sources.test_kafka_topic import topic_name

pytestmark = pytest.mark.spark

OUTPUT = StructType([StructField("name", StringType()), StructField("limit", DoubleType()),
                     StructField("tags", ArrayType(StringType())),
                     StructField("kind", StringType())])
COLUMNS = ["name", "limit", "tags", "kind", "price"]
#: what Google's runtime says of the bodies that do not parse (upb's words)
GARBAGE_ERROR = "Error parsing message with type 'shop.Rule': Wire format was corrupt"


def _versions(tmp_path) -> tuple:
    """Version 1's descriptor set file, and the classes of ``shop.Rule`` in versions 1 and 2."""
    return (write_set(tmp_path / "rules.desc", money(), rules()),
            message_class("shop.Rule", money(), rules()),
            message_class("shop.Rule", money(), rules(2)))


def _encoded(spark, schema: Protobuf, rows: list[tuple]) -> list[bytes]:
    """The values the sink's encoder makes of ``rows`` (the one both its writers call)."""
    frame = spark.createDataFrame(rows, OUTPUT)
    return [bytes(r.value) for r in frame.select(
        encoded(F.struct(*OUTPUT.fieldNames()), schema).alias("value")).collect()]


def test_confluents_serializer_and_sparkcast_read_and_write_each_others_records(
        spark, kafka_broker, tmp_path, capsys):
    topic = topic_name("proto-rules")
    kafka_broker.create_topic(topic)
    v1, rule1, rule2 = _versions(tmp_path)
    with LocalSchemaRegistry("app", PASSWORD) as server:
        client, context = confluent_client(server, topic)
        first = ProtobufSerializer(rule1, client)(rule1(
            name="a", limit=1.5, tags=["x"], kind=1, price={"currency": "EUR", "cents": 7}),
            context)
        second = ProtobufSerializer(rule2, client)(rule2(name="b", source="v2"), context)
        imports = [{"name": "shop/money.proto", "subject": "shop/money.proto", "version": 1}]
        no_rule = server.register(f"{topic}-value", serialized(rules(with_rule=False)),
                                  "PROTOBUF", imports)
        assert (first[1:5], second[1:5], no_rule) == (b"\x00\x00\x00\x02", b"\x00\x00\x00\x03", 4)

        registry = SchemaRegistry(server.url, "app", PASSWORD)
        sink = sinks.kafka(kafka_broker.bootstrap, topic, schema=Protobuf(
            "shop.Rule", v1, confluent=True, registry=registry))
        assert sink.schema.schema_id == 2  # the file Confluent's serializer registered
        sink.check("main", OUTPUT, spark)
        ours = _encoded(spark, sink.schema, [("c", 0.0, [], "BLOCK"), ("d", 2.5, ["y", "z"],
                                                                        "REVIEW")])
        back = [ProtobufDeserializer(rule1, {"use.deprecated.format": False}, client)(v, context)
                for v in ours]
        assert [(m.name, m.limit, list(m.tags), m.kind) for m in back] == [
            ("c", 0.0, [], 0), ("d", 2.5, ["y", "z"], 1)]

        body = first[7:]
        bad = {"bad-magic": b"\x01" + first[1:], "short": b"\x00\x00\x01",
               "unknown": b"\x00" + (99).to_bytes(4, "big") + first[5:],
               "note": first[:5] + b"\x00" + body,  # indexes [0]: shop.Note, not shop.Rule
               "no-rule": b"\x00" + no_rule.to_bytes(4, "big") + b"\x00" + body,
               "garbage": first[:7] + b"\xff\xff\xff"}
        kafka_broker.produce(topic, [("first", first), ("second", second),
                                     *[(f"ours-{i}", v) for i, v in enumerate(ours)],
                                     *bad.items()])
        reader = Protobuf("shop.Rule", v1, confluent=True, registry=registry)
        with pytest.warns(UserWarning, match="schema id 4 has no message shop.Rule"):
            frame = kafka_topic(spark, kafka_broker.bootstrap, topic, reader, key="key",
                                metadata=["offset"])
        latest = kafka_topic(spark, "127.0.0.1:1", topic, Protobuf(
            "shop.Rule", confluent=True, registry=registry))  # no descriptors: version 2's
        rows = read_all(spark, frame, tmp_path, "framed")

    assert frame.columns == [*COLUMNS, "key", "kafka_offset", "_corrupt_record"]
    assert [c for c in latest.columns if c not in COLUMNS] == ["source", "_corrupt_record"]
    decoded = {r.key: (r.name, r.limit, r.tags, r.kind, r.price and tuple(r.price))
               for r in rows if r._corrupt_record is None}
    assert decoded == {"first": ("a", 1.5, ["x"], "REVIEW", ("EUR", 7)),
                       "second": ("b", 0.0, [], "BLOCK", None),  # v2's source: skipped
                       "ours-0": ("c", 0.0, [], "BLOCK", None),
                       "ours-1": ("d", 2.5, ["y", "z"], "REVIEW", None)}
    letters = {json.loads(r._corrupt_record)["key"]: json.loads(r._corrupt_record)
               for r in rows if r._corrupt_record is not None}
    offsets = {r.key: r.kafka_offset for r in rows}
    assert {k: (d["topic"], d["partition"], d["offset"]) for k, d in letters.items()} == {
        k: (topic, 0, offsets[k]) for k in bad}
    assert {k: d["reason"] for k, d in letters.items()} == {
        "bad-magic": "the first byte is 0x01, not the Confluent wire format's magic byte 0x00",
        "short": "the value has 3 bytes, fewer than the Confluent wire format's 5-byte header",
        "unknown": f"schema id 99: the registry at {server.url} has no such id",
        "note": "the message indexes [0] are not message shop.Rule's ([1])",
        "no-rule": "schema id 4 has no message shop.Rule",
        "garbage": "the body does not parse as the Protobuf message shop.Rule (schema id 2): "
                   f"DecodeError: {GARBAGE_ERROR}"}
    assert {k: base64.b64decode(d["value_base64"]) for k, d in letters.items()} == bad
    shown = [capsys.readouterr().out, *[r._corrupt_record or "" for r in rows], repr(reader)]
    assert not [s for s in shown if PASSWORD in s]


def test_plain_protobuf_goes_both_ways_and_misfits_are_refused(spark, kafka_broker, tmp_path):
    topic = topic_name("proto-plain")
    kafka_broker.create_topic(topic, partitions=2)
    plain = Protobuf("shop.Rule", write_set(tmp_path / "rules.desc", money(), rules()))
    sinks.kafka(kafka_broker.bootstrap, topic, schema=plain).check("main", OUTPUT, spark)
    values = _encoded(spark, plain, [("a", 1.0, ["t"], "REVIEW"), ("b", None, None, None)])
    rule = message_class("shop.Rule", money(), rules())
    assert rule.FromString(values[0]).name == "a"  # no header: the body alone
    kafka_broker.produce(topic, [("a", values[0]), ("b", values[1]), ("bad", b"\xff" * 4)])
    rows = read_all(spark, kafka_topic(spark, kafka_broker.bootstrap, topic, plain, key="key",
                                        metadata=["offset"]), tmp_path, "plain")
    assert {r.key: (r.name, r.limit, r.tags, r.kind) for r in rows if not r._corrupt_record} == {
        "a": ("a", 1.0, ["t"], "REVIEW"), "b": ("b", 0.0, [], "BLOCK")}  # zeros, not nulls
    (letter,) = [json.loads(r._corrupt_record) for r in rows if r._corrupt_record]
    assert (letter["key"], letter["reason"]) == (
        "bad", f"the value does not parse as the Protobuf message shop.Rule: DecodeError: "
               f"{GARBAGE_ERROR}")
    for schema, columns, message in [
        (plain, StructType([*OUTPUT.fields[:1], StructField("note", StringType())]),
         r"columns \['note'\] are not fields of message shop.Rule"),
        (Protobuf("shop.Rule", plain.descriptors, confluent=True), OUTPUT, "schema_id=<id>")]:
        with pytest.raises(SinkError, match=message):
            sinks.kafka(kafka_broker.bootstrap, topic, schema=schema).check("main", columns,
                                                                            spark)


def test_a_protobuf_version_registered_while_the_query_runs_is_read_without_a_restart(
        spark, kafka_broker, tmp_path, capsys):
    topic = topic_name("proto-live")
    kafka_broker.create_topic(topic)
    v1, rule1, rule2 = _versions(tmp_path)
    table = f"proto_live_{uuid.uuid4().hex[:8]}"
    with LocalSchemaRegistry("app", PASSWORD) as server:
        client, context = confluent_client(server, topic)
        first = ProtobufSerializer(rule1, client)(rule1(name="a", limit=1.5, kind=1), context)
        kafka_broker.produce(topic, [("first", first)])
        reader = Protobuf("shop.Rule", v1, confluent=True,
                          registry=SchemaRegistry(server.url, "app", PASSWORD))
        query = running(spark, kafka_topic(spark, kafka_broker.bootstrap, topic, reader,
                                           key="key", metadata=["offset"]), tmp_path, table)
        try:
            rows_of(spark, table, 1, query)
            second = ProtobufSerializer(rule2, client)(rule2(  # registers version 2 now
                name="b", limit=2.5, tags=["y"], source="v2", price={"currency": "EUR",
                                                                     "cents": 9}), context)
            assert second[1:5] == b"\x00\x00\x00\x03"  # money.proto 1, version 1 2, this 3
            kafka_broker.produce(topic, [
                ("second", second), ("note", second[:5] + b"\x00" + second[7:]),
                ("nope", b"\x00" + (99).to_bytes(4, "big") + second[5:])])
            rows = rows_of(spark, table, 4, query)
        finally:
            query.stop()
        planned = replanned(spark, kafka_broker, topic, reader, tmp_path, table)

    live = {r.key: r for r in rows}
    assert live == planned  # the worker's lookup gives what the plan gives once it knows id 3
    s = live["second"]
    assert (s.name, s.limit, s.tags, s.kind, tuple(s.price), s._corrupt_record) == (
        "b", 2.5, ["y"], "BLOCK", ("EUR", 9), None)  # v2's source: skipped
    letters = {k: json.loads(live[k]._corrupt_record) for k in ("note", "nope")}
    assert {k: (d["topic"], d["partition"], d["offset"]) for k, d in letters.items()} == {
        k: (topic, 0, live[k].kafka_offset) for k in letters}
    assert {k: d["reason"] for k, d in letters.items()} == {
        "note": "the message indexes [0] are not message shop.Rule's ([1])",
        "nope": f"schema id 99: the registry at {server.url} has no such id"}
    shown = [capsys.readouterr().out, *[r._corrupt_record or "" for r in rows], repr(reader)]
    assert not [s for s in shown if PASSWORD in s]
