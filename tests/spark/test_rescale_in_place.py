"""Rescale in place: Spark's own offline state repartition (PySpark 4.2+,
``spark._streamingCheckpointManager.repartition``) on a sparkcast checkpoint, then a real restart
on the same checkpoint and the same input folders, compared with the harness over every batch.

The program is test_state_tools' ``Tracker`` (value, list and map state, event-time timers, held
elements, broadcast state) at parallelism 4: batches 0-1 on 2 Spark partitions, then
``sparkcast state rescale CKPT --partitions 4``, then batches 2-3 with the session at 4
partitions. Nothing may be lost or duplicated; a change of ``parallelism`` is still refused.
"""

from __future__ import annotations

from collections import Counter

import pytest

from sparkcast.cli import main
from sparkcast.errors import IncompatibleCheckpointError, PipelineError
from sparkcast.spark import read_output, rescale_in_place
from sparkcast.spark.state.compatibility import read_layout
from tests.spark.differential import write_batch_file
from tests.spark.test_state_tools import (
    RULE_BATCHES,
    _events,
    _harness,
    _harness_batch,
    _result,
)

pytestmark = pytest.mark.spark


def _write(base, batches):
    for batch in batches:
        write_batch_file(base / "events0", batch, _events(batch))
        write_batch_file(base / "rules0", batch, RULE_BATCHES.get(batch, []))


def _start(spark, base, parallelism):
    return _result(spark, base, 0, parallelism).write_stream(
        str(base / "out0"), str(base / "ckpt0"), trigger={"availableNow": True})


def _partitions(spark, checkpoint):
    return spark.read.format("state-metadata").load(checkpoint).collect()[0]["numPartitions"]


def test_rescaled_in_place_restarts_on_its_checkpoint_and_input(spark, tmp_path, capsys):
    checkpoint = str(tmp_path / "ckpt0")
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "2")  # whatever an earlier test left
        _write(tmp_path, (0, 1))
        query = _start(spark, tmp_path, 4)
        query.awaitTermination()
        assert query.exception() is None and _partitions(spark, checkpoint) == 2
        groups = read_layout(checkpoint)["subtask_groups"]

        assert main(["state", "rescale", checkpoint, "--partitions", "4"]) == 0
        assert '"partitions": 4' in capsys.readouterr().out
        assert _partitions(spark, checkpoint) == 4
        with pytest.raises(PipelineError, match="repartition"):  # Spark: same count refused
            rescale_in_place(spark, checkpoint, 4)

        _write(tmp_path, (2, 3))  # the input that follows, in the same folders
        spark.conf.set("spark.sql.shuffle.partitions", "4")  # what a user scaling up sets
        with pytest.raises(IncompatibleCheckpointError, match="parallelism"):
            _start(spark, tmp_path, 2)  # a plain parallelism change is still refused
        query = _start(spark, tmp_path, 4)
        query.awaitTermination()
        assert query.exception() is None
        assert read_layout(checkpoint)["subtask_groups"] == groups  # the state's keys kept
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)

    h, high = _harness(), 0
    for batch in range(4):
        high = _harness_batch(h, batch, high)
    expected = Counter(tuple(v) for v in h.output())
    got = Counter(tuple(r) for r in read_output(spark, str(tmp_path / "out0")).collect())
    assert got == expected  # 0 lost, 0 duplicated, counters continuous, each timer once
    ids = sorted(row[1] for row in got.elements() if row[1] >= 0)
    assert ids == sorted(e["id"] for b in range(4) for e in _events(b))
