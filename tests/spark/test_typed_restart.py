"""Typed state across restarts on Spark: a dataclass (holding an enum and a NamedTuple) in
broadcast state and a dataclass in keyed state survive a restart whose classes evolved the
compatible way (a field added with a default, a field removed) and read back frozen on the main
side; an incompatible change is refused before anything runs, with the reason. One first run,
one compatible restart, refusals that cost no micro-batch."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.errors import IncompatibleCheckpointError, ReadOnlyStateError
from sparkcast.spark import Stream, read_output
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

OUTPUT = "k string, id long, n long, action string, low long, frozen boolean, note string"


class Action(str, enum.Enum):  # noqa: UP042 - the form ported code uses
    ALLOW = "allow"
    BLOCK = "block"


class Window(NamedTuple):
    low: int
    high: int


def rule_v1() -> type:
    @dataclass(frozen=True)
    class Rule:
        limit: int
        action: Action
        window: Window

    return Rule


def rule_v2() -> type:
    """Gained ``note`` with a default: old state reads with the default."""

    @dataclass(frozen=True)
    class Rule:
        limit: int
        action: Action
        window: Window
        note: str = "none"

    return Rule


def rule_retyped() -> type:
    @dataclass(frozen=True)
    class Rule:
        limit: str  # was int: old state cannot read as this
        action: Action
        window: Window

    return Rule


def seen_v1() -> type:
    @dataclass
    class Seen:
        count: int
        last: int

    return Seen


def seen_v2() -> type:
    """Lost ``last``: ignored in old state."""

    @dataclass
    class Seen:
        count: int

    return Seen


def make_function(rule: type, seen: type) -> KeyedBroadcastProcessFunction:
    """The same class (same qualified name) over each run's types."""
    rules = MapStateDescriptor("rules", str, rule)
    seen_state = ValueStateDescriptor("seen", seen)

    class TypedRules(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.seen = runtime_context.get_state(seen_state)

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(rules).put(value["name"], rule(
                value["limit"], Action(value["action"]), Window(value["low"], value["high"])))

        def process_element(self, value, ctx):
            before = self.seen.value()
            count = (before.count if before is not None else 0) + 1
            fields = {"count": count, "last": value["id"]}
            self.seen.update(seen(**{k: v for k, v in fields.items()
                                     if k in seen.__dataclass_fields__}))
            found = ctx.get_broadcast_state(rules).get("r")
            try:
                found.limit = 0
                frozen = False
            except ReadOnlyStateError:
                frozen = True
            assert isinstance(found.action, Action) and isinstance(found.window, Window)
            yield (value["k"], value["id"], count, found.action.value, found.window.low, frozen,
                   getattr(found, "note", "-"))

    return TypedRules()


def _result(spark, base, rule, seen):
    events = read_stream(spark, "id long, k string", base / "events")
    rules = read_stream(spark, "name string, limit long, action string, low long, high long",
                        base / "rules")
    return (Stream(events).key_by("k").connect(Stream(rules).broadcast(
        MapStateDescriptor("rules", str, rule))).process(
        make_function(rule, seen), OUTPUT, parallelism=2, state_buckets=4))


def _run(result, base):
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None


def _rows(spark, base):
    return sorted(tuple(r) for r in read_output(spark, str(base / "out")).collect())


def test_typed_state_evolves_across_a_restart_and_an_incompatible_change_is_refused(spark,
                                                                                    tmp_path):
    write_batch_file(tmp_path / "rules", 0, [{"name": "r", "limit": 5, "action": "block",
                                              "low": 1, "high": 9}])
    write_batch_file(tmp_path / "events", 0, [{"id": i, "k": f"k{i % 2}"} for i in range(4)])
    _run(_result(spark, tmp_path, rule_v1(), seen_v1()), tmp_path)
    first = _rows(spark, tmp_path)
    # count per key: each key's rows run in the file's order
    assert sorted((k, n) for k, _, n, *_ in first) == [("k0", 1), ("k0", 2), ("k1", 1), ("k1", 2)]
    assert {row[3:] for row in first} == {("block", 1, True, "-")}

    # the compatible evolution: the old rule reads with the new field's default, counts go on
    write_batch_file(tmp_path / "events", 1, [{"id": 10 + i, "k": f"k{i % 2}"} for i in range(2)])
    _run(_result(spark, tmp_path, rule_v2(), seen_v2()), tmp_path)
    assert sorted(set(_rows(spark, tmp_path)) - set(first)) == [
        ("k0", 10, 3, "block", 1, True, "none"), ("k1", 11, 3, "block", 1, True, "none")]

    # anything else is refused before a batch runs, naming the descriptor and the field
    before = _rows(spark, tmp_path)
    write_batch_file(tmp_path / "events", 2, [{"id": 20, "k": "k0"}])
    for rule, said in ((rule_retyped(), "broadcast_state: descriptor 'rules': Rule.limit: int "
                                        "became str"),
                       (rule_v2(), "keyed_state: descriptor 'seen': the value: new field "
                                   "Seen.last has no default")):
        with pytest.raises(IncompatibleCheckpointError) as refused:
            _result(spark, tmp_path, rule, seen_v1()).write_stream(
                str(tmp_path / "out"), str(tmp_path / "checkpoint"),
                trigger={"availableNow": True})
        assert said in str(refused.value) and "nothing was run" in str(refused.value)
    assert _rows(spark, tmp_path) == before
