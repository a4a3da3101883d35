"""The Spark state backend's logic over in-memory stand-ins for Spark's MapState handles (the
same calls, no JVM): buckets, broadcast order and caching, write-back, TTL sweeps."""

from __future__ import annotations

from typing import Any

from sparkcast import (
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    StateTtlConfig,
    Time,
    ValueStateDescriptor,
)
from sparkcast.core import SubtaskEngine, codec
from sparkcast.core.records import OutputRecord
from sparkcast.spark.state import backend as spark_state
from sparkcast.spark.state.backend import SparkStateBackend
from sparkcast.spark.state.variables import SparkStates
from tests.fake_spark_state import FakeHandle

RULES = MapStateDescriptor("rules", str, object)


def ttl_count() -> ValueStateDescriptor:
    descriptor = ValueStateDescriptor("count", int)
    descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(10)).build())
    return descriptor


class Counter(KeyedBroadcastProcessFunction):
    def __init__(self, count: ValueStateDescriptor) -> None:
        self.descriptor = count

    def open(self, runtime_context):
        self.count = runtime_context.get_state(self.descriptor)
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen", str))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(value)
        yield value, self.count.value(), len(ctx.get_broadcast_state(RULES))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


def engine_over(handle: FakeHandle, function: Any, pipeline: str = "p") -> SubtaskEngine:
    states = SparkStates(handle, ["rules"])
    backend = SparkStateBackend(states, pipeline, buckets=8, blob_dir="/tmp/unused")
    engine = SubtaskEngine(function, [RULES], backend)
    engine.open()
    return engine


def batch(engine: SubtaskEngine, handle: FakeHandle, values: list[str], now: int,
          pipeline: str = "p") -> list[Any]:
    states = SparkStates(handle, ["rules"])
    engine.bind(SparkStateBackend(states, pipeline, buckets=8, blob_dir="/tmp/unused"))
    engine.run_micro_batch([], values, None, values, processing_time=now)
    engine.flush()
    return [OutputRecord._make(r).value for r in engine.take_outputs()]


def test_state_survives_a_new_engine_and_buckets_bound_the_state_calls():
    handle = FakeHandle()
    first = engine_over(handle, Counter(ValueStateDescriptor("count", int)))
    keys = [f"user-{i}" for i in range(200)]
    assert len(batch(first, handle, keys + keys, now=1_000)) == 400
    keyed = handle.states["keyed"]  # one variable for every keyed state (layout version 2)
    assert {name for name, _ in keyed.data} == {"count", "seen"}
    assert len([name for name, _ in keyed.data if name == "count"]) <= 8  # 200 keys, 8 buckets
    assert keyed.calls <= 32  # per descriptor, one read and one write per touched bucket
    second = engine_over(handle, Counter(ValueStateDescriptor("count", int)), pipeline="q")
    assert batch(second, handle, ["user-7"], now=2_000, pipeline="q") == [("user-7", 3, 0)]


class InPlace(KeyedBroadcastProcessFunction):
    """Mutates the values it reads without calling update(): Flink's heap backend keeps that,
    so ours must write it back too."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", list))
        self.counts = runtime_context.get_state(ValueStateDescriptor("counts", dict))

    def process_element(self, value, ctx):
        seen, counts = self.seen.value(), self.counts.value()
        if seen is None:
            self.seen.update([value])
            self.counts.update({"n": 1})
        else:
            seen.append(value)  # in place, no update()
            counts["n"] += 1
        yield list(self.seen.value()), self.counts.value()["n"]

    def process_broadcast_element(self, value, ctx):
        pass


def test_a_list_mutated_in_place_is_written_back():
    handle = FakeHandle()

    def run(values: list[str], pipeline: str) -> list[Any]:
        states = SparkStates(handle, ["rules"])
        backend = SparkStateBackend(states, pipeline, buckets=8, blob_dir="/tmp/unused")
        engine = SubtaskEngine(InPlace(), [RULES], backend)  # a new engine: state from storage
        engine.open()
        engine.run_micro_batch([], values, None, ["k"] * len(values))
        engine.flush()
        return [OutputRecord._make(r).value for r in engine.take_outputs()]

    assert run(["a"], "p1") == [(["a"], 1)]
    assert run(["b", "c"], "p2") == [(["a", "b"], 2), (["a", "b", "c"], 3)]
    assert run(["d"], "p3") == [(["a", "b", "c", "d"], 4)]


def test_broadcast_state_keeps_insertion_order_and_is_shared_per_worker_by_version():
    handle = FakeHandle()
    engine = engine_over(handle, Counter(ValueStateDescriptor("count", int)))
    states = SparkStates(handle, ["rules"])
    engine.bind(SparkStateBackend(states, "p", buckets=8, blob_dir="/tmp/unused"))
    for name in ["zeta", "alpha", "mid"]:
        engine.process_broadcast_element((name, {"limit": len(name)}))
    engine.flush()
    spark_state._BROADCAST_CACHE.clear()
    reader = engine_over(handle, Counter(ValueStateDescriptor("count", int)), pipeline="r")
    assert list(reader.read_only_view(RULES).keys()) == ["zeta", "alpha", "mid"]
    other = engine_over(handle, Counter(ValueStateDescriptor("count", int)), pipeline="r")
    assert other.read_only_view(RULES).get("mid") is reader.read_only_view(RULES).get("mid")


def test_expired_keys_never_touched_again_are_swept_from_spark_state():
    handle = FakeHandle()
    engine = engine_over(handle, Counter(ttl_count()))
    batch(engine, handle, [f"old-{i}" for i in range(100)], now=1_000)
    count_state = handle.states["keyed"]
    assert sum(len(v[0]) for v in count_state.data.values()) > 0
    for second in range(20, 40):  # TTL 10 s has passed; each batch touches one other key
        batch(engine, handle, ["live"], now=second * 1_000)
    remaining = [key for (name, _), blob in count_state.data.items() if name == "count"
                 for key, _ in codec.decode(bytes(blob[0]))]
    assert remaining == ["live"]
