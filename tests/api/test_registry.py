"""``SchemaRegistry`` against the loopback stand-in (``sparkcast.testing.schema_registry``), which
Confluent's own serializer and deserializer use too: the versions of a subject by id, a
schema registered once, errors worded without credentials; and Avro's resolution rules."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sparkcast import SchemaRegistry
from sparkcast.api.registry import resolution_problem
from sparkcast.errors import PipelineError
from sparkcast.testing.schema_registry import LocalSchemaRegistry


def rule(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Rule", "namespace": "shop",
                       "fields": [{"name": "name", "type": "string"}, *fields]})


V1 = rule({"name": "limit", "type": "int"})
V2 = rule({"name": "limit", "type": "long"}, {"name": "owner", "type": "string"})
READER = rule({"name": "limit", "type": "long"},
              {"name": "region", "type": "string", "default": "eu"})
PASSWORD = "s3cret-pw"


def test_confluents_serializer_registers_versions_that_sparkcast_reads_by_id():
    context = SerializationContext("rules", MessageField.VALUE)
    with LocalSchemaRegistry("app", PASSWORD) as server:
        client = SchemaRegistryClient({"url": server.url,
                                       "basic.auth.user.info": f"app:{PASSWORD}"})
        first = AvroSerializer(client, V1)({"name": "a", "limit": 1}, context)
        second = AvroSerializer(client, V2)({"name": "b", "limit": 2, "owner": "x"}, context)
        assert (first[:5], second[:5]) == (b"\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x02")
        read = AvroDeserializer(client, READER)
        assert [read(first, context), read(second, context)] == [
            {"name": "a", "limit": 1, "region": "eu"}, {"name": "b", "limit": 2, "region": "eu"}]

        registry = SchemaRegistry(server.url, "app", PASSWORD)
        assert {i: json.loads(s) for i, s in registry.versions("rules-value").items()} == {
            1: json.loads(V1), 2: json.loads(V2)}
        assert registry.register("rules-value", V2) == 2  # an identical schema keeps its id
        assert registry.register("other-value", V1) == 1
        assert registry.register("rules-value", READER) == 3

        in_url = server.url.replace("http://", f"http://app:{PASSWORD}@")
        assert set(SchemaRegistry(in_url).versions("rules-value")) == {1, 2, 3}
        for wrong in [SchemaRegistry(server.url, "app", "not-it"),
                      SchemaRegistry(server.url.replace("http://", "http://app:not-it@"))]:
            with pytest.raises(PipelineError, match="401") as refused:
                wrong.versions("rules-value")
            assert "not-it" not in str(refused.value) and server.url in str(refused.value)
        with pytest.raises(PipelineError, match="Subject 'nope-value' not found"):
            registry.versions("nope-value")
        assert PASSWORD not in repr(SchemaRegistry(in_url)) + SchemaRegistry(in_url).describe()


def test_avros_rules_say_which_writer_schemas_resolve_and_why_not():
    assert resolution_problem(READER, V1) is None  # int → long, region's default
    assert resolution_problem(READER, V2) is None  # owner dropped
    assert resolution_problem(READER, rule({"name": "limit", "type": "string"})) == (
        "type_mismatch: reader type: long not compatible with writer type: string "
        "(at /fields/1/type)")
    missing = resolution_problem(READER, rule())
    assert missing is not None and missing.startswith("reader_field_missing_default_value: limit")
    assert "the writer schema does not parse" in (
        resolution_problem(READER, '{"type": "nope"}') or "")
    with pytest.raises(PipelineError, match="the Avro schema does not parse"):
        resolution_problem('{"type": "record", "name": "R", "fields": [{"name": "x"}]}', V1)
