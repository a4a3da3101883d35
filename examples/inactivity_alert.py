"""An inactivity alert, a ``KeyedProcessFunction`` as PyFlink users write it.

Per user, an event-time timer fires ``TIMEOUT`` ms after the user's last event: the alert. A
processing-time timer forgets users idle on the wall clock for a day (state cleanup).
Run on the harness by tests/examples/test_ported_examples.py and on Spark by
tests/spark/test_keyed_functions.py.
"""

from __future__ import annotations

from sparkcast import KeyedProcessFunction, TimeDomain, ValueStateDescriptor

TIMEOUT = 1_000
DAY = 86_400_000
OUTPUT_SCHEMA = "user string, last_seen long, alert_at long"


class InactivityAlert(KeyedProcessFunction):
    def open(self, runtime_context):
        self.last_seen = runtime_context.get_state(ValueStateDescriptor("last_seen", int))
        self.cleanup_at = runtime_context.get_state(ValueStateDescriptor("cleanup_at", int))

    def process_element(self, value, ctx):
        timers = ctx.timer_service()
        previous = self.last_seen.value()
        if previous is not None:
            timers.delete_event_time_timer(previous + TIMEOUT)
        seen = max(previous or ctx.timestamp(), ctx.timestamp())
        self.last_seen.update(seen)
        timers.register_event_time_timer(seen + TIMEOUT)
        if self.cleanup_at.value() is None:
            cleanup = timers.current_processing_time() + DAY
            self.cleanup_at.update(cleanup)
            timers.register_processing_time_timer(cleanup)

    def on_timer(self, timestamp, ctx):
        if ctx.time_domain() == TimeDomain.PROCESSING_TIME:
            self.last_seen.clear()
            self.cleanup_at.clear()
            return
        yield ctx.get_current_key(), self.last_seen.value(), timestamp
