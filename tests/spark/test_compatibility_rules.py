"""The comparison behind both restart guards, without Spark: which differences refuse a restart,
what the error says, and what is recorded after a compatible one."""

from __future__ import annotations

import json

import pytest

from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.compatibility import differences, guard_subtask, merged, refuse

OLD = {"layout_version": 1, "path": "operator", "function": "app.Fraud", "keyed": True,
       "key_columns": ["user string"], "parallelism": 4, "subtask_groups": [0, 1, 2, 3],
       "state_buckets": 64, "broadcast_state": {"rules": "map<str, dict>"},
       "keyed_state": {"seen": "value<int>"}, "time_mode": "None", "event_time": None,
       "output_schema": "struct<user:string,n:bigint>",
       "side_outputs": {"review": "struct<user:string>"}}


def test_an_identical_layout_and_a_new_side_output_are_compatible():
    assert differences(OLD, dict(OLD)) == []
    more = {**OLD, "side_outputs": {**OLD["side_outputs"], "alerts": None}}
    assert differences(OLD, more) == []
    fewer = {**OLD, "side_outputs": {}}
    assert differences(OLD, fewer) == []
    assert merged(OLD, fewer)["side_outputs"] == OLD["side_outputs"]  # remembered


def test_each_incompatible_change_is_named_with_both_values_and_the_fix():
    new = {**OLD, "parallelism": 8, "state_buckets": 8,
           "keyed_state": {"seen": "value<int> with TTL"},
           "side_outputs": {"review": "struct<user:bigint>"}}
    lines = differences(OLD, new)
    assert [line.split(":")[0] for line in lines] == ["parallelism", "state_buckets",
                                                      "keyed_state", "side_outputs"]
    assert lines[0] == ("parallelism: the checkpoint has 4, this pipeline 8 (keys are assigned "
                        "to subtasks by hash mod parallelism: start a new checkpoint, or keep "
                        "parallelism=4)")
    error = refuse(lines, "checkpoint ckpt/")
    assert isinstance(error, IncompatibleCheckpointError) and isinstance(error, ValueError)
    assert "nothing was run" in str(error) and "docs/operations.md" in str(error)


class _Backend:
    """The two calls of a state backend the worker guard makes."""

    def __init__(self, stored=None):
        self.blobs = {} if stored is None else {"layout": stored}

    def load(self, name, default):
        return self.blobs.get(name, default)

    def store(self, name, value):
        self.blobs[name] = value


def test_the_worker_guard_records_then_refuses():
    backend = _Backend()
    guard_subtask(backend, "p1", 0, json.dumps(OLD, sort_keys=True))
    assert json.loads(backend.blobs["layout"]) == OLD
    changed = json.dumps({**OLD, "state_buckets": 8}, sort_keys=True)
    with pytest.raises(IncompatibleCheckpointError,
                       match="state_buckets: the checkpoint has 64, this pipeline 8") as refused:
        guard_subtask(backend, "p2", 0, changed)
    assert "the state of subtask 0" in str(refused.value)
    assert json.loads(backend.blobs["layout"]) == OLD  # nothing recorded
