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


def test_a_run_whose_main_output_is_all_dead_letters_ends_with_a_warning_naming_why(
        spark, tmp_path, caplog):
    """Outside the CLI too: the listener sums the run and warns when the query ends."""
    from sparkcast.spark.observe.listener import outcome_of
    from tests.spark.differential import read_stream, write_batch_file

    write_batch_file(tmp_path / "events", 0, [{"user": "a", "amount": 1.5},
                                              {"user": "b", "amount": 2.5}])
    write_batch_file(tmp_path / "rules", 0, [{"name": "r", "value": "v"}])
    events = read_stream(spark, "user string, amount double", tmp_path / "events")
    rules = read_stream(spark, "name string, value string", tmp_path / "rules")
    result = Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Amounts(), "user string, amount long", side_outputs=[REVIEW, RAW], parallelism=1)
    with caplog.at_level("WARNING", logger="sparkcast"):
        query = result.main.writeStream.format("noop").trigger(availableNow=True).start()
        query.awaitTermination()
        outcome = outcome_of(str(query.id))
    assert outcome is not None and outcome.dead_letters == 2 and outcome.main_rows == 0
    assert outcome.side_rows == 4 and not outcome.all_failed  # the side outputs were written
    [line] = [r.getMessage() for r in caplog.records if "ended with" in r.getMessage()]
    assert "its main output all dead letters: 2 dead letter(s) against 0 main row(s)" in line
    assert "field 'amount' expects bigint, got float 1.5" in line
