"""Contexts: what each callback's context reports, what it forbids (timers, keyed state), and
that it is dead once its callback returned."""

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    OutputTag,
    TimeDomain,
    ValueStateDescriptor,
)
from sparkcast.errors import (
    ArgumentTypeError,
    ContextError,
    KeyedStateError,
    PipelineError,
    TimerError,
)

RULES = MapStateDescriptor("rules", str, dict)
COUNT = ValueStateDescriptor("count", int)
TAG = OutputTag("side")


class Reporter(KeyedBroadcastProcessFunction):
    """Emits what the context says; keeps every context it was given."""

    def __init__(self):
        self.kept = {}

    def process_broadcast_element(self, value, ctx):
        self.kept["broadcast"] = ctx
        yield ("BR", value, ctx.timestamp(), ctx.current_watermark(),
               ctx.current_processing_time())

    def process_element(self, value, ctx):
        self.kept["main"] = ctx
        ctx.timer_service().register_event_time_timer(100)
        ctx.timer_service().register_processing_time_timer(200)
        yield ("MAIN", value, ctx.timestamp(), ctx.current_watermark(),
               ctx.current_processing_time(), ctx.get_current_key())

    def on_timer(self, timestamp, ctx):
        self.kept[ctx.time_domain().name] = ctx
        yield ("TIMER", timestamp, ctx.timestamp(), ctx.time_domain(), ctx.get_current_key(),
               ctx.current_watermark(), ctx.current_processing_time())


def test_what_contexts_report(keyed):
    h = keyed(Reporter(), key_selector=lambda v: v[0])
    h.set_processing_time(50)
    h.process_watermark(10)
    h.process_broadcast_element("rule", timestamp=12)
    h.process_element(("k", 1), timestamp=13)
    h.process_element(("k", 2))
    h.process_watermark(150)
    h.set_processing_time(250)
    assert h.output() == [
        ("BR", "rule", 12, 10, 50),
        ("MAIN", ("k", 1), 13, 10, 50, "k"),
        ("MAIN", ("k", 2), None, 10, 50, "k"),
        ("TIMER", 100, 100, TimeDomain.EVENT_TIME, "k", 150, 50),
        ("TIMER", 200, 200, TimeDomain.PROCESSING_TIME, "k", 150, 250),
    ]


CALLS = {
    "timestamp": lambda c: c.timestamp(),
    "current_watermark": lambda c: c.current_watermark(),
    "current_processing_time": lambda c: c.current_processing_time(),
    "output": lambda c: c.output(TAG, 1),
    "get_broadcast_state": lambda c: c.get_broadcast_state(RULES),
}
KEYED_CALLS = {
    "get_current_key": lambda c: c.get_current_key(),
    "timer_service": lambda c: c.timer_service(),
}


@pytest.fixture
def kept_contexts(keyed):
    function = Reporter()
    h = keyed(function, key_selector=lambda v: v[0])
    h.process_broadcast_element("rule")
    h.process_element(("k", 1))
    h.process_watermark(100)
    h.set_processing_time(200)
    assert set(function.kept) == {"broadcast", "main", "EVENT_TIME", "PROCESSING_TIME"}
    return function.kept


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("kind", ["broadcast", "main", "EVENT_TIME", "PROCESSING_TIME"])
def test_contexts_die_when_their_callback_returns(kept_contexts, kind, call):
    with pytest.raises(ContextError, match="callback that has returned"):
        CALLS[call](kept_contexts[kind])


@pytest.mark.parametrize("call", sorted(KEYED_CALLS))
@pytest.mark.parametrize("kind", ["main", "EVENT_TIME", "PROCESSING_TIME"])
def test_keyed_main_side_contexts_die_too(kept_contexts, kind, call):
    with pytest.raises(ContextError):
        KEYED_CALLS[call](kept_contexts[kind])


def test_on_timer_time_domain_dies_too(kept_contexts):
    with pytest.raises(ContextError):
        kept_contexts["EVENT_TIME"].time_domain()


def test_apply_to_keyed_state_dies_too(kept_contexts):
    with pytest.raises(ContextError):
        kept_contexts["broadcast"].apply_to_keyed_state(COUNT, lambda key, state: None)


def test_a_kept_context_fails_inside_a_later_callback(keyed):
    class KeepsContext(KeyedBroadcastProcessFunction):
        previous = None

        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            if self.previous is not None:
                self.previous.timestamp()
            self.previous = ctx
            yield value

    h = keyed(KeepsContext())
    h.process_element("a", timestamp=1)
    with pytest.raises(ContextError):
        h.process_element("b", timestamp=2)


def test_contexts_are_pyflink_nested_types(keyed):
    seen = []

    class Types(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            seen.append(isinstance(ctx, KeyedBroadcastProcessFunction.Context))

        def process_element(self, value, ctx):
            seen.append(isinstance(ctx, KeyedBroadcastProcessFunction.ReadOnlyContext))
            ctx.timer_service().register_event_time_timer(1)

        def on_timer(self, timestamp, ctx):
            seen.append(isinstance(ctx, KeyedBroadcastProcessFunction.OnTimerContext))

    h = keyed(Types())
    h.process_broadcast_element(1)
    h.process_element(1)
    h.process_watermark(1)
    assert seen == [True, True, True]


# ----------------------------------------------------------------------------- timers forbidden


class TimerOnBroadcastSide(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(5)

    def process_element(self, value, ctx):
        pass


def test_timers_on_the_broadcast_side_raise_timer_error(keyed):
    h = keyed(TimerOnBroadcastSide())
    with pytest.raises(TimerError, match="cannot be registered in process_broadcast_element"):
        h.process_broadcast_element("x")
    assert h.timers() == {"EVENT_TIME": [], "PROCESSING_TIME": []}


class NonKeyedTimers(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        if value == "broadcast":
            ctx.timer_service()

    def process_element(self, value, ctx):
        ctx.timer_service().register_processing_time_timer(5)


def test_timers_in_a_non_keyed_function_raise_timer_error(non_keyed):
    h = non_keyed(NonKeyedTimers())
    with pytest.raises(TimerError, match="need a keyed stream"):
        h.process_element("x")
    with pytest.raises(TimerError, match="process_broadcast_element"):
        h.process_broadcast_element("broadcast")


def test_timer_errors_are_runtime_errors(non_keyed):
    with pytest.raises(RuntimeError):
        non_keyed(NonKeyedTimers()).process_element("x")


# ------------------------------------------------------------------------- keyed state forbidden


class KeyedStateInOpen(BroadcastProcessFunction):
    def open(self, runtime_context):
        runtime_context.get_state(COUNT)

    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        pass


def test_keyed_state_in_a_non_keyed_function_fails_at_open(non_keyed):
    with pytest.raises(KeyedStateError, match="needs a keyed stream"):
        non_keyed(KeyedStateInOpen())


class KeyedStateLater(BroadcastProcessFunction):
    def open(self, runtime_context):
        self.runtime_context = runtime_context

    def process_broadcast_element(self, value, ctx):
        self.runtime_context.get_list_state(ListStateDescriptor("l", int))

    def process_element(self, value, ctx):
        self.runtime_context.get_state(COUNT).value()


@pytest.mark.parametrize("side", ["main", "broadcast"])
def test_keyed_state_in_a_non_keyed_function_fails_on_both_sides(non_keyed, side):
    h = non_keyed(KeyedStateLater())
    with pytest.raises(KeyedStateError, match="Keyed state can only be used on a keyed stream"):
        if side == "main":
            h.process_element(1)
        else:
            h.process_broadcast_element(1)


class KeyedStateOnBroadcastSide(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_broadcast_element(self, value, ctx):
        self.count.value()

    def process_element(self, value, ctx):
        self.count.update(1)


def test_keyed_state_without_a_current_key_raises(keyed):
    h = keyed(KeyedStateOnBroadcastSide())
    h.process_element("a")
    with pytest.raises(KeyedStateError, match="apply_to_keyed_state"):
        h.process_broadcast_element("x")


# -------------------------------------------------------------------------------- state names


class StateNames(KeyedBroadcastProcessFunction):
    def __init__(self, first, second):
        self.descriptors = (first, second)

    def open(self, runtime_context):
        first, second = self.descriptors
        getter = {"value": runtime_context.get_state, "list": runtime_context.get_list_state,
                  "map": runtime_context.get_map_state}
        self.handles = [getter[d.kind](d) for d in (first, second)]

    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        pass


def test_duplicate_state_names_of_different_kinds_raise(keyed):
    with pytest.raises(PipelineError, match="'x' is used for both value and list state"):
        keyed(StateNames(ValueStateDescriptor("x"), ListStateDescriptor("x")))


def test_keyed_state_cannot_reuse_a_broadcast_state_name(keyed):
    with pytest.raises(PipelineError, match="'rules' is already a broadcast state"):
        keyed(StateNames(ValueStateDescriptor("v"), MapStateDescriptor("rules", str, dict)))


def test_same_name_same_kind_gives_the_same_handle(keyed):
    function = StateNames(ValueStateDescriptor("x", int), ValueStateDescriptor("x", str))
    keyed(function)
    assert function.handles[0] is function.handles[1]


def test_runtime_context_checks_the_descriptor_kind(keyed):
    class Wrong(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            runtime_context.get_map_state(COUNT)

        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            pass

    # a sparkcast error, so raised as itself from open (not wrapped): still a TypeError
    with pytest.raises(TypeError, match="expected a MapStateDescriptor") as info:
        keyed(Wrong())
    assert isinstance(info.value, ArgumentTypeError)
