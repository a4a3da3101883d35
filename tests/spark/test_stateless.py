"""The shuffle-free path (``stateless.py``): a non-keyed function over a static broadcast side.

It must be chosen exactly when nothing needs state, run without a shuffle or a state store, give
the harness's outputs (per element and ``process_batch``, dead letters and side outputs
included), and stay exactly-once across restarts."""

from __future__ import annotations

import pandas as pd
import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
)
from sparkcast.spark import Stream, read_output
from sparkcast.testing import BroadcastHarness
from tests.spark.differential import read_stream, write_batch_file
from tests.spark.kinds import kind_of

pytestmark = pytest.mark.spark

FACTORS = MapStateDescriptor("factors", str, float)
BIG = OutputTag("big", "id long, scaled double")
MAIN = "id long, user string, amount double, _corrupt_record string"
OUTPUT = "id long, scaled double"


class Scale(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value, ctx):
        if value["amount"] < 0:
            raise ValueError(f"negative amount {value['amount']}")
        factor = ctx.get_broadcast_state(FACTORS).get(value["user"])
        scaled = value["amount"] * (1.0 if factor is None else factor)
        if scaled > 100:
            yield BIG, (value["id"], scaled)
        yield value["id"], scaled


class ScaleBatch(Scale):
    def process_batch(self, batch, ctx):
        factors = pd.Series(dict(ctx.get_broadcast_state(FACTORS).items()), dtype="float64")
        scale = batch["user"].map(factors).fillna(1.0)
        return pd.DataFrame({"id": batch["id"], "scaled": batch["amount"] * scale})


class Announce(Scale):
    def process_broadcast_element(self, value, ctx):
        super().process_broadcast_element(value, ctx)
        yield BIG, (0, value["factor"])  # an output per broadcast row: every subtask emits it


class KeyedScale(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value, ctx):
        yield value["id"], value["amount"]


FACTOR_ROWS = [("u", 10.0), ("v", 0.5)]
BATCHES = [
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(0, 30)],
    [{"id": 30, "user": "u", "amount": -1.0}, '{"id": 31, "user": "u'],
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(32, 60)],
]


def _expected(function):
    harness = BroadcastHarness(function, broadcast_descriptors=[FACTORS], on_error="dead_letter",
                               output_schema=OUTPUT, side_outputs=[BIG])
    harness.open()
    factors = [{"name": name, "factor": factor} for name, factor in FACTOR_ROWS]
    for index, batch in enumerate(BATCHES):
        rows = [r for r in batch if isinstance(r, dict)]
        main = pd.DataFrame(rows) if isinstance(function, ScaleBatch) else rows
        harness.process_micro_batch(main, factors if index == 0 else [])
    return (_tuples(harness.output()), _tuples(harness.side_output(BIG)),
            sorted(d.callback for d in harness.dead_letters()))


def _tuples(values):
    return sorted(tuple(v.values()) if isinstance(v, dict) else tuple(v) for v in values)


def _process(spark, base, function, batches, **options):
    for index in batches:
        write_batch_file(base / "events", index, BATCHES[index])
    factors = spark.createDataFrame(FACTOR_ROWS, "name string, factor double")
    events = Stream(read_stream(spark, MAIN, base / "events"))
    if isinstance(function, KeyedBroadcastProcessFunction):
        events = events.key_by("user")
    return events.connect(Stream(factors).broadcast(FACTORS)).process(
        function, OUTPUT, parallelism=2, side_outputs=[BIG], **options)


def _run(result, base):
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    return query


def _read(spark, base):
    main = sorted(tuple(r) for r in read_output(spark, str(base / "out")).collect())
    big = sorted(tuple(r) for r in read_output(spark, str(base / "out"), BIG).collect())
    letters = read_output(spark, str(base / "out"), "dead_letters").collect()
    return main, big, letters


def _physical_plan(query) -> str:
    return query._jsq.explainInternal(False)


def _logical_plan(df) -> str:
    return df._jdf.queryExecution().analyzed().toString()


@pytest.mark.parametrize("function", [Scale(), ScaleBatch()], ids=["element", "batch"])
def test_static_broadcast_runs_without_shuffle_or_state_and_matches_the_harness(
        spark, tmp_path, function):
    result = _process(spark, tmp_path, function, [0, 1])
    assert kind_of(result) == "stateless"
    plan = _physical_plan(_run(result, tmp_path))
    assert "MapInArrow" in plan
    assert "TransformWithState" not in plan and "Exchange" not in plan and "StateStore" not in plan
    # a restart with a new file: the earlier files are not processed again
    _run(_process(spark, tmp_path, type(function)(), [2]), tmp_path)
    main, big, letters = _read(spark, tmp_path)
    expected_main, expected_big, expected_letters = _expected(type(function)())
    assert main == expected_main
    if not isinstance(function, ScaleBatch):  # process_batch emits no side output
        assert big == expected_big and big
    reasons = sorted(r["callback"] for r in letters)
    assert reasons == sorted(expected_letters + ["input"]), letters  # + the malformed line


@pytest.mark.parametrize("function, options", [
    (KeyedScale(), {}),
    (Scale(), {"hold_until_ready": [FACTORS]}),
    (Announce(), {}),
], ids=["keyed", "hold_until_ready", "broadcast-side-outputs"])
def test_the_operator_path_is_kept_where_state_or_broadcast_outputs_need_it(
        spark, tmp_path, function, options):
    result = _process(spark, tmp_path, function, [0], **options)
    assert kind_of(result) != "stateless"
    assert "TransformWithState" in _logical_plan(result.main)


def test_a_streaming_broadcast_side_is_not_stateless(spark, tmp_path):
    """Its elements must reach every task of their micro-batch: the streamed path
    (test_streamed.py) for write_stream, the operator for result.main."""
    write_batch_file(tmp_path / "factors", 0, [{"name": "u", "factor": 2.0}])
    factors = read_stream(spark, "name string, factor double", tmp_path / "factors")
    write_batch_file(tmp_path / "events", 0, BATCHES[0])
    events = read_stream(spark, MAIN, tmp_path / "events")
    result = Stream(events).connect(Stream(factors).broadcast(FACTORS)).process(Scale(), OUTPUT)
    assert kind_of(result) != "stateless"
    assert kind_of(result) == "streamed"


def test_static_broadcast_timestamps_are_sparks_epoch_millis(spark, tmp_path):
    """A static side's event times are computed by Spark, as the streamed side's are: floored
    to the millisecond before 1970 too (Python's float ``timestamp()`` rounds toward zero)."""
    write_batch_file(tmp_path / "events", 0, [{"id": 1, "user": "u", "amount": 1.0}])
    events = read_stream(spark, MAIN + ", ts timestamp", tmp_path / "events")
    factors = spark.sql(
        "SELECT * FROM VALUES ('u', 2.0D, TIMESTAMP'1969-12-31 23:59:59.9995Z'), "
        "('v', 3.0D, TIMESTAMP'2024-05-17 13:45:12.001999Z') AS t(name, factor, ts)")
    result = Stream(events).connect(Stream(factors).broadcast(FACTORS)).process(
        Scale(), OUTPUT, parallelism=2, event_time="ts")
    assert kind_of(result) == "stateless"
    expected = [r[0] for r in factors.selectExpr("unix_millis(ts)").collect()]
    assert expected == [-1, 1715953512001]
    assert [e.timestamp for e in result.plan.static_broadcast] == expected
