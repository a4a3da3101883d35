"""The storage layer and the blob store by URI: local paths, file://, and S3 (a moto server)."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.errors import StateSerializationError
from sparkcast.spark import Stream, blobs, storage
from sparkcast.spark.blobs import LARGE_VALUE_BYTES, load_value, store_value

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
    blobs._CACHE.clear()
    assert load_value(stored, s3_store) == value
    with fs.open_output_stream(info.path) as out:
        out.write(b"truncated")
    blobs._CACHE.clear()
    with pytest.raises(StateSerializationError, match="checksum"):
        load_value(stored, s3_store)
    blobs._VERIFIED.clear()
    assert store_value(value, s3_store) == stored  # the corrupt object is replaced
    blobs._CACHE.clear()
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
