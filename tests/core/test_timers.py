"""Timers and watermarks: dedup, delete, order, cascades inside one advance, min watermark."""

import pytest

from sparkcast import MIN_WATERMARK, KeyedBroadcastProcessFunction, TimeDomain
from sparkcast.core import codec
from sparkcast.core.timers import TimerQueue
from sparkcast.errors import TimerError

# ------------------------------------------------------------------------------- TimerQueue


def test_queue_dedups_and_orders_by_timestamp_then_key():
    queue = TimerQueue()
    for ts, key in [(20, "b"), (10, "z"), (20, "a"), (10, "z"), (5, ("t", 1))]:
        queue.register(ts, key)
    assert len(queue) == 4 and queue.changed
    fired = []
    while (due := queue.pop_due(100)) is not None:
        fired.append(due)
    assert fired == [(5, ("t", 1)), (10, "z"), (20, "a"), (20, "b")]


def test_queue_pops_only_due_timers():
    queue = TimerQueue()
    queue.register(10, "k")
    assert queue.pop_due(9) is None
    assert queue.next_timestamp() == 10
    assert queue.pop_due(10) == (10, "k")
    assert queue.next_timestamp() is None


def test_queue_delete_skips_the_stale_heap_entry():
    queue = TimerQueue()
    queue.register(10, "k")
    queue.register(20, "k")
    queue.changed = False
    queue.delete(10, "k")
    queue.delete(99, "k")  # unknown: no-op
    assert queue.changed and len(queue) == 1
    assert queue.next_timestamp() == 20
    assert queue.pop_due(100) == (20, "k")


def test_queue_snapshot_and_restore_keep_keys_hashable():
    queue = TimerQueue()
    queue.register(7, ("a", 1))
    queue.register(3, "b")
    restored = TimerQueue()
    restored.restore(codec.decode(codec.encode(queue.snapshot())))
    assert not restored.changed
    assert restored.snapshot() == [[3, "b"], [7, ("a", 1)]]
    assert restored.pop_due(10) == (3, "b")


def test_keys_that_compare_equal_but_encode_differently_are_distinct_timers():
    queue = TimerQueue()
    queue.register(1, 1)
    queue.register(1, True)
    assert len(queue) == 2


# --------------------------------------------------------------------------- engine behaviour


class Timers(KeyedBroadcastProcessFunction):
    """Main elements are (key, command, timestamp); on_timer may register cascades."""

    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        _, command, ts = value
        service = ctx.timer_service()
        getattr(service, command)(ts)

    def on_timer(self, timestamp, ctx):
        key = ctx.get_current_key()
        yield f"{ctx.time_domain().name}:{key}@{timestamp}"
        if key == "cascade" and timestamp < 30:
            register = (ctx.timer_service().register_event_time_timer
                        if ctx.time_domain() is TimeDomain.EVENT_TIME
                        else ctx.timer_service().register_processing_time_timer)
            register(timestamp + 10)  # due already for an advance to 100
        if key == "future":
            ctx.timer_service().register_event_time_timer(timestamp + 1000)


@pytest.fixture
def h(keyed):
    return keyed(Timers(), key_selector=lambda v: v[0])


def register(h, key, ts, domain="event"):
    h.process_element((key, f"register_{domain}_time_timer", ts))


def test_event_timers_fire_in_timestamp_order_across_keys(h):
    register(h, "b", 30)
    register(h, "a", 20)
    register(h, "c", 20)
    register(h, "a", 10)
    h.process_watermark(25)
    assert h.output() == ["EVENT_TIME:a@10", "EVENT_TIME:a@20", "EVENT_TIME:c@20"]
    h.process_watermark(30)  # a timer at exactly the watermark fires
    assert h.output()[-1] == "EVENT_TIME:b@30"


def test_processing_timers_fire_in_order(h):
    register(h, "b", 300, "processing")
    register(h, "a", 200, "processing")
    h.set_processing_time(250)
    h.set_processing_time(300)
    assert h.output() == ["PROCESSING_TIME:a@200", "PROCESSING_TIME:b@300"]


def test_duplicate_registrations_fire_once(h):
    for _ in range(3):
        register(h, "a", 10)
        register(h, "a", 10, "processing")
    assert h.timers() == {"EVENT_TIME": [(10, "a")], "PROCESSING_TIME": [(10, "a")]}
    h.process_watermark(10)
    h.set_processing_time(10)
    assert h.output() == ["EVENT_TIME:a@10", "PROCESSING_TIME:a@10"]


@pytest.mark.parametrize("domain", ["event", "processing"])
def test_deleted_timers_do_not_fire(h, domain):
    register(h, "a", 10, domain)
    register(h, "a", 20, domain)
    h.process_element(("a", f"delete_{domain}_time_timer", 10))
    h.process_element(("b", f"delete_{domain}_time_timer", 20))  # another key's: untouched
    h.process_watermark(100)
    h.set_processing_time(100)
    assert h.output() == [f"{domain.upper()}_TIME:a@20"]


@pytest.mark.parametrize("domain", ["event", "processing"])
def test_timers_registered_in_on_timer_that_are_due_fire_in_the_same_advance(h, domain):
    register(h, "cascade", 10, domain)
    register(h, "other", 25, domain)
    if domain == "event":
        h.process_watermark(100)
    else:
        h.set_processing_time(100)
    name = f"{domain.upper()}_TIME"
    assert h.output() == [f"{name}:cascade@10", f"{name}:cascade@20", f"{name}:other@25",
                          f"{name}:cascade@30"]


def test_timers_registered_in_on_timer_for_later_wait(h):
    register(h, "future", 10)
    h.process_watermark(500)
    assert h.output() == ["EVENT_TIME:future@10"]
    assert h.timers()["EVENT_TIME"] == [(1010, "future")]


def test_event_timers_wait_for_both_inputs(h):
    register(h, "a", 10)
    h.process_main_watermark(50)
    assert h.output() == []  # the broadcast input is still at MIN_WATERMARK
    h.process_broadcast_watermark(40)
    assert h.output() == ["EVENT_TIME:a@10"]


def test_timer_registered_at_or_before_the_watermark_fires_at_the_next_advance(h):
    h.process_watermark(50)
    register(h, "late", 40)
    assert h.output() == []
    h.process_watermark(50)
    assert h.output() == ["EVENT_TIME:late@40"]


def test_a_kept_timer_service_outside_a_keyed_callback_raises(keyed):
    class KeepsService(KeyedBroadcastProcessFunction):
        service = None

        def process_element(self, value, ctx):
            self.service = ctx.timer_service()

        def process_broadcast_element(self, value, ctx):
            self.service.register_event_time_timer(5)

    h = keyed(KeepsService())
    h.process_element("a")
    with pytest.raises(TimerError, match="need a current key"):
        h.process_broadcast_element("x")


# ------------------------------------------------------------------------------- watermarks


class Watermarks(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        yield "BR", ctx.current_watermark()

    def process_element(self, value, ctx):
        yield "MAIN", ctx.current_watermark(), ctx.timer_service().current_watermark(), \
            ctx.timer_service().current_processing_time()


def test_watermark_starts_at_min_and_is_the_min_of_both_inputs(keyed):
    h = keyed(Watermarks())
    h.process_element("a")
    h.process_main_watermark(30)
    h.process_broadcast_element("r")
    h.process_broadcast_watermark(20)
    h.process_element("a")
    h.process_broadcast_watermark(40)
    h.process_element("a")
    assert h.output() == [("MAIN", MIN_WATERMARK, MIN_WATERMARK, 0), ("BR", MIN_WATERMARK),
                          ("MAIN", 20, 20, 0), ("MAIN", 30, 30, 0)]
    assert MIN_WATERMARK == -(2**63)


def test_watermarks_and_processing_time_never_go_back(keyed):
    h = keyed(Watermarks())
    h.process_watermark(30)
    h.process_watermark(10)
    h.set_processing_time(100)
    h.set_processing_time(50)
    h.process_element("a")
    assert h.output() == [("MAIN", 30, 30, 100)]


def test_non_keyed_functions_ignore_timer_firing(non_keyed):
    from sparkcast import BroadcastProcessFunction

    class Plain(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            yield ctx.current_watermark()

        def process_element(self, value, ctx):
            yield ctx.current_watermark()

    h = non_keyed(Plain())
    h.process_watermark(10)
    h.set_processing_time(10)
    h.process_element("x")
    assert h.output() == [10]


def test_same_timestamp_timers_fire_in_canonical_key_order_not_python_order(keyed):
    """The order is the byte order of the keys' canonical JSON: the same in every process, but
    key 10 (b"10") fires before key 9 (b"9")."""

    class IntKeys(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(5)

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key()

    h = keyed(IntKeys())
    for key in (9, 10, 2):
        h.process_element(key)
    h.process_watermark(5)
    assert h.output() == [10, 2, 9]
