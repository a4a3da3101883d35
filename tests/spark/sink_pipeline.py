"""The pipelines of the sink tests: non-keyed (the streamed path) and keyed (the operator path),
each with a side output and dead letters (a raising element, a malformed line).

``python -m tests.spark.sink_pipeline <base> <kind> <jdbc url> <user>`` runs one with ``jdbc`` sinks
for every output (``availableNow``, micro-batch i = input file i) and exits; the SIGKILL test
kills it between the database's commit and Spark's and restarts it in its own session
(``write_jdbc``). ``expected`` gives the harness's outputs.

The keyed function holds its query at a batch's first event where a SIGKILL test put up the
marker (``in_flight(batch)``, ``holds.Hold``, the first run only); the JDBC run holds after
the database committed batch 1 (``AFTER_DATABASE_1``), before Spark's checkpoint does.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness
from tests.spark.differential import read_stream, write_batch_file
from tests.spark.holds import Hold, await_restarting
from tests.spark.kinds import kind_of

FACTORS = MapStateDescriptor("factors", str, float)
SEEN = ValueStateDescriptor("seen", int)
BIG = OutputTag("big", "id long, scaled double")
MAIN_SCHEMA = "id long, user string, amount double, _corrupt_record string"
FACTOR_SCHEMA = "name string, factor double"
OUTPUT = "id long, scaled double"
KINDS = ("streamed", "operator", "partitioned")
EVENTS: list[list[Any]] = [
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(0, 30)],
    [{"id": 30, "user": "u", "amount": -1.0}, '{"id": 31, "user": "u',
     {"id": 32, "user": "v", "amount": 40.0}],
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(33, 60)],
    [{"id": i, "user": "uvw"[i % 3], "amount": float(i)} for i in range(60, 75)],
]
FACTOR_BATCHES = [
    [{"name": "u", "factor": 10.0}, {"name": "v", "factor": 0.5}],
    [],
    [{"name": "v", "factor": 3.0}, {"name": "w", "factor": 2.0}],
    [{"name": "u", "factor": 1.0}],
]
AFTER_DATABASE_1 = "batch-1-in-the-database"
NO_HOLD = Hold()  #: the harness, the runs no test kills


def batch_of(event_id: int) -> int:
    """The micro-batch (input file) of an event."""
    return next(i for i, rows in enumerate(EVENTS)
                if any(isinstance(r, dict) and r["id"] == event_id for r in rows))


def in_flight(batch: int) -> str:
    """The hold at ``batch``'s first event in the keyed function."""
    return f"batch-{batch}-in-flight"


TABLES = {"main": "scaled", "big": "big", "dead_letters": "letters"}
CREATE = {"main": "id bigint, scaled double precision",
          "big": "id bigint, scaled double precision",
          "dead_letters": "callback text, error text, key text, value text, timestamp bigint, "
                          "subtask int"}


def _scale(value: Any, ctx: Any) -> Any:
    if value["amount"] < 0:
        raise ValueError(f"negative amount {value['amount']}")
    factor = ctx.get_broadcast_state(FACTORS).get(value["user"])
    scaled = value["amount"] * (1.0 if factor is None else factor)
    if scaled > 100:
        yield BIG, (value["id"], scaled)
    yield value["id"], scaled


class Scale(BroadcastProcessFunction):
    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield from _scale(value, ctx)


class KeyedScale(KeyedBroadcastProcessFunction):
    """The same outputs, with keyed state (so the operator path)."""

    def __init__(self, hold: Hold = NO_HOLD) -> None:
        self.hold = hold

    def open(self, runtime_context: Any) -> None:
        self.seen = runtime_context.get_state(SEEN)

    process_broadcast_element = Scale.process_broadcast_element

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.hold.at(in_flight(batch_of(value["id"])))
        self.seen.update((self.seen.value() or 0) + 1)
        yield from _scale(value, ctx)


def write_inputs(base: Path, batches: list[int] | None = None) -> None:
    for index in range(len(EVENTS)) if batches is None else batches:
        write_batch_file(base / "events", index, EVENTS[index])
        write_batch_file(base / "factors", index, FACTOR_BATCHES[index])


def build(spark: Any, base: Path, kind: str, hold: Hold = NO_HOLD) -> Any:
    from sparkcast.spark import Stream

    events = Stream(read_stream(spark, MAIN_SCHEMA, base / "events"))
    factors = read_stream(spark, FACTOR_SCHEMA, base / "factors")
    function: Any = Scale()
    if kind != "streamed":
        events, function = events.key_by("user"), KeyedScale(hold)
    # "operator": the engine keyed functions took before the partitioned path
    result = events.connect(Stream(factors).broadcast(FACTORS)).process(
        function, OUTPUT, parallelism=3, side_outputs=[BIG],
        engine="operator" if kind == "operator" else "auto")
    assert kind_of(result) == kind
    return result


def run_to_end(result: Any, base: Path, chosen: dict[Any, Any]) -> Any:
    """``write_stream(sinks=chosen)`` over ``base/checkpoint`` until the input present now is
    written; a failing sink's test reads the error from ``query.exception()``."""
    from pyspark.errors import StreamingQueryException

    query = result.write_stream(checkpoint_location=str(base / "checkpoint"), sinks=chosen,
                                trigger={"availableNow": True})
    try:
        query.awaitTermination()
    except StreamingQueryException:
        pass
    return query


def expected(kind: str, batches: int = len(EVENTS)) -> dict[str, Counter]:
    """``{output: Counter(rows)}`` from the harness; dead letters as (callback, error)."""
    h: Any = (BroadcastHarness(Scale(), [FACTORS], on_error="dead_letter") if kind == "streamed"
              else KeyedBroadcastHarness(KeyedScale(), lambda v: v["user"], [FACTORS],
                                         on_error="dead_letter"))
    h.open()
    for index in range(batches):
        h.process_micro_batch([r for r in EVENTS[index] if isinstance(r, dict)],
                              FACTOR_BATCHES[index])
    letters = Counter((d.callback, d.error) for d in h.dead_letters())
    if batches > 1:
        letters[("input", "malformed input")] += 1
    return {"main": Counter(tuple(v) for v in h.output()),
            "big": Counter(tuple(v) for v in h.side_output(BIG)),
            "dead_letters": letters}


def letter_key(row: Any) -> tuple[str, str]:
    """A dead letter as ``expected`` counts it (a malformed line's error names the parser)."""
    return (row["callback"], "malformed input" if row["callback"] == "input" else row["error"])


def jdbc_sinks(url: str, properties: dict[str, str]) -> dict[str, Any]:
    from sparkcast import sinks

    return {name: sinks.jdbc(url, table, properties=properties)
            for name, table in TABLES.items()}


def holds(base: Path) -> Path:
    """The folder of a query's hold markers."""
    return base / "holds"


def hold_after_database(base: Path) -> None:
    """Hold the query once the database committed batch 1 (its rows and the ledger, in one
    transaction), before Spark's checkpoint commits it."""
    from sparkcast.spark.outputs.sink_writer import SinkWriter

    commit = SinkWriter._commit_jdbc

    def holding(self: Any, database: Any, group: Any, frames: Any, batch_id: int,
                *args: Any) -> None:
        commit(self, database, group, frames, batch_id, *args)
        if batch_id == 1:
            Hold(str(holds(base))).at(AFTER_DATABASE_1)

    SinkWriter._commit_jdbc = holding  # type: ignore[method-assign, assignment]


def run(base: Path, kind: str, url: str, user: str) -> None:
    """``write_jdbc`` in a session of its own (the process the test kills), holding where the
    markers say; stopped at the end."""
    from sparkcast.spark import session
    from sparkcast.testing.postgres import jdbc_jar

    hold_after_database(base)
    spark = session("local[2]", "sparkcast-sink-faults",
                    conf={"spark.sql.shuffle.partitions": "2", "spark.jars": str(jdbc_jar())})
    write_jdbc(spark, base, kind, url, user)
    spark.stop()


def write_jdbc(spark: Any, base: Path, kind: str, url: str, user: str) -> None:
    """The pipeline to the end of its input with ``jdbc`` sinks, in ``spark`` (started again
    if Spark failed it for a Python worker that did not connect back: ``holds.py``)."""
    def start() -> Any:
        return build(spark, base, kind).write_stream(
            checkpoint_location=str(base / "checkpoint"), sinks=jdbc_sinks(url, {"user": user}),
            trigger={"availableNow": True})

    await_restarting(start, start())


if __name__ == "__main__":
    # under the module's own name, not __main__: the checkpoint records the function's class
    # (tests.spark.sink_pipeline.KeyedScale), which a restart in the test's session matches
    from tests.spark import sink_pipeline

    sink_pipeline.run(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
