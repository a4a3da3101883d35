"""Strict outputs on Spark, by the harness's code (tests/testing/test_strict_outputs.py): a
value that does not fit its column without loss is a dead letter naming the field (120.5 into a
bigint is not written as 120), objects map to columns by name, PyFlink types give the schemas,
``Types.PICKLED_BYTE_ARRAY()`` writes codec text, and ``on_error="fail"`` stops the run."""

from __future__ import annotations

import dataclasses

import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, OutputTag, Types
from sparkcast.core.output_codec import decode_output
from sparkcast.spark import Stream

pytestmark = pytest.mark.spark

RULES = MapStateDescriptor("rules", str, str)
REVIEW = OutputTag("review", Types.ROW_NAMED(["user", "amount", "where"], [
    Types.STRING(), Types.DOUBLE(), Types.ROW_NAMED(["city"], [Types.STRING()])]))
RAW = OutputTag("raw", Types.PICKLED_BYTE_ARRAY())


@dataclasses.dataclass
class Place:
    city: str


@dataclasses.dataclass
class Review:
    user: str
    amount: float
    where: Place


class Amounts(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value.user, value.amount              # main: amount long
        yield REVIEW, Review(value.user, value.amount, Place("x"))
        yield RAW, Review(value.user, value.amount, Place("y"))

    def process_broadcast_element(self, value, ctx):
        pass


def _result(spark, on_error="dead_letter"):
    events = spark.createDataFrame([("a", 120.5), ("b", 120.0)], "user string, amount double")
    rules = spark.createDataFrame([("r", "v")], "name string, value string")
    return Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Amounts(), Types.ROW_NAMED(["user", "amount"], [Types.STRING(), Types.LONG()]),
        side_outputs=[REVIEW, RAW], on_error=on_error)


def test_lossy_values_objects_and_pyflink_types_on_spark(spark):
    result = _result(spark)
    assert [tuple(r) for r in result.main.collect()] == [("b", 120)]
    [letter] = result.dead_letters.collect()
    assert "output 'main'" in letter["error"]
    assert "field 'amount' expects bigint, got float 120.5" in letter["error"]
    assert sorted((r["user"], r["amount"], r["where"]["city"])
                  for r in result.side_output(REVIEW).collect()) == [
        ("a", 120.5, "x"), ("b", 120.0, "x")]
    raw = sorted(r["value"] for r in result.side_output(RAW).collect())
    assert decode_output(raw[0], Review, Place) == Review("a", 120.5, Place("y"))


def test_on_error_fail_stops_the_run_on_an_output_that_does_not_fit(spark):
    with pytest.raises(Exception, match="field 'amount' expects bigint"):
        _result(spark, on_error="fail").main.collect()
