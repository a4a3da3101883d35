"""Avro values on a REAL Kafka broker and real local Spark: the sink pipeline's outputs written by
``sinks.kafka`` as plain Avro and as Confluent-framed Avro, then read back by ``kafka_topic`` as
the main and the broadcast side of a second pipeline; records that do not decode (bad bytes, a
wrong magic byte, another schema id, a header cut short) become dead letters naming their
topic, partition and offset, and the records around them are read. Checks before start on
both sides; a null in a field the Avro schema does not allow null fails the batch.

Schema evolution with a registry (the loopback stand-in, ``sparkcast.testing.schema_registry``):
the sink registers its schema and its encoder (the one both of its writers call) frames the
records with that id (Confluent's deserializer reads them),
Confluent's own serializer writes more versions to the same topic, and ``kafka_topic`` decodes
each record by its id, resolved to the reader schema; a version that does not resolve and an id
the registry lacks are dead letters saying why, one registered after the plan is read by the
workers' lookup as a new plan reads it, and the registry's password is shown nowhere. A query
running when Confluent's serializer registers and writes version 2 reads it without a restart,
every kind of Avro field the same as the JVM path gives it; ``lookup_new_ids=False`` keeps the
plan free of the lookup."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import logging
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sparkcast import Avro, BroadcastProcessFunction, MapStateDescriptor, SchemaRegistry, sinks
from sparkcast.errors import PipelineError, SinkError
from sparkcast.sources import kafka_topic
from sparkcast.spark import Stream, read_output
from sparkcast.spark.outputs.kafka_values import encoded
from sparkcast.testing.schema_registry import LocalSchemaRegistry
from tests.sources.test_kafka_topic import topic_name
from tests.spark import sink_pipeline as pipeline
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark


def _record(name: str, scaled: str = "double") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "sparkcast.test",
                       "fields": [{"name": "id", "type": "long"},
                                  {"name": "scaled", "type": scaled}]})


SCALED, BIG = Avro(_record("Scaled")), Avro(_record("Big"), confluent=True, schema_id=7)
BIGS = MapStateDescriptor("bigs", str, float)


def _scaled(*fields: dict, id_type: str = "long", scaled: str = "double") -> str:
    return json.dumps({"type": "record", "name": "Scaled", "namespace": "sparkcast.test",
                       "fields": [{"name": "id", "type": id_type},
                                  {"name": "scaled", "type": scaled}, *fields]})


#: the reader, and the versions written to one topic: the sink's, then Confluent's serializer's
READER = _scaled({"name": "unit", "type": "string", "default": "eur"})
WRITTEN, OLD = _scaled(), _scaled(id_type="int", scaled="float")  # int → long, float → double
NEW = _scaled({"name": "source", "type": "string"})  # a field the reader drops
BAD = _scaled(id_type="string")  # does not resolve: string → long
LATE = _scaled({"name": "note", "type": ["null", "string"], "default": None})
PASSWORD = "pw-never-shown"


class Joined(BroadcastProcessFunction):
    """Each event with every broadcast row seen so far (all of them: one micro-batch)."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(BIGS).put(str(value.id), value.scaled)

    def process_element(self, value, ctx):
        yield value.id, value.scaled, json.dumps(sorted(ctx.get_broadcast_state(BIGS).items()))


def _raw(spark, broker, *topics: str) -> list:
    """The topics' committed records as Spark's batch Kafka reader sees them (value: bytes)."""
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", ",".join(topics))
            .option("kafka.isolation.level", "read_committed").load()
            .select(F.col("key").cast("string").alias("key"), "value", "topic", "partition",
                    "offset").collect())


def test_avro_and_confluent_avro_round_trip_and_misfits_are_dead_letters(
        spark, kafka_broker, tmp_path):
    plain, framed = topic_name("avro-main"), topic_name("avro-big")
    kafka_broker.create_topic(plain, partitions=2)
    kafka_broker.create_topic(framed)
    pipeline.write_inputs(tmp_path, [0])
    query = pipeline.run_to_end(pipeline.build(spark, tmp_path, "streamed"), tmp_path, {
        "main": sinks.kafka(kafka_broker.bootstrap, plain, key="id", schema=SCALED,
                            parallelism=2),
        "big": sinks.kafka(kafka_broker.bootstrap, framed, schema=BIG, parallelism=1),
        "dead_letters": sinks.files(str(tmp_path / "letters"))})
    assert query.exception() is None
    expected = pipeline.expected("streamed", 1)

    written = _raw(spark, kafka_broker, framed)
    assert {bytes(r.value[:5]) for r in written} == {b"\x00\x00\x00\x00\x07"}
    good = bytes(written[0].value)
    bad = {"bad-magic": b"\x01" + good[1:], "other-id": b"\x00\x00\x00\x00\x08" + good[5:],
           "short": b"\x00\x00", "cut-body": good[:6]}
    kafka_broker.produce(framed, list(bad.items()))
    kafka_broker.produce(plain, [("garbage", b"\xff" * 10), ("truncated", b"\x02\x00")])
    where = {(r.key, r.partition, r.offset): r.topic
             for r in _raw(spark, kafka_broker, plain, framed)
             if r.key in {*bad, "garbage", "truncated"}}
    assert len(where) == 6

    events = kafka_topic(spark, kafka_broker.bootstrap, plain, SCALED)
    bigs = kafka_topic(spark, kafka_broker.bootstrap, framed, BIG)
    out = str(tmp_path / "out")
    Stream(events).connect(Stream(bigs).broadcast(BIGS)).process(
        Joined(), "id long, scaled double, bigs string").write_stream(
        out, str(tmp_path / "ckpt2"), trigger={"availableNow": True}).awaitTermination()

    rows = read_output(spark, out).collect()
    assert Counter((r.id, r.scaled) for r in rows) == expected["main"]
    big_state = sorted((str(i), s) for i, s in expected["big"])
    assert {r.bigs for r in rows} == {json.dumps(big_state)} and big_state
    letters = [json.loads(r.value) for r in read_output(spark, out, "dead_letters").collect()]
    assert {(d["key"], d["partition"], d["offset"]): d["topic"] for d in letters} == where
    reasons = {d["key"]: d["reason"] for d in letters}
    assert reasons == {
        "bad-magic": "the first byte is 0x01, not the Confluent wire format's magic byte 0x00",
        "other-id": "schema id 8, expected 7",
        "short": "the value has 2 bytes, fewer than the Confluent wire format's 5-byte header",
        "cut-body": f"the value does not decode as the {BIG.describe()}",
        "garbage": f"the value does not decode as the {SCALED.describe()}",
        "truncated": f"the value does not decode as the {SCALED.describe()}"}
    assert {d["key"]: base64.b64decode(d["value_base64"]) for d in letters
            if d["topic"] == framed} == bad


def test_an_avro_schema_that_does_not_take_the_output_is_refused_before_start(
        spark, kafka_broker):
    output = StructType.fromDDL("id long, scaled double")
    kafka_broker.create_topic("avro-checked")
    sink = sinks.kafka(kafka_broker.bootstrap, "avro-checked", schema=SCALED)
    sink.check("main", output, spark)  # the columns fit (nulls aside)
    with_note = json.loads(SCALED.schema)
    with_note["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    sinks.kafka(kafka_broker.bootstrap, "avro-checked", schema=Avro(json.dumps(with_note))).check(
        "main", output, spark)  # a nullable field the output lacks is written null
    for schema, columns, message in [
        (Avro(_record("S", "string")), output, "Cannot convert SQL field 'scaled'"),
        (SCALED, StructType.fromDDL("id long"), "scaled"),
        (SCALED, StructType.fromDDL("id long, scaled double, note string"), "note"),
        (Avro(_record("S"), confluent=True), output, "schema_id=<id>"),
    ]:
        with pytest.raises(SinkError, match=message) as refused:
            sinks.kafka(kafka_broker.bootstrap, "avro-checked", schema=schema).check(
                "main", columns, spark)
        assert "output 'main', sink kafka(" in str(refused.value)


def test_kafka_topic_reads_the_avro_records_fields_and_refuses_clashes(spark, capsys):
    rule = Avro(json.dumps({"type": "record", "name": "Rule", "fields": [
        {"name": "name", "type": "string"}, {"name": "limit", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "note", "type": ["null", "string"], "default": None}]}),
        confluent=True, schema_id=3)
    frame = kafka_topic(spark, "127.0.0.1:1", "t", rule, key="name", tombstone="deleted",
                        metadata=["offset"])
    assert frame.columns == ["name", "limit", "tags", "note", "deleted", "kafka_offset",
                             "_corrupt_record"]
    assert frame.schema["tags"].dataType.simpleString() == "array<string>"

    def with_field(name: str, kind: str) -> Avro:
        return Avro(json.dumps({"type": "record", "name": "R",
                                "fields": [{"name": name, "type": kind}]}))

    for schema, kwargs, message in [
        (with_field("_corrupt_record", "string"), {}, "leave it out of schema"),
        (with_field("_sparkcast_decoded", "boolean"), {}, "leave it out of the Avro schema"),
        (with_field("name", "long"), {"key": "name"}, "make it string"),
        (with_field("kafka_offset", "long"), {"metadata": ["offset"]}, "rename one"),
    ]:
        with pytest.raises(PipelineError, match=message):
            kafka_topic(spark, "127.0.0.1:1", "t", schema, **kwargs)

    given = Avro(READER, confluent=True, writer_schemas={1: OLD, 2: BAD})
    with pytest.warns(UserWarning, match="writer schema id 2 does not resolve"):
        assert kafka_topic(spark, "127.0.0.1:1", "t", given).columns == [
            "id", "scaled", "unit", "_corrupt_record"]
    with pytest.raises(PipelineError, match="lookup_new_ids is about the ids a registry"):
        Avro(READER, confluent=True, writer_schemas={1: OLD}, lookup_new_ids=False)
    with LocalSchemaRegistry("app", PASSWORD) as server:
        server.register("t-value", OLD)
        registry = SchemaRegistry(server.url, "app", PASSWORD)
        for lookup in (True, False):  # the workers' lookup of new ids, or no Python at all
            kafka_topic(spark, "127.0.0.1:1", "t", Avro(
                READER, confluent=True, registry=registry, lookup_new_ids=lookup)
                        ).explain(extended=True)
        live, jvm_only = capsys.readouterr().out.split("== Parsed Logical Plan ==")[1:]
        assert "looked_up_late" in live and "from_avro" in live and PASSWORD not in live
        assert "looked_up_late" not in jvm_only and "from_avro" in jvm_only
        for avro, message in [
            (Avro(READER, confluent=True, registry=server.url), "401"),
            (Avro(READER, confluent=True, registry=SchemaRegistry(server.url, "app", PASSWORD),
                  subject="nope"), "Subject 'nope' not found"),
            (Avro(READER, confluent=True, registry=SchemaRegistry(server.url, "app", PASSWORD),
                  writer_schemas={1: NEW}), r"writer_schemas \[1\]: the registry holds another"),
        ]:
            with pytest.raises(PipelineError, match=message):
                kafka_topic(spark, "127.0.0.1:1", "t", avro)
        wrong = SchemaRegistry(server.url.replace("//", f"//app:{PASSWORD}x@"))
        for avro, message in [(Avro(READER, confluent=True, registry=wrong), "Unauthorized"),
                              (given, "writer_schemas are for reading")]:
            with pytest.raises(SinkError, match=message) as refused:
                sinks.kafka("127.0.0.1:1", "t", schema=avro)
            assert PASSWORD not in str(refused.value)


class Halves(BroadcastProcessFunction):
    """Yields no value for an odd id: a null the Avro schema does not allow."""

    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        yield value.id, None if value.id % 2 else value.id / 2


def test_a_null_in_a_non_null_avro_field_fails_the_batch_naming_the_field(
        spark, kafka_broker, tmp_path):
    topic = topic_name("avro-nulls")
    kafka_broker.create_topic(topic)
    write_batch_file(tmp_path / "events", 0, [{"id": i} for i in range(4)])
    write_batch_file(tmp_path / "rules", 0, [])
    events = read_stream(spark, "id long, _corrupt_record string", tmp_path / "events")
    rules = read_stream(spark, "name string, _corrupt_record string", tmp_path / "rules")
    query = Stream(events).connect(Stream(rules).broadcast(BIGS)).process(
        Halves(), "id long, scaled double").write_stream(
        checkpoint_location=str(tmp_path / "ckpt"), trigger={"availableNow": True},
        sinks={"main": sinks.kafka(kafka_broker.bootstrap, topic, schema=SCALED)})
    with pytest.raises(StreamingQueryException):
        query.awaitTermination()
    assert "AVRO_CANNOT_WRITE_NULL_FIELD" in str(query.exception())
    assert "`scaled`" in str(query.exception())
    assert kafka_broker.read(topic) == []  # no part of the batch was committed


def read_all(spark, frame, tmp_path, name: str) -> list:
    """Every record of the topic as ``kafka_topic`` gives it (one availableNow query)."""
    table = f"avro_{name}_{uuid.uuid4().hex[:8]}"
    frame.writeStream.format("memory").queryName(table).option(
        "checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start(
    ).awaitTermination()
    rows = spark.table(table).orderBy("kafka_offset").collect()
    spark.catalog.dropTempView(table)
    return rows


def test_records_decode_by_their_writer_schemas_id_resolved_to_the_reader_schema(
        spark, kafka_broker, tmp_path, capsys):
    topic = topic_name("avro-evolved")
    kafka_broker.create_topic(topic)
    with LocalSchemaRegistry("app", PASSWORD) as server:
        registry = SchemaRegistry(server.url, "app", PASSWORD)
        sink = sinks.kafka(kafka_broker.bootstrap, topic, schema=Avro(
            WRITTEN, confluent=True, registry=registry))
        assert sink.schema.schema_id == 1 == registry.register(f"{topic}-value", WRITTEN)
        sink.check("main", StructType.fromDDL("id long, scaled double"), spark)
        written = Counter({(i, i / 2): 1 for i in range(1, 4)})
        values = [bytes(r.value) for r in spark.createDataFrame(
            list(written), "id long, scaled double").select(
            encoded(F.struct("id", "scaled"), sink.schema).alias("value")).collect()]
        kafka_broker.produce(topic, [(None, v) for v in values])

        client = SchemaRegistryClient({"url": server.url,
                                       "basic.auth.user.info": f"app:{PASSWORD}"})
        context = SerializationContext(topic, MessageField.VALUE)
        records = [AvroDeserializer(client, READER)(v, context) for v in values]
        assert Counter((r["id"], r["scaled"]) for r in records) == written
        assert {(v[:5], r["unit"]) for v, r in zip(values, records, strict=True)} == {
            (b"\x00\x00\x00\x00\x01", "eur")}

        def serialized(schema: str, record: dict) -> bytes:
            return AvroSerializer(client, schema)(record, context)

        old = serialized(OLD, {"id": 1001, "scaled": 1.5})
        kafka_broker.produce(topic, [
            ("old", old), ("new", serialized(NEW, {"id": 1002, "scaled": 2.5, "source": "x"})),
            ("bad", serialized(BAD, {"id": "x", "scaled": 3.5})),
            ("unknown", b"\x00" + (99).to_bytes(4, "big") + old[5:])])
        reader = Avro(READER, confluent=True, registry=registry)
        with pytest.warns(UserWarning, match="writer schema id 4 does not resolve") as warned:
            planned = kafka_topic(spark, kafka_broker.bootstrap, topic, reader, key="key",
                                  metadata=["offset"])
        kafka_broker.produce(topic, [  # after the plan: new versions, then a known one
            ("late", serialized(LATE, {"id": 1003, "scaled": 3.0, "note": None})),
            ("late-bad", serialized(_scaled(scaled="string"), {"id": 1, "scaled": "x"})),
            ("after", serialized(NEW, {"id": 1004, "scaled": 4.5, "source": "y"}))])
        planned.explain(extended=True)
        rows = read_all(spark, planned, tmp_path, "planned")

    decoded = [r for r in rows if r._corrupt_record is None]
    assert Counter((r.id, r.scaled) for r in decoded) == written + Counter(
        {(1001, 1.5): 1, (1002, 2.5): 1, (1003, 3.0): 1, (1004, 4.5): 1})
    assert {r.unit for r in decoded} == {"eur"}  # the reader's default, in every version
    letters = {json.loads(r._corrupt_record)["key"]: json.loads(r._corrupt_record)
               for r in rows if r._corrupt_record is not None}
    offsets = {r.key: r.kafka_offset for r in rows}
    assert {k: (d["topic"], d["partition"], d["offset"]) for k, d in letters.items()} == {
        k: (topic, 0, offsets[k]) for k in ("bad", "unknown", "late-bad")}
    assert letters["bad"]["reason"] == (
        "schema id 4 does not resolve to the reader schema Scaled: type_mismatch: reader "
        "type: long not compatible with writer type: string (at /fields/0/type)")
    assert letters["late-bad"]["reason"] == (  # the worker's verdict, in the plan's words
        "schema id 6 does not resolve to the reader schema Scaled: type_mismatch: reader "
        "type: double not compatible with writer type: string (at /fields/1/type)")
    assert letters["unknown"]["reason"] == (
        f"schema id 99: the registry at {server.url} has no such id")  # asked by the worker
    assert base64.b64decode(letters["unknown"]["value_base64"])[:5] == b"\x00\x00\x00\x00c"

    shown = [capsys.readouterr().out, *[str(w.message) for w in warned],
             *[r._corrupt_record or "" for r in rows], repr(reader)]
    assert not [s for s in shown if PASSWORD in s]
    assert "from_avro" in shown[0]  # the plan was shown, and decodes in the JVM


def _rich(*extra: dict, count: str = "long", unit: bool = False) -> str:
    """A record of every kind of Avro field spark-avro maps (``unit``: the reader's default)."""
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "int"}]}
    either = ["null", {"type": "record", "name": "Left", "fields": [
        {"name": "l", "type": "string"}]}, {"type": "record", "name": "Right", "fields": [
            {"name": "r", "type": "string"}]}]
    fields = [
        {"name": "id", "type": "long"}, {"name": "count", "type": count},
        {"name": "ratio", "type": "double"}, {"name": "label", "type": "string"},
        {"name": "ok", "type": "boolean"}, {"name": "raw", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "inner", "type": inner},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                   "scale": 2}},
        {"name": "either", "type": either, "default": None}, *extra]
    if unit:
        fields.append({"name": "unit", "type": "string", "default": "eur"})
    return json.dumps({"type": "record", "name": "Rich", "namespace": "sparkcast.test",
                       "fields": fields})


def _rich_record(i: int, either: dict | None, **extra) -> dict:
    return {"id": i, "count": i * 10, "ratio": i / 4, "label": f"r{i}", "ok": i % 2 == 0,
            "raw": bytes([i, 0, 255]), "note": None if i % 2 else f"n{i}", "tags": ["a", f"t{i}"],
            "attrs": {"k": i}, "inner": {"x": -i}, "kind": "B",
            "digest": b"\x00\x01\x02" + bytes([i]),
            "at": datetime.datetime(2026, 12, 2, 18, i, tzinfo=datetime.UTC),
            "day": datetime.date(2026, 12, i), "price": decimal.Decimal(f"{i}.25"),
            "either": either, **extra}


def confluent_client(server: LocalSchemaRegistry, topic: str) -> tuple:
    """Confluent's registry client for ``server`` (its user and ``PASSWORD``) and the
    serialization context of ``topic``'s values."""
    client = SchemaRegistryClient({"url": server.url, "basic.auth.user.info": f"app:{PASSWORD}"})
    return client, SerializationContext(topic, MessageField.VALUE)


def running(spark, frame, tmp_path, table: str):
    """``frame`` streaming into the memory table ``table`` every half second, until stopped."""
    return frame.writeStream.format("memory").queryName(table).option(
        "checkpointLocation", str(tmp_path / table)).trigger(
        processingTime="500 milliseconds").start()


def replanned(spark, kafka_broker, topic: str, reader, tmp_path, table: str) -> dict:
    """The topic's rows by key as a new plan reads them (one that knows every id by now),
    the stopped query's memory table ``table`` dropped."""
    spark.catalog.dropTempView(table)
    frame = kafka_topic(spark, kafka_broker.bootstrap, topic, reader, key="key",
                        metadata=["offset"])
    return {r.key: r for r in read_all(spark, frame, tmp_path, "again")}


def rows_of(spark, table: str, count: int, query) -> list:
    """The memory table's rows once it holds ``count`` of them (the query keeps running)."""
    deadline = time.monotonic() + 120
    while spark.table(table).count() < count:
        assert query.exception() is None and time.monotonic() < deadline, query.exception()
        time.sleep(0.5)
    return spark.table(table).collect()


def test_a_version_registered_while_the_query_runs_is_read_without_a_restart(
        spark, kafka_broker, tmp_path, capsys, caplog):
    topic = topic_name("avro-live")
    kafka_broker.create_topic(topic)
    reader_schema, v1, v2 = _rich(unit=True), _rich(), _rich(
        {"name": "source", "type": "string"}, count="int")  # int → long; source dropped
    table = f"avro_live_{uuid.uuid4().hex[:8]}"
    with LocalSchemaRegistry("app", PASSWORD) as server:
        client, context = confluent_client(server, topic)

        def serialized(schema: str, record: dict) -> bytes:
            return AvroSerializer(client, schema)(record, context)  # registers a new version

        kafka_broker.produce(topic, [("v1", serialized(v1, _rich_record(1, None)))])
        reader = Avro(reader_schema, confluent=True,
                      registry=SchemaRegistry(server.url, "app", PASSWORD))
        query = running(spark, kafka_topic(spark, kafka_broker.bootstrap, topic, reader,
                                           key="key", metadata=["offset"]), tmp_path, table)
        try:
            rows_of(spark, table, 1, query)
            late = [serialized(v2, _rich_record(2, {"l": "left"}, source="x")),
                    serialized(v2, _rich_record(3, {"r": "right"}, source="y"))]
            assert {v[:5] for v in late} == {b"\x00\x00\x00\x00\x02"}  # registered mid-run
            kafka_broker.produce(topic, [("v2-a", late[0]), ("v2-b", late[1]),
                                         ("nope", b"\x00" + (77).to_bytes(4, "big") + late[0][5:])])
            with caplog.at_level(logging.INFO):
                rows = rows_of(spark, table, 4, query)
            printed = capsys.readouterr().out
            query.explain(extended=True)  # the running query's plan
            plan = capsys.readouterr().out
        finally:
            query.stop()
        planned = replanned(spark, kafka_broker, topic, reader, tmp_path, table)

    live = {r.key: r for r in rows}
    assert live == planned  # the worker's rows are the JVM's, value for value
    assert {k for k, r in live.items() if r._corrupt_record is None} == {"v1", "v2-a", "v2-b"}
    b = live["v2-b"]
    assert (b.id, b["count"], b.unit, b.either, b.inner.x, b.price) == (
        3, 30, "eur", Row(member0=None, member1=Row(r="right")), -3, decimal.Decimal("3.25"))
    assert live["v2-a"].either == Row(member0=Row(l="left"), member1=None)
    letter = json.loads(live["nope"]._corrupt_record)
    assert (letter["topic"], letter["partition"], letter["offset"], letter["reason"]) == (
        topic, 0, live["nope"].kafka_offset,
        f"schema id 77: the registry at {server.url} has no such id")
    assert "ArrowEvalPython" in plan and "from_avro" in plan
    shown = [printed, capsys.readouterr().out, caplog.text, plan, repr(reader),
             *[r._corrupt_record or "" for r in rows]]
    assert not [s for s in shown if PASSWORD in s]
