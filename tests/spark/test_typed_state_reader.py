"""Typed ``read_state``: columns typed by the descriptor (Spark types, dataclasses and NamedTuples
as structs, enums as their values; JSON text where the descriptor declares nothing), on
operator-path checkpoints given by ``file://`` URI and on streamed-path checkpoints (broadcast
snapshots), with ``sparkcast state show`` on both."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from sparkcast.cli import main
from sparkcast.spark import Stream, read_state, state_value
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import read_stream, write_batch_file
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclass
class Rule:
    name: str
    limit: float
    level: Level


class Reading(NamedTuple):
    id: int
    amount: float


RULES = MapStateDescriptor("rules", str, Rule)
LAST = ValueStateDescriptor("last", Reading)
AMOUNTS = ListStateDescriptor("amounts", float)
BY_LEVEL = MapStateDescriptor("by_level", str, int)
ANY = ValueStateDescriptor("any", Types.PICKLED_BYTE_ARRAY())
EVENTS = "id long, k string, amount double"
RULE_ROWS = "name string, limit double, level string"


class Watch(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.last = runtime_context.get_state(LAST)
        self.amounts = runtime_context.get_list_state(AMOUNTS)
        self.by_level = runtime_context.get_map_state(BY_LEVEL)
        self.any = runtime_context.get_state(ANY)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(
            value["name"], Rule(value["name"], value["limit"], Level(value["level"])))

    def process_element(self, value, ctx):
        rule = ctx.get_broadcast_state(RULES).get("r")
        level = rule.level if rule and value["amount"] > rule.limit else Level.LOW
        if (self.last.value() or Reading(-1, 0.0)).id < value["id"]:  # any arrival order
            self.last.update(Reading(value["id"], value["amount"]))
        self.amounts.add(value["amount"])
        self.by_level.put(level.value, (self.by_level.get(level.value) or 0) + 1)
        self.any.update({"seen": len(list(self.amounts.get()))})
        yield value["k"], value["id"]


def _run(spark, base, function, keyed):
    events = Stream(read_stream(spark, EVENTS, base / "events"))
    rules = read_stream(spark, RULE_ROWS, base / "rules")
    if keyed:
        events = events.key_by("k")
    # keyed: an operator checkpoint (Spark's state store, read by its data source)
    result = events.connect(Stream(rules).broadcast(RULES)).process(
        function, "k string, id long", parallelism=2, engine="operator" if keyed else "auto")
    query = result.write_stream(str(base / "out"), str(base / "ckpt"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    assert kind_of(result) == ("operator" if keyed else "streamed")


RULE_BATCH = [{"name": "r", "limit": 5.0, "level": "high"}]
EVENT_BATCH = [{"id": i, "k": "ab"[i % 2], "amount": float(i * 2)} for i in range(6)]


def _inputs(base):
    write_batch_file(base / "rules", 0, RULE_BATCH)
    write_batch_file(base / "events", 0, EVENT_BATCH)


def _harness():
    """The same micro-batch on the harness: the state the checkpoint must hold."""
    h = KeyedBroadcastHarness(Watch(), key_selector=lambda v: v["k"],
                              broadcast_descriptors=[RULES])
    h.open()
    h.process_micro_batch(EVENT_BATCH, RULE_BATCH)
    return h


def test_typed_columns_on_an_operator_checkpoint_given_by_uri(spark, tmp_path, capsys):
    _inputs(tmp_path)
    _run(spark, tmp_path, Watch(), keyed=True)
    uri = (tmp_path / "ckpt").as_uri()
    assert uri.startswith("file://")

    rules = read_state(spark, uri, RULES)
    assert rules.schema.simpleString() == (
        "struct<subtask:int,key:string,value:struct<name:string,limit:double,level:string>,"
        "version:string>")
    assert {(r.subtask, r.key, tuple(r.value)) for r in rules.collect()} == {
        (s, "r", ("r", 5.0, "high")) for s in (0, 1)}

    h = _harness()
    last = read_state(spark, uri, LAST)
    assert last.schema["key"].dataType.simpleString() == "string"  # the key_by column's type
    assert last.schema["value"].dataType.simpleString() == "struct<id:bigint,amount:double>"
    assert {r.key: (r.value.id, r.value.amount) for r in last.collect()} == {
        k: tuple(h.keyed_state(LAST, k)) for k in "ab"}

    amounts = {r.key: r.value for r in read_state(spark, uri, AMOUNTS).collect()}
    assert {k: sorted(v) for k, v in amounts.items()} == {
        k: sorted(h.keyed_state(AMOUNTS, k)) for k in "ab"} == {"a": [0.0, 4.0, 8.0],
                                                              "b": [2.0, 6.0, 10.0]}
    levels = {r.key: r.value for r in read_state(spark, uri, BY_LEVEL).collect()}
    assert levels == {k: h.keyed_state(BY_LEVEL, k) for k in "ab"} == {
        "a": {"low": 2, "high": 1}, "b": {"low": 1, "high": 2}}

    undeclared = read_state(spark, uri, ANY)  # the undeclared form keeps a JSON column
    assert undeclared.schema["value"].dataType.simpleString() == "string"
    assert {r.key: state_value(r.value, ANY) for r in undeclared.collect()} == {
        "a": {"seen": 3}, "b": {"seen": 3}}
    by_name = read_state(spark, uri, "last")  # by name: every column JSON, as before
    assert by_name.schema["value"].dataType.simpleString() == "string"

    assert main(["state", "show", uri, "--key", "a"]) == 0
    assert f"keyed amounts['a'] = {amounts['a']}" in capsys.readouterr().out


class Enrich(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(
            value["name"], Rule(value["name"], value["limit"], Level(value["level"])))

    def process_element(self, value, ctx):
        yield value["k"], value["id"]


def test_streamed_checkpoints_read_their_broadcast_snapshot(spark, tmp_path, capsys):
    _inputs(tmp_path)
    _run(spark, tmp_path, Enrich(), keyed=False)
    rows = read_state(spark, str(tmp_path / "ckpt"), RULES).collect()
    assert [(r.subtask, r.key, tuple(r.value)) for r in sorted(rows)] == [
        (0, "r", ("r", 5.0, "high")), (1, "r", ("r", 5.0, "high"))]
    assert rows[0].version and rows[0].version == rows[1].version
    assert main(["state", "show", (tmp_path / "ckpt").as_uri()]) == 0
    printed = capsys.readouterr().out
    assert "broadcast rules: 1 entries ['r']" in printed and printed.count("subtask ") == 2


def test_spark_types_of_declared_types():
    """tools/state_types.py: what has one Spark type gets it; the rest stays JSON (None)."""
    from typing import Any, Optional

    from sparkcast.spark.tools.state_types import fit, spark_type

    class Size(enum.Enum):
        S = 1
        L = 3

    for optional in (Optional[Reading], Reading | None):  # noqa: UP045 (both spellings)
        assert spark_type(optional).simpleString() == "struct<id:bigint,amount:double>"
    assert spark_type(set[Size]).simpleString() == "array<bigint>"
    assert spark_type(tuple[str, float]).simpleString() == "struct<_1:string,_2:double>"
    assert spark_type(dict[str, list[Rule]]).simpleString() == (
        "map<string,array<struct<name:string,limit:double,level:string>>>")
    for undeclared in (None, Any, dict, Types.PICKLED_BYTE_ARRAY(), int | str):
        assert spark_type(undeclared) is None
    assert fit({Size.L, Size.S}, spark_type(set[Size])) == [1, 3]
    assert fit(Rule("r", 2, Level.HIGH), spark_type(Rule)) == ("r", 2.0, "high")
