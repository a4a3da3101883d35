"""The fraud demo's pipeline (``sparkcast.apps.fraud``) as a benchmark: throughput and update
latency on the micro-batch engine against the operator engine (forced).

The pipeline is the app's own: its function (``FraudRules``: text rules broadcast,
``hold_until_ready`` on the ruleset version, the ``review`` and ``invalid_rules`` side outputs),
its descriptors and schemas, keyed by the app's ``key_by`` (the app declares none today), wired
as ``sparkcast.apps.wiring.build`` wires it.
Throughput: the app's transaction generator writes ``n`` transactions as JSON lines, one file
per micro-batch (``maxFilesPerTrigger=1``), with one rules file per micro-batch (the initial
rules, then the threshold of ``big-foreign`` moved each time), written by ``write_stream`` with
``availableNow``; events / query time. Latency: a ``rate`` source shaped as transactions at
20k/s; every interval one rule upsert (which moves ``rules_version`` by one) lands in the rules
folder; the time to the first committed main or review output carrying it.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import data

from sparkcast.apps import wiring
from sparkcast.apps.fraud import (
    APP,
    COUNTRIES,
    INITIAL_RULES,
    MERCHANTS,
    rule_rows,
    transactions,
)

__all__ = ["APP", "INITIAL", "build", "count_outputs", "inputs", "probe_rule",
           "rate_transactions"]

INITIAL = rule_rows(INITIAL_RULES, 0)
SYSTEMS = {  # name -> (label, engine)
    "micro_batch": ("fraud pipeline, micro-batch engine", "micro_batch"),
    "operator": ("fraud pipeline, operator engine (forced, before)", "operator"),
}
MODES = {
    "quick": {"per_batch": 50_000, "batches": 3, "repeats": 1,
              "latency": {"updates": 6, "interval": 1.0, "warmup": 3.0, "rate": 20_000}},
    "full": {"per_batch": 200_000, "batches": 6, "repeats": 2,
             "latency": {"updates": 20, "interval": 2.0, "warmup": 10.0, "rate": 20_000}},
}


def build(spark: Any, events: Any, rules: str | Path, max_files: int | None = 1,
          engine: str = "auto") -> Any:
    """The app's ``ProcessResult`` over a transactions DataFrame and a rules folder: what
    ``wiring.build`` makes from two folders, with the events from any source (a rate source
    for the latency run), on ``engine``."""
    from sparkcast.spark import Stream

    rules_df = wiring.read_folder(spark, APP.broadcast_schema, rules, max_files)
    main = Stream(events).key_by(*APP.key_by) if APP.key_by else Stream(events)
    broadcast = Stream(rules_df).broadcast(*APP.descriptors, order_by=APP.order_by)
    return main.connect(broadcast).process(
        APP.make_function(), output_schema=APP.output_schema, side_outputs=APP.side_outputs,
        parallelism=2, hold_until_ready=APP.hold_until_ready or None,
        job_parameters={"artifact_root": str(Path(rules).parent.resolve() / "artifacts")},
        engine=engine)


def probe_rule(k: int) -> dict[str, Any]:
    """Update ``k``: one upsert (the ruleset version moves by one) that decides nothing."""
    return {"seq": 1_000 + k, "op": "upsert", "rule_id": f"probe-{k}",
            "condition": f"amount > {10_000_000 + k}", "action": "REVIEW"}


def inputs(n: int, per_batch: int) -> tuple[Path, Path]:
    """``n`` transactions in files of ``per_batch`` and one rules file per file, modification
    times in order (cached under ``benchmarks/.data/fraud/``)."""
    root = data.ROOT / "fraud" / f"{n}_{per_batch}"
    events, rules = root / "events", root / "rules"
    if (root / "_DONE").exists():
        return events, rules
    events.mkdir(parents=True, exist_ok=True)
    rules.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    base = os.path.getmtime(root) - 3_600
    for index, start in enumerate(range(0, n, per_batch)):
        rows = transactions(rng, start, min(per_batch, n - start))
        moved = rule_rows([("big-foreign", f"amount > {5000 - 50 * index} AND "
                                           "ip_country != card_country", "BLOCK")], 10 * index)
        for target, lines in ((events / f"tx-{index:05d}.json", rows),
                              (rules / f"rules-{index:05d}.json",
                               INITIAL if index == 0 else moved)):
            target.write_text("".join(json.dumps(r) + "\n" for r in lines))
            os.utime(target, (base + index, base + index))
    (root / "_DONE").write_text(str(n))
    return events, rules


def rate_transactions(spark: Any, rate: int) -> Any:
    """A ``rate`` source at ``rate`` rows/s shaped as the app's transactions (the generator's
    merchants and countries, amounts spread over 0-10,000)."""
    from pyspark.sql import functions as F

    value = F.col("value")
    merchants = F.array(*[F.lit(m) for m, _ in MERCHANTS])
    codes = F.array(*[F.lit(c) for _, c in MERCHANTS])
    countries = F.array(*[F.lit(c) for c in COUNTRIES])
    pick = (value % len(MERCHANTS)).cast("int")
    home = F.element_at(countries, (value % 5 + 1).cast("int"))
    return (spark.readStream.format("rate").option("rowsPerSecond", rate)
            .option("numPartitions", 2).load()
            .select(F.concat(F.lit("tx"), value.cast("string")).alias("tx_id"),
                    F.concat(F.lit("card"), (value % 200).cast("string")).alias("card_id"),
                    ((value * 7919) % 1_000_000 / 100.0).alias("amount"),
                    F.element_at(merchants, pick + 1).alias("merchant"),
                    F.element_at(codes, pick + 1).cast("long").alias("mcc"),
                    home.alias("card_country"),
                    F.when(value % 4 == 0, F.element_at(countries, (value % 8 + 1).cast("int")))
                    .otherwise(home).alias("ip_country"),
                    (value % 24).alias("hour"),
                    (F.col("timestamp").cast("double") * 1000).cast("long").alias("ts")))


def count_outputs(out: Path) -> dict[str, int]:
    """Rows in each output folder of a finished run (main + review = one per transaction)."""
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    for name in ("main", "review", "dead_letters"):
        files = list((out / f"_output={name}").glob("**/*.parquet"))
        counts[f"rows_{name}"] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return counts


def prepare(mode: str) -> None:
    config = MODES[mode]
    inputs(config["per_batch"] * config["batches"], config["per_batch"])


def measure(spark: Any, mode: str, timeout: float, log: Any) -> dict:
    """Throughput (systems alternating, best of the repeats) and latency on each engine."""
    config = MODES[mode]
    n = config["per_batch"] * config["batches"]
    runs: dict[str, list[dict]] = {name: [] for name in SYSTEMS}
    for repeat in range(config["repeats"]):
        for name in list(SYSTEMS) if repeat % 2 == 0 else list(SYSTEMS)[::-1]:
            result = spark.call({"op": "fraud", "n": n, "per_batch": config["per_batch"],
                                 "engine": SYSTEMS[name][1]}, timeout)
            runs[name].append(result)
            log(f"fraud {name:12s} n={n:>9,} " + (
                f"{result['seconds']:.2f} s, main+review "
                f"{result['rows_main'] + result['rows_review']:,}"
                if result.get("ok") else f"FAILED: {result.get('error', '')[:200]}"))
    latency = {}
    w5 = config["latency"]
    budget = w5["updates"] * w5["interval"] + w5["warmup"] + 120
    for name in SYSTEMS:
        result = spark.call({"op": "fraud_latency", "engine": SYSTEMS[name][1], **w5}, budget)
        latency[name] = result
        log(f"fraud latency {name}: " + (
            f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, {result['seen']}/"
            f"{result['updates']} seen" if result.get("ok")
            else f"FAILED: {result.get('error', '')[:200]}"))
    throughput = {}
    for name, results in runs.items():
        good = [r for r in results if r.get("ok")]
        throughput[name] = ({"seconds": [r["seconds"] for r in good],
                             "rate": n / min(r["seconds"] for r in good),
                             "batches": good[0].get("batches"),
                             "rows_out": good[0]["rows_main"] + good[0]["rows_review"]}
                            if good else {"error": next((r.get("error") for r in results),
                                                        "no run")})
    return {"n": n, "per_batch": config["per_batch"], "throughput": throughput,
            "latency": latency}


def targets(fraud: dict, ratio: Any, verdict: Any) -> list[tuple[str, str, str]]:
    new = fraud["throughput"].get("micro_batch", {}).get("rate")
    old = fraud["throughput"].get("operator", {}).get("rate")
    rows = [("fraud pipeline: micro-batch engine ≥ 1.0x the operator engine", ratio(new, old),
             verdict(None if not (new and old) else new >= old))]
    lat = fraud["latency"].get("micro_batch", {})
    if lat.get("ok"):
        ok = lat["p99_ms"] is not None and lat["p99_ms"] < 1000 and lat["seen"] == lat["updates"]
        rows.append(("fraud pipeline: update p99 < 1 s at 20k tx/s (micro-batch engine)",
                     f"p50 {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms", verdict(ok)))
    return rows


def table(fraud: dict, fmt_rate: Any) -> str:
    lines = [f"## The fraud demo's pipeline ({fraud['n']:,} transactions, "
             f"{fraud['per_batch']:,} a micro-batch)", "",
             (__doc__ or "").split("\n\n")[1].replace("\n", " "), "",
             "| engine | runs (s) | transactions/s (best) | update p50 (ms) | update p99 (ms) "
             "| updates seen | micro-batch median (ms) |", "|---|---|---:|---:|---:|---:|---:|"]
    for name, (label, _) in SYSTEMS.items():
        t = fraud["throughput"].get(name, {})
        lat = fraud["latency"].get(name, {})
        runs = (" / ".join(f"{s:.1f}" for s in t["seconds"]) if t.get("seconds")
                else f"failed: {str(t.get('error'))[:80]}")
        late = ([f"{lat['p50_ms'] or 0:.0f}", f"{lat['p99_ms'] or 0:.0f}",
                 f"{lat['seen']}/{lat['updates']}", f"{lat['batch_ms_median'] or 0:.0f}"]
                if lat.get("ok") else [f"failed: {str(lat.get('error'))[:60]}", "", "", ""])
        lines.append(f"| {label} | {runs} | {fmt_rate(t.get('rate'))} | " + " | ".join(late)
                     + " |")
    return "\n".join(lines)
