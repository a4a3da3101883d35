"""Test harnesses for broadcast and keyed functions, like Flink's operator test harnesses.

They run the engine that Spark runs, with in-memory state and a manual clock; no Spark session.
Beside them, throwaway servers on loopback for tests and demos: a Kafka broker (``kafka.py``),
a PostgreSQL cluster (``postgres.py``) and the free port each takes (``ports.py``), and a
stand-in for a schema registry's REST API (``schema_registry.py``, on a port the system picks).
"""

from sparkcast.testing.harness import (
    BroadcastHarness,
    KeyedBroadcastHarness,
    KeyedCoProcessHarness,
    KeyedProcessHarness,
)

__all__ = ["BroadcastHarness", "KeyedBroadcastHarness", "KeyedCoProcessHarness",
           "KeyedProcessHarness"]
