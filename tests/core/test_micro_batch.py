"""Micro-batches: clocks first, then broadcast elements in one deterministic order, then main
elements (or both merged by event time with time_alignment="event")."""

import itertools

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor
from sparkcast.core import BroadcastElement
from sparkcast.core.engine import order_broadcast
from sparkcast.testing import KeyedBroadcastHarness

CONFIG = MapStateDescriptor("config", str, dict)


class Versioned(KeyedBroadcastProcessFunction):
    """Broadcast updates append to a history and overwrite "current": order-sensitive."""

    def process_broadcast_element(self, value, ctx):
        state = ctx.get_broadcast_state(CONFIG)
        history = (state.get("history") or {"seen": []})["seen"]
        state.put("history", {"seen": history + [value["v"]]})
        state.put("current", value)
        yield f"BR:{value['v']}"

    def process_element(self, value, ctx):
        current = ctx.get_broadcast_state(CONFIG).get("current")
        yield value["id"], None if current is None else current["v"]
        if value.get("timer"):
            ctx.timer_service().register_event_time_timer(value["timer"])
            ctx.timer_service().register_processing_time_timer(value["timer"])

    def on_timer(self, timestamp, ctx):
        current = ctx.get_broadcast_state(CONFIG).get("current")
        yield f"TIMER:{ctx.time_domain().name}@{timestamp}", current and current["v"]


def harness(**options):
    h = KeyedBroadcastHarness(Versioned(), lambda v: v["id"], [CONFIG], check_outputs=False,
                              **options)
    h.open()
    return h


UPDATES = [{"v": "a"}, {"v": "b", "x": [1, 2]}, {"v": "c"}, {"v": "d", "y": {"k": 1}}]


@pytest.mark.parametrize("timestamps", [None, [5, 5, 5, 5], [4, 1, 3, 2], [7, None, 7, 1]])
def test_outputs_are_identical_for_every_permutation_of_the_broadcast_elements(timestamps):
    results = set()
    for order in itertools.permutations(range(len(UPDATES))):
        h = harness()
        h.process_micro_batch(
            main=[{"id": "e1"}, {"id": "e2"}],
            broadcast=[UPDATES[i] for i in order],
            broadcast_timestamps=None if timestamps is None else [timestamps[i] for i in order],
        )
        results.add(repr((h.output_records(), h.broadcast_state(CONFIG))))
    assert len(results) == 1


def test_event_time_orders_the_broadcast_elements():
    h = harness()
    h.process_micro_batch(broadcast=UPDATES, broadcast_timestamps=[4, 1, 3, 2])
    assert h.broadcast_state(CONFIG)["history"] == {"seen": ["b", "d", "c", "a"]}


def test_broadcast_elements_without_time_come_first():
    ordered = order_broadcast([BroadcastElement("late", 10), BroadcastElement("untimed", None)])
    assert [e.value for e in ordered] == ["untimed", "late"]


def test_order_by_value_decides_before_event_time():
    elements = [BroadcastElement("x", timestamp=1, order=3), BroadcastElement("y", 2, order=1),
                BroadcastElement("z", 0), BroadcastElement("w", 5, order=2)]
    assert [e.value for e in order_broadcast(elements)] == ["z", "y", "w", "x"]


def test_content_hash_breaks_ties_independently_of_dict_order():
    first = order_broadcast([BroadcastElement({"a": 1, "b": 2}), BroadcastElement({"c": 3})])
    second = order_broadcast([BroadcastElement({"c": 3}), BroadcastElement({"b": 2, "a": 1})])
    assert [e.value for e in first] == [e.value for e in second]


def test_batch_alignment_applies_all_broadcast_elements_before_main_elements():
    h = harness()
    h.process_micro_batch(
        main=[{"id": "early"}, {"id": "late"}], main_timestamps=[1, 100],
        broadcast=[{"v": "a"}, {"v": "b"}], broadcast_timestamps=[10, 50],
    )
    assert h.output() == ["BR:a", "BR:b", ("early", "b"), ("late", "b")]


def test_event_alignment_shows_each_event_exactly_the_updates_at_or_before_it():
    h = harness(time_alignment="event")
    h.process_micro_batch(
        main=[{"id": "e30"}, {"id": "e5"}, {"id": "e10"}, {"id": "e50"}],
        main_timestamps=[30, 5, 10, 50],
        broadcast=[{"v": "at50"}, {"v": "at10"}, {"v": "at60"}],
        broadcast_timestamps=[50, 10, 60],
    )
    assert h.output() == [("e5", None), "BR:at10", ("e10", "at10"), ("e30", "at10"),
                          "BR:at50", ("e50", "at50"), "BR:at60"]


def test_event_alignment_keeps_input_order_for_equal_timestamps():
    h = harness(time_alignment="event")
    h.process_micro_batch(main=[{"id": "b"}, {"id": "a"}, {"id": "c"}],
                          main_timestamps=[7, 7, 7], broadcast=[{"v": "x"}],
                          broadcast_timestamps=[7])
    assert h.output() == ["BR:x", ("b", "x"), ("a", "x"), ("c", "x")]


def test_clocks_advance_first_and_fire_timers_before_the_batch():
    h = harness()
    h.process_micro_batch(main=[{"id": "k", "timer": 20}], broadcast=[{"v": "old"}])
    h.clear_output()
    h.process_micro_batch(main=[{"id": "k"}], broadcast=[{"v": "new"}],
                          watermark=25, processing_time=30)
    assert h.output() == [
        ("TIMER:PROCESSING_TIME@20", "old"),  # processing time first, then the watermark
        ("TIMER:EVENT_TIME@20", "old"),
        "BR:new",
        ("k", "new"),
    ]


def test_every_subtask_ends_with_the_same_broadcast_state():
    states = []
    for index, order in enumerate([[0, 1, 2, 3], [3, 1, 0, 2], [2, 3, 1, 0]]):
        h = harness(parallelism=3, subtask_index=index)
        h.process_micro_batch(main=[{"id": f"only-on-{index}"}],
                              broadcast=[UPDATES[i] for i in order])
        states.append(h.broadcast_state(CONFIG))
    assert states[0] == states[1] == states[2]


def test_main_elements_keep_the_input_order():
    h = harness()
    h.process_micro_batch(main=[{"id": i} for i in (3, 1, 2)], main_timestamps=[30, 10, 20])
    assert h.output() == [(3, None), (1, None), (2, None)]
