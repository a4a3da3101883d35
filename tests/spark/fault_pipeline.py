"""The pipeline of the fault-injection test, run in a subprocess that the test kills.

``python -m tests.spark.fault_pipeline <base> <path>`` runs, over ``<base>/events`` against a
changing broadcast side ``<base>/rules``, with ``write_stream`` (``availableNow``, one file per
source per micro-batch, so micro-batch i holds events file i and rules file i however often the
process dies), a keyed counter (``partitioned``: the path the planner picks for it; ``operator``:
forced onto the stateful operator path) or a non-keyed check (``streamed``: the
streamed-broadcast path), and exits when the input is processed. The test
kills it with SIGKILL mid-batch and restarts it from the same checkpoint; ``expected`` replays
the same micro-batches through the harness; ``write`` runs it in a session the caller owns.
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
from tests.spark.kinds import kind_of

RULES = MapStateDescriptor("rules", str, int)
COUNT = ValueStateDescriptor("count", int)
EVENTS_SCHEMA = "id long, k string, amount long, ts long"
RULES_SCHEMA = "name string, limit long, ts long"
OUTPUT = "k string, id long, n long, flagged boolean, version long"
PATHS = ("operator", "streamed", "partitioned")
EVENT_FILES, RULE_FILES, PER_FILE = 4, 3, 40


class Ledger(KeyedBroadcastProcessFunction):
    """A per-key counter checked against broadcast limits; some inputs fail on purpose."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(COUNT)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        if value["limit"] < 0:
            raise ValueError(f"negative limit {value['limit']}")
        rules = ctx.get_broadcast_state(RULES)
        rules.put(value["name"], value["limit"])
        rules.put("version", (rules.get("version") or 0) + 1)

    def process_element(self, value: Any, ctx: Any) -> Any:
        if value["id"] % 37 == 0:
            raise RuntimeError(f"event {value['id']} is poisoned")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        rules = ctx.get_broadcast_state(RULES)
        yield (value["k"], value["id"], n, value["amount"] > (rules.get("amount") or 0),
               rules.get("version"))


class Check(BroadcastProcessFunction):
    """The ledger without the counter: non-keyed, so ``write_stream`` takes the streamed path."""

    process_broadcast_element = Ledger.process_broadcast_element

    def process_element(self, value: Any, ctx: Any) -> Any:
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


def run(base: Path, path: str) -> None:
    """The pipeline in a session of its own (the process the test kills), stopped at the end."""
    from sparkcast.spark import session

    spark = session("local[2]", "sparkcast-faults", conf={"spark.sql.shuffle.partitions": "2"})
    write(spark, base, path)
    spark.stop()


def write(spark: Any, base: Path, path: str) -> None:
    """The pipeline to the end of its input in ``spark``; a last, unkilled run from the
    checkpoint runs this way in the test's own session (no second JVM to start)."""
    from sparkcast.spark import Stream

    reader = spark.readStream.option("maxFilesPerTrigger", 1)
    main = reader.schema(EVENTS_SCHEMA).json(str(base / "events"))
    bcast = reader.schema(RULES_SCHEMA).json(str(base / "rules"))
    stream = Stream(main) if path == "streamed" else Stream(main).key_by("k")
    function = Check() if path == "streamed" else Ledger()
    # "operator": the engine every keyed function took before the partitioned path
    result = stream.connect(Stream(bcast).broadcast(RULES)).process(
        function, OUTPUT, parallelism=3, event_time="ts",
        engine="operator" if path == "operator" else "auto")
    assert kind_of(result) == path, kind_of(result)
    query = result.write_stream(str(base / "out"), str(base / "checkpoint"),
                                trigger={"availableNow": True})
    query.awaitTermination()


if __name__ == "__main__":
    # run under the module's own name, not __main__: the checkpoint records the function's
    # class (tests.spark.fault_pipeline.Ledger), which a restart in the test's session matches
    from tests.spark import fault_pipeline

    fault_pipeline.run(Path(sys.argv[1]), sys.argv[2])
