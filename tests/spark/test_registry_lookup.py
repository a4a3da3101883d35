"""A worker's lookup of a schema id the plan did not know, without Spark: it waits while the
registry cannot answer (a WARNING per attempt, no credential in it) and reads the id once the
registry is up, then answers from its cache with the registry gone; an id the registry does not
know, and a writer that does not resolve, are reasons with the id, not waits."""

from __future__ import annotations

import io
import json
import logging
import threading
import time

import fastavro

from sparkcast import SchemaRegistry
from sparkcast.spark.outputs.avro_late import LateAvro
from sparkcast.spark.outputs.protobuf_late import LateProtobuf
from sparkcast.spark.outputs.registry_lookup import FIRST_WAIT
from sparkcast.testing.schema_registry import LocalSchemaRegistry

PASSWORD = "pw-never-shown"


def _record(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Scaled", "namespace": "sparkcast.test",
                       "fields": [{"name": "id", "type": "long"}, *fields]})


READER = _record({"name": "unit", "type": "string", "default": "eur"})
WRITER = _record({"name": "note", "type": "string"})  # a field the reader drops
BAD = json.dumps({"type": "record", "name": "Scaled", "namespace": "sparkcast.test",
                  "fields": [{"name": "id", "type": "string"}]})


def _framed(schema_id: int, schema: str, record: dict) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(json.loads(schema)), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()


def _read(body: bytes) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(body), json.loads(READER))


def test_a_lookup_waits_for_the_registry_then_reads_and_caches_the_id(caplog):
    with LocalSchemaRegistry("app", PASSWORD) as server:
        server.register("t-value", WRITER)
        server.register("t-value", BAD)
        server.down = True  # 503 to every request
        where = server.url.replace("//", f"//app:{PASSWORD}@")
        registry = SchemaRegistry(where, options={"max.retries": 0})  # no retries in the
        late = LateAvro(registry, READER, "Scaled")                   # client: ours are seen
        value = _framed(1, WRITER, {"id": 7, "note": "x"})
        found: list[tuple] = []
        asking = threading.Thread(target=lambda: found.append(late.converted(value)),
                                  daemon=True)
        with caplog.at_level(logging.WARNING, "sparkcast.spark.outputs.registry_lookup"):
            asking.start()
            deadline = time.monotonic() + 30
            while len(_waits(caplog)) < 2 and time.monotonic() < deadline:
                time.sleep(FIRST_WAIT / 5)
            assert not found  # two failed attempts, and the record waits
            server.down = False
            asking.join(60)
        assert found, "the lookup did not return once the registry was up"
        (body, error), = found
        assert error is None and _read(body) == {"id": 7, "unit": "eur"}
        waits = _waits(caplog)
        assert len(waits) >= 2 and all(server.url in w for w in waits)
        assert "looking schema id 1 up" in waits[0] and "(attempt 1)" in waits[0]
        assert not [w for w in waits if PASSWORD in w or "app:" in w]
        assert late.converted(_framed(2, BAD, {"id": "x"})) == (None, (
            "schema id 2 does not resolve to the reader schema Scaled: type_mismatch: reader "
            "type: long not compatible with writer type: string (at /fields/0/type)"))
        assert late.converted(_framed(9, WRITER, {"id": 1, "note": ""})) == (
            None, f"schema id 9: the registry at {server.url} has no such id")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert late.converted(value) == (body, None)  # the registry is gone: from the cache
    assert not caplog.records
    shown = [repr(late), repr(registry), repr(LateProtobuf(registry, "shop.Rule"))]
    assert not [r for r in shown if PASSWORD in r or "app:" in r]


def _waits(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "sparkcast.spark.outputs.registry_lookup"]


def test_a_body_cut_short_is_the_reason_the_plan_gives():
    with LocalSchemaRegistry() as server:
        server.register("t-value", WRITER)
        late = LateAvro(SchemaRegistry(server.url), READER, "Scaled")
        value = _framed(1, WRITER, {"id": 123456, "note": "some text"})
        for cut in (6, 7):
            assert late.converted(value[:cut]) == (None, (
                "the value does not decode with writer schema id 1 (read as the Avro record "
                "Scaled)"))
