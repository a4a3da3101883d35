"""Restarts that the checkpoint cannot serve are refused before any batch runs; safe ones pass.

One first run (module fixture) is shared: each refused restart only builds the plan and calls
``write_stream``, which raises on the driver, so it costs no micro-batch. The output written by
the first run must read back unchanged after every refusal.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark import Stream, read_output
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

LIMITS = MapStateDescriptor("limits", str, int)
OUTPUT = "k string, id long, n long"
BIG = OutputTag("big", "k string, id long")
SEVENTHS = OutputTag("sevenths", "id long")
EVENTS = "id long, k string"


def make_counter(step: int, extra: OutputTag | None = None) -> type:
    """The same class (same qualified name) with different code: a code edit between runs."""

    class Counter(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(LIMITS).put("limit", value["limit"])

        def process_element(self, value, ctx):
            n = (self.count.value() or 0) + step
            self.count.update(n)
            if value["id"] > ctx.get_broadcast_state(LIMITS).get("limit"):
                yield BIG, (value["k"], value["id"])
            if extra is not None and value["id"] % 7 == 0:
                yield extra, (value["id"],)
            yield value["k"], value["id"], n

    return Counter


class OtherCounter(make_counter(1)):  # another class: not a code edit
    pass


def _events(index):
    return [{"id": index * 100 + i, "k": f"key{i % 7}"} for i in range(14)]


def _result(spark, base, function=None, output=OUTPUT, **options):
    events = read_stream(spark, EVENTS, base / "events")
    limits = read_stream(spark, "limit long", base / "limits")
    options = {"parallelism": 4, "state_buckets": 64, "side_outputs": [BIG], **options}
    return (Stream(events).key_by("k").connect(Stream(limits).broadcast(LIMITS))
            .process(function or make_counter(1)(), output, **options))


def _run(result, base):
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    return query


def _main(spark, base):
    return sorted(tuple(r) for r in read_output(spark, str(base / "out")).collect())


@pytest.fixture(scope="module")
def first_run(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("restarts")
    write_batch_file(base / "limits", 0, [{"limit": 1_000}])
    write_batch_file(base / "events", 0, _events(0))
    _run(_result(spark, base), base)
    assert len(_main(spark, base)) == 14
    return base


@pytest.mark.parametrize(("change", "said"), [
    ({"parallelism": 2}, "parallelism: the checkpoint has 4, this pipeline 2 (keys are "
                         "assigned to subtasks by hash mod parallelism: start a new checkpoint, "
                         "or keep parallelism=4)"),
    ({"parallelism": 8}, "parallelism: the checkpoint has 4, this pipeline 8"),
    ({"state_buckets": 8}, "state_buckets: the checkpoint has 64, this pipeline 8"),
    ({"output": "k string, id string, n long"}, "output_schema: the checkpoint has "
                                                '"struct<k:string,id:bigint,n:bigint>", this '
                                                'pipeline "struct<k:string,id:string,n:bigint>"'),
    ({"output": "k string, id long, count long"}, "or keep output_schema="),
    ({"function": OtherCounter()}, "function: the checkpoint has "),
    ({"side_outputs": [OutputTag("big", "k string, id string")]}, "side_outputs: "),
])
def test_an_incompatible_restart_is_refused_and_the_output_is_untouched(spark, first_run, change,
                                                                         said):
    before = _main(spark, first_run)
    write_batch_file(first_run / "events", 9, _events(9))  # new input the refused run must not see
    try:
        result = _result(spark, first_run, **change)
        with pytest.raises(IncompatibleCheckpointError) as refused:
            result.write_stream(str(first_run / "out"), str(first_run / "checkpoint"),
                                trigger={"availableNow": True})
    finally:
        (first_run / "events" / "part-0009.json").unlink()
    assert said in str(refused.value)
    assert "nothing was run" in str(refused.value)
    assert _main(spark, first_run) == before


def test_a_code_edit_and_a_new_side_output_restart_fine(spark, first_run):
    before = _main(spark, first_run)
    write_batch_file(first_run / "events", 1, _events(1))
    _run(_result(spark, first_run, make_counter(10, SEVENTHS)(), side_outputs=[BIG, SEVENTHS]),
         first_run)
    after = _main(spark, first_run)
    assert set(before) <= set(after) and len(after) == len(before) + 14
    new = sorted(r for r in after if r[1] >= 100)
    assert len(new) == 14
    # the counters carried over: each key had 2 events, the edited code adds 10 per event
    assert sorted(n for _, _, n in new) == sorted([12] * 7 + [22] * 7)
    sevenths = sorted(r.id for r in read_output(spark, str(first_run / "out"), SEVENTHS).collect())
    assert sevenths == [105, 112]  # the new side output, typed


def test_the_workers_refuse_a_user_managed_checkpoint(spark, tmp_path):
    """``result.main.writeStream`` with the user's own checkpoint: the subtasks' state holds the
    layout, and the first batch after an incompatible restart fails before it commits."""
    write_batch_file(tmp_path / "limits", 0, [{"limit": 1_000}])
    write_batch_file(tmp_path / "events", 0, _events(0))
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(**options):
        main = _result(spark, tmp_path, **options).main
        return (main.writeStream.format("parquet").option("path", out)
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())

    query = start()
    query.awaitTermination()
    rows = spark.read.parquet(out).count()
    assert rows == 14
    write_batch_file(tmp_path / "events", 1, _events(1))
    query = start(state_buckets=8)
    with pytest.raises(StreamingQueryException, match="state_buckets: the checkpoint has 64"):
        query.awaitTermination()
    assert spark.read.parquet(out).count() == rows
