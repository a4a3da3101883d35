"""State time-to-live, with PyFlink's builder: ``StateTtlConfig.new_builder(Time.seconds(1))``.

TTL runs on processing time, as in Flink. The engine applies it itself, when state is accessed,
so the harness and Spark expire exactly the same entries (docs/semantics.md, "State TTL").
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from sparkcast.errors import ArgumentTypeError, PipelineError


@dataclass(frozen=True)
class Time:
    """A duration in milliseconds; PyFlink's ``pyflink.common.time.Time``."""

    _millis: int

    def to_milliseconds(self) -> int:
        return self._millis

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        return Time(int(milliseconds))

    @staticmethod
    def seconds(seconds: int) -> Time:
        return Time(int(seconds * 1000))

    @staticmethod
    def minutes(minutes: int) -> Time:
        return Time(int(minutes * 60_000))

    @staticmethod
    def hours(hours: int) -> Time:
        return Time(int(hours * 3_600_000))

    @staticmethod
    def days(days: int) -> Time:
        return Time(int(days * 86_400_000))


def to_millis(duration: Time | datetime.timedelta | int) -> int:
    """Accept a ``Time``, a ``timedelta`` or integer milliseconds."""
    if isinstance(duration, Time):
        return duration.to_milliseconds()
    if isinstance(duration, datetime.timedelta):
        return int(duration.total_seconds() * 1000)
    if isinstance(duration, int) and not isinstance(duration, bool):
        return duration
    raise ArgumentTypeError(
        f"expected Time, timedelta or int milliseconds, got {type(duration).__name__}")


@dataclass(frozen=True)
class StateTtlConfig:
    """When keyed state expires; Flink's ``StateTtlConfig``.

    >>> ttl = (StateTtlConfig.new_builder(Time.minutes(10))
    ...        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
    ...        .build())
    """

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    ttl_millis: int
    update_type: UpdateType = UpdateType.OnCreateAndWrite
    state_visibility: StateVisibility = StateVisibility.NeverReturnExpired
    ttl_time_characteristic: TtlTimeCharacteristic = TtlTimeCharacteristic.ProcessingTime

    @staticmethod
    def new_builder(ttl: Time | datetime.timedelta | int) -> StateTtlConfig.Builder:
        return StateTtlConfig.Builder(StateTtlConfig(to_millis(ttl)))

    def get_ttl(self) -> Time:
        return Time(self.ttl_millis)

    def get_update_type(self) -> UpdateType:
        return self.update_type

    def get_state_visibility(self) -> StateVisibility:
        return self.state_visibility

    def get_ttl_time_characteristic(self) -> TtlTimeCharacteristic:
        return self.ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self.update_type is not StateTtlConfig.UpdateType.Disabled

    @property
    def refresh_on_read(self) -> bool:
        return self.update_type is StateTtlConfig.UpdateType.OnReadAndWrite

    class Builder:
        """PyFlink's ``StateTtlConfig.Builder``; cleanup strategies are accepted for porting."""

        def __init__(self, config: StateTtlConfig) -> None:
            if config.ttl_millis <= 0:
                raise PipelineError("TTL must be positive")
            self._config = config

        def _with(self, **changes: Any) -> StateTtlConfig.Builder:
            self._config = replace(self._config, **changes)
            return self

        def set_update_type(self, update_type: StateTtlConfig.UpdateType) -> StateTtlConfig.Builder:
            return self._with(update_type=update_type)

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(
            self, visibility: StateTtlConfig.StateVisibility
        ) -> StateTtlConfig.Builder:
            return self._with(state_visibility=visibility)

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(
                StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
            )

        def never_return_expired(self) -> StateTtlConfig.Builder:
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            return self._with(ttl_time_characteristic=characteristic)

        def use_processing_time(self) -> StateTtlConfig.Builder:
            return self

        def set_ttl(self, ttl: Time | datetime.timedelta | int) -> StateTtlConfig.Builder:
            return self._with(ttl_millis=to_millis(ttl))

        # Flink's cleanup strategies tune *when* its backends purge; the engine drops expired
        # entries when they are accessed (and, on Spark, keys whose state has all expired at the
        # end of each micro-batch), so these only keep ports working.
        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            return self

        def cleanup_incrementally(
            self, cleanup_size: int = 5, run_cleanup_for_every_record: bool = False
        ) -> StateTtlConfig.Builder:
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int = 1000, periodic_compaction_time: object = None
        ) -> StateTtlConfig.Builder:
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            return self

        def build(self) -> StateTtlConfig:
            return self._config
