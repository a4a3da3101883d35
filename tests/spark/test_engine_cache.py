"""A Python worker's engine cache (``execution/engines.py``): an engine and the broadcast
state it is bound to leave the cache together, so with more subtasks and plans than the
cache holds, every engine the per-batch driver's binder (``streamed.SnapshotBinder``) hands out
reads the batch's snapshot, never empty state or an earlier batch's, and every engine the
in-place binder (``static_side.StaticBinder``) hands out reads its own plan's static side.
Real plans, the driver's real ``BroadcastApplier`` writing snapshots into a checkpoint, real
engines; the capacity is the cache's parameter."""

from __future__ import annotations

import dataclasses

import pytest

from sparkcast import Row
from sparkcast.core.records import BroadcastElement
from sparkcast.spark import Stream
from sparkcast.spark.execution.engines import EngineCache, plan_engine
from sparkcast.spark.execution.static_side import StaticBinder
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
                                         lambda p=plan, s=subtask: plan_engine(p, s))
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
    first = cache.entry(plan, 0, lambda: plan_engine(plan, 0))
    bind(first)
    tables = first.engine.broadcast.tables
    again = cache.entry(plan, 0, lambda: plan_engine(plan, 0))
    bind(again)
    assert again is first and again.engine.broadcast.tables is tables  # not decoded again


def _static_plan(spark, base, factor):
    events = Stream(read_stream(spark, MAIN, base / "events"))
    factors = spark.createDataFrame([("u", factor), ("v", factor + 1)],
                                    "name string, factor double")
    return events.connect(Stream(factors).broadcast(FACTORS)).process(
        Scale(), OUTPUT, parallelism=PARALLELISM).plan


def test_engines_made_again_after_an_eviction_read_their_plans_static_side(spark, tmp_path):
    plans = [_static_plan(spark, tmp_path, 2.0).for_workers(),
             _static_plan(spark, tmp_path, 5.0).for_workers()]
    expected = [{"u": 2.0, "v": 3.0}, {"u": 5.0, "v": 6.0}]
    cache = EngineCache(capacity=3)
    for _ in range(2):
        for plan, want in zip(plans, expected, strict=True):
            bind = StaticBinder(plan.static)
            for subtask in range(PARALLELISM):
                cached = cache.entry(plan, subtask, lambda p=plan, s=subtask: plan_engine(p, s))
                bind(cached)
                assert cached.bound == plan.static.digest
                assert dict(cached.engine.broadcast.tables["factors"]) == want, subtask
    assert len(cache) == 3


def test_the_workers_plan_is_frozen_and_holds_no_static_rows(spark, tmp_path):
    plan = _static_plan(spark, tmp_path, 2.0)
    shipped = plan.for_workers()
    with pytest.raises(dataclasses.FrozenInstanceError):
        shipped.parallelism = 1  # type: ignore[misc]
    assert not hasattr(shipped, "static_broadcast") and not hasattr(shipped, "spark")
    assert len(plan.static_broadcast) == 2 and shipped.static is plan.static
