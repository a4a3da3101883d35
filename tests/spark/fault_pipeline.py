"""The pipeline of the fault-injection test, run in a subprocess that the test kills.

``python -m tests.spark.fault_pipeline <root> <path>...`` runs one query per path side by side in
one session, each over ``<root>/<path>/events`` against a changing broadcast side
``<root>/<path>/rules``, with ``write_stream`` (``availableNow``, one file per source per
micro-batch, so micro-batch i holds events file i and rules file i however often the process
dies): a keyed counter (``partitioned``: the path the planner picks for it; ``operator``: forced
onto the stateful operator path) or a non-keyed check (``streamed``: the streamed-broadcast
path); it exits when every input is processed. The test kills it with SIGKILL mid-batch and
restarts it from the same checkpoints; ``expected`` replays the same micro-batches through the
harness; ``write`` runs one query in a session the caller owns.

Each query holds itself at the moments the test armed (``holds.Hold``, the first run only; the
markers under ``<root>/<path>/holds``): ``in_flight(batch)`` at a batch's first event in the
function, ``AFTER_SINK_2`` once ``foreachBatch``'s files sink logged batch 2 and before Spark's
checkpoint committed it (the streamed and partitioned paths; the operator path's sink is Spark's
own, in the JVM, so the test catches that moment by a file event instead).
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
    Row,
    ValueStateDescriptor,
)
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness
from tests.spark.differential import write_batch_file
from tests.spark.holds import Hold, await_restarting
from tests.spark.kinds import kind_of

RULES = MapStateDescriptor("rules", str, int)
COUNT = ValueStateDescriptor("count", int)
EVENTS_SCHEMA = "id long, k string, amount long, ts long"
RULES_SCHEMA = "name string, limit long, ts long"
OUTPUT = "k string, id long, n long, flagged boolean, version long"
PATHS = ("operator", "streamed", "partitioned")
EVENT_FILES, RULE_FILES, PER_FILE = 4, 3, 40
AFTER_SINK_2 = "batch-2-after-the-sink"
NO_HOLD = Hold()  #: the harness, the runs no test kills


def in_flight(batch: int) -> str:
    """The hold at ``batch``'s first event in the function."""
    return f"batch-{batch}-in-flight"


def holds(base: Path) -> Path:
    """The folder of a query's hold markers."""
    return base / "holds"


class Ledger(KeyedBroadcastProcessFunction):
    """A per-key counter checked against broadcast limits; some inputs fail on purpose."""

    def __init__(self, hold: Hold = NO_HOLD) -> None:
        self.hold = hold

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        if value["limit"] < 0:
            raise ValueError(f"negative limit {value['limit']}")
        rules = ctx.get_broadcast_state(RULES)
        rules.put(value["name"], value["limit"])
        rules.put("version", (rules.get("version") or 0) + 1)

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.hold.at(in_flight(value["id"] // PER_FILE))
        if value["id"] % 37 == 0:
            raise RuntimeError(f"event {value['id']} is poisoned")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        rules = ctx.get_broadcast_state(RULES)
        yield (value["k"], value["id"], n, value["amount"] > (rules.get("amount") or 0),
               rules.get("version"))


class Check(BroadcastProcessFunction):
    """The ledger without the counter: non-keyed, so ``write_stream`` takes the streamed path."""

    __init__ = Ledger.__init__
    process_broadcast_element = Ledger.process_broadcast_element

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.hold.at(in_flight(value["id"] // PER_FILE))
        if value["id"] % 37 == 0:
            raise RuntimeError(f"event {value['id']} is poisoned")
        rules = ctx.get_broadcast_state(RULES)
        yield (value["k"], value["id"], None, value["amount"] > (rules.get("amount") or 0),
               rules.get("version"))


def events(index: int) -> list[dict[str, Any]]:
    """File ``index``'s events; their event times are out of line order (a permutation), so
    the counter's ``n`` shows that each key's events ran in the file's order."""
    return [{"id": index * PER_FILE + i, "k": f"k{(index * 7 + i) % 9}",
             "amount": (index * 31 + i * 17) % 100, "ts": 1_000 * index + (i * 7) % PER_FILE}
            for i in range(PER_FILE)]


def rules(index: int) -> list[dict[str, Any]]:
    return [{"name": "amount", "limit": 30 + 20 * index, "ts": 1_000 * index},
            {"name": "broken", "limit": -index - 1, "ts": 1_000 * index}]


def expected(path: str) -> tuple[Counter, Counter]:
    """Main outputs and dead letters ``(callback, error)`` of the harness over the same batches."""
    h: Any = (BroadcastHarness(Check(), [RULES], on_error="dead_letter") if path == "streamed"
              else KeyedBroadcastHarness(Ledger(), lambda v: v["k"], [RULES],
                                         on_error="dead_letter"))
    h.open()
    for index in range(EVENT_FILES):
        main = events(index)  # in the file's order: the order Spark gives each key's events
        bcast = rules(index) if index < RULE_FILES else []
        h.process_micro_batch([Row(**r) for r in main], [Row(**r) for r in bcast],
                              main_timestamps=[r["ts"] for r in main],
                              broadcast_timestamps=[r["ts"] for r in bcast])
    return (Counter(h.output()),
            Counter((d.callback, d.error) for d in h.dead_letters()))


def write_inputs(base: Path) -> None:
    """The events and rules files under ``base``, one per micro-batch."""
    for index in range(EVENT_FILES):
        write_batch_file(base / "events", index, events(index))
    for index in range(RULE_FILES):
        write_batch_file(base / "rules", index, rules(index))


def hold_after_the_sink() -> None:
    """Hold where ``foreachBatch``'s files sink has logged batch 2 (``_spark_metadata/2``) and
    Spark's checkpoint has not committed it; the query found by its output folder."""
    from sparkcast.spark.state.commit_log import CommitLog

    def holding(log: Any) -> Any:
        def wrapped(self: Any, batch: int, *args: Any) -> Any:
            done = log(self, batch, *args)
            if batch == 2:
                Hold(str(holds(Path(self.path).parent))).at(AFTER_SINK_2)
            return done
        return wrapped

    CommitLog.commit = holding(CommitLog.commit)  # type: ignore[method-assign]
    CommitLog.log_empty = holding(CommitLog.log_empty)  # type: ignore[method-assign]


def run(root: Path, paths: list[str]) -> None:
    """One query per path, side by side, in a session of its own (the process the test kills),
    stopped at the end. Each held task keeps one of the master's slots, so there are more slots
    than queries."""
    from sparkcast.spark import session

    hold_after_the_sink()
    spark = session(f"local[{2 * len(paths)}]", "sparkcast-faults",
                    conf={"spark.sql.shuffle.partitions": "2"})

    def starting(path: str) -> Any:
        return lambda: start(spark, root / path, path, Hold(str(holds(root / path))))

    for again, query in [(starting(p), starting(p)()) for p in paths]:
        await_restarting(again, query)
    spark.stop()


def write(spark: Any, base: Path, path: str) -> None:
    """The pipeline to the end of its input in ``spark``; a last, unkilled run from the
    checkpoint runs this way in the test's own session (no second JVM to start)."""
    start(spark, base, path).awaitTermination()


def start(spark: Any, base: Path, path: str, hold: Hold = NO_HOLD) -> Any:
    """The query of ``path`` over ``base``, started."""
    from sparkcast.spark import Stream

    reader = spark.readStream.option("maxFilesPerTrigger", 1)
    main = reader.schema(EVENTS_SCHEMA).json(str(base / "events"))
    bcast = reader.schema(RULES_SCHEMA).json(str(base / "rules"))
    stream = Stream(main) if path == "streamed" else Stream(main).key_by("k")
    function = Check(hold) if path == "streamed" else Ledger(hold)
    # "operator": the engine every keyed function took before the partitioned path
    result = stream.connect(Stream(bcast).broadcast(RULES)).process(
        function, OUTPUT, parallelism=3, event_time="ts",
        engine="operator" if path == "operator" else "auto")
    assert kind_of(result) == path, kind_of(result)
    return result.write_stream(str(base / "out"), str(base / "checkpoint"),
                               trigger={"availableNow": True})


if __name__ == "__main__":
    # run under the module's own name, not __main__: the checkpoint records the function's
    # class (tests.spark.fault_pipeline.Ledger), which a restart in the test's session matches
    from tests.spark import fault_pipeline

    fault_pipeline.run(Path(sys.argv[1]), sys.argv[2:])
