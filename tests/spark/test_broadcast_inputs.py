"""The broadcast side as carefully as the main side, on Spark.

One streaming query (keyed, parallelism 4) checks together: every Spark column type (maps,
arrays, structs, binary, decimals, timestamps, dates, nested) on both sides, in the subtask and
ordering hashes too (a map column made ``process()`` fail with HASH_MAP_TYPE), reaching the
function as the harness gets them; malformed broadcast lines become ``input`` dead letters with
the raw line; a broadcast element that fails is one dead letter, not one per subtask. Invalid
options are refused at ``process()``.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from collections import Counter

import pytest
from pyspark.sql import functions as F

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, Row, ValueStateDescriptor
from sparkcast.errors import PipelineError
from sparkcast.spark import Stream, read_output
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

FLAGS = MapStateDescriptor("flags", str, object)
SEEN = ValueStateDescriptor("seen", int)
UTC = datetime.UTC
MAIN = ("id long, k string, attrs map<string,string>, tags array<string>, "
        "loc struct<lat:double,lon:double>, amount decimal(10,2), at timestamp, day date, "
        "payload_b64 string")
BROADCAST = ("name string, conf map<string,string>, levels array<long>, "
             "owner struct<team:string,ids:array<long>>, lim decimal(12,3), since timestamp, "
             "day date, blob_b64 string, nested array<struct<k:string,v:map<string,long>>>, "
             "_corrupt_record string")
MALFORMED = '{"name": "half'


class Flags(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(SEEN)

    def process_broadcast_element(self, value, ctx):
        if value["name"] == "boom":  # fails the same way on every subtask
            raise ValueError("boom")
        if value["name"] == "poison":  # fails only where key k1's state lives
            ctx.apply_to_keyed_state(SEEN, _refuse_k1)
        ctx.get_broadcast_state(FLAGS).put(value["name"], value)

    def process_element(self, value, ctx):
        self.seen.update(1)
        flag = ctx.get_broadcast_state(FLAGS).get("f1")
        yield value["id"], repr(value), repr(flag)


def _refuse_k1(key, state):
    if key == "k1":
        raise RuntimeError(f"cannot apply to {key}")


def _event(i):
    return {"id": i, "k": f"k{i % 4}", "attrs": {"plan": "pro", "n": str(i)},
            "tags": ["a", f"t{i}"], "loc": {"lat": 1.5, "lon": -i / 4}, "amount": f"{i}.25",
            "at": f"2024-01-02T03:04:{i:02d}Z", "day": "2024-01-02",
            "payload_b64": base64.b64encode(bytes([i, 0, 255])).decode()}


def _ordered(**fields):
    """A Row with its fields in the schema's order, as Spark's input rows have them (PyFlink's
    ``Row(**kwargs)`` sorts the names)."""
    return Row(*fields)(*fields.values())


def _event_value(i):
    raw = _event(i)
    return _ordered(id=i, k=raw["k"], attrs=raw["attrs"], tags=raw["tags"],
                    loc=_ordered(lat=1.5, lon=-i / 4), amount=decimal.Decimal(f"{i}.25"),
                    at=datetime.datetime(2024, 1, 2, 3, 4, i, tzinfo=UTC),
                    day=datetime.date(2024, 1, 2), payload=bytes([i, 0, 255]))


def _flag(name):
    return {"name": name, "conf": {"color": "blue", "beta": "on"}, "levels": [3, 1],
            "owner": {"team": "core", "ids": [7, 8]}, "lim": "10.125",
            "since": "2024-05-06T07:08:09Z", "day": "2024-05-06",
            "blob_b64": base64.b64encode(b"\x00flag").decode(),
            "nested": [{"k": "x", "v": {"a": 1}}]}


def _flag_value(name):
    return _ordered(name=name, conf={"color": "blue", "beta": "on"}, levels=[3, 1],
                    owner=_ordered(team="core", ids=[7, 8]), lim=decimal.Decimal("10.125"),
                    since=datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
                    day=datetime.date(2024, 5, 6), nested=[_ordered(k="x", v={"a": 1})],
                    blob=b"\x00flag")


def _binary(df, column):
    return df.withColumn(column.removesuffix("_b64"), F.unbase64(column)).drop(column)


def test_every_column_type_malformed_lines_and_failures_once(spark, tmp_path):
    write_batch_file(tmp_path / "flags", 0, [_flag("f1"), _flag("boom"), MALFORMED])
    write_batch_file(tmp_path / "flags", 1, [_flag("poison")])
    write_batch_file(tmp_path / "events", 0, [_event(i) for i in range(8)])
    write_batch_file(tmp_path / "events", 1, [_event(i) for i in range(8, 12)])
    events = _binary(read_stream(spark, MAIN, tmp_path / "events"), "payload_b64")
    flags = _binary(read_stream(spark, BROADCAST, tmp_path / "flags"), "blob_b64")
    result = (Stream(events).key_by("k").connect(Stream(flags).broadcast(FLAGS))
              .process(Flags(), "id long, value string, flag string", parallelism=4))
    out = str(tmp_path / "out")
    query = result.write_stream(out, str(tmp_path / "checkpoint"), trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None

    h = KeyedBroadcastHarness(Flags(), lambda v: v["k"], [FLAGS], on_error="dead_letter")
    h.open()
    h.process_micro_batch([_event_value(i) for i in range(8)],
                          [_flag_value("f1"), _flag_value("boom")])
    h.process_micro_batch([_event_value(i) for i in range(8, 12)], [_flag_value("poison")])
    assert sorted(tuple(r) for r in read_output(spark, out).collect()) == sorted(h.output())

    letters = [r.asDict() for r in read_output(spark, out, "dead_letters").collect()]
    (malformed,) = [d for d in letters if d["callback"] == "input"]
    assert malformed["value"] == MALFORMED
    assert "broadcast schema" in malformed["error"]
    failed = Counter((d["callback"], d["error"], d["key"]) for d in letters
                     if d["callback"] != "input")
    assert failed == Counter(("process_broadcast_element", d.error,
                              None if d.key is None else f'"{d.key}"') for d in h.dead_letters())
    assert failed == Counter({("process_broadcast_element", "ValueError: boom", None): 1,
                              ("process_broadcast_element", "RuntimeError: cannot apply to k1",
                               '"k1"'): 1})


def test_a_static_broadcast_side_with_malformed_lines_is_refused(spark, tmp_path):
    write_batch_file(tmp_path / "flags", 0, [_flag("f1"), MALFORMED])
    flags = spark.read.schema(BROADCAST).json(str(tmp_path / "flags"))
    events = spark.createDataFrame([(1, "k")], "id long, k string")
    with pytest.raises(PipelineError, match="static broadcast DataFrame has malformed lines"):
        Stream(events).key_by("k").connect(Stream(flags).broadcast(FLAGS)).process(
            Flags(), "id long, value string, flag string")


@pytest.mark.parametrize(("option", "said"), [
    ({"parallelism": 0}, "parallelism must be an integer of at least 1, not 0"),
    ({"parallelism": 2.5}, "parallelism must be an integer"),
    ({"state_buckets": 0}, "state_buckets must be an integer of at least 1, not 0"),
    ({"hold_capacity": -1}, "hold_capacity must be an integer of at least 0, not -1"),
    ({"time_alignment": "eventual"}, "time_alignment must be 'batch' or 'event'"),
    ({"on_error": "ignore"}, "on_error must be 'dead_letter' or 'fail'"),
])
def test_invalid_options_are_refused_at_process(spark, option, said):
    events = spark.createDataFrame([(1, "k")], "id long, k string")
    flags = spark.createDataFrame([("f1",)], "name string")
    with pytest.raises(PipelineError, match=said):
        Stream(events).key_by("k").connect(Stream(flags).broadcast(FLAGS)).process(
            Flags(), "id long, value string, flag string", **option)
