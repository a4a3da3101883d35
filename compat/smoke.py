"""A smoke job for one PySpark version: ``python compat/smoke.py [WORKDIR]``.

Runs the micro-batch engine's three shapes on a local session through ``write_stream`` with an
available-now trigger, reads each output back and compares it with the pure-Python harness fed
the same micro-batches:

* keyed: per-key counters over a changing (streamed) broadcast side (by subtask: each
  subtask's keyed store), with a side output and dead letters;
* streamed: a non-keyed enrichment over a streamed broadcast side (one ``foreachBatch`` whose
  driver applies the broadcast);
* stateless: the same enrichment over a static broadcast side (in place, no shuffle).

Prints one line, ``compat pyspark=<version> ... PASS`` (or ``FAIL`` and what differed), and exits
0 only on PASS. ``make compat`` runs it in a virtualenv per supported PySpark (compat/run.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
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

RULES = MapStateDescriptor("rules", str, int)
LABELS = MapStateDescriptor("labels", str, str)
ALERTS = OutputTag("alerts", "k string, id long, amount long")
KEYED_OUTPUT = "k string, id long, n long, limit long"
ENRICHED_OUTPUT = "id long, category string, label string"
EVENTS = "id long, k string, category string, amount long, ts long"
RULES_SCHEMA = "version long, limit long, category string, label string, ts long"
BATCHES, PER_BATCH = 3, 20


class Thresholds(KeyedBroadcastProcessFunction):
    """Counts events per key; an event above the current limit also goes to ``ALERTS``."""

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(RULES).put("limit", value["limit"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        limit = ctx.get_broadcast_state(RULES).get("limit")
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        if value["amount"] > limit:  # a null amount raises: a dead letter
            yield ALERTS, (value["k"], value["id"], value["amount"])
        yield value["k"], value["id"], n, limit


class Labels(BroadcastProcessFunction):
    """Enriches an event with its category's label as the broadcast side has it now."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(LABELS).put(value["category"], value["label"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        label = ctx.get_broadcast_state(LABELS).get(value["category"])
        yield value["id"], value["category"], label or "unknown"


def batches() -> list[tuple[list[dict], list[dict]]]:
    """``(rules, events)`` per micro-batch; the limit and one label change in every batch."""
    out = []
    for b in range(BATCHES):
        rules = [{"version": b, "limit": 40 + 10 * b, "category": f"c{b % 3}",
                  "label": f"L{b}", "ts": 1_000 * b}]
        events = [{"id": n, "k": f"k{n % 5}", "category": f"c{n % 4}",
                   "amount": None if n % 17 == 0 else (n * 37) % 100, "ts": 1_000 * b + 1 + i}
                  for i in range(PER_BATCH) for n in [b * PER_BATCH + i]]
        out.append((rules, events))
    return out


STATIC_LABELS = [{"version": 0, "limit": 0, "category": f"c{c}", "label": f"S{c}", "ts": 0}
                 for c in range(3)]


def write_inputs(data: Path) -> None:
    """One events and one rules file per micro-batch, dated a second apart: a file source
    takes files in order of modification time."""
    start = time.time() - 1_000
    for name in ("events", "rules", "static"):
        (data / name).mkdir(parents=True)
    for b, (rules, events) in enumerate(batches()):
        for name, rows in (("events", events), ("rules", rules)):
            path = data / name / f"{b:03d}.json"
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            os.utime(path, (start + b, start + b))
    (data / "static" / "labels.json").write_text(
        "".join(json.dumps(r) + "\n" for r in STATIC_LABELS))


def expected() -> dict[str, Counter]:
    """The harness's outputs for the same micro-batches."""
    from sparkcast.api.row import row_type
    from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

    def rows(ddl: str, records: list[dict]) -> list[Any]:
        fields = tuple(part.split()[0] for part in ddl.split(","))
        return [row_type(fields)._make(r.get(f) for f in fields) for r in records]

    keyed = KeyedBroadcastHarness(Thresholds(), lambda v: v["k"], [RULES], on_error="dead_letter")
    streamed = BroadcastHarness(Labels(), [LABELS])
    static = BroadcastHarness(Labels(), [LABELS])
    for harness in (keyed, streamed, static):
        harness.open()
    for b, (rules, events) in enumerate(batches()):
        times = [e["ts"] for e in events]
        for harness in (keyed, streamed):
            harness.process_micro_batch(rows(EVENTS, events), rows(RULES_SCHEMA, rules),
                                        main_timestamps=times,
                                        broadcast_timestamps=[r["ts"] for r in rules])
        static.process_micro_batch(rows(EVENTS, events),
                                   rows(RULES_SCHEMA, STATIC_LABELS) if b == 0 else [],
                                   main_timestamps=times,
                                   broadcast_timestamps=[0] * len(STATIC_LABELS) if b == 0 else [])
    return {"keyed": Counter(tuple(v) for v in keyed.output()),
            "alerts": Counter(tuple(v) for v in keyed.side_output(ALERTS)),
            "dead_letters": Counter((d.callback, d.value["id"]) for d in keyed.dead_letters()),
            "streamed": Counter(tuple(v) for v in streamed.output()),
            "stateless": Counter(tuple(v) for v in static.output())}


def run(spark: Any, data: Path, out: Path) -> tuple[dict[str, Counter], dict[str, str]]:
    """Every pipeline to the end of the data; (outputs read back, the path each plan took)."""
    from sparkcast.spark import Stream, read_output

    def source(name: str, schema: str) -> Any:
        return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(
            str(data / name))

    events = source("events", EVENTS)
    results = {
        "keyed": Stream(events).key_by("k").connect(
            Stream(source("rules", RULES_SCHEMA)).broadcast(RULES, order_by="version")).process(
            Thresholds(), KEYED_OUTPUT, parallelism=2, side_outputs=[ALERTS], event_time="ts"),
        "streamed": Stream(events).connect(
            Stream(source("rules", RULES_SCHEMA)).broadcast(LABELS, order_by="version")).process(
            Labels(), ENRICHED_OUTPUT, parallelism=2, event_time="ts"),
        "stateless": Stream(events).connect(
            Stream(spark.read.schema(RULES_SCHEMA).json(str(data / "static"))).broadcast(LABELS)
        ).process(Labels(), ENRICHED_OUTPUT, parallelism=2, event_time="ts"),
    }
    for name, result in results.items():
        result.write_stream(str(out / name), str(out / f"{name}-checkpoint"),
                            trigger={"availableNow": True}, query_name=name).awaitTermination()
    keyed = str(out / "keyed")
    read = {
        "keyed": Counter(tuple(r) for r in read_output(spark, keyed).collect()),
        "alerts": Counter(tuple(r) for r in read_output(spark, keyed, ALERTS).collect()),
        "dead_letters": Counter((r.callback, json.loads(r.value)["id"])
                                for r in read_output(spark, keyed, "dead_letters").collect()),
        "streamed": Counter(tuple(r) for r in read_output(spark, str(out / "streamed")).collect()),
        "stateless": Counter(tuple(r)
                             for r in read_output(spark, str(out / "stateless")).collect()),
    }
    return read, {name: shape_of(result.plan) for name, result in results.items()}


def shape_of(plan: Any) -> str:
    """The engine a new checkpoint of ``plan`` takes, and the micro-batch engine's shape."""
    if plan.engine == "operator":
        return "operator"
    return ("by subtask" if plan.by_subtask else
            "foreachBatch" if plan.per_batch_driver else "in place")


def metered_rows(out: Path, names: list[str], want: dict[str, int]) -> dict[str, int]:
    """Main rows per query as the progress logs count them (the listener writes them a moment
    after the query ends: wait up to 30 s for ``want``)."""
    deadline = time.monotonic() + 30
    while True:
        counted = {name: _logged_main_rows(out / name / "_sparkcast_progress.jsonl")
                   for name in names}
        if counted == want or time.monotonic() > deadline:
            return counted
        time.sleep(0.5)


def _logged_main_rows(log: Path) -> int:
    if not log.exists():
        return 0
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sum(op.get("main_rows") or 0 for r in records for op in r["operators"].values())


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        return check(Path(argv[1]))
    with tempfile.TemporaryDirectory(prefix="sparkcast-compat-") as work:
        return check(Path(work))


def check(work: Path) -> int:
    """Run, compare, print the result line; 0 on PASS."""
    import pyspark

    import sparkcast
    from sparkcast.spark import session

    write_inputs(work / "data")
    spark = session("local[2]")
    actual, paths = run(spark, work / "data", work / "out")
    spark.stop()
    want = expected()
    outputs = ["keyed", "streamed", "stateless"]
    metered = metered_rows(work / "out", outputs,
                           {name: sum(actual[name].values()) for name in outputs})
    problems = [f"{name}: {sum((want[name] - actual[name]).values())} missing, "
                f"{sum((actual[name] - want[name]).values())} extra" for name in want
                if actual[name] != want[name]]
    wanted_paths = {"keyed": "by subtask", "streamed": "foreachBatch", "stateless": "in place"}
    problems += [f"{name} ran {paths[name]}, not {wanted_paths[name]}" for name in paths
                 if paths[name] != wanted_paths[name]]
    problems += [f"{name}: the progress log counts {metered[name]} main rows, "
                 f"{sum(actual[name].values())} were written" for name in outputs
                 if metered[name] != sum(actual[name].values())]
    counts = " ".join(f"{name}={sum(actual[name].values())}" for name in want)
    verdict = "PASS" if not problems else "FAIL " + "; ".join(problems)
    print(f"compat pyspark={pyspark.__version__} sparkcast={sparkcast.__version__} "
          f"python={sys.version.split()[0]} {counts} {verdict}", flush=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
