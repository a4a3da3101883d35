"""The live view's update-to-effect latency at any event-time scale, and its broadcast counts
said once: subtasks' reports from real engines (the harness), merged as the listener merges a
progress report (``progress.batch_record``), rendered by the view and the Prometheus text."""

import json
import re
import time

import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.core.batch_metrics import subtask_report
from sparkcast.monitoring.progress import batch_record
from sparkcast.monitoring.prometheus import exposition
from sparkcast.monitoring.store import Monitor
from sparkcast.monitoring.view import Style, batch_line, screen
from sparkcast.testing import BroadcastHarness

LIMITS = MapStateDescriptor("limits", str, float)
MINUTE_MS = 60_000


class Limit(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value, ctx.get_broadcast_state(LIMITS).get("max")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put("max", value)


def subtask(index, broadcast, times):
    """One subtask's report of one micro-batch that applied ``broadcast`` at event ``times``."""
    h = BroadcastHarness(Limit(), [LIMITS], subtask_index=index, parallelism=2,
                         output_schema="value double, max double")
    h.open()
    h.engine.meter.begin()
    h.process_micro_batch(main=[1.0, 2.0], broadcast=broadcast, broadcast_timestamps=times)
    h.engine.meter.finish()
    return subtask_report(h.engine.meter, subtask=index, batch=0, events_main=2,
                          events_broadcast=len(broadcast), held=0,
                          version=h.engine.broadcast_version, broadcast_entries={"limits": 1},
                          outputs={"main": 2}, dead_letters={})


def monitor_of(reports):
    progress = {"id": "q-id", "name": "q", "batchId": 0, "numInputRows": 6,
                "durationMs": {"triggerExecution": 120}, "processedRowsPerSecond": 50.0,
                "observedMetrics": {"sparkcast": {
                    "main_rows": 4, "side_output_rows": 0, "dead_letters": 0,
                    "subtask_reports": [json.dumps(r) for r in reports]}}}
    monitor = Monitor()
    monitor.add(batch_record(progress))
    return monitor


def view_text(monitor):
    return "\n".join(screen(monitor, style=Style(tty=False)))


def now_ms():
    return int(time.time() * 1000)


@pytest.mark.parametrize("scale", ["versions", "epoch seconds", "epoch microseconds"])
def test_event_times_on_another_scale_give_the_latency_from_arrival_not_a_nonsense_number(
        scale):
    times = {"versions": [1, 2], "epoch seconds": [now_ms() // 1000] * 2,
             "epoch microseconds": [now_ms() * 1000] * 2}[scale]
    monitor = monitor_of([subtask(i, [10.0, 20.0], times) for i in (0, 1)])
    shown = re.search(r"update-to-effect latency (\d+) ms", view_text(monitor))
    assert shown is not None and 0 <= int(shown.group(1)) < MINUTE_MS, view_text(monitor)
    scraped = re.search(r'sparkcast_update_effect_latency_seconds\{[^}]*query="q"[^}]*\} (\S+)',
                        exposition(monitor).decode())
    assert scraped is not None and 0 <= float(scraped.group(1)) < 60


def test_a_wall_clock_event_time_still_measures_from_when_the_update_was_made():
    made = now_ms() - 5_000  # the update was made five seconds ago
    monitor = monitor_of([subtask(0, [10.0], [made])])
    shown = re.search(r"update-to-effect latency (\d+) ms", view_text(monitor))
    assert shown is not None and 5_000 <= int(shown.group(1)) < MINUTE_MS


def test_broadcast_elements_are_counted_once_and_the_per_subtask_sum_is_labelled():
    monitor = monitor_of([subtask(i, [10.0, 20.0, 30.0], None) for i in (0, 1)])
    text = view_text(monitor)
    assert "events main 4 + broadcast 3 (counted once)" in text, text
    assert "broadcast applied 6 times (summed over the subtasks that applied them)" in text
    [state] = monitor.queries()
    assert "broadcast 3 (counted once)" in batch_line(state.records[-1])
    scrape = exposition(monitor).decode()
    assert re.search(r'sparkcast_broadcast_elements_total\{[^}]*\} 3\.0', scrape), scrape
    assert re.search(r'sparkcast_broadcast_applied_total\{[^}]*\} 6\.0', scrape)
