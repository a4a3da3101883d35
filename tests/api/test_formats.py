"""``Avro``, the value object of Avro record values: refused early with the fix, the
Confluent header it writes (magic byte 0, the schema id in 4 bytes big-endian), and where its
writer schemas come from."""

from __future__ import annotations

import json

import pytest

from sparkcast import Avro, SchemaRegistry
from sparkcast.errors import PipelineError

RECORD = json.dumps({"type": "record", "name": "Rule", "namespace": "app",
                     "fields": [{"name": "name", "type": "string"},
                                {"name": "limit", "type": "double"}]})


def test_the_confluent_header_is_the_magic_byte_and_the_id_big_endian():
    assert Avro(RECORD, confluent=True, schema_id=7).header() == b"\x00\x00\x00\x00\x07"
    assert Avro(RECORD, confluent=True, schema_id=2 ** 31 - 1).header() == b"\x00\x7f\xff\xff\xff"
    assert Avro(RECORD, confluent=True, schema_id=258).header()[1:] == (258).to_bytes(4, "big")


def test_writer_schemas_come_from_the_registry_under_the_topics_subject():
    by_url = Avro(RECORD, confluent=True, registry="https://app:pw@registry:8081/sr")
    assert by_url.registry == SchemaRegistry("https://app:pw@registry:8081/sr")
    assert by_url.resolves and by_url.subject_of("rules") == "rules-value"
    assert Avro(RECORD, confluent=True, subject="app.Rule").subject_of("rules") == "app.Rule"
    assert Avro(RECORD, confluent=True, writer_schemas={1: RECORD}).resolves
    assert not Avro(RECORD, confluent=True, schema_id=1).resolves
    written = by_url.with_schema_id(4)
    assert (written.schema_id, written.registry, written.header()) == (4, None,
                                                                       b"\x00\x00\x00\x00\x04")
    assert "pw" not in repr(by_url) + repr(by_url.registry) + by_url.describe()
    assert by_url.registry.describe() == "https://registry:8081/sr"


def test_describe_names_the_record_and_the_framing():
    assert Avro(RECORD).describe() == "Avro record Rule"
    assert Avro(RECORD, confluent=True, schema_id=3).describe() == (
        "Confluent-framed Avro record Rule (schema id 3)")
    assert Avro(RECORD, confluent=True).describe() == (
        "Confluent-framed Avro record Rule (any schema id)")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"schema": "{not json"}, "not JSON"),
    ({"schema": json.dumps({"type": "string"})}, "must be a record"),
    ({"schema": json.dumps({"type": "record", "fields": []})}, "needs a name"),
    ({"schema": {"type": "record"}}, "as JSON text"),
    ({"schema": RECORD, "schema_id": 7}, "pass confluent=True"),
    ({"schema": RECORD, "confluent": True, "schema_id": -1}, "registry id"),
    ({"schema": RECORD, "confluent": True, "schema_id": 2 ** 31}, "registry id"),
    ({"schema": RECORD, "confluent": True, "schema_id": "7"}, "registry id"),
    ({"schema": RECORD, "registry": "http://registry:8081"}, "pass confluent=True"),
    ({"schema": RECORD, "writer_schemas": {1: RECORD}}, "pass confluent=True"),
    ({"schema": RECORD, "confluent": True, "registry": "registry:8081"}, "http:// or https://"),
    ({"schema": RECORD, "confluent": True, "schema_id": 1, "registry": "http://r:1"},
     "give one or the other"),
    ({"schema": RECORD, "confluent": True, "writer_schemas": {-1: RECORD}}, "registry id"),
    ({"schema": RECORD, "confluent": True, "writer_schemas": {1: {"type": "record"}}},
     "as JSON text"),
    ({"schema": RECORD, "confluent": True, "writer_schemas": {1: "{nope"}}, "is not JSON"),
])
def test_a_schema_that_cannot_work_is_refused_with_the_fix(kwargs, message):
    with pytest.raises(PipelineError, match=message):
        Avro(**kwargs)


def test_writing_the_confluent_format_needs_the_id():
    with pytest.raises(PipelineError, match="schema_id=<id>"):
        Avro(RECORD, confluent=True).header()
    with pytest.raises(PipelineError, match="schema_id=<id>"):
        Avro(RECORD).header()
