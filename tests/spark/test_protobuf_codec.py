"""sparkcast's Protobuf codec (``spark/outputs/protobuf_codec.py``) on real local Spark: the Spark
types of a message's fields, that message decoded and encoded back to the same
bytes (maps, nested and repeated messages, Timestamp and Duration, uint64, enums by name and by
number, proto3 zeros with and without ``emit``), the runtime's error for a body that does not
parse, a recursive message refused, the sink's check of column types without a job, and a
value its field cannot hold refused naming the field."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from google.protobuf import descriptor_pb2
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sparkcast.api.protobuf_descriptors import DescriptorSet
from sparkcast.errors import PipelineError, SinkError
from sparkcast.spark.outputs.protobuf_codec import (
    ERROR,
    decoded,
    encoded,
    message_struct,
    misfits,
)
from sparkcast.spark.outputs.protobuf_rows import Encoder, message_class

pytestmark = pytest.mark.spark

F_ = descriptor_pb2.FieldDescriptorProto
WHEN = datetime.datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=datetime.UTC)


def _file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="t/kinds.proto", package="t", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/duration.proto"])
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="A", number=0)
    kind.value.add(name="B", number=1)
    inner = file.message_type.add(name="Inner")
    inner.field.add(name="big", number=1, type=F_.TYPE_UINT64, label=F_.LABEL_OPTIONAL)
    inner.field.add(name="when", number=2, type=F_.TYPE_MESSAGE, label=F_.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp")
    top = file.message_type.add(name="All")
    for number, (name, kind_, label, type_name) in enumerate([
            ("text", F_.TYPE_STRING, F_.LABEL_OPTIONAL, ""),
            ("count", F_.TYPE_INT64, F_.LABEL_OPTIONAL, ""),
            ("small", F_.TYPE_UINT32, F_.LABEL_OPTIONAL, ""),
            ("kind", F_.TYPE_ENUM, F_.LABEL_OPTIONAL, ".t.Kind"),
            ("tags", F_.TYPE_STRING, F_.LABEL_REPEATED, ""),
            ("at", F_.TYPE_MESSAGE, F_.LABEL_OPTIONAL, ".google.protobuf.Timestamp"),
            ("took", F_.TYPE_MESSAGE, F_.LABEL_OPTIONAL, ".google.protobuf.Duration"),
            ("inner", F_.TYPE_MESSAGE, F_.LABEL_OPTIONAL, ".t.Inner"),
            ("inners", F_.TYPE_MESSAGE, F_.LABEL_REPEATED, ".t.Inner"),
            ("attrs", F_.TYPE_MESSAGE, F_.LABEL_REPEATED, ".t.All.AttrsEntry")], 1):
        field = top.field.add(name=name, number=number, type=kind_, label=label)
        if type_name:
            field.type_name = type_name
    entry = top.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F_.TYPE_STRING, label=F_.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F_.TYPE_INT32, label=F_.LABEL_OPTIONAL)
    loop = file.message_type.add(name="Loop")
    loop.field.add(name="next", number=1, type=F_.TYPE_MESSAGE, label=F_.LABEL_OPTIONAL,
                   type_name=".t.Loop")
    return file


SET = DescriptorSet(descriptor_pb2.FileDescriptorSet(file=[_file()]).SerializeToString()
                    ).completed().data
INNER = T.StructType([T.StructField("big", T.DecimalType(20, 0)),
                      T.StructField("when", T.TimestampType())])


def test_the_fields_have_the_documented_spark_types():
    assert message_struct("t.All", SET) == T.StructType([
        T.StructField("text", T.StringType()), T.StructField("count", T.LongType()),
        T.StructField("small", T.LongType()), T.StructField("kind", T.StringType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("at", T.TimestampType()), T.StructField("took", T.DayTimeIntervalType()),
        T.StructField("inner", INNER), T.StructField("inners", T.ArrayType(INNER)),
        T.StructField("attrs", T.MapType(T.StringType(), T.IntegerType()))])
    assert message_struct("t.All", SET, enums_as_ints=True)["kind"].dataType == T.IntegerType()
    with pytest.raises(PipelineError, match=r"message t.Loop is recursive \(t.Loop → t.Loop\)"):
        message_struct("t.Loop", SET)


def test_a_message_of_these_kinds_is_decoded_and_encoded_back_to_its_bytes(spark):
    message = message_class("t.All", SET)(
        text="hi", count=-5, small=2 ** 32 - 1, kind=1, tags=["a", "b"], attrs={"x": 1},
        inner={"big": 2 ** 64 - 1}, inners=[{"big": 3}, {}])
    message.at.FromDatetime(WHEN)
    message.inner.when.FromDatetime(WHEN)
    message.took.FromTimedelta(datetime.timedelta(seconds=90, microseconds=5))
    full = message.SerializeToString()
    values = spark.createDataFrame([(full,), (b"",), (b"\xff\xff",), (None,)], "v binary")
    parsed = values.select(decoded(F.col("v"), "t.All", SET, True, False).alias("p"))
    rows = [r.p for r in parsed.collect()]
    assert rows[0].asDict(recursive=True) == {
        "text": "hi", "count": -5, "small": 2 ** 32 - 1, "kind": "B", "tags": ["a", "b"],
        "at": WHEN.replace(tzinfo=None), "took": datetime.timedelta(seconds=90, microseconds=5),
        "inner": {"big": Decimal(2 ** 64 - 1), "when": WHEN.replace(tzinfo=None)},
        "inners": [{"big": Decimal(3), "when": None}, {"big": Decimal(0), "when": None}],
        "attrs": {"x": 1}, ERROR: None}  # the session's time zone is the driver's: UTC
    assert (rows[1].text, rows[1]["count"], rows[1].kind, rows[1].tags, rows[1].at) == (
        "", 0, "A", [], None)  # proto3 zeros, and an unset message
    assert rows[2][ERROR] == ("DecodeError: Error parsing message with type 't.All': Wire "
                              "format was corrupt") and rows[2].text is None
    assert rows[3][ERROR] is None and rows[3].text is None  # no value: nothing to parse
    columns = message_struct("t.All", SET).fieldNames()
    back = parsed.where(F.col("p").getField(ERROR).isNull() & F.col("v").isNotNull()).select(
        encoded(F.struct(*[F.col("p").getField(c).alias(c) for c in columns]), "t.All", SET))
    assert [bytes(r[0]) for r in back.collect()] == [full, b""]


def test_without_emit_zeros_read_as_nulls_and_enums_as_ints_read_as_numbers(spark):
    body = message_class("t.All", SET)(kind=1, count=0).SerializeToString()
    frame = spark.createDataFrame([(body,)], "v binary")
    (row,) = frame.select(decoded(F.col("v"), "t.All", SET, False, True).alias("p")).collect()
    assert (row.p.kind, row.p["count"], row.p.text, row.p.tags) == (1, None, None, [])


def _struct(**types: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(n, t) for n, t in types.items()])


def test_the_sinks_check_names_each_column_its_field_does_not_take():
    good = T.StructType([T.StructField("text", T.StringType()),
                         T.StructField("count", T.IntegerType()),
                         T.StructField("kind", T.IntegerType()),
                         T.StructField("inner", _struct(big=T.LongType()))])
    assert misfits(good, "t.All", SET) == []
    wrong = T.StructType([T.StructField("count", T.StringType()),
                          T.StructField("tags", T.StringType()),
                          T.StructField("inner", _struct(nope=T.LongType())),
                          T.StructField("attrs", T.MapType(T.StringType(), T.StringType()))])
    assert misfits(wrong, "t.All", SET) == [
        "count (string, for int64)", "tags (string, for a repeated field)",
        "inner.nope (no such field)", "attrs value (string, for int32)"]


@pytest.mark.parametrize(("row", "message"), [
    ({"count": 2 ** 70}, "field t.All.count: Value out of range"),
    ({"kind": "Z"}, r"field t.All.kind: not a name of enum t.Kind \(its names: A, B\)"),
    ({"inner": {"big": -1}}, "field t.Inner.big: Value out of range")])
def test_a_value_its_field_cannot_hold_is_a_sink_error_naming_the_field(row, message):
    with pytest.raises(SinkError, match=message):
        Encoder("t.All", SET).body(row)
