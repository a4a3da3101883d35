"""State TTL on processing time (``harness.set_processing_time``): value, list (per element),
map (per entry), reducing and aggregating state; update types and visibilities."""

import datetime
from types import SimpleNamespace

import pytest

from sparkcast import (
    AggregateFunction,
    AggregatingStateDescriptor,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Time,
    ValueStateDescriptor,
)

UpdateType = StateTtlConfig.UpdateType
Visibility = StateTtlConfig.StateVisibility


def ttl(update=UpdateType.OnCreateAndWrite, visibility=Visibility.NeverReturnExpired,
        duration=100):
    return (StateTtlConfig.new_builder(duration).set_update_type(update)
            .set_state_visibility(visibility).build())


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator


def descriptors(config):
    made = SimpleNamespace(
        value=ValueStateDescriptor("value", int),
        list=ListStateDescriptor("list", str),
        map=MapStateDescriptor("map", str, int),
        reducing=ReducingStateDescriptor("reducing", lambda a, b: a + b, int),
        aggregating=AggregatingStateDescriptor("aggregating", Count()),
    )
    for descriptor in vars(made).values():
        descriptor.enable_time_to_live(config)
    return made


class Ops(KeyedBroadcastProcessFunction):
    """``(key, op)`` main elements run ``op(states)`` and yield its result; a broadcast element
    yields the keys ``apply_to_keyed_state`` visits for the named state."""

    def __init__(self, config):
        self.d = descriptors(config)

    def open(self, runtime_context):
        rc = runtime_context
        self.s = SimpleNamespace(
            value=rc.get_state(self.d.value), list=rc.get_list_state(self.d.list),
            map=rc.get_map_state(self.d.map), reducing=rc.get_reducing_state(self.d.reducing),
            aggregating=rc.get_aggregating_state(self.d.aggregating),
        )

    def process_element(self, value, ctx):
        yield value[1](self.s)

    def process_broadcast_element(self, value, ctx):
        keys = []
        ctx.apply_to_keyed_state(getattr(self.d, value), lambda key, state: keys.append(key))
        yield sorted(keys)


@pytest.fixture
def make(keyed):
    def build(**config):
        return keyed(Ops(ttl(**config)), key_selector=lambda v: v[0])
    return build


def at(harness, time, op, key="k"):
    """Run ``op`` for ``key`` at processing time ``time``; return what it returned."""
    harness.set_processing_time(time)
    harness.clear_output()
    harness.process_element((key, op))
    return harness.output()[0]


def stored(harness, name, key="k"):
    return harness.engine.keyed_states.table(name).get(key)


# ------------------------------------------------------------------------------------- value


def test_value_expires_after_ttl(make):
    h = make()
    at(h, 0, lambda s: s.value.update(1))
    assert at(h, 99, lambda s: s.value.value()) == 1
    assert at(h, 100, lambda s: s.value.value()) is None
    assert stored(h, "value") is None  # dropped when touched


def test_on_create_and_write_does_not_refresh_on_read(make):
    h = make(update=UpdateType.OnCreateAndWrite)
    at(h, 0, lambda s: s.value.update(1))
    assert at(h, 60, lambda s: s.value.value()) == 1
    assert at(h, 100, lambda s: s.value.value()) is None


def test_on_read_and_write_refreshes_on_read(make):
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.value.update(1))
    assert at(h, 60, lambda s: s.value.value()) == 1  # now expires at 160
    assert at(h, 159, lambda s: s.value.value()) == 1  # now expires at 259
    assert at(h, 259, lambda s: s.value.value()) is None


@pytest.mark.parametrize("update", [UpdateType.OnCreateAndWrite, UpdateType.OnReadAndWrite])
def test_writes_refresh_in_both_update_types(make, update):
    h = make(update=update)
    at(h, 0, lambda s: s.value.update(1))
    at(h, 80, lambda s: s.value.update(2))
    assert stored(h, "value") == [2, 180]
    assert at(h, 179, lambda s: s.value.value()) == 2


def test_return_expired_if_not_cleaned_up_returns_it_once(make, state_backend):
    h = make(visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: s.value.update(1))
    # in memory it is expired but not cleaned up yet; Spark's backend sweeps expired keys at
    # every flush (cleanup differs by backend, as in Flink)
    swept = state_backend is not None
    assert at(h, 150, lambda s: s.value.value()) == (None if swept else 1)
    assert at(h, 151, lambda s: s.value.value()) is None  # that read cleaned it up


def test_never_return_expired(make):
    h = make(visibility=Visibility.NeverReturnExpired)
    at(h, 0, lambda s: s.value.update(1))
    assert at(h, 150, lambda s: s.value.value()) is None


def test_ttl_runs_on_processing_time_not_event_time(make):
    h = make()
    at(h, 0, lambda s: s.value.update(1))
    h.process_watermark(10_000)
    assert at(h, 50, lambda s: s.value.value()) == 1


@pytest.mark.parametrize("duration", [Time.seconds(1), datetime.timedelta(seconds=1), 1000])
def test_ttl_durations(keyed, duration):
    h = keyed(Ops(ttl(duration=duration)), key_selector=lambda v: v[0])
    at(h, 0, lambda s: s.value.update(1))
    assert at(h, 999, lambda s: s.value.value()) == 1
    assert at(h, 1000, lambda s: s.value.value()) is None


# -------------------------------------------------------------------------------------- list


def test_list_elements_expire_one_by_one(make):
    h = make()
    at(h, 0, lambda s: s.list.add("a"))
    at(h, 50, lambda s: s.list.add("b"))
    assert at(h, 99, lambda s: list(s.list.get())) == ["a", "b"]
    assert at(h, 100, lambda s: list(s.list.get())) == ["b"]
    assert at(h, 150, lambda s: list(s.list.get())) == []
    assert stored(h, "list") is None


def test_list_read_refreshes_every_element_with_on_read_and_write(make):
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.list.add("a"))
    at(h, 50, lambda s: s.list.add("b"))
    assert at(h, 90, lambda s: list(s.list)) == ["a", "b"]  # both now expire at 190
    assert at(h, 189, lambda s: list(s.list)) == ["a", "b"]
    assert at(h, 289, lambda s: list(s.list)) == []


def test_list_update_restamps_everything(make):
    h = make()
    at(h, 0, lambda s: s.list.add("a"))
    at(h, 90, lambda s: s.list.update(["x", "y"]))
    assert at(h, 150, lambda s: list(s.list.get())) == ["x", "y"]


def test_collections_return_expired_elements_once_if_not_cleaned_up(make, state_backend):
    """Flink's TtlStateTestBase.testRelaxedExpirationOnWrite for list and map state: with
    ReturnExpiredIfNotCleanedUp the access that finds elements expired returns them and cleans
    them up, so the next access finds nothing."""
    h = make(visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: (s.list.add("a"), s.map.put("x", 1)))
    swept = state_backend is not None  # Spark's backend sweeps expired keys at every flush
    expected = ([], {}) if swept else (["a"], {"x": 1})
    assert at(h, 100, lambda s: (list(s.list.get()), dict(s.map.items()))) == expected
    assert at(h, 100, lambda s: (list(s.list.get()), dict(s.map.items()))) == ([], {})


# --------------------------------------------------------------------------------------- map


def test_map_entries_expire_one_by_one(make):
    h = make()
    at(h, 0, lambda s: s.map.put("x", 1))
    at(h, 50, lambda s: s.map.put_all({"y": 2, "z": 3}))
    assert at(h, 100, lambda s: (sorted(s.map.keys()), s.map.get("x"), s.map.contains("x"),
                                 len(s.map))) == (["y", "z"], None, False, 2)
    assert at(h, 150, lambda s: (s.map.is_empty(), list(s.map.items()))) == (True, [])
    assert stored(h, "map") is None


def test_map_get_refreshes_one_entry_with_on_read_and_write(make):
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.map.put_all({"x": 1, "y": 2}))
    assert at(h, 90, lambda s: s.map.get("x")) == 1  # only x now expires at 190
    assert at(h, 150, lambda s: dict(s.map.items())) == {"x": 1}


def test_map_iteration_refreshes_with_on_read_and_write(make):
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.map.put_all({"x": 1, "y": 2}))
    assert at(h, 90, lambda s: sorted(s.map.values())) == [1, 2]
    assert at(h, 189, lambda s: len(s.map)) == 2


def test_map_get_does_not_refresh_with_on_create_and_write(make):
    h = make()
    at(h, 0, lambda s: s.map.put("x", 1))
    assert at(h, 90, lambda s: (s.map.get("x"), dict(s.map.items()))) == (1, {"x": 1})
    assert at(h, 100, lambda s: s.map.get("x")) is None


# -------------------------------------------------------------------- reducing and aggregating


def test_reducing_state_expires_and_restarts(make):
    h = make()
    at(h, 0, lambda s: s.reducing.add(1))
    at(h, 50, lambda s: s.reducing.add(2))  # a write: now expires at 150
    assert at(h, 149, lambda s: s.reducing.get()) == 3
    assert at(h, 150, lambda s: s.reducing.get()) is None
    at(h, 160, lambda s: s.reducing.add(5))
    assert at(h, 160, lambda s: s.reducing.get()) == 5


def test_aggregating_state_expires_and_restarts(make):
    h = make()
    at(h, 0, lambda s: s.aggregating.add("e"))
    at(h, 10, lambda s: s.aggregating.add("e"))
    assert at(h, 109, lambda s: s.aggregating.get()) == 2
    assert at(h, 110, lambda s: s.aggregating.get()) is None
    at(h, 120, lambda s: s.aggregating.add("e"))
    assert at(h, 120, lambda s: s.aggregating.get()) == 1


def test_aggregating_on_read_and_write_refreshes_on_get(make):
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.aggregating.add("e"))
    assert at(h, 90, lambda s: s.aggregating.get()) == 1
    assert at(h, 180, lambda s: s.aggregating.get()) == 1


# ----------------------------------------------------------------------- apply_to_keyed_state


@pytest.mark.parametrize(
    ("name", "write"),
    [
        ("value", lambda s: s.value.update(1)),
        ("list", lambda s: s.list.add("a")),
        ("map", lambda s: s.map.put("x", 1)),
        ("reducing", lambda s: s.reducing.add(1)),
        ("aggregating", lambda s: s.aggregating.add(1)),
    ],
)
def test_apply_to_keyed_state_skips_expired_entries(make, name, write):
    h = make()
    at(h, 0, write, key="old")
    at(h, 50, write, key="new")
    h.set_processing_time(60)
    h.process_broadcast_element(name)
    assert h.output()[-1] == ["new", "old"]
    h.set_processing_time(120)
    h.process_broadcast_element(name)
    assert h.output()[-1] == ["new"]


def test_micro_batch_processing_time_drives_ttl(make):
    h = make()
    h.process_micro_batch(main=[("k", lambda s: s.value.update(1))], processing_time=0)
    h.process_micro_batch(main=[("k", lambda s: s.value.value())], processing_time=99)
    h.process_micro_batch(main=[("k", lambda s: s.value.value())], processing_time=100)
    assert h.output() == [None, 1, None]
