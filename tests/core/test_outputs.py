"""Main and side outputs, and the timestamps they carry."""

import pytest

from sparkcast import BroadcastProcessFunction, KeyedBroadcastProcessFunction, OutputTag

LATE = OutputTag("late")
AUDIT = OutputTag("audit", "msg string")


class Emitter(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        yield f"br:{value}"
        yield AUDIT, f"br-audit:{value}"
        ctx.output(AUDIT, f"br-ctx:{value}")

    def process_element(self, value, ctx):
        yield f"main:{value}"
        yield LATE, f"late:{value}"
        ctx.output(AUDIT, f"ctx:{value}")
        yield ("not-a-tag", value)  # an ordinary 2-tuple is a main output
        ctx.timer_service().register_event_time_timer(100)
        ctx.timer_service().register_processing_time_timer(200)

    def on_timer(self, timestamp, ctx):
        yield f"timer:{ctx.time_domain().name}"
        yield LATE, f"timer-late:{ctx.time_domain().name}"
        ctx.output(AUDIT, f"timer-ctx:{ctx.time_domain().name}")


@pytest.fixture
def h(keyed):
    harness = keyed(Emitter(), key_selector=lambda v: "one key")
    harness.process_broadcast_element("r", timestamp=5)
    harness.process_element("e", timestamp=13)
    harness.process_element("n")  # no timestamp
    harness.process_watermark(100)
    harness.set_processing_time(200)
    return harness


def test_main_output_with_timestamps(h):
    assert h.output_records() == [
        ("br:r", 5),
        ("main:e", 13), (("not-a-tag", "e"), 13),
        ("main:n", None), (("not-a-tag", "n"), None),
        ("timer:EVENT_TIME", 100),  # an event-time timer's outputs carry its time
        ("timer:PROCESSING_TIME", None),  # a processing-time timer's carry none
    ]
    assert h.output() == [value for value, _ in h.output_records()]


def test_side_outputs_by_yield_and_ctx_output(h):
    assert h.side_output(LATE) == ["late:e", "late:n", "timer-late:EVENT_TIME",
                                   "timer-late:PROCESSING_TIME"]
    assert h.side_output(AUDIT) == ["br-audit:r", "br-ctx:r", "ctx:e", "ctx:n",
                                    "timer-ctx:EVENT_TIME", "timer-ctx:PROCESSING_TIME"]
    assert h.side_output(OutputTag("unused")) == []


def test_side_output_timestamps_match_the_main_outputs(h):
    # The harness has no public side-output records; read the collected OutputRecords.
    records = [(r.value, r.timestamp) for r in h._records if r.tag is not None]
    assert ("late:e", 13) in records and ("ctx:e", 13) in records
    assert ("br-ctx:r", 5) in records
    assert ("timer-late:EVENT_TIME", 100) in records and ("timer-ctx:EVENT_TIME", 100) in records
    # yield and ctx.output agree in processing-time timers too: no timestamp
    assert ("timer-late:PROCESSING_TIME", None) in records
    assert ("timer-ctx:PROCESSING_TIME", None) in records


def test_tags_are_matched_by_value(h):
    assert h.side_output(OutputTag("late")) == h.side_output(LATE)


def test_clear_output(h):
    h.clear_output()
    assert h.output() == [] and h.side_output(LATE) == []
    h.process_element("again", timestamp=300)
    assert h.output_records() == [("main:again", 300), (("not-a-tag", "again"), 300)]


def test_outputs_keep_the_emission_order_across_callbacks(non_keyed):
    class Echo(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            yield value

        def process_element(self, value, ctx):
            yield value

    h = non_keyed(Echo())
    for i in range(5):
        (h.process_element if i % 2 else h.process_broadcast_element)(i, timestamp=i)
    assert h.output_records() == [(i, i) for i in range(5)]
