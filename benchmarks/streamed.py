"""The multi-batch streamed workloads: a broadcast side that changes while the job runs.

Events arrive ``per_batch`` a micro-batch (``maxFilesPerTrigger``) over ``batches`` micro-batches;
the broadcast side is read with ``readStream``, its rows in micro-batch 0 and one update in every
later one (``data.broadcast_updates_dir``). Every system writes Parquet files (the sparkcast
forms with ``write_stream``, exactly once; the baselines append), so the sink costs the same.

Systems (W1, W2, W4 unless said): sparkcast ``process_batch`` and per-element on the
micro-batch engine (broadcast applied once per micro-batch on the driver) and on the operator
engine (forced: what every streamed broadcast side took before); the hand-written
``foreachBatch`` job; for W3 (keyed) sparkcast per-element on both engines and three
Spark-native counters (``transformWithStateInPandas``, ``applyInPandasWithState``,
``foreachBatch`` with a Parquet state table), the fastest kept as the baseline; for W7 (a
session count with an event-time timer per user, the timeout broadcast) sparkcast per-element
on both engines. The systems of a workload alternate (forward, then backward) ``repeats`` times;
a rate is events / query time (``start()`` to the end of ``awaitTermination()``), the best of
the repeats.
"""

from __future__ import annotations

from typing import Any

SYSTEMS = {  # name -> (label, workloads, job)
    "batch-mb": ("sparkcast process_batch, micro-batch engine", ("W1", "W2", "W4"),
                 {"op": "streamed", "mode": "batch", "engine": "micro_batch"}),
    "batch-operator": ("sparkcast process_batch, operator engine (before)", ("W1", "W2", "W4"),
                       {"op": "streamed", "mode": "batch", "engine": "operator"}),
    "element-mb": ("sparkcast per-element, micro-batch engine", ("W1", "W2", "W3", "W4", "W7"),
                   {"op": "streamed", "mode": "element", "engine": "micro_batch"}),
    "element-operator": ("sparkcast per-element, operator engine (before)",
                         ("W1", "W2", "W3", "W4", "W7"),
                         {"op": "streamed", "mode": "element", "engine": "operator"}),
    "foreachbatch": ("foreachBatch + re-read + broadcast var + mapInPandas", ("W1", "W2", "W4"),
                     {"op": "foreachbatch_streamed"}),
    "main-noop": ("sparkcast process_batch, result.main to noop", ("W1",),
                      {"op": "streamed_main", "mode": "batch"}),
    "foreachbatch-noop": ("foreachBatch + re-read + broadcast var + mapInPandas, noop sink",
                          ("W1",), {"op": "foreachbatch_streamed", "write": "noop-sink"}),
    "tws": ("transformWithStateInPandas counter (Spark-native)", ("W3",),
            {"op": "tws_counter"}),
    "aipws": ("applyInPandasWithState counter (Spark-native)", ("W3",),
              {"op": "aipws_counter"}),
    "fb-state": ("foreachBatch + Parquet state table (Spark-native)", ("W3",),
                 {"op": "fb_state_counter"}),
}
#: W3's Spark-native ways to write the keyed counter; the fastest is "the baseline"
NATIVE_W3 = ("tws", "aipws", "fb-state")

MODES = {
    # quick leaves out the grouped W3 baselines: at ~1.1k events/s, 300k events take ~5 min
    "quick": {"per_batch": 100_000, "batches": 3, "repeats": 1,
              "workloads": ("W1", "W3", "W7"), "skip": ("tws", "aipws")},
    "full": {"per_batch": 500_000, "batches": 8, "repeats": 2,
             "workloads": ("W1", "W2", "W3", "W4", "W7"),
             # the Spark-native W3 counter handles ~1.1k events/s here (a Python call and three
             # state calls per user per micro-batch, 100k users): 3 x 100k, once, is ~5 min;
             # W7's timers on the operator engine: 1M events stay well inside the time limit
             "sizes": {"W3": {"per_batch": 100_000, "batches": 3, "repeats": 1},
                       "W7": {"per_batch": 200_000, "batches": 5}}},
}


def sizes(mode: str, workload: str) -> dict:
    """``per_batch``, ``batches`` and ``repeats`` of ``workload`` in ``mode``."""
    config = MODES[mode]
    return {"per_batch": config["per_batch"], "batches": config["batches"],
            "repeats": config["repeats"], **config.get("sizes", {}).get(workload, {})}


def measure(spark: Any, mode: str, timeout: float, log: Any,
            workloads: set[str] | None = None, systems: set[str] | None = None) -> dict:
    """Run every system of every workload; ``{workload: {system: {"runs": [...], ...}}}``."""
    config = MODES[mode]
    results: dict[str, dict[str, Any]] = {}
    for workload in config["workloads"]:
        if workloads is not None and workload not in workloads:
            continue
        size = sizes(mode, workload)
        n = size["per_batch"] * size["batches"]
        names = [s for s, (_, w, _) in SYSTEMS.items()
                 if workload in w and (systems is None or s in systems)
                 and s not in config.get("skip", ())]
        runs: dict[str, list[dict]] = {s: [] for s in names}
        for repeat in range(size["repeats"]):
            for name in names if repeat % 2 == 0 else names[::-1]:
                job = {**SYSTEMS[name][2], "workload": workload, "n": n,
                       "per_batch": size["per_batch"]}
                result = spark.call(job, timeout)
                runs[name].append(result)
                log(f"streamed {workload} {name:17s} n={n:>9,} "
                    + (f"{result['seconds']:.2f} s, {result.get('batches')} micro-batches"
                       if result.get("ok") else f"FAILED: {result.get('error', '')[:200]}"))
        results[workload] = {name: {**_summary(r, n), "per_batch": size["per_batch"]}
                             for name, r in runs.items()}
    return {**config, "workloads": results}


def _summary(runs: list[dict], n: int) -> dict:
    good = [r["seconds"] for r in runs if r.get("ok")]
    if not good:
        return {"error": next((r.get("error") for r in runs), "no run")}
    return {"seconds": good, "rate": n / min(good),
            "batches": next(r.get("batches") for r in runs if r.get("ok"))}


def prepare(mode: str, workloads: set[str]) -> None:
    """Generate the inputs before anything is timed."""
    import data

    for workload in MODES[mode]["workloads"]:
        if workload in workloads:
            size = sizes(mode, workload)
            data.events_mtimes_ordered(workload, size["per_batch"] * size["batches"])
            data.broadcast_updates_dir(workload, size["batches"])


def rate(results: dict, workload: str, system: str) -> float | None:
    entry = results.get("streamed", {}).get("workloads", {}).get(workload, {}).get(system, {})
    return entry.get("rate")


def targets(results: dict, ratio: Any, verdict: Any) -> list[tuple[str, str, str]]:
    rows = []
    for workload in ("W1", "W2", "W4"):
        b, fb = rate(results, workload, "batch-mb"), rate(results, workload, "foreachbatch")
        ok = None if not (b and fb) else b >= fb
        rows.append((f"{workload} micro-batch process_batch ≥ 1.0x foreachBatch", ratio(b, fb),
                     verdict(ok)))
    main, fb = rate(results, "W1", "main-noop"), rate(results, "W1", "foreachbatch-noop")
    ok = None if not (main and fb) else main >= 0.8 * fb
    rows.append(("W1 result.main (noop sink) ≥ 0.8x foreachBatch (noop sink)", ratio(main, fb),
                 verdict(ok)))
    for workload, need in (("W1", 2), ("W2", 2), ("W4", 2), ("W7", 1.5)):
        new = rate(results, workload, "element-mb")
        old = rate(results, workload, "element-operator")
        ok = None if not (new and old) else new >= need * old
        what = "timers: micro-batch" if workload == "W7" else "micro-batch per-element"
        rows.append((f"{workload} {what} ≥ {need}x the operator engine's", ratio(new, old),
                     verdict(ok)))
    rows += w3_targets(results, ratio, verdict)
    return rows


def fastest_native(results: dict) -> tuple[str | None, float | None]:
    """The fastest Spark-native W3 counter that ran: ``(system, events/s)``."""
    rates = {name: rate(results, "W3", name) for name in NATIVE_W3}
    best = max((n for n in rates if rates[n]), key=lambda n: rates[n] or 0, default=None)
    return best, rates[best] if best else None


def w3_targets(results: dict, ratio: Any, verdict: Any) -> list[tuple[str, str, str]]:
    """W3 on each engine against the fastest Spark-native counter (≥ 1.0x); the ratio to
    PyFlink is the throughput section's, where both run the same inputs (``report.py``)."""
    best, native = fastest_native(results)
    label = SYSTEMS[best][0].split(" (")[0] if best else "none ran"
    rows = []
    for name, system in (("micro-batch engine", "element-mb"),
                         ("operator engine (before)", "element-operator")):
        mine = rate(results, "W3", system)
        ok = None if not (mine and native) else mine >= native
        rows.append((f"W3 {name} ≥ 1.0x the fastest Spark-native counter ({label})",
                     ratio(mine, native), verdict(ok)))
    return rows


def table(results: dict, fmt_rate: Any, ratio: Any = None) -> str:
    """The streamed rows; the last column is each rate over the workload's baseline (W3: the
    fastest Spark-native counter; W7: the operator engine; else the hand-written
    ``foreachBatch`` job)."""
    streamed = results.get("streamed")
    if not streamed:
        return ""
    best, _ = fastest_native(results)
    lines = [f"## Streamed broadcast side, {streamed['batches']} micro-batches of "
             f"{streamed['per_batch']:,} events (W3, W7: as the column says)", "",
             "| workload | system | micro-batches × events | runs (s) | events/s (best) "
             "| vs baseline |", "|---|---|---:|---|---:|---:|"]
    for workload, systems in streamed["workloads"].items():
        base = rate(results, workload, {"W3": best, "W7": "element-operator"}.get(workload)
                    or "foreachbatch")
        for name, entry in systems.items():
            label = SYSTEMS[name][0]
            if entry.get("error"):
                lines.append(f"| {workload} | {label} | — | failed: "
                             f"{str(entry['error'])[:80]} | — | — |")
                continue
            runs = " / ".join(f"{s:.1f}" for s in entry["seconds"])
            lines.append(f"| {workload} | {label} | {entry['batches']} × "
                         f"{entry.get('per_batch', streamed['per_batch']):,} | {runs} | "
                         f"{fmt_rate(entry['rate'])} | "
                         f"{ratio(entry['rate'], base) if ratio else '—'} |")
    return "\n".join(lines)
