"""Where one subtask's state lives: the interface the engine writes through, and a dict backend.

The engine sees every piece of state as a mutable mapping: one table per broadcast descriptor
(key -> frozen value, insertion-ordered), one per keyed descriptor (user key -> value), and named
blobs for its own bookkeeping (timers, held elements, versions). A backend decides how tables are
stored and must make them durable at ``flush``, which the engine's driver calls when a micro-batch
(or, in the harness, a call) ends. Values read from a keyed table may be mutated in place by user
code; a backend must persist such mutations at ``flush`` (the dict backend shares the objects; the
Spark backend writes back every container value it handed out).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import MutableMapping
from typing import Any

from sparkcast.core import codec
from sparkcast.core.converters import Convert


class StateBackend(ABC):
    """State of one subtask, behind mappings."""

    #: the job's classes, which stored objects decode as (``core/type_registry.py``)
    types: codec.Resolver | None = None

    def use_types(self, types: codec.Resolver) -> None:
        """Decode stored objects as the job's classes (the engine's ``TypeRegistry``)."""
        self.types = types

    @abstractmethod
    def broadcast_table(self, name: str, decode: Convert | None = None
                        ) -> MutableMapping[Any, Any]:
        """``decode``: how stored entries become typed ones (``core/converters.py``), for a backend
        that decodes state; the whole {key: value} table goes through it."""

    @abstractmethod
    def keyed_table(self, name: str, decode: Convert | None = None) -> MutableMapping[Any, Any]:
        """``decode``: how one stored record (a key's value, list or map) becomes typed."""

    @abstractmethod
    def load(self, name: str, default: Any) -> Any:
        """An engine blob (timers, held elements, versions) as last stored."""

    @abstractmethod
    def store(self, name: str, value: Any) -> None: ...

    def flush(self) -> None:  # noqa: B027 - dict-backed state is durable as it is written
        """Make everything written since the last flush durable."""


class _CheckedDict(dict):
    """A dict that refuses what the stable codec cannot store, so the harness fails where Spark
    would."""

    __slots__ = ()

    def __setitem__(self, key: Any, value: Any) -> None:
        if type(key) not in _PLAIN:
            codec.encode(key)
        if type(value) not in _PLAIN:
            codec.encode(value)
        super().__setitem__(key, value)


_PLAIN = frozenset({str, int, float, bool, type(None)})


class DictBackend(StateBackend):
    """In-memory state for the harness and unit tests; blobs go through the codec like on Spark."""

    def __init__(self) -> None:
        self.broadcast: dict[str, dict[Any, Any]] = {}
        self.keyed: dict[str, dict[Any, Any]] = {}
        self.blobs: dict[str, bytes] = {}

    def broadcast_table(self, name: str, decode: Convert | None = None
                        ) -> MutableMapping[Any, Any]:
        return self.broadcast.setdefault(name, _CheckedDict())  # holds typed values as they are

    def keyed_table(self, name: str, decode: Convert | None = None) -> MutableMapping[Any, Any]:
        return self.keyed.setdefault(name, _CheckedDict())

    def load(self, name: str, default: Any) -> Any:
        blob = self.blobs.get(name)
        return default if blob is None else codec.decode(blob, self.types)

    def store(self, name: str, value: Any) -> None:
        self.blobs[name] = codec.encode(value)
