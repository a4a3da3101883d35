"""The sinks, each beside the same write done by hand in ``foreachBatch``, in one run.

On the multi-batch streamed inputs of ``streamed.py`` (the broadcast side read as a stream,
``process_batch``): sparkcast through ``write_stream(sinks={...: files(...)})`` and through
``foreach_batch`` appending the main frame to Parquet, against the hand-written ``foreachBatch``
job appending the same Parquet (target ≥ 0.9x); ``foreach_batch`` with a no-op body against
``foreachBatch`` with a no-op body (≥ 0.9x); the ``jdbc`` sink into PostgreSQL (staged, one
transaction per micro-batch, exactly once) against the hand-written job's plain
``df.write.jdbc`` of the same rows (≥ 0.8x). Systems alternate forward and backward; a rate is
events / query time, the best of the repeats.

    python benchmarks/sinks.py --mode quick      # prints the rows and ratios
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SYSTEMS = {  # name -> (label, workloads, job)
    "sinks-files": ("sparkcast write_stream(sinks=files)", ("W1", "W2", "W4"),
                    {"op": "sink_streamed", "form": "sinks-files"}),
    "foreach-parquet": ("sparkcast foreach_batch → Parquet", ("W1", "W2", "W4"),
                        {"op": "sink_streamed", "form": "foreach-parquet"}),
    "fb-parquet": ("foreachBatch → Parquet (by hand)", ("W1", "W2", "W4"),
                   {"op": "foreachbatch_streamed", "write": "parquet"}),
    "foreach-noop": ("sparkcast foreach_batch, no-op body", ("W1",),
                     {"op": "sink_streamed", "form": "foreach-noop"}),
    "fb-noop": ("foreachBatch, no-op body", ("W1",),
                {"op": "foreachbatch_streamed", "write": "noop"}),
    "sinks-jdbc": ("sparkcast jdbc sink → PostgreSQL (exactly once)", ("W1-jdbc",),
                   {"op": "sink_streamed", "form": "sinks-jdbc"}),
    "fb-jdbc": ("foreachBatch → df.write.jdbc (by hand)", ("W1-jdbc",),
                {"op": "foreachbatch_streamed", "write": "jdbc"}),
}
#: (system, baseline, target) rows of the summary
TARGETS = [(w, "sinks-files", "fb-parquet", 0.9) for w in ("W1", "W2", "W4")] + [
    (w, "foreach-parquet", "fb-parquet", 0.9) for w in ("W1", "W2", "W4")] + [
    ("W1", "foreach-noop", "fb-noop", 0.9), ("W1-jdbc", "sinks-jdbc", "fb-jdbc", 0.8)]

MODES = {
    "quick": {"per_batch": 100_000, "batches": 3, "repeats": 1,
              "sizes": {"W1-jdbc": {"per_batch": 100_000, "batches": 2}}},
    "full": {"per_batch": 500_000, "batches": 4, "repeats": 2,
             "sizes": {"W1-jdbc": {"per_batch": 100_000, "batches": 3}}},
}


def sizes(mode: str, workload: str) -> dict:
    config = MODES[mode]
    return {"per_batch": config["per_batch"], "batches": config["batches"],
            "repeats": config["repeats"], **config["sizes"].get(workload, {})}


def measure(spark: Any, mode: str, timeout: float, log: Any,
            workloads: set[str] | None = None) -> dict:
    """``{workload: {system: {"seconds": [...], "rate": ...}}}``, systems alternating."""
    results: dict[str, dict[str, Any]] = {}
    for workload in ("W1", "W2", "W4", "W1-jdbc"):
        if workloads is not None and workload.split("-")[0] not in workloads:
            continue
        size = sizes(mode, workload)
        n = size["per_batch"] * size["batches"]
        names = [s for s, (_, w, _) in SYSTEMS.items() if workload in w]
        runs: dict[str, list[dict]] = {s: [] for s in names}
        for repeat in range(size["repeats"]):
            for name in names if repeat % 2 == 0 else names[::-1]:
                job = {**SYSTEMS[name][2], "workload": workload.split("-")[0], "n": n,
                       "per_batch": size["per_batch"]}
                result = spark.call(job, timeout)
                runs[name].append(result)
                log(f"sinks {workload} {name:16s} n={n:>9,} "
                    + (f"{result['seconds']:.2f} s, {result.get('batches')} micro-batches"
                       + (f", {result['rows_out']:,} rows written" if "rows_out" in result
                          else "") if result.get("ok")
                       else f"FAILED: {result.get('error', '')[:300]}"))
        results[workload] = {name: _summary(r, n, size) for name, r in runs.items()}
    return {"mode": mode, "workloads": results}


def _summary(runs: list[dict], n: int, size: dict) -> dict:
    good = [r["seconds"] for r in runs if r.get("ok")]
    if not good:
        return {"error": next((r.get("error") for r in runs), "no run")}
    return {"seconds": good, "rate": n / min(good), **size,
            "rows_out": next((r["rows_out"] for r in runs if "rows_out" in r), None)}


def table(results: dict) -> str:
    lines = ["| workload | system | micro-batches × events | runs (s) | events/s (best) |",
             "|---|---|---:|---|---:|"]
    for workload, systems in results["workloads"].items():
        for name, entry in systems.items():
            label = SYSTEMS[name][0]
            if entry.get("error"):
                lines.append(f"| {workload} | {label} | — | failed: "
                             f"{str(entry['error'])[:80]} | — |")
                continue
            runs = " / ".join(f"{s:.1f}" for s in entry["seconds"])
            lines.append(f"| {workload} | {label} | {entry['batches']} × "
                         f"{entry['per_batch']:,} | {runs} | {entry['rate']:,.0f} |")
    return "\n".join(lines)


def targets(results: dict) -> list[tuple[str, str, str]]:
    rows = []
    for workload, system, baseline, target in TARGETS:
        entries = results["workloads"].get(workload, {})
        mine = entries.get(system, {}).get("rate")
        theirs = entries.get(baseline, {}).get("rate")
        ratio = None if not (mine and theirs) else mine / theirs
        rows.append((f"{workload} {SYSTEMS[system][0]} ≥ {target}x {SYSTEMS[baseline][0]}",
                     "—" if ratio is None else f"{ratio:.2f}x",
                     "—" if ratio is None else ("met" if ratio >= target else "missed")))
    return rows


def prepare(mode: str, only: set[str] | None) -> None:
    """Generate the inputs before anything is timed."""
    import data

    for workload in ("W1", "W2", "W4"):
        if only is None or workload in only:
            for key in (workload, f"{workload}-jdbc"):
                size = sizes(mode, key)
                data.events_mtimes_ordered(workload, size["per_batch"] * size["batches"])
                data.broadcast_updates_dir(workload, size["batches"])


def main() -> None:
    from child import SparkServer, log

    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--only", nargs="*", help="workloads (W1, W2, W4)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    only = set(args.only) if args.only else None
    prepare(args.mode, only)
    spark = SparkServer()
    spark.start()
    try:
        spark.call({"op": "warmup"}, args.timeout)
        results = measure(spark, args.mode, args.timeout, log, only)
    finally:
        spark.stop()
    out = HERE / "results" / f"sinks-{args.mode}.json"
    out.write_text(json.dumps(results, indent=1))
    print(table(results))
    print()
    for row in targets(results):
        print(" | ".join(row))


if __name__ == "__main__":
    main()
