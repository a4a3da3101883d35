"""A Python worker's engine cache (``execution/engines.py``): an engine and the broadcast
snapshot it is bound to leave the cache together, so with more subtasks and plans than the
cache holds, every engine the per-batch driver's binder (``streamed.SnapshotBinder``) hands out
reads the batch's snapshot, never empty state or an earlier batch's. Real plans, the driver's
real ``BroadcastApplier`` writing snapshots into a checkpoint, real engines; the capacity is the
cache's parameter."""

from __future__ import annotations

import pytest

from sparkcast import Row
from sparkcast.core.records import BroadcastElement
from sparkcast.spark import Stream
from sparkcast.spark.execution.engines import EngineCache, static_engine
from sparkcast.spark.execution.streamed import BroadcastApplier, SnapshotBinder
from tests.spark.differential import read_stream
from tests.spark.test_stateless import FACTORS, MAIN, OUTPUT, Scale

pytestmark = pytest.mark.spark

PARALLELISM = 4


def _plan(spark, base):
    events = Stream(read_stream(spark, MAIN, base / "events"))
    factors = read_stream(spark, "name string, factor double", base / "factors")
    return events.connect(Stream(factors).broadcast(FACTORS)).process(
        Scale(), OUTPUT, parallelism=PARALLELISM).plan


def _factor(name, factor, ts):
    return BroadcastElement(Row(name=name, factor=factor), ts)


def test_engines_made_again_after_an_eviction_read_the_batchs_snapshot(spark, tmp_path):
    plans = [_plan(spark, tmp_path), _plan(spark, tmp_path)]  # two pipelines: 8 engines
    cache = EngineCache(capacity=3)
    batches = [[_factor("u", 2.0, 1)], [_factor("v", 3.0, 2)], [_factor("u", 5.0, 3)]]
    expected = [{"u": 2.0}, {"u": 2.0, "v": 3.0}, {"u": 5.0, "v": 3.0}]
    appliers = [BroadcastApplier(plan, str(tmp_path / f"ck{i}")) for i, plan in enumerate(plans)]
    for batch, elements in enumerate(batches):
        files = [applier.apply(batch, elements)[0] for applier in appliers]
        for _ in range(2):  # a second pass meets only engines made again after an eviction
            for plan, file in zip(plans, files, strict=True):
                bind = SnapshotBinder(file, plan.blob_store)
                for subtask in range(PARALLELISM):
                    cached = cache.entry(plan, subtask,
                                         lambda p=plan, s=subtask: static_engine(p, s))
                    bind(cached)
                    assert cached.bound == file
                    assert dict(cached.engine.broadcast.tables["factors"]) == expected[batch], (
                        plan.pipeline_id, subtask, batch)
        assert len(cache) == 3


def test_an_engine_kept_in_the_cache_is_bound_once_per_snapshot(spark, tmp_path):
    plan = _plan(spark, tmp_path)
    cache = EngineCache(capacity=PARALLELISM)
    applier = BroadcastApplier(plan, str(tmp_path / "ck"))
    file = applier.apply(0, [_factor("u", 2.0, 1)])[0]
    bind = SnapshotBinder(file, plan.blob_store)
    first = cache.entry(plan, 0, lambda: static_engine(plan, 0))
    bind(first)
    tables = first.engine.broadcast.tables
    again = cache.entry(plan, 0, lambda: static_engine(plan, 0))
    bind(again)
    assert again is first and again.engine.broadcast.tables is tables  # not decoded again
