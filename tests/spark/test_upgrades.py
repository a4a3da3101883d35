"""Checkpoints written by sparkcast 0.3 restart as they were written: 0.3 recorded the
micro-batch engine's shapes by name (``stateless``, ``streamed``, ``partitioned``), which read
as ``micro_batch`` (``plan.recorded_engine``); the operator's checkpoints stay on the operator
(tests/spark/test_partitioned.py, ``test_a_checkpoint_of_the_operator_path_restarts_on_it``)."""

from __future__ import annotations

import json

import pytest

from tests.spark.kinds import kind_of
from tests.spark.test_partitioned import _expected, _totals, _write, _written

pytestmark = pytest.mark.spark


def _run(result, base) -> None:
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None


def test_a_checkpoint_0_3_recorded_as_partitioned_restarts_on_the_micro_batch_engine(
        spark, tmp_path):
    _write(tmp_path, range(2))
    _run(_totals(spark, tmp_path), tmp_path)
    record_file = tmp_path / "checkpoint" / "sparkcast" / "layout.json"
    record = json.loads(record_file.read_text())
    assert record["path"] == "micro_batch"
    record["path"] = "partitioned"  # what 0.3 wrote for this job
    record_file.write_text(json.dumps(record))

    _write(tmp_path, range(2, 4))
    again = _totals(spark, tmp_path)
    assert kind_of(again, str(tmp_path / "checkpoint")) == "partitioned"
    _run(again, tmp_path)
    assert _written(spark, tmp_path) == _expected([[i] for i in range(4)])
    assert json.loads(record_file.read_text())["path"] == "micro_batch"
