"""The key scope: the current key, the current element's timestamp and the subtask's clocks.

Keyed state, timers and contexts read "whose state, at what time" from here and nothing else
(Quix Streams' state handles hold a narrow transaction, not the store): they never see the
engine. The engine's main-side runner sets ``key`` and ``timestamp`` per element, so this is a
plain slotted object with public fields, read on every state access.
"""

from __future__ import annotations

from typing import Any

from sparkcast.api.timers import MIN_WATERMARK


class _Sentinel:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_KEY"


#: The current key outside keyed callbacks (keys themselves may be any value but this).
NO_KEY: Any = _Sentinel()

#: The one NaN every NaN key is replaced with: NaN != NaN, and since Python 3.10 a NaN hashes by
#: identity, so without this two events keyed by NaN would never share keyed state or timers.
NAN_KEY = float("nan")


def normal_key(key: Any) -> Any:
    """``key`` with every float NaN in it (tuple keys too) replaced by ``NAN_KEY``, so keys are
    equal exactly when their encodings are; str and int keys return at once."""
    kind = type(key)
    if kind is str or kind is int:
        return key
    if kind is float:
        return key if key == key else NAN_KEY
    if isinstance(key, tuple) and any(normal_key(k) is not k for k in key):
        items = [normal_key(k) for k in key]
        return key._make(items) if hasattr(key, "_make") else tuple(items)
    return key


class KeyScope:
    """Whose state and what time: written by the engine, read by state handles and contexts."""

    __slots__ = ("broadcast_watermark", "key", "main_watermark", "processing_time", "timestamp")

    def __init__(self) -> None:
        self.key: Any = NO_KEY
        self.timestamp: int | None = None
        self.processing_time = 0
        self.main_watermark = MIN_WATERMARK
        self.broadcast_watermark = MIN_WATERMARK

    @property
    def watermark(self) -> int:
        """The operator's watermark: the minimum of its two inputs' (as in Flink)."""
        return min(self.main_watermark, self.broadcast_watermark)

    def enter(self, key: Any, timestamp: int | None) -> None:
        """Make ``key`` (normalised) current for one callback at ``timestamp``."""
        self.key = normal_key(key)
        self.timestamp = timestamp

    def leave(self) -> None:
        self.key = NO_KEY
