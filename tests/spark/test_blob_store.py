"""Broadcast values of 1 MiB or more are stored once, content-addressed, and verified."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.errors import ReadOnlyStateError, StateSerializationError
from sparkcast.spark import Stream
from sparkcast.spark.state.blobs import LARGE_VALUE_BYTES, load_value, store_value
from tests.spark.kinds import kind_of

MODEL = MapStateDescriptor("model", str, object)


def test_small_values_stay_inline(tmp_path):
    stored = store_value({"w": [1, 2, 3]}, str(tmp_path))
    assert not stored.startswith(b'{"$blob"')
    assert load_value(stored, str(tmp_path)) == {"w": [1, 2, 3]}
    assert os.listdir(tmp_path) == []


def test_large_values_are_written_once_and_read_back_frozen(tmp_path):
    weights = np.arange(LARGE_VALUE_BYTES // 4, dtype=np.float64)
    first = store_value({"weights": weights}, str(tmp_path))
    second = store_value({"weights": weights.copy()}, str(tmp_path))
    assert first == second and first.startswith(b'{"$blob"') and len(first) < 200
    assert len([f for f in os.listdir(tmp_path) if not f.startswith(".")]) == 1
    value = load_value(first, str(tmp_path))
    assert np.array_equal(value["weights"], weights)
    with pytest.raises(ReadOnlyStateError):
        value["weights"] = None


def test_a_corrupted_blob_fails_its_checksum(tmp_path):
    from sparkcast.spark.state import blobs

    stored = store_value({"w": "x" * LARGE_VALUE_BYTES}, str(tmp_path))
    (blob,) = [f for f in os.listdir(tmp_path) if not f.startswith(".")]
    with open(tmp_path / blob, "r+b") as f:
        f.seek(10)
        f.write(b"#")
    blobs.forget_cached()
    with pytest.raises(StateSerializationError, match="checksum"):
        load_value(stored, str(tmp_path))


class LoadModel(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODEL).get("current")
        yield value.x, None if model is None else len(model["weights"])

    def process_broadcast_element(self, value, ctx):
        size = value.size
        ctx.get_broadcast_state(MODEL).put("current", {"weights": "w" * size})


@pytest.mark.spark
def test_large_broadcast_state_is_stored_once_for_all_subtasks(spark, tmp_path):
    size = LARGE_VALUE_BYTES + 10
    events = spark.createDataFrame([(i,) for i in range(40)], "x long")
    model = spark.createDataFrame([(size,)], "size long")
    result = Stream(events).connect(Stream(model).broadcast(MODEL)).process(
        LoadModel(), "x long, n long", parallelism=4, blob_store=str(tmp_path / "blobs"),
        hold_until_ready=[MODEL])  # held events need state: the operator path, not stateless.py
    assert kind_of(result) != "stateless"
    rows = result.main.collect()
    assert sorted(r.x for r in rows) == list(range(40))
    assert {r.n for r in rows} == {size}
    assert len(os.listdir(tmp_path / "blobs")) == 1


def _files(folder):
    return [f for f in os.listdir(folder) if not f.startswith(".")]


def test_references_are_relative_so_the_store_can_move(tmp_path):
    from sparkcast.spark.state import blobs

    stored = store_value({"w": "m" * LARGE_VALUE_BYTES}, str(tmp_path / "a"))
    assert str(tmp_path).encode() not in stored
    os.rename(tmp_path / "a", tmp_path / "b")
    blobs.forget_cached()
    assert load_value(stored, str(tmp_path / "b"))["w"] == "m" * LARGE_VALUE_BYTES
    blobs.forget_cached()
    with pytest.raises(StateSerializationError, match="missing from the blob store"):
        load_value(stored, str(tmp_path / "a"))


def test_an_existing_corrupt_blob_is_rewritten_not_trusted(tmp_path):
    from sparkcast.spark.state import blobs

    value = {"w": "c" * LARGE_VALUE_BYTES}
    stored = store_value(value, str(tmp_path))
    (name,) = _files(tmp_path)
    (tmp_path / name).write_bytes(b"half a file")  # a damaged copy, e.g. an interrupted rsync
    blobs.forget_cached()
    assert store_value(value, str(tmp_path)) == stored
    blobs.forget_cached()
    assert load_value(stored, str(tmp_path)) == value


def test_file_uris_are_paths_not_folder_names(tmp_path, monkeypatch):
    from sparkcast.spark.state import blobs

    monkeypatch.chdir(tmp_path)
    store = (tmp_path / "store").as_uri()  # file:///...
    stored = store_value({"w": "u" * LARGE_VALUE_BYTES}, store)
    assert len(_files(tmp_path / "store")) == 1
    assert not (tmp_path / "file:").exists()
    blobs.forget_cached()
    assert load_value(stored, store)["w"] == "u" * LARGE_VALUE_BYTES


def test_no_default_store_on_a_remote_master_says_what_to_pass():
    from sparkcast.errors import PipelineError
    from sparkcast.spark.state.blobs import NO_STORE, default_blob_store

    assert default_blob_store("p1", local_master=False) == NO_STORE
    a, b = default_blob_store("p1", True), default_blob_store("p2", True)
    assert a != b  # one folder per pipeline, never shared between jobs
    with pytest.raises(PipelineError, match="blob_store="):
        store_value({"w": "r" * LARGE_VALUE_BYTES}, NO_STORE)
