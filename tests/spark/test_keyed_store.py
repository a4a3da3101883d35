"""The partitioned path's keyed store without Spark: a local SQLite copy per subtask, made durable
as one delta file per micro-batch in the checkpoint, rebuilt from the checkpoint wherever the
local copy cannot serve (another host, a replay, a gap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcast.spark.state import keyed_store
from sparkcast.spark.state.keyed_store import SNAPSHOT_INTERVAL, SubtaskStore, versions
from sparkcast.spark.state.store_backend import StoreBackend

KEYS = ["a", "b", ("x", 1), 7]


def _batch(location: str, root: Path, batch: int, keys: list, subtask: int = 0,
           attempt: str | None = None) -> dict:
    """One micro-batch: count each key, remember the batch in a blob; the state after it
    (``attempt``: its file staged under that name)."""
    store = SubtaskStore(location, "store", subtask, str(root), attempt=attempt)
    store.open(batch)
    try:
        backend = StoreBackend(store, {})
        counts = backend.keyed_table("count")
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        backend.store("last", batch)
        backend.flush()
        return dict(counts.items())
    finally:
        store.close()


def _read(location: str, root: Path, batch: int) -> tuple[dict, object]:
    store = SubtaskStore(location, "store", 0, str(root))
    store.open(batch)
    try:
        backend = StoreBackend(store, {})
        return dict(backend.keyed_table("count").items()), backend.load("last", None)
    finally:
        store.close()


def test_state_survives_hosts_replays_and_compaction(tmp_path):
    location = str(tmp_path / "checkpoint" / "keyed")
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    for batch in range(2 * SNAPSHOT_INTERVAL + 3):
        state = _batch(location, host_a if batch % 5 else host_b, batch, KEYS[: 1 + batch % 4])
    assert state == {"a": 23, "b": 17, ("x", 1): 11, 7: 5}
    # a host that never ran the subtask rebuilds from the latest snapshot and the deltas after
    assert _read(location, tmp_path / "c", 23) == (state, 22)
    # a replay of batch 22 on a host already past it starts from the state after batch 21
    assert _read(location, host_a, 22) == ({"a": 22, "b": 16, ("x", 1): 10, 7: 5}, 21)
    files = versions(str(Path(location) / "0"))
    snapshots = sorted(b for b, kind in files.items() if kind == "snapshot")
    assert snapshots == [SNAPSHOT_INTERVAL - 1, 2 * SNAPSHOT_INTERVAL - 1]
    # what a replay of the last snapshot's batch needs is kept, nothing older
    assert min(files) == SNAPSHOT_INTERVAL - 1


def test_the_state_of_a_batch_is_the_attempt_a_sinks_commit_named(tmp_path):
    """Two attempts of batch 1 that computed different state (a function that reads the clock)
    stage their files; the batch's state is the one published, whichever attempt ran last on
    a worker, and a worker's copy of the other attempt is rebuilt."""
    location = str(tmp_path / "keyed")
    _batch(location, tmp_path / "w1", 0, ["a"])
    _batch(location, tmp_path / "w1", 1, ["a"], attempt="first")
    _batch(location, tmp_path / "w2", 1, ["b"], attempt="retry")
    assert _read(location, tmp_path / "cold", 2) == ({"a": 1}, 0)  # nothing published yet
    assert keyed_store.publish(location, 0, 1, "first")  # the attempt Kafka holds
    assert not keyed_store.publish(location, 0, 1, "never-staged")
    assert keyed_store.publish(location, 0, 1, "first")  # published already: still an answer
    assert _read(location, tmp_path / "w2", 2) == ({"a": 2}, 1)  # w2's copy was "retry"'s
    assert _read(location, tmp_path / "w1", 2) == ({"a": 2}, 1)
    # a replay that adopts "retry" instead (its marker won) replaces the published file
    assert keyed_store.publish(location, 0, 1, "retry")
    assert _read(location, tmp_path / "w1", 2) == ({"a": 1, "b": 1}, 1)
    # a staged snapshot forgets the older files only once it is published
    last = 2 * SNAPSHOT_INTERVAL - 1  # the second snapshot: the first one's deltas can go
    for batch in range(2, last + 1):
        _batch(location, tmp_path / "w1", batch, ["a"], attempt=f"at-{batch}")
        folder = tmp_path / "keyed" / "0"
        assert min(versions(str(folder))) == 0
        assert keyed_store.publish(location, 0, batch, f"at-{batch}")
    assert min(versions(str(folder))) == SNAPSHOT_INTERVAL - 1
    assert _read(location, tmp_path / "cold", last + 1)[0] == {"a": last, "b": 1}
    # what attempts staged for batches before the one published is gone
    assert sorted(p.name for p in folder.iterdir() if p.name.count(".") == 2) == []


def test_a_zombie_attempt_of_a_committed_batch_publishes_no_state(tmp_path):
    """An attempt that ends after Spark committed its batch (its executor declared lost, its
    stage re-attempted) leaves the state the attempt that counted published; the same attempt
    before the commit publishes its own."""
    from sparkcast.spark.outputs.task_sinks import StagedState

    checkpoint = tmp_path / "checkpoint"
    location = keyed_store.folder(str(checkpoint))
    _batch(location, tmp_path / "w", 0, ["a"])
    _batch(location, tmp_path / "w", 1, ["a"], attempt=keyed_store.attempt_token("nonce"))
    (checkpoint / "commits").mkdir(parents=True)
    (checkpoint / "commits" / "1").write_text('v1\n{"nextBatchWatermarkMs":0}')
    state = StagedState(str(checkpoint), 1, "nonce", {})
    state.publish((0,), ())
    assert _read(location, tmp_path / "cold", 2) == ({"a": 1}, 0)  # nothing published
    (checkpoint / "commits" / "1").unlink()
    state.publish((0,), ())
    assert _read(location, tmp_path / "cold", 2) == ({"a": 2}, 1)


def test_a_delta_holds_only_what_the_batch_changed(tmp_path):
    location = str(tmp_path / "keyed")
    _batch(location, tmp_path / "a", 0, [f"k{i}" for i in range(5000)])
    _batch(location, tmp_path / "a", 1, ["k1"])
    first, second = (Path(location, "0", f"{b}.delta").stat().st_size for b in (0, 1))
    assert second * 50 < first


def test_removed_keys_stay_removed_after_a_rebuild(tmp_path):
    location = str(tmp_path / "keyed")
    _batch(location, tmp_path / "a", 0, ["a", "b"])
    store = SubtaskStore(location, "store", 0, str(tmp_path / "a"))
    store.open(1)
    backend = StoreBackend(store, {})
    del backend.keyed_table("count")["a"]
    backend.flush()
    store.close()
    assert _read(location, tmp_path / "other", 2)[0] == {"b": 1}
    store.open(2)
    with pytest.raises(KeyError):
        del StoreBackend(store, {}).keyed_table("count")["nothing"]
    store.close()


def test_a_missing_delta_is_rebuilt_from_what_the_checkpoint_holds(tmp_path):
    location = str(tmp_path / "keyed")
    for batch in range(3):
        _batch(location, tmp_path / "a", batch, ["a"])
    # the local copy says batch 2; a task of batch 1 (a replay) must not read it
    assert _read(location, tmp_path / "a", 1)[0] == {"a": 1}
    assert _read(location, tmp_path / "a", 3)[0] == {"a": 3}


def test_every_checkpoint_gets_its_own_store_id(tmp_path):
    first = keyed_store.store_id(str(tmp_path / "one"))
    assert keyed_store.store_id(str(tmp_path / "one")) == first
    assert keyed_store.store_id(str(tmp_path / "two")) != first


# ---------------------------------------------------------------- warm state between batches

def _open(location: str, root: Path, batch: int) -> tuple[SubtaskStore, StoreBackend]:
    store = SubtaskStore(location, "store", 0, str(root))
    store.open(batch)
    return store, StoreBackend(store, {}, warm=True)


def _warm_batch(location: str, root: Path, batch: int, keys: list, fail: bool = False
                ) -> dict:
    """One micro-batch appending the batch to each key's list; ``fail``: it dies before its
    commit, after changing the values it read."""
    store, backend = _open(location, root, batch)
    try:
        seen = backend.keyed_table("seen")
        for key in keys:
            seen[key] = [*seen.get(key, []), batch]
            seen[key].append(-batch)  # mutated in place, as user code may
        if fail:
            raise RuntimeError("killed")
        backend.flush()
        return {k: list(v) for k, v in seen.items()}
    finally:
        store.close()


def test_a_subtasks_state_stays_between_its_batches_on_one_worker(tmp_path, monkeypatch):
    """The next batch on the same worker reads no store row: its values are the warm state
    (a container as the bytes its batch committed, so a copy, not the object handed out)."""
    location, root = str(tmp_path / "keyed"), tmp_path / "a"
    _warm_batch(location, root, 0, ["a", "b"])
    store, backend = _open(location, root, 1)
    first = backend.keyed_table("seen").get("a")
    backend.flush()
    store.close()
    store, backend = _open(location, root, 2)
    monkeypatch.setattr(store, "get", lambda *_: pytest.fail("read from the store"))
    monkeypatch.setattr(store, "get_many", lambda *_: pytest.fail("read from the store"))
    again = backend.keyed_table("seen").get("a")
    assert again == first == [0, 0] and again is not first
    store.close()


def test_warm_state_is_dropped_where_it_may_not_be_true(tmp_path):
    location, worker, other = str(tmp_path / "keyed"), tmp_path / "a", tmp_path / "b"
    _warm_batch(location, worker, 0, ["a"])
    # a failed attempt changed the values it read but never committed: the retry reads the store
    with pytest.raises(RuntimeError):
        _warm_batch(location, worker, 1, ["a"], fail=True)
    assert _warm_batch(location, worker, 1, ["a"]) == {"a": [0, 0, 1, -1]}
    # another worker ran batch 2: this one's memory is a batch behind and is not used
    assert _warm_batch(location, other, 2, ["a"]) == {"a": [0, 0, 1, -1, 2, -2]}
    assert _warm_batch(location, worker, 3, ["a"]) == {"a": [0, 0, 1, -1, 2, -2, 3, -3]}
    # a replay of batch 3 on the same worker starts from batch 2's state
    assert _warm_batch(location, worker, 3, ["a"]) == {"a": [0, 0, 1, -1, 2, -2, 3, -3]}
    assert _warm_batch(location, tmp_path / "c", 4, ["a"]) == {
        "a": [0, 0, 1, -1, 2, -2, 3, -3, 4, -4]}


def test_a_rollback_leaves_no_worker_on_the_old_line(tmp_path):
    """Batches 2 and 3 rolled back (their files removed, as with offsets and commits removed
    or a backup restored) and run again elsewhere with other keys: the first worker's local
    copy and warm state still reflect the old batch 3, and the batch numbers match the new
    line's; the lineage tokens do not, so batch 4 starts from the new line's state."""
    location, worker, other = str(tmp_path / "keyed"), tmp_path / "a", tmp_path / "b"
    for batch in range(4):
        _warm_batch(location, worker, batch, ["a"])
    for batch in (2, 3):
        (tmp_path / "keyed" / "0" / f"{batch}.delta").unlink()
    for batch in (2, 3):
        _warm_batch(location, other, batch, ["b"])
    assert _warm_batch(location, worker, 4, ["a"]) == {"a": [0, 0, 1, -1, 4, -4],
                                                        "b": [2, -2, 3, -3]}


def test_warm_and_cold_workers_give_the_same_state_over_many_batches(tmp_path):
    location = str(tmp_path / "keyed")
    expected: dict = {}
    for batch in range(2 * SNAPSHOT_INTERVAL + 3):
        keys = KEYS[: 1 + batch % 4]
        for key in keys:
            expected[key] = [*expected.get(key, []), batch, -batch]
        root = tmp_path / ("a" if batch % 7 else "b")
        assert _warm_batch(location, root, batch, keys) == expected


def _seen_at(location: str, root: Path, batch: int) -> dict:
    store, backend = _open(location, root, batch)
    try:
        seen = backend.keyed_table("seen")
        return {key: list(seen[key]) for key in sorted(seen)}
    finally:
        store.close()


def test_a_value_a_function_keeps_and_mutates_in_a_later_batch_is_not_the_warm_value(tmp_path):
    """A function keeps the list it got from state in batch 0 and appends to it in batch 1
    without reading or updating that key: the store never sees the append, so the warm state
    this worker takes in batch 2 must not either (it is not the live object), and a warm and a
    cold worker read the same."""
    location, worker = str(tmp_path / "keyed"), tmp_path / "a"
    store, backend = _open(location, worker, 0)
    seen = backend.keyed_table("seen")
    seen["a"] = [0]
    kept = seen["a"]
    backend.flush()
    store.close()
    store, backend = _open(location, worker, 1)
    backend.keyed_table("seen")["b"] = [1]
    kept.append(1)  # a later batch mutates the kept object, and never calls update()
    backend.flush()
    store.close()
    cold = _seen_at(location, tmp_path / "b", 2)
    assert cold == {"a": [0], "b": [1]}
    assert _seen_at(location, worker, 2) == cold
