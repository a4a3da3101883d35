"""``Avro``, the value object of Avro record values: refused early with the fix, and the
Confluent header it writes (magic byte 0, the schema id in 4 bytes big-endian)."""

from __future__ import annotations

import json

import pytest

from sparkcast import Avro
from sparkcast.errors import PipelineError

RECORD = json.dumps({"type": "record", "name": "Rule", "namespace": "app",
                     "fields": [{"name": "name", "type": "string"},
                                {"name": "limit", "type": "double"}]})


def test_the_confluent_header_is_the_magic_byte_and_the_id_big_endian():
    assert Avro(RECORD, confluent=True, schema_id=7).header() == b"\x00\x00\x00\x00\x07"
    assert Avro(RECORD, confluent=True, schema_id=2 ** 31 - 1).header() == b"\x00\x7f\xff\xff\xff"
    assert Avro(RECORD, confluent=True, schema_id=258).header()[1:] == (258).to_bytes(4, "big")


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
])
def test_a_schema_that_cannot_work_is_refused_with_the_fix(kwargs, message):
    with pytest.raises(PipelineError, match=message):
        Avro(**kwargs)


def test_writing_the_confluent_format_needs_the_id():
    with pytest.raises(PipelineError, match="schema_id=<id>"):
        Avro(RECORD, confluent=True).header()
    with pytest.raises(PipelineError, match="schema_id=<id>"):
        Avro(RECORD).header()
