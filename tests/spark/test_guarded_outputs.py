"""Guarded output folders (``outputs/guarded.py``): a new checkpoint is refused in a folder that
holds another job's committed micro-batches, before anything runs, through the API and the CLI;
and files that no committed micro-batch lists (a kill between publishing a batch's files and
logging them) are gone after the restart, so a plain reader (pyarrow over a ``_output=`` folder)
reads what ``read_output`` reads; a committed batch's files stay, whatever ``compactInterval``
the log was written with, and a restart whose ``compactInterval`` contradicts the log is refused;
a checkpoint that kept only its last commits (``minBatchesToRetain``) starts a new folder's log
that Spark reads.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark import Stream, read_output
from sparkcast.spark.layout import MANIFEST
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.commit_log import COMPACT_INTERVAL, CommitLog
from tests.spark import fault_pipeline
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
LIMITS = MapStateDescriptor("limits", str, int)
EVENTS = "id long, k string"


class Count(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put("limit", value["limit"])

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value["k"], value["id"], n


def _events(index):
    return [{"id": index * 100 + i, "k": f"key{i % 3}"} for i in range(6)]


def _run(spark, base, events, output, checkpoint, schema="k string, id long, n long",
         engine="auto"):
    """The keyed counter; ``engine="auto"`` takes the partitioned path (``foreachBatch`` and
    sparkcast's commit log), ``"operator"`` Spark's file sink."""
    result = (Stream(read_stream(spark, EVENTS, base / events)).key_by("k")
              .connect(Stream(read_stream(spark, "limit long", base / "limits"))
                       .broadcast(LIMITS))
              .process(Count(), output_schema=schema, parallelism=2, engine=engine))
    query = result.write_stream(str(base / output), str(base / checkpoint),
                                trigger={"availableNow": True})
    query.awaitTermination()


def _main_files(out: Path) -> Counter:
    """The main output as a plain reader sees the folder: every Parquet file in it."""
    table = ds.dataset(str(out / "_output=main"), format="parquet").to_table()
    return Counter(zip(*(table.column(c).to_pylist() for c in ("k", "id", "n")), strict=True))


@pytest.mark.parametrize("engine", ["auto", "operator"])
def test_a_new_checkpoint_is_refused_in_another_jobs_output_folder(spark, tmp_path, engine):
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    write_batch_file(tmp_path / "events", 0, _events(0))
    _run(spark, tmp_path, "events", "out", "ck_a", engine=engine)
    first = Counter(tuple(r) for r in read_output(spark, str(tmp_path / "out")).collect())
    assert sum(first.values()) == 6
    manifest = (tmp_path / "out" / MANIFEST).read_text()

    write_batch_file(tmp_path / "other", 0, _events(5))
    for schema in ("k string, id long, n long", "k string, id long, n int"):
        with pytest.raises(IncompatibleCheckpointError) as refused:
            _run(spark, tmp_path, "other", "out", "ck_b", schema, engine=engine)
        message = str(refused.value)
        assert message.startswith(f"the output folder {tmp_path / 'out'} belongs to another job")
        assert str(tmp_path / "ck_a") in message and str(tmp_path / "ck_b") in message
        assert "write to a new folder" in message
        assert "of main output struct<k:string,id:bigint,n:bigint>" in message
    assert not (tmp_path / "ck_b" / "commits").exists()  # nothing was run
    assert (tmp_path / "out" / MANIFEST).read_text() == manifest
    assert Counter(tuple(r) for r in read_output(spark, str(tmp_path / "out")).collect()) == first

    # its own checkpoint goes on writing there; the other job writes to a new folder
    write_batch_file(tmp_path / "events", 1, _events(1))
    _run(spark, tmp_path, "events", "out", "ck_a", engine=engine)
    assert read_output(spark, str(tmp_path / "out")).count() == 12
    _run(spark, tmp_path, "other", "out_b", "ck_b", engine=engine)
    assert read_output(spark, str(tmp_path / "out_b")).count() == 6


def test_an_output_folder_of_an_older_release_refuses_only_a_new_checkpoint(spark, tmp_path):
    """A manifest without its checkpoint (written before owners were recorded): the checkpoint
    with committed batches goes on; a new one is refused."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    write_batch_file(tmp_path / "events", 0, _events(0))
    _run(spark, tmp_path, "events", "out", "ck_a")
    manifest = json.loads((tmp_path / "out" / MANIFEST).read_text())
    del manifest["checkpoint"]
    (tmp_path / "out" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(IncompatibleCheckpointError, match="a checkpoint it does not record"):
        _run(spark, tmp_path, "events", "out", "ck_new")
    write_batch_file(tmp_path / "events", 1, _events(1))
    _run(spark, tmp_path, "events", "out", "ck_a")
    assert read_output(spark, str(tmp_path / "out")).count() == 12
    assert "checkpoint" in json.loads((tmp_path / "out" / MANIFEST).read_text())


def test_a_file_no_committed_batch_lists_is_removed_on_restart(spark, tmp_path):
    """Spark's file sink (the operator path) leaves a killed batch's files in the folder too."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    write_batch_file(tmp_path / "events", 0, _events(0))
    _run(spark, tmp_path, "events", "out", "ck", engine="operator")
    folder = tmp_path / "out" / "_output=main"
    written = next(f for f in folder.iterdir() if f.suffix == ".parquet")
    shutil.copy(written, folder / "part-99999-orphan.c000.snappy.parquet")
    copied = pq.read_metadata(written).num_rows
    assert copied > 0
    assert sum(_main_files(tmp_path / "out").values()) == 6 + copied  # its rows counted twice
    write_batch_file(tmp_path / "events", 1, _events(1))
    _run(spark, tmp_path, "events", "out", "ck", engine="operator")
    assert not (folder / "part-99999-orphan.c000.snappy.parquet").exists()
    spark_rows = Counter(tuple(r) for r in read_output(spark, str(tmp_path / "out")).collect())
    assert sum(spark_rows.values()) == 12
    assert _main_files(tmp_path / "out") == spark_rows


KILL_AFTER_PUBLISHING = """
import os, signal, sys
from pathlib import Path
from sparkcast.spark.state.commit_log import CommitLog

publish = CommitLog._publish

def publish_then_die(self, batch, staging, only):
    entries = publish(self, batch, staging, only)
    if batch == 1:  # the files are in the output folder, the batch's log file is not
        Path(sys.argv[1], "published").write_text(str(len(entries)))
        os.killpg(os.getpgid(0), signal.SIGKILL)
    return entries

CommitLog._publish = publish_then_die
from tests.spark import fault_pipeline
fault_pipeline.run(Path(sys.argv[1]), ["partitioned"])
"""


@pytest.mark.fresh_jvm
def test_a_kill_between_publishing_and_logging_leaves_no_file_a_plain_reader_sees(
        spark, tmp_path):
    base = tmp_path / "partitioned"  # where fault_pipeline.run puts the path's query
    fault_pipeline.write_inputs(base)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    killed = subprocess.run([sys.executable, "-c", KILL_AFTER_PUBLISHING, str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                            start_new_session=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert int((tmp_path / "published").read_text()) > 0
    out = base / "out"
    assert not (out / "_spark_metadata" / "1").exists()
    before = Counter(tuple(r) for r in read_output(spark, str(out)).collect())
    assert sum(_main_files(out).values()) > sum(before.values())  # the orphans are visible

    fault_pipeline.write(spark, base, "partitioned")  # the restart, in this session
    main, _ = fault_pipeline.expected("partitioned")
    written = Counter(tuple(r) for r in read_output(spark, str(out)).collect())
    assert written == main
    table = ds.dataset(str(out / "_output=main"), format="parquet").to_table()
    plain = Counter(zip(*(table.column(c).to_pylist()
                          for c in ("k", "id", "n", "flagged", "version")), strict=True))
    assert plain == main  # nothing twice for a reader that lists the folder


def test_the_cli_refuses_another_jobs_output_folder_before_running(tmp_path, spark):
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    write_batch_file(tmp_path / "events", 0, _events(0))
    _run(spark, tmp_path, "events", "out", "ck")  # another job's folder
    command = [sys.executable, "-m", "sparkcast.cli", "run",
               str(ROOT / "examples" / "enrich_job.py"), "--output", "out", "--checkpoint",
               "ck2", "--available-now", "--no-view"]
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900,
                            check=False)
    assert second.returncode == 2, second.stderr[-3000:]
    assert "error: the output folder out belongs to another job" in second.stderr
    assert f"({tmp_path / 'ck'})" in second.stderr and "checkpoint ck2," in second.stderr
    assert "of main output struct<k:string,id:bigint,n:bigint>" in second.stderr
    assert "waiting for the first micro-batch" not in second.stdout
    assert not (tmp_path / "ck2" / "commits").exists()
    assert read_output(spark, str(tmp_path / "out")).count() == 6


def _log(out: Path) -> list[str]:
    return sorted((p.name for p in (out / "_spark_metadata").iterdir()
                   if not p.name.startswith(".")), key=lambda n: int(n.split(".")[0]))


def _with_interval(spark, interval, run):
    spark.conf.set(COMPACT_INTERVAL, str(interval))
    try:
        run()
    finally:
        spark.conf.unset(COMPACT_INTERVAL)


def test_a_restart_after_a_crash_keeps_the_batches_of_a_log_with_another_compact_interval(
        spark, tmp_path, monkeypatch):
    """Written with ``compactInterval`` 2 (batch 1 logged in ``1.compact``), the query failing
    between publishing batch 2's files and logging them (in this session: the SIGKILL of that
    moment is the test above's), restarted with the default (10): the cleanup
    removes batch 2's orphans and keeps batch 1's files, and the log goes on with its own
    interval (``3.compact``), which Spark's reader reads."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    for index in range(2):
        write_batch_file(tmp_path / "events", index, _events(index))
    out = tmp_path / "out"
    _with_interval(spark, 2, lambda: _run(spark, tmp_path, "events", "out", "ck"))
    assert _log(out) == ["0", "1.compact"]

    publish = CommitLog._publish

    def publish_then_fail(self, batch, staging, only):
        entries = publish(self, batch, staging, only)
        if batch == 2:  # the files are in the output folder, the batch's log file is not
            raise RuntimeError("died after publishing batch 2")
        return entries

    monkeypatch.setattr(CommitLog, "_publish", publish_then_fail)
    write_batch_file(tmp_path / "events", 2, _events(2))
    with pytest.raises(Exception, match="died after publishing batch 2"):
        _with_interval(spark, 2, lambda: _run(spark, tmp_path, "events", "out", "ck"))
    monkeypatch.undo()
    assert _log(out) == ["0", "1.compact"]
    assert sum(_main_files(out).values()) > 12  # batch 2's orphans are visible

    write_batch_file(tmp_path / "events", 3, _events(3))
    _run(spark, tmp_path, "events", "out", "ck")  # the session's default interval, 10
    assert _log(out) == ["0", "1.compact", "2", "3.compact"]
    spark_rows = Counter(tuple(r) for r in read_output(spark, str(out)).collect())
    assert sum(spark_rows.values()) == 24
    assert {id_ // 100 for _, id_, _ in spark_rows} == {0, 1, 2, 3}
    assert _main_files(out) == spark_rows  # batch 1's files kept, batch 2's not twice


def test_spark_file_sinks_log_with_another_compact_interval_keeps_its_files_on_restart(
        spark, tmp_path):
    """The operator path: Spark's file sink writes the log with ``compactInterval`` 2; the
    restart (default 10) removes an orphan and keeps batch 1's files."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    for index in range(2):
        write_batch_file(tmp_path / "events", index, _events(index))
    out = tmp_path / "out"
    _with_interval(spark, 2, lambda: _run(spark, tmp_path, "events", "out", "ck",
                                          engine="operator"))
    assert _log(out) == ["0", "1.compact"]
    folder = out / "_output=main"
    written = next(f for f in folder.iterdir() if f.suffix == ".parquet")
    shutil.copy(written, folder / "part-99999-orphan.c000.snappy.parquet")
    for index in (2, 3):
        write_batch_file(tmp_path / "events", index, _events(index))
    _run(spark, tmp_path, "events", "out", "ck", engine="operator")
    assert not (folder / "part-99999-orphan.c000.snappy.parquet").exists()
    assert _log(out) == ["0", "1.compact", "2", "3.compact"]
    spark_rows = Counter(tuple(r) for r in read_output(spark, str(out)).collect())
    assert sum(spark_rows.values()) == 24
    assert _main_files(out) == spark_rows


def test_a_restart_whose_compact_interval_contradicts_the_log_is_refused(spark, tmp_path):
    """Batches 0 and 1 logged with the default interval (no ``.compact`` file yet); with 2,
    batch 1 would be a ``.compact`` file, which Spark's sink and reader would look for."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    for index in range(2):
        write_batch_file(tmp_path / "events", index, _events(index))
    out = tmp_path / "out"
    _run(spark, tmp_path, "events", "out", "ck")
    assert _log(out) == ["0", "1"]
    write_batch_file(tmp_path / "events", 2, _events(2))
    with pytest.raises(IncompatibleCheckpointError) as refused:
        _with_interval(spark, 2, lambda: _run(spark, tmp_path, "events", "out", "ck"))
    message = str(refused.value)
    assert message.startswith(f"{COMPACT_INTERVAL} is 2 in this session, but the commit log "
                              f"of the output folder {out} was written with another")
    assert "batch 1's log file would be a .compact one" in message
    assert "The log holds 0, 1" in message
    assert _log(out) == ["0", "1"]
    assert checkpoint_files.last_committed(str(tmp_path / "ck")) == 1  # nothing was run
    _run(spark, tmp_path, "events", "out", "ck")  # with the setting it was written with
    assert read_output(spark, str(out)).count() == 18


def test_a_checkpoint_that_kept_only_its_last_commits_starts_a_log_spark_reads(
        spark, tmp_path):
    """``minBatchesToRetain`` 1: the checkpoint's commit log is purged; a new output folder's
    log starts at the last compact batch (0 here), which Spark's reader needs."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1}])
    for index in range(4):
        write_batch_file(tmp_path / "events", index, _events(index))
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", "1")
    try:
        _run(spark, tmp_path, "events", "out", "ck")
    finally:
        spark.conf.unset("spark.sql.streaming.minBatchesToRetain")
    committed = checkpoint_files.committed_batches(str(tmp_path / "ck"))
    assert committed[-1] == 3 and committed[0] > 0  # purged
    write_batch_file(tmp_path / "events", 4, _events(4))
    _run(spark, tmp_path, "events", "new_out", "ck")
    assert _log(tmp_path / "new_out") == ["0", "1", "2", "3", "4"]
    rows = read_output(spark, str(tmp_path / "new_out")).collect()
    assert sorted(r["id"] for r in rows) == [400 + i for i in range(6)]
