"""Write ``docs/benchmarks.md`` and ``docs/img/*.png`` from a results dict of ``run.py``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import fraud_pipeline
import scale
import sinks
import streamed

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs"
IMG = DOCS / "img"

LABELS = {
    "sparkcast": "sparkcast per-element",
    "sparkcast-batch": "sparkcast process_batch",
    "sparkcast-batch-streamed": "sparkcast process_batch, streamed broadcast",
    "sparkcast-mb": "sparkcast per-element, micro-batch engine",
    "pyflink": "PyFlink 2.3 per-element (p=2)",
    "foreachbatch": "foreachBatch + broadcast var + mapInPandas",
    "jvm-join": "Spark JVM broadcast join",
    "arrow-floor": "Spark mapInArrow, no logic (floor)",
    "pandas": "pandas, one process (limit)",
}
WORKLOADS = {
    "W1": "enrichment (1,000-row dimension)",
    "W2": "rules (100 rules on 5 fields)",
    "W3": "keyed counter (100k users) + threshold",
    "W4": "logistic regression (20 features)",
}
PEERS = ("pyflink", "foreachbatch", "jvm-join", "pandas", "arrow-floor")


def _rate(results: dict, workload: str, system: str) -> float | None:
    entry = results.get("throughput", {}).get(workload, {}).get(system, {})
    return entry.get("rate")


def _fmt_rate(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.0f}k" if value >= 1e4 else f"{value / 1e3:.1f}k"


def _ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "—"
    ratio = a / b
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.1f}x" if ratio < 100 else f"{ratio:.0f}x"


def throughput_table(results: dict) -> str:
    lines = ["| workload | system | sizes (events) | time small / large (s) | steady events/s "
             "| whole-run (s) | whole-run events/s |",
             "|---|---|---|---|---:|---:|---:|"]
    for workload, systems in results.get("throughput", {}).items():
        for system, entry in systems.items():
            n = entry.get("n", [None, None])
            secs = entry.get("seconds", [None, None])
            sizes = " / ".join(f"{v:,}" for v in n if v)
            times = " / ".join(f"{v:.2f}" for v in secs if v is not None)
            if entry.get("error"):
                lines.append(f"| {workload} | {LABELS[system]} | {sizes} | failed: "
                             f"{str(entry['error'])[:80]} | — | — | — |")
                continue
            lines.append(f"| {workload} | {LABELS[system]} | {sizes} | {times} | "
                         f"{_fmt_rate(entry.get('rate'))} | {entry.get('whole_run_s', 0):.1f} | "
                         f"{_fmt_rate(entry.get('whole_rate'))} |")
    return "\n".join(lines)


def ratio_table(results: dict) -> str:
    lines = ["| workload | sparkcast form | vs PyFlink | vs foreachBatch | vs JVM join "
             "| vs pandas | vs mapInArrow floor |", "|---|---|---:|---:|---:|---:|---:|"]
    for workload in results.get("throughput", {}):
        for mine in ("sparkcast", "sparkcast-batch", "sparkcast-batch-streamed", "sparkcast-mb"):
            rate = _rate(results, workload, mine)
            if rate is None:
                continue
            cells = [_ratio(rate, _rate(results, workload, peer)) for peer in PEERS]
            lines.append(f"| {workload} | {LABELS[mine]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(results: dict) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) rows."""
    rows = []

    def verdict(ok: bool | None) -> str:
        return "—" if ok is None else ("met" if ok else "missed")

    for workload in ("W1", "W2", "W4"):
        b = _rate(results, workload, "sparkcast-batch")
        f = _rate(results, workload, "pyflink")
        fb = _rate(results, workload, "foreachbatch")
        ok = None if not (b and f) else b >= 20 * f
        rows.append((f"{workload} process_batch ≥ 20x PyFlink", _ratio(b, f), verdict(ok)))
        ok = None if not (b and fb) else b >= 0.5 * fb
        rows.append((f"{workload} process_batch ≥ 0.5x foreachBatch", _ratio(b, fb), verdict(ok)))
    for workload in ("W1", "W2", "W3", "W4"):
        e = _rate(results, workload, "sparkcast")
        f = _rate(results, workload, "pyflink")
        need = 1.0 if workload == "W3" else 1.5
        ok = None if not (e and f) else e >= need * f
        rows.append((f"{workload} per-element ≥ {need:g}x PyFlink", _ratio(e, f), verdict(ok)))
    e, f = _rate(results, "W3", "sparkcast-mb"), _rate(results, "W3", "pyflink")
    rows.append(("W3 per-element on the micro-batch engine ≥ 50x PyFlink (the same inputs, "
                 "sizes and run)", _ratio(e, f), verdict(None if not (e and f) else e >= 50 * f)))
    rows += streamed.targets(results, _ratio, verdict)
    if results.get("fraud"):
        rows += fraud_pipeline.targets(results["fraud"], _ratio, verdict)
    if results.get("sinks"):
        rows += sinks.targets(results["sinks"])
    for name, lat in results.get("latency", {}).items():
        if lat.get("ok"):
            ok = (lat["p99_ms"] is not None and lat["p99_ms"] < 1000
                  and lat["seen"] == lat["updates"])
            workload = "W7" if lat.get("mode") == "timer" else "W5"
            rows.append((f"{workload} update p99 < 1 s at 20k events/s ({name})",
                         f"p50 {lat['p50_ms']:.0f} ms, p99 {lat['p99_ms']:.0f} ms, micro-batch "
                         f"median {lat['batch_ms_median']:.0f} ms", verdict(ok)))
            if lat.get("mode") == "keyed" and lat.get("engine") == "micro_batch":
                rows.append((f"W5 update p99 < 0.5 s, the aim ({name})",
                             f"p99 {lat['p99_ms']:.0f} ms", verdict(ok and lat["p99_ms"] < 500)))
    mem = results.get("memory", {})
    sc, fl = mem.get("sparkcast", {}), mem.get("pyflink", {})
    if sc.get("ok") and fl.get("ok"):
        rows.append(("W6 memory below PyFlink's", f"{sc['peak_rss_mb']:.0f} MB vs "
                     f"{fl['peak_rss_mb']:.0f} MB", verdict(sc["peak_rss_mb"] < fl["peak_rss_mb"])))
        rows.append(("W6 run within 2x PyFlink's", f"{sc['seconds']:.0f} s vs "
                     f"{fl['seconds']:.0f} s", verdict(sc["seconds"] <= 2 * fl["seconds"])))
    return rows


def plots(results: dict) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(parents=True, exist_ok=True)
    made = []
    workloads = list(results.get("throughput", {}))
    if workloads:
        systems = [s for s in LABELS if any(s in results["throughput"][w] for w in workloads)]
        fig, ax = plt.subplots(figsize=(10, 5))
        width = 0.8 / max(len(systems), 1)
        for i, system in enumerate(systems):
            values = [_rate(results, w, system) or 0 for w in workloads]
            bars = ax.bar([x + i * width for x in range(len(workloads))], values, width,
                          label=LABELS[system])
            for bar, value in zip(bars, values, strict=True):
                if value:
                    ax.annotate(_fmt_rate(value), (bar.get_x() + bar.get_width() / 2, value),
                                ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_yscale("log")
        ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(workloads))])
        ax.set_xticklabels([f"{w}\n{WORKLOADS[w]}" for w in workloads], fontsize=8)
        ax.set_ylabel("steady-state events/s (log)")
        ax.set_title(f"Throughput, local[2], {results.get('mode')} run {results['started'][:10]}")
        ax.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        fig.savefig(IMG / "throughput.png", dpi=110)
        plt.close(fig)
        made.append("img/throughput.png")
    latency = results.get("latency", {})
    if any(v.get("ok") for v in latency.values()):
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, entry in latency.items():
            if entry.get("ok") and entry["latencies_ms"]:
                values = sorted(entry["latencies_ms"])
                ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], marker="o",
                        label=f"sparkcast {name}")
        ax.set_xlabel("update written → first output with it (ms)")
        ax.set_ylabel("fraction of updates")
        ax.set_title("W5, W7: broadcast update latency at 20k events/s")
        ax.axvline(2000, color="grey", linestyle="--", linewidth=1)
        ax.legend()
        fig.tight_layout()
        fig.savefig(IMG / "update_latency.png", dpi=110)
        plt.close(fig)
        made.append("img/update_latency.png")
    mem = results.get("memory", {})
    if any(isinstance(v, dict) and v.get("ok") for v in mem.values()):
        fig, ax = plt.subplots(figsize=(6, 4))
        names = [n for n in ("sparkcast", "pyflink") if mem.get(n, {}).get("ok")]
        jvm = [mem[n]["peak_jvm_mb"] for n in names]
        py = [mem[n]["peak_python_mb"] for n in names]
        ax.bar(names, jvm, label="JVM")
        ax.bar(names, py, bottom=jvm, label="Python")
        ax.set_ylabel("peak resident memory (MB)")
        ax.set_title("W6: 100 MB broadcast state, parallelism 8")
        ax.legend()
        fig.tight_layout()
        fig.savefig(IMG / "memory.png", dpi=110)
        plt.close(fig)
        made.append("img/memory.png")
    return made


STREAMED = """\
The targets above compare the systems as the workloads define them: a broadcast side read as a
static DataFrame (the `foreachBatch` baseline re-reads the same Parquet every micro-batch). There,
sparkcast's non-keyed functions run on the micro-batch engine (one `mapInArrow`, no shuffle). The
*streamed broadcast* rows of this table run `result.main` to `noop`, so the operator engine
(union, shuffle, `transformWithStateInPandas`, broadcast state checkpointed per subtask);
`write_stream` runs the micro-batch engine instead, measured over many micro-batches in the next
table. *Micro-batch engine* (W3) reads the broadcast side as a stream too, but drops the main
output in `foreach_batch` (a `noop` write): the micro-batch engine, run the way the PyFlink row
is run, on the same inputs at the same sizes."""

METHOD = """\
## How it is measured

- **Runner**: `benchmarks/run.py` (`make bench`, `make bench-quick`). One Spark session (in a
  child process) serves every Spark-based measurement; each PyFlink job is its own process in
  `benchmarks/.venv-flink` (`apache-flink==2.3.0` from PyPI). Every measurement has a time limit.
- **Data**: generated by `benchmarks/data.py` with a fixed seed; the main stream of size *n* is the
  first *n* rows of one stream, so runs of two sizes share a prefix. Spark systems and pandas read
  the same rows as Parquet files (100k rows a file); PyFlink reads them as CSV.
- **Sizes and steady state**: every system runs every workload at two sizes (small on all
  systems, then large on all systems in reverse order). Steady-state events/s =
  (n_large − n_small) / (t_large − t_small): start-up, planning and per-query costs cancel.
  *Whole-run* is the large run's wall time including building the pipeline.
- **sparkcast** (both forms): `Stream(spark.readStream.parquet(dir)).connect(Stream(
  spark.read.parquet(broadcast)).broadcast(DESC)).process(fn, output_schema=..., parallelism=2)`
  (W3: `.key_by("user")` and a `KeyedBroadcastProcessFunction` with a `ValueState`), the main
  output written by `result.main.writeStream.format("noop").trigger(availableNow=True)` — one
  streaming query, all input files in one micro-batch, a fresh checkpoint, RocksDB state store.
  t = `start()` to the end of `awaitTermination()`. Session: `sparkcast.spark.session()` with
  `spark.sql.shuffle.partitions=2`, `local[2]`. With its static broadcast side, a non-keyed
  function (W1, W2, W4) runs on the micro-batch engine (one `mapInArrow`, no state; see
  architecture.md); W3 (keyed) on the operator engine.
- **sparkcast process_batch, streamed broadcast**: the same, but the broadcast Parquet is read
  with `readStream` (its rows arrive in the first micro-batch, with the events), so
  `result.main` runs the operator engine (union, shuffle, `transformWithStateInPandas`,
  broadcast state checkpointed): what a broadcast side that changes while the job runs costs.
- **sparkcast per-element, micro-batch engine** (W3): PyFlink's run on PyFlink's inputs. The
  same W3 events (Parquet here, CSV there: the same rows) and the same one broadcast row (the
  threshold), read as a stream as Flink's broadcast side is, at the same two sizes as PyFlink
  (`w3_same`), all events in one micro-batch; the main output dropped as Flink's
  `DiscardingSink` drops it (`foreach_batch` writing the main frame to `noop`), so the query
  runs on the micro-batch engine (keyed state per subtask, broadcast applied once on the
  driver). The steady-state rate of both comes from the same two sizes.
- **Streamed broadcast side, many micro-batches** (`benchmarks/streamed.py`): events
  `maxFilesPerTrigger`-limited to 500k a micro-batch (full; 100k quick) over 8 micro-batches,
  the broadcast Parquet read with `readStream`, `maxFilesPerTrigger=1`: its rows in micro-batch 0,
  one update in each later one. sparkcast writes with `write_stream` (Parquet, exactly once) on
  the micro-batch engine (broadcast applied once per micro-batch on the driver, main rows
  through Python once), or on the operator engine forced, as before. The `foreachBatch`
  baseline re-reads the update files up to the batch, folds them, broadcasts a variable, runs
  `mapInPandas` and appends Parquet. W3 (keyed) runs sparkcast on the micro-batch engine
  (`write_stream` of a keyed function with both sides streamed) and on the operator engine
  (forced), against three Spark-native ways to write the same counter, the fastest kept as
  *the* baseline: a `transformWithStateInPandas` processor grouped by user, a `ValueState`
  count per user, the latest threshold file read in `init` (once per task, i.e. per
  micro-batch; it reads the last file, not the batch's: a small advantage to the baseline),
  appending Parquet;
  `applyInPandasWithState` grouped by user, the count in the group state, the threshold read
  the same way; and `foreachBatch` with a state table: per micro-batch the previous state
  version (Parquet, one folder per batch id) is read, each user's events are numbered after
  its previous total (a window), flagged against the batch's threshold, appended to Parquet,
  and the new state version (previous ⟗ the batch's per-user counts) is written. The two
  grouped ones handle ~1.1k events/s here (a Python call and state calls per user per
  micro-batch, 100k users), so W3 runs 3 micro-batches of 100k events, once (quick: 3 × 100k
  too). W3's ratio to PyFlink is the throughput section's (the same inputs and sizes on both).
  W7 (timers) runs sparkcast per-element on both engines: events `user int, ts long` at 20k
  events/s of event time (`ts`, epoch ms, Spark's watermark with zero delay on the events,
  `event_time="ts"`), users in bursts of 5 events, a random one of 10k users each; the
  function is Flink's count-with-timeout example with the timeout broadcast: per user a count
  and a deadline (the last event + the timeout), an event-time timer registered at each
  event's deadline; the timer that fires at the current deadline emits the session; the
  broadcast side sets the timeout (1 s, then 1.2 s and 1 s in turn, one update per
  micro-batch). 5 micro-batches of 200k events
  (quick: 3 × 100k). Systems alternate (forward, then backward); best of 2.
- **W5 latency**: a `rate` source at 20k events/s, a broadcast update every 2 s to a JSON file
  source; the time from writing an update to the first micro-batch whose outputs carry it. The
  keyed form is a per-user counter (10k users) keyed by user whose outputs echo the version,
  written by `write_stream` on the micro-batch engine (at the default trigger, and at
  `processingTime="500 milliseconds"`) and on the operator engine (forced), always read from
  the committed output. Non-keyed forms: `result.main` (the operator engine) read in a
  `foreachBatch`; `write_stream` (the micro-batch engine) read from the micro-batch's files
  once its commit is logged, so the latency includes the exactly-once write. **W7 latency**
  (session timers): W7's function on the same machinery, keyed by user, the rate source's
  timestamp as `ts` (watermark with zero delay), users in bursts of 5 rate rows (10k users: a
  user returns every 2.5 s), each update carrying a timeout; an output exists only where a
  session's timer fired and carries the version the timer saw, so an update is seen when the
  first timer after it fires and commits; written by `write_stream` on each engine. The
  micro-batch median is Spark's `triggerExecution`: the floor of an update's latency is about
  one micro-batch (an update lands during one, takes effect in the next).
- **foreachBatch baseline**: the same streaming read; per micro-batch the broadcast Parquet is
  read to pandas, made a broadcast variable, and `mapInPandas` runs the same vectorized body as
  `process_batch`, written to `noop`. No state, no checkpointed broadcast state: the ceiling of a
  hand-written Spark job.
- **mapInArrow floor** (W1, W2, W4): the same streaming read; `mapInArrow` receives every
  event column and returns only the first, to `noop`. No logic and no state: what moving the
  events from the JVM to Python and back costs, the ceiling of every Python system on Spark.
- **JVM join** (W1): `events.join(F.broadcast(dim), "key")` computing amount × weight, same query
  shape and sink; no Python at all.
- **PyFlink 2.3**: as DESIGN.md §5 says is fair: `_python_worker_execution_mode=process`,
  `python.fn-execution.bundle.size=1000000`, `bundle.time=10000`, `python.state.cache-size=200000`
  (W3 has 100k users; the default caches 1,000 keys), parallelism 2, main stream read
  in the JVM (Flink's filesystem CSV table source as a DataStream of typed rows), broadcast side
  `from_collection`,
  output to the JVM `DiscardingSink`. The per-element bodies are the same functions
  (`benchmarks/logic.py`) sparkcast calls; PyFlink reads fields by position (its `Row` looks
  names up with `list.index`). t = `env.execute()`. Non-keyed Flink jobs may process some
  events before the broadcast rows arrive (W1 then drops them); they still count as processed.
  W3 runs PyFlink at 100k / 400k events (at 1M it ran past the time limit): each first access of a
  key is a blocking state request from the Python worker to the JVM. Probe on this machine, 50k
  W3 events: 31.8 s with the `ValueState`, 6.9 s with the same job keeping no state.
- **pandas**: one process reads the Parquet files and runs the vectorized body on all rows
  (W3: `groupby(user).cumcount()`): the limit without any streaming engine.
- **W5**: a Spark `rate` source at 20k events/s as the main stream, a JSON file source as the
  broadcast stream; every interval the driver writes an update (version, written_ms) atomically.
  The function stamps each output with the version it used; a `foreachBatch` on `result.main`
  records, for each version first seen, now − written_ms (driver clock for both). Default
  trigger (micro-batches back to back).
- **W6**: 100,000 broadcast entries of 1,000 bytes (100 MB) as a streaming Parquet source
  (a static side of that size travels in the plan, and `transformWithStateInPandas` cannot load
  a plan that large, `BROADCAST_VARIABLE_NOT_LOADED`), parallelism 8, 200k W1 events, written by
  `write_stream` (so on the micro-batch engine: the broadcast side is applied once, on the
  driver);
  peak resident memory of the process tree (driver, JVM, Python workers) sampled every 0.25 s
  from /proc, in a fresh Spark session. PyFlink: the same entries from a JVM CSV source,
  parallelism 8, the client's process tree (mini cluster + workers).
- **Kafka in and out** (`benchmarks/kafka.py`, `make bench-kafka`; its section below is written
  by `kafka.py --write` and kept when a full run rewrites this page): a throwaway broker (one
  KRaft node, `sparkcast.testing.kafka`) and one Spark session (`local[2]`,
  `spark.sql.shuffle.partitions=2`); every topic is read by Spark's Kafka source with
  `kafka.fetch.max.wait.ms=50`. *Throughput*: W1 over a 4-partition events topic and a
  dimension topic, `availableNow` in fixed batches; the hand-written job (`foreachBatch` that
  re-reads the dimension topic into a broadcast variable, `mapInPandas`, Spark's Kafka sink),
  sparkcast's `process_batch` through Spark's sink (a user's sink), and through `sinks.kafka`;
  forward then backward, best run of each. *Kafka latency*: each job runs alone, at each rate
  (5,000 and 20,000 events/s), on topics of its own: events `{"key": k}` (10,000 keys) appended
  to a 4-partition topic by a producer in a process of its own (confluent-kafka, not sharing
  the driver's GIL), a version record on a 1-partition topic every 2 s, both topics stamped
  by the broker (`LogAppendTime`), so "produced" is the moment a record is in the log. Every
  decision carries the latest version its job knew and its event's append time; a reader in
  another process reads the decisions topic `read_committed` (Spark's sink writes no
  transactions, so for the hand-written job that reader sees each record when a plain one
  would). *Update latency*: a version's append time → the first read of a decision carrying
  it or a later version; *event latency*: an event's append time → the read of its decision;
  p50/p99 over the measured window, which opens once one micro-batch reads under 2 s of
  events (the backlog of the job's start worked off, or the catch-up time spent) and holds one
  update per interval; the run then goes on, events still flowing, until every update and
  every event of the window has been decided (or a time limit); an event or update never
  read counts as slower than all. *Kept up*: the window's micro-batches decided events at ≥ 95%
  of the rate they were appended at (the events read by each batch after the first, over the
  time from the first's end to the last's: each batch reads what the topic holds when it
  starts, so only a job whose batches grow falls short), and at most 5 s of events were unread
  at the window's end (lag: the topic's end offsets minus the last completed micro-batch's).
  The jobs: **hand-written**, a stream-static join of
  the events with the versions topic (a batch read that Spark plans again in every
  micro-batch, reduced to its latest version), Spark's Kafka sink, default trigger, no keyed
  state, no Python; **sparkcast keyed**, `KeyedDecision` (`benchmarks/spark_systems.py`: a
  count per key in a `ValueState`, the version in broadcast state), the versions topic
  broadcast, `write_stream` into `sinks.kafka` (exactly once, two subtasks, keyed by key),
  default trigger; **sparkcast keyed + timer per key**, the same with
  `KeyedDecisionTimer`: each event registers a processing-time timer on the whole second
  1–2 s ahead (one or two per key), whose `on_timer` does nothing.
"""


def write(results: dict) -> None:
    """``docs/benchmarks.md`` and its plots (full runs: the committed figures)."""
    made = plots(results)
    if results.get("scale"):
        made += scale.plots(results["scale"], IMG)
    doc = DOCS / "benchmarks.md"
    doc.write_text(render(results, made) + kept_sections(doc.read_text() if doc.exists() else ""))


#: sections another script writes into docs/benchmarks.md (``benchmarks/kafka.py --write``,
#: between ``<!-- kafka:begin -->`` and ``<!-- kafka:end -->``): a full run keeps them
KEPT = re.compile(r"(?:^## [^\n]*\n\n)?<!-- (\w+):begin -->.*?<!-- \1:end -->\n?",
                  re.S | re.M)


def kept_sections(doc: str) -> str:
    """The sections of ``doc`` that other scripts wrote, each with its heading."""
    return "".join("\n" + match.group(0) for match in KEPT.finditer(doc))


def render(results: dict, made: list[str] | None = None) -> str:
    """The report as Markdown; ``made`` lists the plots to link."""
    made = made or []
    m = results["machine"]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `benchmarks/run.py --mode {results['mode']}` on {results['started']} "
        f"(took {results.get('elapsed_s', 0):.0f} s). **Quick runs use small inputs on a "
        "possibly busy machine: read them as smoke tests, not as figures** (a steady-state "
        "rate is shown as — when the larger run was not measurably slower than the smaller).",
        "",
        f"Machine: {m.get('cpu')} ({m.get('cores')} cores), {m.get('memory')}, {m.get('os')}; "
        f"Python {m.get('python')}, {m.get('java')}; PySpark {m.get('pyspark')}, pandas "
        f"{m.get('pandas')}, pyarrow {m.get('pyarrow')}; PyFlink 2.3.0. Load average at start: "
        + ", ".join(f"{v:.1f}" for v in m.get("load_at_start", [])) + ".",
        "",
        "Sizes: " + ", ".join(f"{k} = {v}" for k, v in results.get("sizes", {}).items()
                               if v is not None) + ".",
        "",
    ]
    lines += ["## Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t} | {m_} | {v} |" for t, m_, v in targets(results)]
    lines += ["", "## Throughput", "", throughput_table(results), "",
              "## sparkcast's ratio to each peer (steady-state events/s)", "",
              ratio_table(results), "", STREAMED, "", streamed.table(results, _fmt_rate, _ratio),
              ""]
    if results.get("fraud"):
        lines += [fraud_pipeline.table(results["fraud"], _fmt_rate), ""]
    if results.get("sinks"):
        lines += ["## Sinks, each beside the same write by hand in foreachBatch", "",
                  (sinks.__doc__ or "").split("\n\n")[1].replace("\n", " "), "",
                  sinks.table(results["sinks"]), ""]
    if "img/throughput.png" in made:
        lines += ["![throughput](img/throughput.png)", ""]
    latency = results.get("latency", {})
    if latency:
        lines += ["## W5, W7: broadcast update latency (W7: session timers)", "",
                  "| function form | updates seen | p50 (ms) | p99 (ms) | micro-batch median (ms) "
                  "| rows per micro-batch (median) |", "|---|---:|---:|---:|---:|---:|"]
        for name, e in latency.items():
            if e.get("ok"):
                lines.append(f"| {name} | {e['seen']}/{e['updates']} | {e['p50_ms'] or 0:.0f} | "
                             f"{e['p99_ms'] or 0:.0f} | {e['batch_ms_median'] or 0:.0f} | "
                             f"{e['rows_per_batch_median'] or 0:.0f} |")
            else:
                lines.append(f"| {name} | failed: {str(e.get('error'))[:100]} | | | | |")
        lines.append("")
        if "img/update_latency.png" in made:
            lines += ["![update latency](img/update_latency.png)", ""]
    if results.get("scale"):
        lines += [scale.render(results["scale"], made), ""]
    mem = results.get("memory")
    if mem:
        lines += ["## W6: 100 MB broadcast state at parallelism 8", "",
                  "| system | peak RSS (MB) | JVM (MB) | Python (MB) | before the job (MB) "
                  "| run (s) |", "|---|---:|---:|---:|---:|---:|"]
        for name in ("sparkcast", "pyflink"):
            e = mem.get(name, {})
            if e.get("ok"):
                lines.append(f"| {name} | {e['peak_rss_mb']:.0f} | {e['peak_jvm_mb']:.0f} | "
                             f"{e['peak_python_mb']:.0f} | "
                             f"{e.get('before_mb', 0) or 0:.0f} | {e['seconds']:.1f} |")
            else:
                lines.append(f"| {name} | failed: {str(e.get('error'))[:100]} | | | | |")
        lines.append("")
        if "img/memory.png" in made:
            lines += ["![memory](img/memory.png)", ""]
    lines += [METHOD]
    return "\n".join(lines)


def summary(results: dict) -> str:
    out = ["", "steady-state events/s:"]
    for workload, systems in results.get("throughput", {}).items():
        cells = [f"{s}={_fmt_rate(e.get('rate'))}" for s, e in systems.items()]
        out.append(f"  {workload}: " + ", ".join(cells))
    out.append("targets:")
    out += [f"  {t}: {m} -> {v}" for t, m, v in targets(results)]
    return "\n".join(out)


if __name__ == "__main__":  # re-render from a results file
    results = json.loads(Path(sys.argv[1]).read_text())
    write(results)
    print(summary(results))
