"""Timer service and time domains; PyFlink's ``pyflink.datastream.timerservice``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum

MIN_WATERMARK = -(2**63)
"""The watermark before any watermark arrived: Java's ``Long.MIN_VALUE``, as PyFlink reports it."""


class TimeDomain(Enum):
    """Which clock fired a timer; Flink's ``TimeDomain``."""

    EVENT_TIME = 0
    PROCESSING_TIME = 1


class TimerService(ABC):
    """Registers timers for the current key; only keyed functions have one."""

    @abstractmethod
    def current_processing_time(self) -> int:
        """The processing time (epoch ms) of the current micro-batch (the harness's manual
        clock in tests)."""

    @abstractmethod
    def current_watermark(self) -> int:
        """The current event-time watermark (epoch ms); ``MIN_WATERMARK`` before the first
        one."""

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once processing time reaches ``timestamp``;
        registering the same time twice fires once."""

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """Call ``on_timer`` for the current key once the watermark reaches ``timestamp``;
        registering the same time twice fires once."""

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Cancel the current key's processing-time timer at ``timestamp``, if there is one."""

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None:
        """Cancel the current key's event-time timer at ``timestamp``, if there is one."""
