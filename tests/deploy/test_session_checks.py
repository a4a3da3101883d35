"""``process(...)`` checks a session it did not make and names the fix (classic local session;
the cluster and Connect tests cover the other kinds)."""

from __future__ import annotations

import sys
from contextlib import contextmanager

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor
from sparkcast.errors import PipelineError
from sparkcast.spark import Stream, session
from sparkcast.spark.environment import (
    ROCKSDB,
    STATE_STORE,
    default_parallelism,
    is_local_master,
    master_of,
)
from sparkcast.spark.planning.checks import require_shared

pytestmark = pytest.mark.spark
LIMITS = MapStateDescriptor("limits", str, int)
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


class Count(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put("limit", value.limit)

    def process_element(self, value, ctx):
        yield value.k, ctx.get_broadcast_state(LIMITS).get("limit")


@contextmanager
def setting(spark, key, value):
    before = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.set(key, before)


def pipeline(spark, **options):
    # inputs made in the JVM (as file sources are): a DataFrame made from Python objects runs
    # the Python executable that was set when it was made
    events = spark.range(6).selectExpr("concat('k', id) AS k")
    limits = spark.range(1).selectExpr("5L AS limit")
    return Stream(events).key_by("k").connect(Stream(limits).broadcast(LIMITS)).process(
        Count(), "k string, limit long", **options)


def test_the_default_state_store_is_refused_with_the_setting_to_make(spark):
    with setting(spark, STATE_STORE, HDFS), pytest.raises(PipelineError) as error:
        pipeline(spark, parallelism=2)
    assert f"spark.conf.set('{STATE_STORE}', '{ROCKSDB}')" in str(error.value)


def test_a_worker_python_without_sparkcast_is_replaced_on_a_local_master(spark):
    context = spark.sparkContext
    before = context.pythonExec
    context.pythonExec = "/nonexistent/python3"
    try:
        with pytest.warns(UserWarning, match="PYSPARK_PYTHON=") as caught:
            result = pipeline(spark, parallelism=2)
        assert [w.filename for w in caught if "PYSPARK_PYTHON=" in str(w.message)] == [__file__]
        assert context.pythonExec == sys.executable
        assert sorted(result.main.collect()) == [(f"k{i}", 5) for i in range(6)]
    finally:
        context.pythonExec = before


def test_spark_default_200_partitions_give_the_cores_as_parallelism_and_a_warning(spark):
    with setting(spark, "spark.sql.shuffle.partitions", "200"):
        assert default_parallelism(spark) == spark.sparkContext.defaultParallelism == 2
        with pytest.warns(UserWarning, match="spark.sql.shuffle.partitions") as caught:
            result = pipeline(spark)
        assert [w.filename for w in caught if "shuffle" in str(w.message)] == [__file__]
    assert result.plan.parallelism == 2
    with setting(spark, "spark.sql.shuffle.partitions", "3"):
        assert default_parallelism(spark) == 3  # a chosen value is kept


def test_session_again_keeps_the_running_sessions_settings_and_applies_only_its_conf(spark):
    key = "spark.sql.streaming.numRecentProgressUpdates"
    with setting(spark, key, "100"):
        assert session(conf={key: "7"}) is spark
        assert spark.conf.get(key) == "7"
    # sparkcast's defaults (4 partitions) are for a session it starts, not for this one
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert default_parallelism(spark) == 2


def test_a_local_checkpoint_with_a_remote_master_is_refused(spark, tmp_path):
    assert is_local_master(master_of(spark))
    require_shared(str(tmp_path), master_of(spark))  # fine on a local master
    require_shared(tmp_path.as_uri(), "spark://10.0.0.1:7077")  # a stated shared mount
    require_shared("s3a://bucket/cp", "yarn")
    with pytest.raises(PipelineError, match="file:///... for a shared mount"):
        require_shared(str(tmp_path), "spark://10.0.0.1:7077")
