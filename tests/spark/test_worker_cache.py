"""A Python worker's one cache (``state/worker_cache.py``): every cache the worker keeps is a
section of it, each with its invalidation rule, under one bound; the least recently used entry
of any section goes first, and an entry heavier than the bound is not kept."""

from __future__ import annotations

from sparkcast.spark.execution import engines, static_side  # noqa: F401 - their sections
from sparkcast.spark.outputs import avro_late, kafka_transactions, registry_lookup  # noqa: F401
from sparkcast.spark.state import backend, blobs, snapshots, store_backend  # noqa: F401
from sparkcast.spark.state.worker_cache import WORKER, WorkerCache


def test_every_cache_of_a_worker_is_a_section_of_the_one_cache_with_its_rule():
    assert set(WORKER.sections) == {"engines", "warm state", "snapshots", "static sides",
                                    "operator broadcast", "blobs", "kept producers",
                                    "admin clients", "registry schemas", "Avro readers"}
    assert all("taken while" in section.rule for section in WORKER.sections.values())
    assert "lineage token" in WORKER.sections["warm state"].rule


def test_the_bound_is_shared_and_the_least_recently_used_entry_of_any_section_goes_first():
    cache = WorkerCache(bound=10)
    tables = cache.section("tables", "taken while its key matches", len)
    things = cache.section("things", "taken while its key matches")
    tables.put("a", {1: 1, 2: 2, 3: 3, 4: 4})
    things.put("x", object())
    tables.put("b", {1: 1, 2: 2, 3: 3, 4: 4})
    assert cache.weight == 9
    assert tables.get("a") is not None  # now the most recent: "x" is the oldest
    things.put("y", object())
    things.put("z", object())  # 11 > 10: the oldest, "x", goes
    assert things.get("x") is None and tables.get("a") is not None and len(things) == 2
    # order now b, y, z, a: a table of 6 pushes out b, then the things, not the recent a
    tables.put("c", {n: n for n in range(6)})
    assert tables.get("b") is None and len(things) == 0
    assert tables.get("a") is not None and cache.weight == 10


def test_an_entry_heavier_than_the_bound_is_not_kept_and_putting_again_reweighs():
    cache = WorkerCache(bound=5)
    tables = cache.section("tables", "taken while its key matches", len)
    grown = tables.put("a", {1: 1})
    assert cache.weight == 1
    grown.update({n: n for n in range(2, 5)})
    tables.put("a", grown)
    assert cache.weight == 4
    grown.update({n: n for n in range(5, 9)})
    tables.put("a", grown)  # 8 > 5: not kept, and the old entry is gone
    assert tables.get("a") is None and cache.weight == 0
