"""Outputs written by the Python tasks (``execution/task_writer.py``, ``outputs/task_files.py``).

The same tagged frame is written once by Spark's writer (what the streamed path did before) and
once by the tasks with pyarrow, each committed by the commit log: Spark's reader must see the
same columns, types and values in both (NaN, infinities, -0.0, dates and timestamps before the
Gregorian switch, nested types, escaped output folders), and the counts gathered by the tasks
must equal the observation over the frame. Files no writer reported are never published; the
streamed path's ``write_stream`` writes through the tasks, and through Spark for another format.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import Observation

from sparkcast import OutputTag
from sparkcast.errors import SinkError
from sparkcast.spark import Stream, read_output
from sparkcast.spark.execution.task_writer import SPARK_SCHEMA_KEY
from sparkcast.spark.observe.observation import observed, observed_row
from sparkcast.spark.outputs.files import partitioned
from sparkcast.spark.outputs.task_files import file_layout, write_in_tasks
from sparkcast.spark.state.commit_log import CommitLog
from tests.spark.differential import read_stream, write_batch_file
from tests.spark.kinds import kind_of
from tests.spark.test_stateless import FACTORS, MAIN, OUTPUT, Scale

pytestmark = pytest.mark.spark

FIELDS = ("b tinyint, s smallint, i int, l long, f float, d double, dec decimal(20,4), "
          "small decimal(9,2), flag boolean, name string, raw binary, day date, at timestamp, "
          "local timestamp_ntz, tags array<string>, attrs map<string,int>, "
          "point struct<x:double,ys:array<double>>, "
          "nested array<struct<k:string,v:map<string,double>>>")
TAGGED = f"_tag string, _ts long, _payload string, {FIELDS}"
SIDE = OutputTag("late/events: #1 {x}=%", "id int, why string")
NONE = (None,) * 18


def _main_row(i):
    return (None, 1_700_000_000_000 + i, None, i % 128 - 64, i * 100, i, i * 10**10,
            [1.5, float("nan"), float("inf"), float("-inf"), -0.0, None][i % 6],
            [2.25, float("nan"), float("-inf"), float("inf"), -0.0, None][i % 6],
            Decimal("12345678901234.5678") if i % 2 else None, Decimal("-1234567.89"),
            bool(i % 2), f"név-{i} ✓", bytes([i % 256, 0, 255]),
            [dt.date(1500, 3, 1), dt.date(2024, 2, 29), dt.date(1970, 1, 1)][i % 3],
            [dt.datetime(1800, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC),
             dt.datetime(2024, 6, 1, 23, 59, 59, 999999, tzinfo=dt.UTC), None][i % 3],
            dt.datetime(1600, 5, 6, 7, 8, 9, 1) if i % 2 else dt.datetime(2030, 1, 1),
            ["a", None, "ü"] if i % 2 else [], {"k": i, "z": None},
            (float("nan"), [1.0, -0.0]) if i % 2 else None,
            [("x", {"p": float("inf")}), ("y", {})])


def _letter(callback, error):
    return json.dumps({"callback": callback, "error": error, "key": None, "value": "v",
                       "timestamp": None, "subtask": 0})


def _report(events, latency, outputs, counters):
    return json.dumps({"events_main": events, "events_broadcast": 0, "broadcast_applied": 1,
                       "held": 0, "timers_fired": 0, "callback_ms": 1.5,
                       "effect_latency_ms": latency, "outputs": outputs,
                       "user": {"counters": counters}})


def _tagged(spark):
    rows = [_main_row(i) for i in range(40)]
    rows += [(SIDE.tag_id, 7, json.dumps({"id": i, "why": "late"}), *NONE) for i in range(5)]
    rows += [("dead_letters", None, _letter("process_element", "boom"), *NONE),
             ("dead_letters", None, _letter("output", "a string for an int"), *NONE),
             ("dead_letters", None, _letter("process_element", "another"), *NONE)]
    rows += [("_metrics", None, _report(20, 3.0, {"main": 20}, {"seen": 4}), *NONE),
             ("_metrics", None, _report(20, None, {"main": 20, SIDE.tag_id: 5}, {}), *NONE)]
    return spark.createDataFrame(rows, TAGGED).repartition(2)


def _canonical(rows):
    return sorted(repr(r.asDict(recursive=True)) for r in rows)


def test_spark_reads_the_tasks_files_as_it_reads_its_own_writers(spark, tmp_path):
    frame = _tagged(spark).cache()
    by_spark, by_tasks = str(tmp_path / "spark"), str(tmp_path / "tasks")
    CommitLog(by_spark).write(0, partitioned(frame), "parquet")
    log = CommitLog(by_tasks)
    layout = file_layout(spark, frame.schema, "parquet")
    assert layout is not None
    written = write_in_tasks([(frame, None)], [], log.staging(0), layout)
    log.commit(0, log.staging(0), written.files)

    theirs, ours = spark.read.parquet(by_spark), spark.read.parquet(by_tasks)
    assert ours.schema == theirs.schema
    assert _canonical(ours.collect()) == _canonical(theirs.collect())
    assert sorted(os.listdir(by_tasks)) == sorted(os.listdir(by_spark))  # escaped folders too
    main = read_output(spark, by_tasks).collect()
    assert len(main) == 40 and any(math.isnan(r["d"]) for r in main if r["d"] is not None)
    assert sorted(r["id"] for r in read_output(spark, by_tasks, SIDE).collect()) == [0, 1, 2, 3, 4]
    files = [p for p in Path(by_tasks).rglob("*.parquet")]
    assert {p.parent.name for p in files} == {"_output=main", "_output=dead_letters",
                                              "_output=_metrics", "_output=late%2Fevents%3A "
                                              "%231 %7Bx}%3D%25"}
    assert all(SPARK_SCHEMA_KEY in pq.read_metadata(p).metadata for p in files)
    frame.unpersist()


def test_the_tasks_counts_are_the_observations(spark, tmp_path):
    frame = _tagged(spark)
    counts = Observation("task-writer-test")
    observed(frame, counts, spark).write.format("noop").mode("overwrite").save()
    expected = observed_row(counts)
    log = CommitLog(str(tmp_path / "out"))
    layout = file_layout(spark, frame.schema, "parquet")
    assert layout is not None
    written = write_in_tasks([(frame, None)], [], log.staging(0), layout)
    row = written.observed_row()
    assert sorted(row.pop("subtask_reports")) == sorted(expected.pop("subtask_reports"))
    assert row == expected
    assert row["dead_letters_process_element"] == 2 and row["side_output_rows"] == 5
    assert row["first_dead_letter"] == "output: a string for an int"
    assert row["user_counters"] == {"seen": 4} and row["effect_latency_ms"] == 3.0


def test_only_the_files_writers_reported_are_committed(spark, tmp_path):
    frame = _tagged(spark)
    log = CommitLog(str(tmp_path / "out"))
    staging = log.staging(0)
    layout = file_layout(spark, frame.schema, "parquet")
    assert layout is not None
    written = write_in_tasks([(frame, None)], [], staging, layout)
    stray = Path(staging) / "_output=main" / "part-00009-from-a-failed-attempt.parquet"
    stray.write_bytes(b"half a file")
    log.commit(0, staging, written.files)
    assert spark.read.parquet(str(tmp_path / "out")).count() == frame.count()
    assert not list((tmp_path / "out").rglob("*failed-attempt*"))
    logged = (tmp_path / "out" / "_spark_metadata" / "0").read_text()
    assert len(logged.splitlines()) == 1 + len(written.files)

    again = write_in_tasks([(frame, None)], [], log.staging(1), layout)
    os.remove(Path(log.staging(1)) / next(iter(again.files)))
    with pytest.raises(SinkError, match="missing"):
        log.commit(1, log.staging(1), again.files)


def test_types_pyarrow_cannot_write_as_spark_would_keep_sparks_writer(spark):
    interval = spark.createDataFrame([], "_tag string, _ts long, _payload string, "
                                         "gap interval day to second").schema
    plain = spark.createDataFrame([], "_tag string, _ts long, _payload string, n int").schema
    assert file_layout(spark, interval, "parquet") is None
    assert file_layout(spark, plain, "json") is None
    assert file_layout(spark, plain, "parquet") is not None


@pytest.mark.parametrize("format", ["parquet", "json"])
def test_write_stream_on_the_streamed_path_writes_from_the_tasks_for_parquet(
        spark, tmp_path, format):
    for index, (events, factors) in enumerate([
            ([{"id": 1, "user": "u", "amount": 2.0}, {"id": 2, "user": "v", "amount": 3.0}],
             [{"name": "u", "factor": 10.0}]),
            ([{"id": 3, "user": "u", "amount": float("nan")}], [{"name": "v", "factor": 2.0}])]):
        write_batch_file(tmp_path / "events", index, events)
        write_batch_file(tmp_path / "factors", index, factors)
    result = Stream(read_stream(spark, MAIN, tmp_path / "events")).connect(
        Stream(read_stream(spark, "name string, factor double", tmp_path / "factors"))
        .broadcast(FACTORS)).process(Scale(), OUTPUT, parallelism=2)
    assert kind_of(result) == "streamed"
    out = tmp_path / "out"
    query = result.write_stream(str(out), str(tmp_path / "checkpoint"), format=format,
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    rows = read_output(spark, str(out), format=format).collect()
    assert sorted(r["id"] for r in rows) == [1, 2, 3]
    data = [p for p in out.rglob("*") if p.is_file() and "=" in p.parent.name]
    assert data and all(p.name.split("-")[0].isdigit() for p in data)  # committed as batch N
    if format == "parquet":
        assert all(pq.read_metadata(p).created_by.startswith("parquet-cpp-arrow") for p in data)
    else:
        assert all(p.name.endswith(".json") for p in data)
