"""The broadcast functions of PyFlink's own tests (``pyflink/datastream/tests/test_data_stream.py``:
``test_co_broadcast_process``, ``test_keyed_co_broadcast_process``,
``test_co_broadcast_side_output``, ``test_keyed_co_broadcast_side_output``), in the form those
tests write them: positional access to tuple and ``Row`` elements, ``Types.INT()`` keys,
``OutputTag("side", Types.INT())``, ``ReducingStateDescriptor`` with a lambda, outputs from the
broadcast side, an event-time timer. The functions sit at module level (the tests define them
inside test methods) so Spark's workers import them; only the imports changed.

Each test's expected output (PyFlink's assertion, parallelism 2) is kept beside it as
``*_EXPECTED`` for the harness and Spark runs to be compared with."""

from collections import defaultdict
from typing import Tuple  # noqa: UP035 - as PyFlink's tests write it

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ReducingState,  # noqa: F401 - named by a type comment, as in PyFlink's test
    ReducingStateDescriptor,
    RuntimeContext,
    Types,
)

# ------------------------------------------------------------------ test_co_broadcast_process


class MyBroadcastProcessFunction(BroadcastProcessFunction):
    def __init__(self, map_state_desc):
        self._map_state_desc = map_state_desc
        self._cache = defaultdict(list)

    def process_element(self, value: int, ctx: BroadcastProcessFunction.ReadOnlyContext):
        ro_broadcast_state = ctx.get_broadcast_state(self._map_state_desc)
        key = value % 2
        if ro_broadcast_state.contains(key):
            if self._cache.get(key) is not None:
                for v in self._cache[key]:
                    yield ro_broadcast_state.get(key) + str(v)
                self._cache[key].clear()
            yield ro_broadcast_state.get(key) + str(value)
        else:
            self._cache[key].append(value)

    def process_broadcast_element(
        self, value: Tuple[int, str], ctx: BroadcastProcessFunction.Context  # noqa: UP006
    ):
        key = value[0]
        yield str(key) + value[1]
        broadcast_state = ctx.get_broadcast_state(self._map_state_desc)
        broadcast_state.put(key, value[1])
        if self._cache.get(key) is not None:
            for v in self._cache[key]:
                yield value[1] + str(v)
            self._cache[key].clear()


mapping_desc = MapStateDescriptor(
    "mapping", key_type_info=Types.INT(), value_type_info=Types.STRING()
)
CO_BROADCAST_PROCESS_EXPECTED = ["0a", "0a", "1b", "1b", "a2", "a4", "b1", "b3", "b5"]

# ------------------------------------------------------------ test_keyed_co_broadcast_process


def _create_string(s, t):
    return 'value: {}, ts: {}'.format(s, t)  # noqa: UP032 - as PyFlink's test writes it


class MyKeyedBroadcastProcessFunction(KeyedBroadcastProcessFunction):
    def __init__(self, map_state_desc):
        self._map_state_desc = map_state_desc
        self._cache = None

    def open(self, runtime_context: RuntimeContext):
        self._cache = defaultdict(list)

    def process_element(
        self, value: Tuple[int, str], ctx: KeyedBroadcastProcessFunction.ReadOnlyContext  # noqa: UP006
    ):
        ro_broadcast_state = ctx.get_broadcast_state(self._map_state_desc)
        key = value[0] % 2
        if ro_broadcast_state.contains(key):
            if self._cache.get(key) is not None:
                for v in self._cache[key]:
                    yield _create_string(ro_broadcast_state.get(key) + str(v[0]), v[1])
                self._cache[key].clear()
            yield _create_string(ro_broadcast_state.get(key) + str(value[0]), value[1])
        else:
            self._cache[key].append(value)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10000)

    def process_broadcast_element(
        self, value: Tuple[int, str, str], ctx: KeyedBroadcastProcessFunction.Context  # noqa: UP006
    ):
        key = value[0]
        yield _create_string(str(key) + value[2], ctx.timestamp())
        broadcast_state = ctx.get_broadcast_state(self._map_state_desc)
        broadcast_state.put(key, value[2])
        if self._cache.get(key) is not None:
            for v in self._cache[key]:
                yield _create_string(value[2] + str(v[0]), v[1])
            self._cache[key].clear()

    def on_timer(self, timestamp: int, ctx: KeyedBroadcastProcessFunction.OnTimerContext):
        yield _create_string(ctx.get_current_key(), timestamp)


KEYED_CO_BROADCAST_PROCESS_EXPECTED = [
    'value: 0a, ts: 1603708215000', 'value: 0a, ts: 1603708215000',
    'value: 1, ts: 1603708221000', 'value: 1b, ts: 1603708215000',
    'value: 1b, ts: 1603708215000', 'value: 2, ts: 1603708222000',
    'value: 3, ts: 1603708223000', 'value: 4, ts: 1603708224000',
    'value: a2, ts: 1603708212000', 'value: a4, ts: 1603708214000',
    'value: b1, ts: 1603708211000', 'value: b3, ts: 1603708213000',
]

# -------------------------------------------------------------- test_co_broadcast_side_output

tag = OutputTag("side", Types.INT())


class SideOutputBroadcastProcessFunction(BroadcastProcessFunction):

    def process_element(self, value, ctx):
        yield value[0]
        yield tag, value[1]

    def process_broadcast_element(self, value, ctx):
        yield value[1]
        yield tag, value[0]


dummy_desc = MapStateDescriptor(
    "dummy", key_type_info=Types.INT(), value_type_info=Types.STRING()
)
CO_BROADCAST_SIDE_OUTPUT_EXPECTED = (['a', 'b', 'c', 'd', 'd', 'f', 'f'],
                                     [0, 1, 2, 3, 3, 4, 4])

# -------------------------------------------------------- test_keyed_co_broadcast_side_output


class SideOutputKeyedBroadcastProcessFunction(KeyedBroadcastProcessFunction):

    def __init__(self):
        self.reducing_state = None  # type: ReducingState

    def open(self, context: RuntimeContext):
        self.reducing_state = context.get_reducing_state(
            ReducingStateDescriptor("reduce", lambda i, j: i+j, Types.INT())
        )

    def process_element(self, value, ctx):
        self.reducing_state.add(value[1])
        yield value[0]
        yield tag, self.reducing_state.get()

    def process_broadcast_element(self, value, ctx):
        yield value[1]
        yield tag, value[0]


KEYED_CO_BROADCAST_SIDE_OUTPUT_EXPECTED = (['a', 'a', 'b', 'b', 'c', 'c', 'd', 'd'],
                                           [0, 1, 2, 4, 5, 5, 6, 6])
