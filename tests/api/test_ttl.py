"""``StateTtlConfig`` and its PyFlink builder, ``Time`` factories, durations as timedelta/int.
(TTL behaviour on state is in tests/core/test_ttl_state.py.)"""

import dataclasses
import datetime

import pytest

from sparkcast import StateTtlConfig, Time
from sparkcast.api.ttl import to_millis

UpdateType = StateTtlConfig.UpdateType
Visibility = StateTtlConfig.StateVisibility


@pytest.mark.parametrize(
    ("time", "millis"),
    [
        (Time.milliseconds(7), 7),
        (Time.seconds(2), 2_000),
        (Time.seconds(1.5), 1_500),
        (Time.minutes(3), 180_000),
        (Time.hours(1), 3_600_000),
        (Time.days(2), 172_800_000),
    ],
)
def test_time_factories(time, millis):
    assert time.to_milliseconds() == millis


def test_time_is_a_frozen_value():
    assert Time.seconds(1) == Time.milliseconds(1000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Time.seconds(1)._millis = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("duration", "millis"),
    [(Time.seconds(1), 1000), (datetime.timedelta(minutes=1, milliseconds=5), 60_005), (250, 250)],
)
def test_durations_accepted(duration, millis):
    assert to_millis(duration) == millis
    assert StateTtlConfig.new_builder(duration).build().ttl_millis == millis


@pytest.mark.parametrize("bad", [True, 1.5, "10s", None])
def test_other_durations_are_rejected(bad):
    with pytest.raises(TypeError, match="Time, timedelta or int"):
        to_millis(bad)


@pytest.mark.parametrize("ttl", [0, -1, Time.seconds(0)])
def test_ttl_must_be_positive(ttl):
    with pytest.raises(ValueError, match="positive"):
        StateTtlConfig.new_builder(ttl)


def test_builder_defaults_match_flink():
    config = StateTtlConfig.new_builder(Time.seconds(10)).build()
    assert config.get_ttl() == Time.seconds(10)
    assert config.get_update_type() is UpdateType.OnCreateAndWrite
    assert config.get_state_visibility() is Visibility.NeverReturnExpired
    assert (config.get_ttl_time_characteristic()
            is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)
    assert config.is_enabled() and not config.refresh_on_read


def test_update_type_setters():
    builder = StateTtlConfig.new_builder(Time.seconds(1))
    assert builder.update_ttl_on_read_and_write().build().refresh_on_read
    assert not builder.update_ttl_on_create_and_write().build().refresh_on_read
    config = builder.set_update_type(UpdateType.OnReadAndWrite).build()
    assert config.get_update_type() is UpdateType.OnReadAndWrite
    assert not builder.set_update_type(UpdateType.Disabled).build().is_enabled()


def test_visibility_setters():
    builder = StateTtlConfig.new_builder(Time.seconds(1))
    assert (builder.return_expired_if_not_cleaned_up().build().get_state_visibility()
            is Visibility.ReturnExpiredIfNotCleanedUp)
    assert (builder.never_return_expired().build().get_state_visibility()
            is Visibility.NeverReturnExpired)
    config = builder.set_state_visibility(Visibility.ReturnExpiredIfNotCleanedUp).build()
    assert config.state_visibility is Visibility.ReturnExpiredIfNotCleanedUp


def test_set_ttl_and_time_characteristic():
    builder = StateTtlConfig.new_builder(Time.seconds(1))
    assert builder.set_ttl(Time.minutes(2)).build().ttl_millis == 120_000
    assert builder.set_ttl(datetime.timedelta(seconds=3)).build().ttl_millis == 3_000
    characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert builder.set_ttl_time_characteristic(characteristic).use_processing_time().build() \
        .get_ttl_time_characteristic() is characteristic


def test_cleanup_strategies_are_accepted_for_porting_and_change_nothing():
    plain = StateTtlConfig.new_builder(Time.seconds(5)).build()
    ported = (StateTtlConfig.new_builder(Time.seconds(5))
              .cleanup_full_snapshot()
              .cleanup_incrementally(10, True)
              .cleanup_in_rocksdb_compact_filter(1000, Time.hours(1))
              .disable_cleanup_in_background()
              .build())
    assert ported == plain


def test_builder_chain_returns_the_builder():
    builder = StateTtlConfig.new_builder(1)
    for step in (builder.update_ttl_on_read_and_write, builder.never_return_expired,
                 builder.use_processing_time, builder.cleanup_full_snapshot,
                 builder.disable_cleanup_in_background):
        assert step() is builder


def test_config_is_frozen():
    config = StateTtlConfig.new_builder(1).build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ttl_millis = 5  # type: ignore[misc]
