"""The storage layer and the blob store by URI: local paths, file://, and S3 (a moto server)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.errors import StateSerializationError
from sparkcast.spark import Stream
from sparkcast.spark.state import blobs, storage
from sparkcast.spark.state.blobs import LARGE_VALUE_BYTES, load_value, store_value

MODEL = MapStateDescriptor("model", str, object)


@pytest.mark.parametrize("location, kind, path", [
    ("/tmp/x/y", "local", "/tmp/x/y"),
    ("file:///tmp/x/y", "local", "/tmp/x/y"),
    ("file:/tmp/x/y", "local", "/tmp/x/y"),  # how Spark prints local URIs
    ("s3a://bucket/a/b?region=us-east-1", "s3", "bucket/a/b"),
    ("s3://k:s@bucket/a?region=us-east-1", "s3", "bucket/a"),
])
def test_locations_resolve_to_a_file_system_and_a_path(location, kind, path):
    fs, inner = storage.resolve(location)
    assert (fs.type_name, inner) == (kind, path)


def test_join_keeps_the_query_of_a_uri():
    assert (storage.join("s3://b/cp?scheme=http", "blobs", "ab")
            == "s3://b/cp/blobs/ab?scheme=http")
    assert storage.join("/tmp/cp/", "blobs") == "/tmp/cp/blobs"
    assert storage.is_local_path("file:///x") and not storage.is_local_path("hdfs://nn/x")
    assert not storage.is_uri("relative/dir") and storage.is_uri("gs://b/x")


def test_blobs_on_s3_are_written_once_verified_and_rewritten_when_corrupt(s3_store):
    value = {"w": "s" * LARGE_VALUE_BYTES}
    stored = store_value(value, s3_store)
    fs, folder = storage.resolve(s3_store)
    (info,) = fs.get_file_info(pafs.FileSelector(folder))
    blobs.forget_cached()
    assert load_value(stored, s3_store) == value
    with fs.open_output_stream(info.path) as out:
        out.write(b"truncated")
    blobs.forget_cached()
    with pytest.raises(StateSerializationError, match="checksum"):
        load_value(stored, s3_store)
    assert store_value(value, s3_store) == stored  # the corrupt object is replaced
    blobs.forget_cached()
    assert load_value(stored, s3_store) == value


class LoadModel(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODEL).get("current")
        yield value.x, None if model is None else len(model["weights"])

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODEL).put("current", {"weights": "w" * value.size})


@pytest.mark.spark
def test_spark_workers_store_large_broadcast_state_on_s3(spark, s3_store):
    size = LARGE_VALUE_BYTES + 5
    events = spark.createDataFrame([(i,) for i in range(20)], "x long")
    model = spark.createDataFrame([(size,)], "size long")
    result = Stream(events).connect(Stream(model).broadcast(MODEL)).process(
        LoadModel(), "x long, n long", parallelism=2, blob_store=s3_store,
        hold_until_ready=[MODEL])
    rows = result.main.collect()
    assert sorted(r.x for r in rows) == list(range(20)) and {r.n for r in rows} == {size}
    fs, folder = storage.resolve(s3_store)
    assert len(fs.get_file_info(pafs.FileSelector(folder))) == 1


class Versioned(BroadcastProcessFunction):
    """A large model in broadcast state: its blob lives in the store under the checkpoint."""

    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODEL).get("current")
        yield value.x, None if model is None else model["version"]

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODEL).put(
            "current", {"version": value.version, "weights": "v" * (LARGE_VALUE_BYTES + 1)})


@pytest.mark.spark
def test_a_moved_blob_store_serves_a_restart(spark, tmp_path, json_lines):
    """Spark's transformWithState checkpoint records its state schema files by absolute path
    (PySpark 4.3), so Spark itself cannot move a checkpoint folder; the blob store can move:
    its references are relative. Workers cache values by (store, digest), so the restart reads
    the moved files."""
    from sparkcast.spark import read_output

    events, models = tmp_path / "events", tmp_path / "models"
    json_lines(models, "m0.json", [{"version": 7}])
    json_lines(events, "e0.json", [{"x": i} for i in range(3)])

    def run(store):
        main = spark.readStream.schema("x long").json(str(events))
        model = spark.readStream.schema("version long").json(str(models))
        query = (Stream(main).connect(Stream(model).broadcast(MODEL))
                 .process(Versioned(), "x long, version long", parallelism=2, blob_store=store)
                 .write_stream(str(tmp_path / "out"), (tmp_path / "checkpoint").as_uri(),
                               trigger={"availableNow": True}))
        query.awaitTermination()

    run((tmp_path / "blobs-a").as_uri())
    assert len(list((tmp_path / "blobs-a").iterdir())) == 1
    (tmp_path / "blobs-a").rename(tmp_path / "blobs-b")
    json_lines(events, "e1.json", [{"x": i} for i in range(3, 6)])
    run((tmp_path / "blobs-b").as_uri())
    rows = read_output(spark, str(tmp_path / "out")).collect()
    assert sorted((r.x, r.version) for r in rows) == [(i, 7) for i in range(6)]
    assert not (tmp_path / "blobs-a").exists()
