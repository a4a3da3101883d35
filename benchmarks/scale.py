"""Scale curves of the keyed pattern: keyed state, broadcast state, parallelism, a cluster.

One function for every point, ``ScaleCounter``: keyed by user, a per-user count in a
``ValueState``, and a lookup per event in a broadcast ``MapState`` of N entries (read as a
stream: the N entries in micro-batch 0, ten re-weighted in each later one). Every point is its
own process with a fresh Spark session (its peak memory is its own), one streaming query over
Parquet files, one file per micro-batch (``maxFilesPerTrigger=1``), ``availableNow``, written by
``write_stream``:

- **keys** (10k to 10M): the first micro-batches hold every key once (files of up to 1M events:
  the state is filled), then ``measure`` events over the same keys, 100k a micro-batch;
- **broadcast entries** (1k to 1M): 100k users, the entries arrive in micro-batch 0;
- **parallelism** 1 and 2 locally (``local[p]``, ``parallelism=p``), and 2 workers of one core
  on the standalone cluster the tests start (``tests/deploy/cluster.py``).

Throughput is the measured micro-batches' events over their ``triggerExecution`` time (the fill
batches are not counted); memory is the peak resident memory of the point's process tree (the
driver, its JVM and Python workers; on the cluster also the master, workers, executors and
their Python workers), sampled every 0.25 s; the checkpoint size is ``du`` of the checkpoint
folder after the run (offsets, commits and every retained state store version).

    python benchmarks/scale.py --mode quick          # the small points; prints the curves
    python benchmarks/scale.py --mode full --curves keys   # one curve, 10k to 10M keys
    python benchmarks/run.py --mode full             # runs them too (run.py --scale in quick)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import child  # noqa: E402
import data  # noqa: E402
import procmem  # noqa: E402
from child import MAIN_PY  # noqa: E402

FILL_CHUNK = 1_000_000  # the largest fill micro-batch
MEASURE_CHUNK = 100_000
CURVES = ("keys", "entries", "parallelism")
USERS = 100_000  # the users of every curve but the keys curve
ENTRIES = 1_000  # the broadcast entries of every curve but the entries curve

MODES = {
    "quick": {"keys": (10_000, 100_000), "entries": (1_000, 10_000), "measure": 200_000,
              "parallelism": (1, 2), "cluster": True, "timeout": 300},
    "full": {"keys": (10_000, 100_000, 1_000_000, 10_000_000),
             "entries": (1_000, 10_000, 100_000, 1_000_000), "measure": 300_000,
             "parallelism": (1, 2), "cluster": True,
             # the 10M-key point fills 10M keys first (~12 min on the operator engine here)
             "timeout": 1800},
}

# -------------------------------------------------------------------------------- the function


def _function() -> Any:
    """``ScaleCounter`` (built here so that the module imports without sparkcast)."""
    from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor

    dim = MapStateDescriptor("dim", int, float)

    class ScaleCounter(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

        def process_element(self, value, ctx):
            state = ctx.get_broadcast_state(dim)
            size = state.get(-1)  # the entry count rides under key -1
            weight = state.get(value.slot % int(size)) if size else None
            count = (self.count.value() or 0) + 1
            self.count.update(count)
            yield value.user, count, weight

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(dim).put(value.key, value.weight)

    return ScaleCounter(), dim


# ------------------------------------------------------------------------------------- data


def events_dir(keys: int, measure: int) -> tuple[Path, int]:
    """Events (``user int, slot int, amount double``): every key once (the fill), then
    ``measure`` events over the keys; one file per micro-batch, modification times in order.
    Returns the folder and the number of fill files."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data.ROOT / "scale" / f"events_{keys}_{measure}"
    fills = -(-keys // FILL_CHUNK)
    if (path / "_DONE").exists():
        return path, fills
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([data.SEED, keys, measure])
    frames = [np.arange(s, min(s + FILL_CHUNK, keys), dtype=np.int32)
              for s in range(0, keys, FILL_CHUNK)]
    frames += [rng.integers(0, keys, min(MEASURE_CHUNK, measure - s), dtype=np.int32)
               for s in range(0, measure, MEASURE_CHUNK)]
    base = os.path.getmtime(path) - 7_200
    for index, users in enumerate(frames):
        frame = pd.DataFrame({"user": users,
                              "slot": rng.integers(0, 1 << 30, len(users), dtype=np.int32),
                              "amount": rng.uniform(1, 1000, len(users)).round(2)})
        target = path / f"part-{index:05d}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), target)
        os.utime(target, (base + index, base + index))
    (path / "_DONE").write_text(str(len(frames)))
    return path, fills


def broadcast_dir(entries: int, files: int) -> Path:
    """``entries`` weights (and their count under key -1) in file 0, ten re-weighted in each
    of the next ``files - 1``; modification times in order."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = data.ROOT / "scale" / f"broadcast_{entries}_{files}"
    if (path / "_DONE").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([data.SEED, entries])
    base = os.path.getmtime(path) - 7_200
    for index in range(files):
        keys = (np.concatenate([[-1], np.arange(entries)]) if index == 0
                else rng.integers(0, entries, 10))
        weights = rng.uniform(0.5, 1.5, len(keys)).round(4)
        if index == 0:
            weights[0] = entries
        frame = pd.DataFrame({"key": keys.astype(np.int32), "weight": weights})
        target = path / f"part-{index:05d}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), target)
        os.utime(target, (base + index, base + index))
    (path / "_DONE").write_text(str(files))
    return path


def prepare(mode: str, curves: Collection[str] = CURVES) -> None:
    for point in points(mode, curves):
        files = _inputs(point)
        broadcast_dir(point["entries"], files)


def _inputs(point: dict) -> int:
    path, fills = events_dir(point["keys"], point["measure"])
    return len(list(path.glob("part-*.parquet")))


# ----------------------------------------------------------------------------------- points


def points(mode: str, curves: Collection[str] = CURVES) -> list[dict]:
    """Every point of ``mode`` on ``curves``: ``{"curve", "keys", "entries", "measure",
    "master", ...}``."""
    config = MODES[mode]
    measure = config["measure"]
    out = [{"curve": "keys", "keys": k, "entries": ENTRIES, "measure": measure,
            "parallelism": 2, "master": "local[2]"} for k in config["keys"]]
    out += [{"curve": "entries", "keys": USERS, "entries": e, "measure": measure,
             "parallelism": 2, "master": "local[2]"} for e in config["entries"]]
    out += [{"curve": "parallelism", "keys": USERS, "entries": ENTRIES, "measure": measure,
             "parallelism": p, "master": f"local[{p}]"} for p in config["parallelism"]]
    if config["cluster"]:
        out.append({"curve": "parallelism", "keys": USERS, "entries": ENTRIES,
                    "measure": measure, "parallelism": 2, "master": "cluster"})
    return [point for point in out if point["curve"] in curves]


class Sampler:
    """Peak resident memory of several process trees together (``procmem.tree_rss``)."""

    def __init__(self, roots: list[int]) -> None:
        self.roots, self.peak, self._stop = roots, 0, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, sum(procmem.tree_rss(r)["total"] for r in self.roots))
            self._stop.wait(0.25)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_point(point: dict) -> dict:
    """One point in this process (a fresh session): its rates, memory and checkpoint size."""
    from spark_systems import checked

    from sparkcast.spark import Stream, session

    p = point["parallelism"]
    master = point.get("master_url") or point.get("master") or "local[2]"
    conf = {"spark.sql.shuffle.partitions": str(p), "spark.default.parallelism": str(p)}
    if master.startswith("spark://"):
        conf.update({"spark.executor.cores": "1", "spark.cores.max": "2",
                     "spark.executor.memory": "1g", "spark.pyspark.python": sys.executable,
                     "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", str(HERE))})
    spark = session(master=master, conf=conf)
    events, fills = events_dir(point["keys"], point["measure"])
    files = len(list(events.glob("part-*.parquet")))
    main = (spark.readStream.schema("user int, slot int, amount double")
            .option("maxFilesPerTrigger", 1).parquet(str(events)))
    updates = (spark.readStream.schema("key int, weight double").option("maxFilesPerTrigger", 1)
               .parquet(str(broadcast_dir(point["entries"], files))))
    function, dim = _function()
    engine = point.get("engine", "micro_batch")
    result = Stream(main).key_by("user").connect(Stream(updates).broadcast(dim)).process(
        function, output_schema="user int, count long, weight double", parallelism=p,
        engine=engine)
    checked(result, engine)
    tmp = Path(tempfile.mkdtemp(prefix="sparkcast-scale-"))
    checkpoint, out = tmp / "checkpoint", tmp / "out"
    before = procmem.tree_rss(os.getpid())["total"]
    with Sampler([os.getpid(), *point.get("roots", [])]) as sampler:
        start = time.perf_counter()
        # URIs: a cluster master refuses a bare local path (other hosts would not see it)
        query = result.write_stream(out.as_uri(), checkpoint.as_uri(),
                                    trigger={"availableNow": True})
        query.awaitTermination()
        seconds = time.perf_counter() - start
    progress = [p_ for p_ in query.recentProgress if p_["numInputRows"]]
    measured = [p_ for p_ in progress if p_["batchId"] >= fills]
    rows = sum(p_["numInputRows"] for p_ in measured)
    busy = sum(p_["durationMs"]["triggerExecution"] for p_ in measured) / 1000
    result_ = {"seconds": seconds, "engine": engine,
               "batches": len(progress), "fill_batches": fills,
               "rate": rows / busy if busy else None, "measured_rows": rows,
               "first_batch_s": progress[0]["durationMs"]["triggerExecution"] / 1000
               if progress else None,
               "fill_s": sum(p_["durationMs"]["triggerExecution"] for p_ in progress
                             if p_["batchId"] < fills) / 1000,
               "peak_rss_mb": sampler.peak / 2**20, "before_mb": before / 2**20,
               "checkpoint_bytes": _du(checkpoint), "state_bytes": _du(checkpoint / "state")}
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return result_


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


# ----------------------------------------------------------------------------------- driver


def _call(point: dict, timeout: float) -> dict:
    """``run_point`` in a child process (its own session and memory); a timeout is reported."""
    return child.run_once([MAIN_PY, str(Path(__file__).resolve()), "--point", json.dumps(point)],
                          timeout, "scale")


def _on_cluster(point: dict, timeout: float) -> dict:
    """The point on a standalone cluster (master and two one-core workers), started and
    stopped here with the tests' helper."""
    sys.path.insert(0, str(ROOT))
    from tests.deploy.cluster import Cluster

    cluster = Cluster(Path(tempfile.mkdtemp(prefix="sparkcast-scale-cluster-")))
    try:
        cluster.start()
        roots = [p.pid for p in cluster.processes]
        return _call({**point, "master_url": cluster.master_url, "roots": roots}, timeout)
    except RuntimeError as exc:
        return {"ok": False, "error": str(exc)}
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


def measure(mode: str, log: Any, timeout: float | None = None,
            curves: Collection[str] = CURVES) -> dict:
    """Every point of ``mode`` on ``curves``, one after another; ``{"points": [...]}``."""
    (HERE / "results").mkdir(exist_ok=True)
    limit = timeout or MODES[mode]["timeout"]
    results, done = [], {}
    for point in points(mode, curves):
        started = time.time()
        same = json.dumps({k: v for k, v in point.items() if k != "curve"}, sort_keys=True)
        if same in done:  # the same point on another curve (e.g. 100k keys, 1k entries, p=2)
            result = done[same]
        else:
            result = done[same] = (_on_cluster(point, limit) if point.get("master") == "cluster"
                                   else _call(point, limit))
        results.append({**point, **result, "wall_s": time.time() - started})
        log(f"scale {point['curve']:11s} keys={point['keys']:>10,} entries="
            f"{point['entries']:>9,} p={point['parallelism']} {point.get('master', '')}: "
            + (f"{result['rate']:,.0f} events/s, peak {result['peak_rss_mb']:,.0f} MB, "
               f"checkpoint {result['checkpoint_bytes'] / 2**20:,.1f} MB ({result['engine']})"
               if result.get("ok") and result.get("rate")
               else f"FAILED: {str(result.get('error'))[:200]}"))
    return {"mode": mode, "measure": MODES[mode]["measure"], "points": results}


# ----------------------------------------------------------------------------------- report


def curve(scale: dict, name: str) -> list[dict]:
    return [p for p in scale.get("points", []) if p["curve"] == name and p.get("ok")
            and p.get("rate")]


def _x(point: dict, name: str) -> Any:
    if name == "keys":
        return point["keys"]
    if name == "entries":
        return point["entries"]
    return f"{point.get('master', 'local')}, p={point['parallelism']}"


def _engine(point: dict) -> str:
    return point["engine"].replace("_", "-")


def per_unit(point: dict) -> float:
    """Checkpoint bytes per key."""
    return point["checkpoint_bytes"] / point["keys"]


def _count(value: int) -> str:
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return str(value)


def sentences(scale: dict) -> dict[str, str]:
    """One sentence per curve on how cost grows, computed from the points."""
    out = {}
    for name, what in (("keys", "keys"), ("entries", "broadcast entries")):
        points_ = curve(scale, name)
        if len(points_) < 2:
            continue
        first, last = points_[0], points_[-1]
        lo, hi = _x(first, name), _x(last, name)
        fall = first["rate"] / last["rate"]
        if name == "keys":
            grows = (f"the checkpoint from {per_unit(first):,.0f} to {per_unit(last):,.0f} "
                     "bytes per key")
        else:
            added = (last["checkpoint_bytes"] - first["checkpoint_bytes"]) / (hi - lo)
            grows = (f"the checkpoint from {first['checkpoint_bytes'] / 2**20:,.1f} to "
                     f"{last['checkpoint_bytes'] / 2**20:,.1f} MB ({added:,.0f} bytes per "
                     "added entry)")
        out[name] = (
            f"From {_count(lo)} to {_count(hi)} {what} ({hi / lo:g}x), throughput "
            + ("is flat" if 0.95 <= fall <= 1.05 else f"falls {fall:.2f}x"
               if fall > 1 else f"rises {1 / fall:.2f}x")
            + f" ({first['rate']:,.0f} → {last['rate']:,.0f} events/s), peak memory goes "
            f"from {first['peak_rss_mb']:,.0f} to {last['peak_rss_mb']:,.0f} MB, and "
            + grows + ".")
    points_ = curve(scale, "parallelism")
    local = {p["parallelism"]: p for p in points_ if p.get("master", "").startswith("local")}
    cluster = next((p for p in points_ if p.get("master") == "cluster"), None)
    if 1 in local and 2 in local:
        text = (f"Parallelism 2 runs at {local[2]['rate'] / local[1]['rate']:.2f}x the "
                f"throughput of parallelism 1 on this 2-core machine")
        if cluster:
            text += (f"; two one-core workers on the standalone cluster run at "
                     f"{cluster['rate'] / local[2]['rate']:.2f}x local parallelism 2")
        out["parallelism"] = text + "."
    return out


def table(scale: dict) -> str:
    lines = ["| curve | keys | broadcast entries | where | engine | fill (s) | events/s "
             "| peak RSS (MB) | checkpoint (MB) | checkpoint bytes per key | run (s) |",
             "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for p in scale.get("points", []):
        where = f"{p.get('master', 'local[2]')}, p={p['parallelism']}"
        if not (p.get("ok") and p.get("rate")):
            lines.append(f"| {p['curve']} | {p['keys']:,} | {p['entries']:,} | {where} | "
                         f"failed: {str(p.get('error'))[:80]} | | | | | | |")
            continue
        lines.append(
            f"| {p['curve']} | {p['keys']:,} | {p['entries']:,} | {where} | {p['engine']} | "
            f"{p['fill_s']:.1f} | {p['rate']:,.0f} | {p['peak_rss_mb']:,.0f} | "
            f"{p['checkpoint_bytes'] / 2**20:,.1f} | {per_unit(p):,.0f} | "
            f"{p['seconds']:.1f} |")
    return "\n".join(lines)


def plots(scale: dict, img: Path) -> list[str]:
    """One PNG per curve into ``img``; the names made (relative to docs/)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    made = []
    for name, label in (("keys", "keyed state (keys)"), ("entries", "broadcast state (entries)")):
        points_ = curve(scale, name)
        if len(points_) < 2:
            continue
        xs = [_x(p, name) for p in points_]
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
        series = (("events/s", [p["rate"] for p in points_]),
                  ("peak RSS (MB)", [p["peak_rss_mb"] for p in points_]),
                  (("checkpoint bytes per key", [per_unit(p) for p in points_])
                   if name == "keys" else
                   ("checkpoint (MB)", [p["checkpoint_bytes"] / 2**20 for p in points_])))
        for ax, (ylabel, ys) in zip(axes, series, strict=True):
            ax.plot(xs, ys, marker="o")
            ax.set_xscale("log")
            ax.set_xlabel(label)
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
        fig.suptitle(f"Scale: {label}, {_engine(points_[0])} engine")
        fig.tight_layout()
        fig.savefig(img / f"scale_{name}.png", dpi=110)
        plt.close(fig)
        made.append(f"img/scale_{name}.png")
    points_ = curve(scale, "parallelism")
    if points_:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        labels = [_x(p, "parallelism") for p in points_]
        bars = ax.bar(labels, [p["rate"] for p in points_])
        for bar, p in zip(bars, points_, strict=True):
            ax.annotate(f"{p['rate']:,.0f}", (bar.get_x() + bar.get_width() / 2, p["rate"]),
                        ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("events/s")
        ax.set_title(f"Scale: parallelism, {_engine(points_[0])} engine")
        fig.tight_layout()
        fig.savefig(img / "scale_parallelism.png", dpi=110)
        plt.close(fig)
        made.append("img/scale_parallelism.png")
    return made


def render(scale: dict, made: list[str]) -> str:
    """The scale section of docs/benchmarks.md."""
    said = sentences(scale)
    paragraphs = (__doc__ or "").split("\n\n")
    lines = ["## Scale curves", "", paragraphs[1].replace("\n", " "), "", paragraphs[2], "",
             paragraphs[3].replace("\n", " "), "", table(scale), ""]
    for name in ("keys", "entries", "parallelism"):
        image = f"img/scale_{name}.png"
        if name in said:
            lines += [said[name], ""]
        if image in made:
            lines += [f"![scale: {name}]({image})", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=sorted(MODES), default="quick")
    parser.add_argument("--point", help=argparse.SUPPRESS)
    parser.add_argument("--curves", nargs="*", choices=CURVES, default=list(CURVES),
                        help="the curves to measure (default: all)")
    args = parser.parse_args()
    if args.point:
        out = sys.stdout
        sys.stdout = sys.stderr
        try:
            result = {"ok": True, **run_point(json.loads(args.point))}
        except Exception as exc:  # noqa: BLE001 - reported to the driver
            import traceback

            traceback.print_exc()
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        child.answer(result, out)
        return
    prepare(args.mode, args.curves)
    results = measure(args.mode, lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}",
                                                 flush=True), curves=args.curves)
    some = "" if set(args.curves) == set(CURVES) else "-" + "-".join(args.curves)
    target = HERE / "results" / f"scale-{args.mode}{some}.json"
    target.write_text(json.dumps(results, indent=1))
    print(table(results))
    for sentence in sentences(results).values():
        print(sentence)


if __name__ == "__main__":
    main()
