"""The Flink docs' count-with-timeout example ("Process Function", "Example"), twice: its Java
form ported (a ``CountWithTimestamp`` POJO in ``ValueState``) and its Python form (a ``Row`` in
``ValueState``, ``current[1] += 1``)."""

from sparkcast import (
    KeyedProcessFunction,
    Row,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)


class CountWithTimestamp:
    """The Java docs' POJO: ``public String key; public long count; public long lastModified``."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.last_modified = 0


class CountWithTimeoutFunction(KeyedProcessFunction):
    """The Java form: ``state.value()``, ``current.count++``, a timer a minute after the last
    modification, which emits ``(key, count)`` if nothing modified the key since."""

    def open(self, runtime_context: RuntimeContext):
        self.state = runtime_context.get_state(
            ValueStateDescriptor("myState", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        current = self.state.value()
        if current is None:
            current = CountWithTimestamp()
            current.key = value[0]
        current.count += 1
        current.last_modified = ctx.timestamp()
        self.state.update(current)
        ctx.timer_service().register_event_time_timer(current.last_modified + 60000)

    def on_timer(self, timestamp, ctx):
        result = self.state.value()
        if timestamp == result.last_modified + 60000:
            yield result.key, result.count


class CountWithTimeoutRowFunction(KeyedProcessFunction):
    """The Python form, as the Flink docs write it."""

    def __init__(self):
        self.state = None

    def open(self, runtime_context: RuntimeContext):
        self.state = runtime_context.get_state(ValueStateDescriptor(
            "my_state", Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()])))

    def process_element(self, value, ctx: "KeyedProcessFunction.Context"):
        # retrieve the current count
        current = self.state.value()
        if current is None:
            current = Row(value.f1, 0, 0)

        # update the state's count
        current[1] += 1

        # set the state's timestamp to the record's assigned event time timestamp
        current[2] = ctx.timestamp()

        # write the state back
        self.state.update(current)

        # schedule the next timer 60 seconds from the current event time
        ctx.timer_service().register_event_time_timer(current[2] + 60000)

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext"):
        # get the state for the key that scheduled the timer
        result = self.state.value()

        # check if this is an outdated timer or the latest timer
        if timestamp == result[2] + 60000:
            # emit the state on timeout
            yield result[0], result[1]
