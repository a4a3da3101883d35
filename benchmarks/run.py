"""The benchmark runner: every workload on every system, alternating, in one session.

    python benchmarks/run.py --mode quick     # ~2-3 minutes (make bench-quick)
    python benchmarks/run.py --mode full      # ~20-25 minutes (make bench)
    python benchmarks/run.py --mode quick --only W1   # a subset of workloads
    python benchmarks/run.py --mode quick --scale     # with the (small) scale curves

Throughput (W1-W4): each system runs each workload at two input sizes; the steady-state rate is
(n2 - n1) / (t2 - t1), which cancels start-up and per-query fixed costs; the sizes alternate
over systems (small on every system, then large on every system) so drift in machine load is
spread over all of them. W5 (broadcast update latency) and W6 (memory with a 100 MB broadcast
state) are measured once each. W7 (a session count with an event-time timer per user) runs in
the streamed section (throughput on both engines) and in the latency section. Every
measurement runs in a child process with a time limit (``child.py``); a limit hit is reported,
not fatal. Results: ``benchmarks/results/<mode>.json``; a whole full run also writes
``docs/benchmarks.md`` and ``docs/img/*.png``, other runs ``benchmarks/results/<mode>.md``.
The fraud demo's pipeline (``fraud_pipeline.py``) runs unless ``--only`` or ``--skip-fraud``;
the scale curves (``scale.py``, each point its own Spark session) run in ``--mode full`` and
with ``--scale``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import child  # noqa: E402
import data  # noqa: E402
import fraud_pipeline  # noqa: E402
import report  # noqa: E402
import scale  # noqa: E402
import sinks  # noqa: E402
import streamed  # noqa: E402
from child import MAIN_PY, SparkServer, log  # noqa: E402

FLINK_PY = os.environ.get("BENCH_FLINK_PYTHON", str(HERE / ".venv-flink" / "bin" / "python"))

SYSTEMS = {  # name -> (label, workloads)
    "sparkcast": ("sparkcast per-element", ("W1", "W2", "W3", "W4")),
    "sparkcast-batch": ("sparkcast process_batch", ("W1", "W2", "W4")),
    "sparkcast-batch-streamed": ("sparkcast process_batch, streamed broadcast",
                                 ("W1", "W2", "W4")),
    "sparkcast-mb": ("sparkcast per-element, micro-batch engine", ("W3",)),
    "pyflink": ("PyFlink 2.3 per-element (p=2)", ("W1", "W2", "W3", "W4")),
    "foreachbatch": ("foreachBatch + broadcast var + mapInPandas", ("W1", "W2", "W4")),
    "jvm-join": ("Spark JVM stream-static broadcast join", ("W1",)),
    "arrow-floor": ("Spark mapInArrow, no logic (the floor for Python)", ("W1", "W2", "W4")),
    "pandas": ("pandas, one process (limit)", ("W1", "W2", "W3", "W4")),
}
SLOW = {"sparkcast", "sparkcast-mb", "pyflink"}
# W5 forms: (workload, function form, engine, trigger): non-keyed result.main (the operator's)
# and write_stream (the micro-batch engine); the keyed counter written by write_stream on the
# micro-batch engine, at the default trigger (micro-batches back to back) and a short fixed one,
# and on the operator (forced); W7, the session count with an event-time timer per user, on both
SHORT_TRIGGER = {"processingTime": "500 milliseconds"}
LATENCY_FORMS = (("W5", "element", "operator", None), ("W5", "batch", "operator", None),
                 ("W5", "element", "micro_batch", None), ("W5", "batch", "micro_batch", None),
                 ("W5", "keyed", "micro_batch", None),
                 ("W5", "keyed", "micro_batch", SHORT_TRIGGER),
                 ("W5", "keyed", "operator", None),
                 ("W7", "timer", "micro_batch", None), ("W7", "timer", "operator", None))
FORM_NAMES = {"element": "element", "batch": "batch", "keyed": "keyed counter",
              "timer": "session timers"}


def latency_name(form: str, engine: str, trigger: dict | None) -> str:
    """The latency row's name: the form, the engine (result.main for the non-keyed forms on the
    operator) and a trigger other than Spark's default."""
    name = FORM_NAMES[form]
    if form in ("element", "batch") and engine == "operator":
        name += ", result.main (operator engine)"
    else:
        name += ", " + ("micro-batch engine" if engine == "micro_batch"
                        else "operator engine (forced)")
    return name + (f", trigger {trigger['processingTime']}" if trigger else "")


MODES = {
    # sizes: (small, large) per speed class; timeout per measurement (s)
    "quick": {"slow": (20_000, 60_000), "fast": (100_000, 400_000), "timeout": 90,
              # W3 on the micro-batch engine and PyFlink: the same inputs, the same sizes
              "w3_same": (20_000, 60_000),
              # fewer workloads for some systems (a PyFlink job costs ~30 s of start-up)
              "restrict": {"pyflink": ("W1",), "sparkcast-batch-streamed": ("W1",),
                           "arrow-floor": ("W1",)},
              "w2_slow": (10_000, 30_000),
              "w5": {"updates": 6, "interval": 1.0, "warmup": 3.0, "rate": 20_000},
              "w6": None},
    "full": {"slow": (200_000, 1_000_000), "fast": (1_000_000, 5_000_000), "timeout": 420,
             "restrict": {},
             "w2_slow": (50_000, 200_000),
             "w3_same": (100_000, 400_000),  # PyFlink keyed: ~3k events/s
             "w5": {"updates": 20, "interval": 2.0, "warmup": 10.0, "rate": 20_000},
             "w6": {"n": 200_000, "parallelism": 8}},
}


def run_flink(job: dict, timeout: float) -> dict:
    if not Path(FLINK_PY).exists():
        return {"ok": False, "error": f"no PyFlink venv at {FLINK_PY} (make bench creates it)"}
    return child.run_once([FLINK_PY, str(HERE / "flink_systems.py"), json.dumps(job)], timeout,
                          "flink")


def measure(spark: SparkServer, system: str, workload: str, n: int, timeout: float) -> dict:
    if system == "pyflink":
        data.events_csv(workload, n)
        return run_flink({"workload": workload, "n": n}, timeout)
    job: dict = {"workload": workload, "n": n}
    if system == "sparkcast":
        job.update(op="sparkcast", mode="element")
    elif system == "sparkcast-batch":
        job.update(op="sparkcast", mode="batch")
    elif system == "sparkcast-batch-streamed":
        job.update(op="sparkcast", mode="batch", streamed_broadcast=True)
    elif system == "sparkcast-mb":  # PyFlink's run: the broadcast side a stream, output dropped
        job.update(op="sparkcast", mode="element", streamed_broadcast=True, output="noop")
    elif system == "foreachbatch":
        job.update(op="foreachbatch")
    elif system == "jvm-join":
        job.update(op="jvm_join")
    elif system == "arrow-floor":
        job.update(op="arrow_floor")
    else:
        job.update(op="pandas_limit")
    return spark.call(job, timeout)


def sizes_for(mode: dict, system: str, workload: str) -> tuple[int, int]:
    if workload == "W3" and system in ("pyflink", "sparkcast-mb"):
        return mode["w3_same"]
    if system in SLOW:
        return mode["w2_slow"] if workload == "W2" else mode["slow"]
    return mode["fast"]


def systems_for(mode: dict, systems: list[str], workload: str) -> list[str]:
    return [s for s in systems if workload in mode["restrict"].get(s, SYSTEMS[s][1])]


def steady(small: dict, large: dict) -> dict:
    out = {"n": [small.get("n"), large.get("n")], "seconds": [small.get("seconds"),
                                                              large.get("seconds")]}
    if small.get("ok") and large.get("ok"):
        dt = large["seconds"] - small["seconds"]
        dn = large["n"] - small["n"]
        out["rate"] = dn / dt if dt > 0 else None
        out["whole_run_s"] = large["seconds"] + (large.get("build_seconds") or 0)
        out["whole_rate"] = large["n"] / large["seconds"]
        out["startup_s"] = (small["seconds"] - small["n"] / out["rate"]) if out["rate"] else None
    else:
        out["error"] = small.get("error") or large.get("error")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--only", nargs="*", help="workloads (W1..W7) to run")
    parser.add_argument("--systems", nargs="*", help="systems to run (default all)")
    parser.add_argument("--no-report", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="skip the single-batch throughput section (W1-W4)")
    parser.add_argument("--skip-sinks", action="store_true",
                        help="skip the sinks section (sinks.py)")
    parser.add_argument("--skip-streamed", action="store_true",
                        help="skip the multi-batch streamed section (streamed.py)")
    parser.add_argument("--skip-fraud", action="store_true",
                        help="skip the fraud pipeline section (fraud_pipeline.py)")
    parser.add_argument("--scale", action="store_true",
                        help="run the scale curves (scale.py; always in --mode full)")
    parser.add_argument("--skip-scale", action="store_true", help="not even in --mode full")
    args = parser.parse_args()
    mode = MODES[args.mode]
    only = set(args.only or ["W1", "W2", "W3", "W4", "W5", "W6", "W7"])
    run_fraud = not args.skip_fraud and not args.only
    run_scale = (args.scale or args.mode == "full") and not args.skip_scale
    systems = [s for s in SYSTEMS if not args.systems or s in args.systems]
    (HERE / "results").mkdir(exist_ok=True)
    started = time.time()
    results: dict = {"mode": args.mode, "started": datetime.now(UTC).isoformat(
        timespec="seconds"), "machine": machine(), "throughput": {}, "raw": [],
        "sizes": {k: v for k, v in mode.items() if k != "timeout"}}

    log("generating data (fixed seed, cached in benchmarks/.data/)")
    for workload in ("W1", "W2", "W3", "W4"):
        if workload not in only or args.skip_throughput:
            continue
        for system in systems_for(mode, systems, workload):
            for n in sizes_for(mode, system, workload):
                data.events_dir(workload, n)
                if system == "pyflink":
                    data.events_csv(workload, n)
        data.broadcast_dir(workload)
    if not args.skip_streamed:
        streamed.prepare(args.mode, only)
    if not args.skip_sinks:
        sinks.prepare(args.mode, only)
    if run_fraud:
        fraud_pipeline.prepare(args.mode)
    if run_scale:
        scale.prepare(args.mode)

    spark = SparkServer()
    spark.start()
    log("warming up (Python workers, JIT; not counted)")
    spark.call({"op": "warmup"}, mode["timeout"])
    for workload in ("W1", "W2", "W3", "W4"):
        if workload not in only or args.skip_throughput:
            continue
        runs = systems_for(mode, systems, workload)
        raw: dict[str, list[dict]] = {s: [] for s in runs}
        for index in range(2):
            order = runs if index == 0 else runs[::-1]
            for system in order:
                n = sizes_for(mode, system, workload)[index]
                result = measure(spark, system, workload, n, mode["timeout"])
                result["n"] = n
                raw[system].append(result)
                results["raw"].append({"workload": workload, "system": system, **result})
                shown = (f"{result['seconds']:.2f} s" if result.get("ok")
                         else f"FAILED: {result.get('error', '')[:200]}")
                log(f"{workload} {system:16s} n={n:>9,} {shown}")
        results["throughput"][workload] = {s: steady(*raw[s]) for s in runs
                                           if len(raw[s]) == 2}

    if not args.skip_streamed:
        results["streamed"] = streamed.measure(spark, args.mode, mode["timeout"], log, only,
                                               set(args.systems) if args.systems else None)

    if not args.skip_sinks:
        results["sinks"] = sinks.measure(spark, args.mode, mode["timeout"], log, only)

    if run_fraud:
        results["fraud"] = fraud_pipeline.measure(spark, args.mode, mode["timeout"], log)

    for workload, form, engine, trigger in LATENCY_FORMS:
        if workload not in only or not mode["w5"]:
            continue
        job = {"op": "latency", "mode": form, "engine": engine, "trigger": trigger,
               **mode["w5"]}
        budget = mode["w5"]["updates"] * mode["w5"]["interval"] + mode["w5"]["warmup"] + 90
        result = spark.call(job, budget)
        name = latency_name(form, engine, trigger)
        results.setdefault("latency", {})[name] = result
        log(f"{workload} sparkcast {name}: "
            + (f"p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, "
               f"{result['seen']}/{result['updates']} updates seen, micro-batch median "
               f"{result['batch_ms_median']} ms" if result.get("ok")
               else f"FAILED: {result.get('error', '')[:200]}"))
    spark.stop()

    if "W6" in only and mode["w6"]:
        w6 = mode["w6"]
        data.large_broadcast_dir()
        data.events_csv("W1", w6["n"])
        data.events_dir("W1", w6["n"])
        fresh = SparkServer()  # a fresh session: no Python workers left from earlier jobs
        fresh.start()
        sc = fresh.call({"op": "memory", **w6}, mode["timeout"])
        fresh.stop()
        fl = run_flink({"workload": "W6", "n": w6["n"], "parallelism": w6["parallelism"]},
                       mode["timeout"])
        results["memory"] = {"sparkcast": sc, "pyflink": fl, **w6}
        for name, r in (("sparkcast", sc), ("pyflink", fl)):
            log(f"W6 {name}: " + (f"peak RSS {r['peak_rss_mb']:.0f} MB (JVM "
                                 f"{r['peak_jvm_mb']:.0f}, Python {r['peak_python_mb']:.0f}), "
                                 f"{r['seconds']:.1f} s" if r.get("ok")
                                 else f"FAILED: {r.get('error', '')[:200]}"))

    if run_scale:  # every point is its own process with a fresh session
        results["scale"] = scale.measure(args.mode, log)

    results["elapsed_s"] = time.time() - started
    suffix = "" if not args.only else "-" + "-".join(sorted(only))
    out = HERE / "results" / f"{args.mode}{suffix}.json"
    out.write_text(json.dumps(results, indent=1))
    log(f"results: {out} ({results['elapsed_s']:.0f} s)")
    if not args.no_report:
        if args.mode == "full" and not args.only and not args.systems:
            report.write(results)
            log("wrote docs/benchmarks.md and docs/img/")
        else:  # a smoke run or a subset must not replace the committed figures
            markdown = out.with_suffix(".md")
            markdown.write_text(report.render(results))
            print(report.throughput_table(results))
            log(f"wrote {markdown} (docs/benchmarks.md comes from a whole full run)")
        print(report.summary(results))


def machine() -> dict:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(open("/proc/meminfo").readline().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    versions = {}
    try:
        out = subprocess.run([MAIN_PY, "-c", "import pyspark, pandas, pyarrow; print("
                              "pyspark.__version__, pandas.__version__, pyarrow.__version__)"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        versions.update(pyspark=out[0], pandas=out[1], pyarrow=out[2])
    except Exception:  # noqa: BLE001
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem,
            "os": platform.platform(), "python": platform.python_version(),
            "java": java.splitlines()[0] if java else "", "load_at_start": os.getloadavg(),
            **versions}


if __name__ == "__main__":
    main()
