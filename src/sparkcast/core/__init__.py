"""The engine core, pure Python: runs one subtask of a broadcast function over a state backend.

The test harness and the Spark runtime both drive ``SubtaskEngine``; only the backend differs,
and the harness's contexts are strict (fresh per callback, invalidated when it returns).
"""

from sparkcast.core.backend import DictBackend, StateBackend
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import DEAD_LETTERS, BroadcastElement, DeadLetter, OutputRecord

__all__ = [
    "DEAD_LETTERS",
    "BroadcastElement",
    "DeadLetter",
    "DictBackend",
    "OutputRecord",
    "StateBackend",
    "SubtaskEngine",
]
