"""The commit log's own ``compactInterval`` (``state/commit_log.py``), on logs in Spark's format
written here by hand: the interval found as Spark's ``CompactibleFileStreamLog`` finds it, files
read by the names they have, a log the session's setting contradicts refused, and a log started
for a checkpoint whose early commits are gone. The restarts through Spark are in
``test_guarded_outputs.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.state.commit_log import COMPACT_INTERVAL, CommitLog, derive_interval


def _write_log(out: Path, names: list[str]) -> None:
    """Log files named ``names``, each listing one file of its batch (a ``.compact`` file
    every file of the batches up to it)."""
    log = out / "_spark_metadata"
    log.mkdir(parents=True)
    for name in names:
        batch = int(name.split(".")[0])
        batches = range(batch + 1) if name.endswith(".compact") else [batch]
        lines = [json.dumps({"path": f"file://{out}/_output=main/{b}-part-0.parquet",
                             "size": 1, "isDir": False, "modificationTime": 0,
                             "blockReplication": 1, "blockSize": 1, "action": "add"})
                 for b in batches]
        (log / name).write_text("\n".join(["v1", *lines]))


@pytest.mark.parametrize(("default", "last_compact", "interval"), [
    (10, 4, 5),   # one compact file before the default's first: its batch count
    (5, 11, 6),   # Spark's own example: the smallest divisor of 12 not below 5
    (3, 9, 5),
    (5, 9, 10),   # no divisor of 10 between 5 and 5: 10
    (4, 6, 7),    # 7 is prime
])
def test_the_interval_of_a_log_with_one_compact_file_is_derived_as_spark_does(
        default, last_compact, interval):
    assert derive_interval(default, last_compact) == interval


def test_a_log_keeps_its_own_interval_whatever_the_session_says(tmp_path):
    _write_log(tmp_path, ["0", "1", "2", "3", "4.compact", "5"])
    for session in (2, 5, 10, 50):
        log = CommitLog(str(tmp_path), session)
        assert log.compact_interval == 5
        log.check_interval()
    _write_log(tmp_path / "two", ["4.compact", "5", "6", "7", "8", "9.compact", "10"])
    assert CommitLog(str(tmp_path / "two"), 3).compact_interval == 5
    # an older interval before the last two compact files is no contradiction: Spark reads on
    # from the last one
    _write_log(tmp_path / "changed", ["4.compact", "9.compact", "10", "19.compact", "20"])
    changed = CommitLog(str(tmp_path / "changed"), 5)
    assert changed.compact_interval == 10
    changed.check_interval()


def test_the_logged_files_are_read_from_the_last_compact_file_by_their_names(tmp_path):
    _write_log(tmp_path, ["0", "1", "2", "3", "4.compact", "5"])
    assert CommitLog(str(tmp_path)).logged_files() == {
        f"_output=main/{b}-part-0.parquet" for b in range(6)}


def test_a_compact_file_written_with_the_log_interval_holds_every_batch(tmp_path):
    _write_log(tmp_path, ["0", "1", "2", "3", "4.compact", "5", "6", "7", "8"])
    log = CommitLog(str(tmp_path), 10)  # the session's setting; the log's is 5
    log.log_empty(9)
    compact = (tmp_path / "_spark_metadata" / "9.compact").read_text().splitlines()[1:]
    assert sorted(json.loads(line)["path"].rsplit("/", 1)[1] for line in compact) == [
        f"{b}-part-0.parquet" for b in range(9)]
    assert not (tmp_path / "_spark_metadata" / "9").exists()


def test_a_log_the_sessions_interval_contradicts_is_refused(tmp_path):
    _write_log(tmp_path, ["0", "1", "2"])
    CommitLog(str(tmp_path), 10).check_interval()
    with pytest.raises(IncompatibleCheckpointError) as refused:
        CommitLog(str(tmp_path), 2).check_interval()
    message = str(refused.value)
    assert message.startswith(f"{COMPACT_INTERVAL} is 2 in this session")
    assert "batch 1's log file would be a .compact one" in message
    assert "The log holds 0, 1, 2" in message


def test_a_log_started_after_purged_commits_begins_at_the_last_compact_batch(tmp_path):
    log = CommitLog(str(tmp_path), 5)
    assert log.start([6, 7, 8]) == [4, 5, 6, 7, 8]  # Spark's reader reads 4.compact on
    assert CommitLog(str(tmp_path), 5).batches() == [4, 5, 6, 7, 8]
    assert (tmp_path / "_spark_metadata" / "4.compact").exists()
    assert CommitLog(str(tmp_path / "later"), 5).start([14, 15]) == [14, 15]
    assert CommitLog(str(tmp_path / "full"), 5).start([0, 1, 2]) == [0, 1, 2]
