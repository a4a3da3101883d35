"""``query.stop()`` during a micro-batch of a ``foreachBatch`` query of ours: the interrupted
batch ends in a short error Spark reads as a stop (``errors.MicroBatchInterrupted``). Spark matches
the Python error's text against its ``StreamExecution.PROXY_ERROR`` pattern, which recurses once
per character: the interrupted job's own error (a Python traceback over a Java stack trace)
overflowed the stream thread's stack on every stop. The errors here are real Py4J errors."""

from __future__ import annotations

import re

import pytest
from py4j.protocol import Py4JJavaError

from sparkcast.errors import MicroBatchInterrupted
from sparkcast.spark.outputs.batch_driver import BatchDriver
from tests.spark.test_stateless import FACTORS, OUTPUT, Scale

pytestmark = pytest.mark.spark

# Spark's StreamExecution.PROXY_ERROR, as Python's re reads it
PROXY_ERROR = re.compile(r"py4j\.protocol\.Py4JJavaError: An error occurred while calling"
                         r"((.|\r\n|\r|\n)*)(java\.lang\.InterruptedException|"
                         r"java\.io\.InterruptedIOException|"
                         r"java\.nio\.channels\.ClosedByInterruptException)")


class Raising:
    """A consumer whose batch fails with the error ``fail`` raises."""

    def __init__(self, fail) -> None:
        self.fail = fail

    def committed(self, batch_id: int) -> bool:
        return False

    def consume(self, batch) -> None:
        self.fail()


def _driver(spark, tmp_path, fail) -> BatchDriver:
    events = spark.createDataFrame([(1, "u", 2.0)], "id long, user string, amount double")
    factors = spark.createDataFrame([("u", 3.0)], "name string, factor double")
    from sparkcast.spark import Stream
    plan = Stream(events).connect(Stream(factors).broadcast(FACTORS)).process(
        Scale(), OUTPUT).plan
    return BatchDriver(plan, str(tmp_path / "ckpt"), Raising(fail))


def _interrupted_jvm_call(spark) -> None:
    thread = spark._jvm.java.lang.Thread
    thread.currentThread().interrupt()
    thread.sleep(10)  # raises java.lang.InterruptedException in the JVM


def test_an_interrupted_batch_ends_in_a_short_error_spark_reads_as_a_stop(spark, tmp_path):
    with pytest.raises(Py4JJavaError) as original:
        _interrupted_jvm_call(spark)
    assert "java.lang.InterruptedException" in str(original.value)
    driver = _driver(spark, tmp_path, lambda: _interrupted_jvm_call(spark))
    with pytest.raises(MicroBatchInterrupted) as stopped:
        driver(spark.range(1).toDF("x"), 7)
    text = str(stopped.value)
    assert PROXY_ERROR.search(text) and "micro-batch 7" in text
    assert len(text) < 200 < len(str(original.value))
    assert stopped.value.__cause__ is None and stopped.value.__suppress_context__


def test_any_other_error_of_a_batch_is_raised_as_it_is(spark, tmp_path):
    def fail() -> None:
        spark._jvm.java.lang.Integer.parseInt("not a number")

    with pytest.raises(Exception, match="not a number") as failed:
        _driver(spark, tmp_path, fail)(spark.range(1).toDF("x"), 0)
    assert not isinstance(failed.value, MicroBatchInterrupted)
