"""SubtaskEngine used directly, as the Spark runtime uses it: validation, the shared-context hot
path, flush and restart over the same backend."""

import pandas as pd
import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from sparkcast.core import BroadcastElement, DictBackend, OutputRecord, SubtaskEngine
from sparkcast.core.engine import check_broadcast, fresh_function, validate_function
from sparkcast.errors import PipelineError
from sparkcast.testing import KeyedBroadcastHarness

RULES = MapStateDescriptor("rules", str, dict)
SEEN = ListStateDescriptor("seen", str)
TOTAL = ValueStateDescriptor("total", int)


class Matcher(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(SEEN)
        self.total = runtime_context.get_state(TOTAL)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value["name"], value)
        yield "BR", value["name"], ctx.timestamp()

    def process_element(self, value, ctx):
        self.seen.add(value["item"])
        self.total.update((self.total.value() or 0) + 1)
        rules = sorted(ctx.get_broadcast_state(RULES).keys())
        ctx.timer_service().register_event_time_timer(value["due"])
        yield ctx.get_current_key(), value["item"], ctx.timestamp(), rules

    def on_timer(self, timestamp, ctx):
        yield "TIMER", ctx.get_current_key(), timestamp, list(self.seen.get())


def engine(backend=None, strict=False):
    e = SubtaskEngine(Matcher(), [RULES], backend or DictBackend(), strict_contexts=strict)
    e.open()
    return e


MAIN = [{"user": u, "item": i, "due": d} for u, i, d in
        [("u1", "a", 10), ("u2", "b", 20), ("u1", "c", 10), ("u3", "d", 5)]]


def run_batch(e, watermark=None):
    e.run_micro_batch([BroadcastElement({"name": "r2"}, 2), BroadcastElement({"name": "r1"}, 1)],
                      MAIN, [1, 2, 3, 4], [m["user"] for m in MAIN], watermark=watermark)
    e.flush()
    return [OutputRecord._make(r) for r in e.take_outputs()]


def test_shared_contexts_give_the_same_outputs_as_strict_ones():
    fast, strict = engine(), engine(strict=True)
    first = run_batch(fast), run_batch(fast, watermark=50)
    second = run_batch(strict), run_batch(strict, watermark=50)
    assert first == second
    assert all(isinstance(r, OutputRecord) for r in first[0])
    # The second batch's watermark fires the timers before its main elements run.
    assert [r.value for r in first[1][:3]] == [
        ("TIMER", "u3", 5, ["d"]), ("TIMER", "u1", 10, ["a", "c"]), ("TIMER", "u2", 20, ["b"])]


def test_engine_matches_the_harness():
    e = engine()
    h = KeyedBroadcastHarness(Matcher(), lambda v: v["user"], [RULES], check_outputs=False)
    h.open()
    records = run_batch(e)
    h.process_micro_batch(main=MAIN, main_timestamps=[1, 2, 3, 4],
                          broadcast=[{"name": "r2"}, {"name": "r1"}], broadcast_timestamps=[2, 1])
    assert [(r.value, r.timestamp) for r in records] == h.output_records()


def test_state_timers_and_bookkeeping_survive_a_restart_over_the_same_backend():
    backend = DictBackend()
    first = engine(backend)
    run_batch(first)
    second = engine(backend)  # a new process: fresh engine and function, same state
    assert dict(second.read_only_view(RULES).items()) == {"r1": {"name": "r1"},
                                                          "r2": {"name": "r2"}}
    assert second.broadcast_version == first.broadcast_version != ""
    second.advance_watermark(100, 100)
    fired = [r.value for r in map(OutputRecord._make, second.take_outputs())]
    assert fired == [("TIMER", "u3", 5, ["d"]), ("TIMER", "u1", 10, ["a", "c"]),
                     ("TIMER", "u2", 20, ["b"])]


def test_bind_switches_to_another_backend():
    first = DictBackend()
    e = engine(first)
    run_batch(e)
    assert {d.name: len(q) for d, q in e.timers.items()} == {"EVENT_TIME": 3,
                                                            "PROCESSING_TIME": 0}
    e.bind(DictBackend())
    assert dict(e.read_only_view(RULES).items()) == {}
    assert e.broadcast_version == ""
    assert [len(q) for q in e.timers.values()] == [0, 0]  # restored (empty) from the new one
    assert e.keyed_states.peek(TOTAL, "u1") is None
    e.advance_watermark(100, 100)
    assert e.take_outputs() == []
    e.bind(first)  # and back: everything as the first backend stored it
    assert sorted(e.read_only_view(RULES).keys()) == ["r1", "r2"]
    assert e.keyed_states.peek(TOTAL, "u1") == 2
    e.advance_watermark(100, 100)
    assert [r[1][:2] for r in e.take_outputs()] == [("TIMER", "u3"), ("TIMER", "u1"),
                                                    ("TIMER", "u2")]


def test_broadcast_version_follows_the_broadcast_elements():
    a, b = engine(), engine()
    a.process_broadcast_element({"name": "r1"}, 1)
    b.process_broadcast_element({"name": "r1"}, 1)
    assert a.broadcast_version == b.broadcast_version
    b.process_broadcast_element({"name": "r2"}, 1)
    assert a.broadcast_version != b.broadcast_version


def test_vectorized_micro_batch_takes_a_dataframe():
    class Batch(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_batch(self, batch, ctx):
            return batch.assign(double=batch["n"] * 2)

    e = SubtaskEngine(Batch(), [RULES], DictBackend())
    e.open()
    e.run_micro_batch([], pd.DataFrame({"n": [1, 2]}))
    (record,) = map(OutputRecord._make, e.take_outputs())
    assert record.batch and record.tag is None and record.timestamp is None
    assert record.value["double"].tolist() == [2, 4]


class NoMain(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        pass


class NoBroadcast(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        pass


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (object(), "is not a BroadcastProcessFunction"),
        (NoMain(), "defines neither process_element nor process_batch"),
        (NoBroadcast(), "must define process_broadcast_element"),
    ],
)
def test_validate_function(function, message):
    with pytest.raises(PipelineError, match=message):
        validate_function(function)
    with pytest.raises(PipelineError, match=message):
        SubtaskEngine(function, [RULES], DictBackend())


@pytest.mark.parametrize(
    ("descriptors", "message"),
    [
        ([], "at least one MapStateDescriptor"),
        ([ValueStateDescriptor("rules")], "always map state"),
        ([RULES, MapStateDescriptor("rules", int, int)], r"repeated: \['rules'\]"),
    ],
)
def test_check_broadcast(descriptors, message):
    with pytest.raises(PipelineError, match=message):
        check_broadcast(descriptors)


def test_fresh_function_gives_each_subtask_its_own_instance():
    template = Matcher()
    template.cache = {"k": [1]}
    copy = fresh_function(template)
    assert copy is not template and copy.cache == template.cache
    copy.cache["k"].append(2)
    assert template.cache == {"k": [1]}


def test_take_outputs_drains():
    e = engine()
    e.process_broadcast_element({"name": "r"}, 3)
    assert [r.value for r in map(OutputRecord._make, e.take_outputs())] == [("BR", "r", 3)]
    assert e.take_outputs() == []
