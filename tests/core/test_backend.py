"""``DictBackend``: in-memory state that refuses what Spark's codec could not store."""

import pytest

from sparkcast.core import DictBackend, StateBackend
from sparkcast.errors import StateSerializationError


def test_tables_are_created_once_per_name():
    backend = DictBackend()
    assert isinstance(backend, StateBackend)
    table = backend.broadcast_table("rules")
    table["r1"] = {"a": 1}
    assert backend.broadcast_table("rules") is table
    assert backend.keyed_table("rules") is not table  # separate namespaces
    assert backend.broadcast == {"rules": {"r1": {"a": 1}}}


@pytest.mark.parametrize("kind", ["broadcast_table", "keyed_table"])
def test_tables_refuse_values_the_codec_cannot_store(kind):
    table = getattr(DictBackend(), kind)("t")
    with pytest.raises(StateSerializationError):
        table["k"] = object()
    with pytest.raises(StateSerializationError):
        table[object()] = 1
    assert "k" not in table


def test_blobs_go_through_the_codec():
    backend = DictBackend()
    assert backend.load("timers", []) == []
    backend.store("timers", [[5, ("k", 1)]])
    assert isinstance(backend.blobs["timers"], bytes)
    assert backend.load("timers", None) == [[5, ("k", 1)]]
    with pytest.raises(StateSerializationError):
        backend.store("bad", object())
    backend.flush()  # durable as written; flush is a no-op that must not fail
