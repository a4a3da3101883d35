"""In-memory stand-ins for PySpark's transformWithState state handles (the same calls, no JVM),
so the Spark state backend's logic runs in unit tests, and the core behaviour tests run on it."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

_PIPELINES = itertools.count()


class FakeMapState:
    """PySpark's MapState API over a dict: keys and values are tuples."""

    def __init__(self) -> None:
        self.data: dict[tuple, tuple] = {}
        self.calls = 0

    def getValue(self, key: tuple) -> tuple | None:  # noqa: N802 - PySpark's names
        self.calls += 1
        return self.data.get(key)

    def containsKey(self, key: tuple) -> bool:  # noqa: N802
        self.calls += 1
        return key in self.data

    def updateValue(self, key: tuple, value: tuple) -> None:  # noqa: N802
        self.calls += 1
        self.data[key] = value

    def removeKey(self, key: tuple) -> None:  # noqa: N802
        self.calls += 1
        self.data.pop(key, None)

    def iterator(self) -> Any:
        self.calls += 1
        return iter(list(self.data.items()))

    def keys(self) -> Any:
        self.calls += 1
        return iter(list(self.data))

    def exists(self) -> bool:
        return bool(self.data)

    def clear(self) -> None:
        self.data.clear()


class FakeHandle:
    """``StatefulProcessorHandle.getMapState``: one FakeMapState per name, kept across calls."""

    def __init__(self) -> None:
        self.states: dict[str, FakeMapState] = {}

    def getMapState(self, name: str, key_schema: str, value_schema: str  # noqa: N802
                    ) -> FakeMapState:
        return self.states.setdefault(name, FakeMapState())


class LazyStates:
    """``SparkStates`` whose broadcast variables appear on first use (the driver declares them
    all up front; unit tests do not know them)."""

    def __init__(self, handle: FakeHandle) -> None:
        from sparkcast.spark.state.variables import state_name

        self.meta = handle.getMapState("meta", "name string", "blob binary")
        self.broadcast = _ByName(lambda n: handle.getMapState(state_name("b", n), "", ""))
        self.keyed = handle.getMapState("keyed", "state string, bucket int", "blob binary")


class _ByName(dict):
    def __init__(self, make: Callable[[str], FakeMapState]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, name: str) -> FakeMapState:
        self[name] = state = self._make(name)
        return state


def spark_backend_factory(buckets: int = 4) -> Callable[[], Any]:
    """A factory of Spark state backends over one fake handle: each call is a new micro-batch's
    backend over the same stored state, as the processor binds one per call."""
    from sparkcast.spark.state.backend import SparkStateBackend

    handle = FakeHandle()
    pipeline = f"fake-{next(_PIPELINES)}"
    return lambda: SparkStateBackend(LazyStates(handle), pipeline, buckets,  # type: ignore[arg-type]
                                     "/tmp/sparkcast-unused-blobs")
