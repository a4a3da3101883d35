"""The comparison behind both restart guards, without Spark: which differences refuse a restart,
what the error says, and what is recorded after a compatible one."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

import pytest

from sparkcast import MapStateDescriptor, ValueStateDescriptor
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.state.compatibility import (
    descriptor_record,
    differences,
    guard_subtask,
    layout_to_keep,
    refuse,
)

SEEN = {"kind": "value", "value": {"kind": "scalar", "name": "int"}, "ttl": False}
OLD = {"layout_version": 1, "path": "operator", "function": "app.Fraud", "keyed": True,
       "key_columns": ["user string"], "parallelism": 4, "subtask_groups": [0, 1, 2, 3],
       "state_buckets": 64,
       "broadcast_state": {"rules": {"kind": "map", "key": {"kind": "scalar", "name": "str"},
                                     "value": {"kind": "map"}, "ttl": False}},
       "keyed_state": {"seen": SEEN}, "time_mode": "None", "event_time": None,
       "output_schema": "struct<user:string,n:bigint>",
       "side_outputs": {"review": "struct<user:string>"}}


def test_an_identical_layout_and_a_new_side_output_are_compatible():
    assert differences(OLD, dict(OLD)) == []
    more = {**OLD, "side_outputs": {**OLD["side_outputs"], "alerts": None}}
    assert differences(OLD, more) == []
    fewer = {**OLD, "side_outputs": {}}
    assert differences(OLD, fewer) == []
    assert layout_to_keep(OLD, fewer)["side_outputs"] == OLD["side_outputs"]  # remembered


def test_other_grouping_keys_are_refused_only_where_state_is_keyed_by_them():
    """The operator's state is keyed by the grouping keys; the micro-batch engine's by subtask
    index (its groups only place rows in shuffle partitions)."""
    moved = {**OLD, "subtask_groups": [0, 1, 2, 14]}
    assert [line.split(":")[0] for line in differences(OLD, moved)] == ["subtask_groups"]
    batch = {**OLD, "path": "micro_batch"}
    assert differences(batch, {**moved, "path": "micro_batch"}) == []
    assert differences({**batch, "path": "partitioned"}, {**moved, "path": "micro_batch"}) == []


def test_each_incompatible_change_is_named_with_both_values_and_the_fix():
    new = {**OLD, "parallelism": 8, "state_buckets": 8,
           "keyed_state": {"seen": {**SEEN, "ttl": True}},
           "side_outputs": {"review": "struct<user:bigint>"}}
    lines = differences(OLD, new)
    assert [line.split(":")[0] for line in lines] == ["parallelism", "state_buckets",
                                                      "keyed_state", "side_outputs"]
    assert lines[0] == ("parallelism: the checkpoint has 4, this pipeline 8 (keys are assigned "
                        "to subtasks by hash mod parallelism: start a new checkpoint, or keep "
                        "parallelism=4)")
    assert lines[2].startswith('keyed_state: the checkpoint has {"seen": "value<int>"}, this '
                               'pipeline {"seen": "value<int> with TTL"}')
    error = refuse(lines, "checkpoint ckpt/")
    assert isinstance(error, IncompatibleCheckpointError) and isinstance(error, ValueError)
    assert "nothing was run" in str(error) and "docs/operations.md" in str(error)
    # the point and the fix lead, in one short line; the details follow, a line each
    lead, *details = str(error).splitlines()
    assert len(lead) < 200 and "new checkpoint" in lead, lead
    assert "parallelism, state_buckets, keyed_state, side_outputs differ" in lead
    assert details[:4] == [f"  {line}" for line in lines]


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


class Action(str, enum.Enum):  # noqa: UP042 - the form ported code uses
    ALLOW = "allow"
    BLOCK = "block"


@dataclass
class Rule:
    limit: float
    action: Action


def _rule_type(*fields):
    """A class named Rule with ``fields`` ``(name, type[, default])``: one rule class per run."""
    namespace = {"__annotations__": {f[0]: f[1] for f in fields}}
    namespace.update({f[0]: f[2] for f in fields if len(f) == 3})
    return dataclass(type("Rule", (), namespace))


def _with_rules(value_type) -> dict:
    layout = dict(OLD)
    layout["broadcast_state"] = {
        "rules": descriptor_record(MapStateDescriptor("rules", str, value_type))}
    layout["keyed_state"] = {"last": descriptor_record(ValueStateDescriptor("last", value_type))}
    return layout


def test_a_declared_type_may_evolve_as_old_state_reads_and_nothing_else():
    old = _with_rules(Rule)
    assert differences(old, _with_rules(_rule_type(("limit", float), ("action", Action),
                                                   ("note", str, "")))) == []  # added, default
    assert differences(old, _with_rules(_rule_type(("limit", float)))) == []  # removed
    no_default = differences(old, _with_rules(_rule_type(("limit", float), ("action", Action),
                                                        ("note", str))))
    assert no_default == [
        f"{item}: descriptor {name!r}: the value: new field Rule.note has no default; give it "
        "one so old state can be read (state written under the old type must read as the new "
        "one: a type may gain fields that have defaults, lose fields and gain enum members; "
        "give the new field a default, keep the old type, or start a new checkpoint)"
        for item, name in (("broadcast_state", "rules"), ("keyed_state", "last"))]
    retyped = differences(old, _with_rules(_rule_type(("limit", str), ("action", Action))))
    assert [line.split(" (")[0] for line in retyped] == [
        "broadcast_state: descriptor 'rules': Rule.limit: float became str",
        "keyed_state: descriptor 'last': Rule.limit: float became str"]
    renamed = differences(old, _with_rules(Action))
    assert "the value: Rule became Action" in renamed[0]
    # a descriptor added or removed is named as before, its types shown as labels
    more = {**old, "keyed_state": {**old["keyed_state"],
                                   "n": descriptor_record(ValueStateDescriptor("n", int))}}
    (line,) = differences(old, more)
    assert line.startswith('keyed_state: the checkpoint has {"last": "value<Rule>"}, this '
                           'pipeline {"last": "value<Rule>", "n": "value<int>"}')


def test_a_refused_layout_version_names_the_release_that_wrote_the_checkpoint():
    new = {**OLD, "layout_version": 3, "sparkcast_version": "0.9.0"}
    (line,) = differences({**OLD, "sparkcast_version": "0.3.0"}, new)
    assert line.startswith("layout_version: the checkpoint has 1, this pipeline 3 (this "
                           "checkpoint was written by sparkcast 0.3.0, under another layout")
    assert "run sparkcast 0.3.0" in line and "'Upgrades'" in line
    (unrecorded,) = differences(OLD, new)  # 0.2.0 recorded no version
    assert "a sparkcast release before 0.3.0" in unrecorded


def test_the_writing_release_is_recorded_but_never_refuses():
    import sparkcast

    older = {**OLD, "sparkcast_version": "0.3.0"}
    newer = {**OLD, "sparkcast_version": sparkcast.__version__ + ".post1"}
    assert differences(older, newer) == [] and differences(OLD, newer) == []
    assert layout_to_keep(older, newer)["sparkcast_version"] == newer["sparkcast_version"]


def _plan():
    """The fields of a plan that ``layout_of`` reads."""
    from types import SimpleNamespace

    return SimpleNamespace(engine="operator", function=object(), keyed=False, main_fields=[],
                           key_positions=[], key_types=[], parallelism=1,
                           subtask_of_group={0: 0}, state_buckets=1, broadcast_descriptors=[],
                           keyed_descriptors=[], time_mode="None", event_time=None,
                           output_schema=SimpleNamespace(simpleString=lambda: "struct<>"),
                           side_schemas={})


def test_the_layout_record_names_this_release(tmp_path):
    import sparkcast
    from sparkcast.spark.state.compatibility import check_checkpoint, read_layout

    (tmp_path / "commits").mkdir()
    check_checkpoint(_plan(), str(tmp_path))  # no committed batch yet: recorded
    assert read_layout(str(tmp_path))["sparkcast_version"] == sparkcast.__version__


def test_committed_batches_without_a_layout_record_are_refused(tmp_path):
    """sparkcast 0.1.0 wrote layout 1 and recorded nothing: such a checkpoint is not run."""
    from sparkcast.spark.state.compatibility import check_checkpoint

    (tmp_path / "commits").mkdir()
    (tmp_path / "commits" / "0").write_text("v1\n{}\n")
    with pytest.raises(IncompatibleCheckpointError, match="no layout record .* sparkcast "
                       "0.1.0") as refused:
        check_checkpoint(_plan(), str(tmp_path))
    assert "nothing was run" in str(refused.value)
    assert not (tmp_path / "sparkcast" / "layout.json").exists()
