"""Loopback ports for the throwaway servers of tests (Kafka, PostgreSQL, a standalone cluster)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port that nothing listens on now (a server may still lose it to a race before
    it binds: the PostgreSQL server's ``start`` retries with another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
