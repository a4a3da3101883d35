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
        """The duration in milliseconds."""
        return self._millis

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        """A duration of ``milliseconds`` ms."""
        return Time(int(milliseconds))

    @staticmethod
    def seconds(seconds: int) -> Time:
        """A duration of ``seconds`` seconds."""
        return Time(int(seconds * 1000))

    @staticmethod
    def minutes(minutes: int) -> Time:
        """A duration of ``minutes`` minutes."""
        return Time(int(minutes * 60_000))

    @staticmethod
    def hours(hours: int) -> Time:
        """A duration of ``hours`` hours."""
        return Time(int(hours * 3_600_000))

    @staticmethod
    def days(days: int) -> Time:
        """A duration of ``days`` days."""
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

    Examples:
        >>> ttl = (StateTtlConfig.new_builder(Time.minutes(10))
        ...        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        ...        .build())
    """

    class UpdateType(Enum):
        """What restarts a value's TTL: its writes, or its reads too; ``Disabled`` turns TTL
        off."""

        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        """Whether a read may still return an expired value that has not been removed yet."""

        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time TTL runs on: processing time only, as in Flink."""

        ProcessingTime = 0

    ttl_millis: int
    update_type: UpdateType = UpdateType.OnCreateAndWrite
    state_visibility: StateVisibility = StateVisibility.NeverReturnExpired
    ttl_time_characteristic: TtlTimeCharacteristic = TtlTimeCharacteristic.ProcessingTime

    @staticmethod
    def new_builder(ttl: Time | datetime.timedelta | int) -> StateTtlConfig.Builder:
        """A builder for a config with this TTL (a ``Time``, a ``timedelta`` or milliseconds);
        by default writes restart the TTL and expired values are never returned."""
        return StateTtlConfig.Builder(StateTtlConfig(to_millis(ttl)))

    def get_ttl(self) -> Time:
        """The time to live."""
        return Time(self.ttl_millis)

    def get_update_type(self) -> UpdateType:
        """What restarts a value's TTL."""
        return self.update_type

    def get_state_visibility(self) -> StateVisibility:
        """Whether expired values that are still stored may be returned."""
        return self.state_visibility

    def get_ttl_time_characteristic(self) -> TtlTimeCharacteristic:
        """The time TTL runs on (processing time)."""
        return self.ttl_time_characteristic

    def is_enabled(self) -> bool:
        """False when the update type is ``Disabled``: the descriptor then keeps no TTL."""
        return self.update_type is not StateTtlConfig.UpdateType.Disabled

    @property
    def refresh_on_read(self) -> bool:
        """Whether a read restarts the TTL too (``OnReadAndWrite``)."""
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
            """Set what restarts a value's TTL."""
            return self._with(update_type=update_type)

        def update_ttl_on_create_and_write(self) -> StateTtlConfig.Builder:
            """Restart the TTL when a value is written (the default)."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> StateTtlConfig.Builder:
            """Restart the TTL when a value is read or written."""
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(
            self, visibility: StateTtlConfig.StateVisibility
        ) -> StateTtlConfig.Builder:
            """Set whether expired values that are still stored may be returned."""
            return self._with(state_visibility=visibility)

        def return_expired_if_not_cleaned_up(self) -> StateTtlConfig.Builder:
            """Let a read return an expired value that has not been removed yet (sparkcast
            removes expired values as it reads them, so at most once)."""
            return self.set_state_visibility(
                StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp
            )

        def never_return_expired(self) -> StateTtlConfig.Builder:
            """Never return an expired value (the default)."""
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(
            self, characteristic: StateTtlConfig.TtlTimeCharacteristic
        ) -> StateTtlConfig.Builder:
            """Set the time TTL runs on; processing time is the only one."""
            return self._with(ttl_time_characteristic=characteristic)

        def use_processing_time(self) -> StateTtlConfig.Builder:
            """Run TTL on processing time, which it always does; kept for ports."""
            return self

        def set_ttl(self, ttl: Time | datetime.timedelta | int) -> StateTtlConfig.Builder:
            """Replace the time to live."""
            return self._with(ttl_millis=to_millis(ttl))

        # Flink's cleanup strategies tune *when* its backends purge; the engine drops expired
        # entries when they are accessed (and, on Spark, keys whose state has all expired at the
        # end of each micro-batch), so these only keep ports working.
        def cleanup_full_snapshot(self) -> StateTtlConfig.Builder:
            """Accepted for ports; does nothing (expired entries are dropped on access)."""
            return self

        def cleanup_incrementally(
            self, cleanup_size: int = 5, run_cleanup_for_every_record: bool = False
        ) -> StateTtlConfig.Builder:
            """Accepted for ports; does nothing (expired entries are dropped on access)."""
            return self

        def cleanup_in_rocksdb_compact_filter(
            self, query_time_after_num_entries: int = 1000, periodic_compaction_time: object = None
        ) -> StateTtlConfig.Builder:
            """Accepted for ports; does nothing (there is no RocksDB compaction here)."""
            return self

        def disable_cleanup_in_background(self) -> StateTtlConfig.Builder:
            """Accepted for ports; does nothing."""
            return self

        def build(self) -> StateTtlConfig:
            """The config, for ``StateDescriptor.enable_time_to_live``."""
            return self._config
