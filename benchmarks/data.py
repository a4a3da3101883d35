"""Workload data, generated once with a fixed seed and cached under ``benchmarks/.data/``.

Every system reads the same rows: Spark systems the Parquet files, PyFlink the same rows as CSV
(read by Flink's JVM filesystem source), pandas the Parquet files. The main stream of size ``n`` is
the first ``n`` rows of one endless stream (chunks of ``CHUNK`` rows, each seeded by its index),
so a smaller run is a prefix of a larger one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from logic import FEATURES, N_FEATURES, RULE_FIELDS

SEED = 20240611
CHUNK = 100_000
ROOT = Path(os.environ.get("BENCH_DATA", Path(__file__).resolve().parent / ".data"))
DIM_KEYS = 1000
USERS_W3 = 100_000
N_RULES = 100
# W7 (sessions with a timeout): event time runs at RATE_W7 events/s from T0_W7; users arrive in
# bursts of BURST_W7 events, a random one of USERS_W7 each, so a user comes back every ~2.5 s
# of event time on average and a 1 s timeout ends most sessions after one burst
RATE_W7 = 20_000
T0_W7 = 1_700_000_000_000
USERS_W7 = 10_000
BURST_W7 = 5
TIMEOUT_W7 = 1_000

EVENT_SCHEMAS = {
    "W1": "key int, amount double",
    "W2": "user int, amount double, country int, merchant int, hour int, device int",
    "W3": "user int, amount double",
    "W4": "user int, " + ", ".join(f"{f} double" for f in FEATURES),
    "W7": "user int, ts long",
}
BROADCAST_SCHEMAS = {
    "W1": "key int, weight double",
    "W2": ", ".join(f"{f} {'double' if f == 'min_amount' else 'int'}" for f in RULE_FIELDS),
    "W3": "name string, value long",
    "W4": "name string, bias double, weights array<double>",
    "W7": "version long, written_ms long, timeout long, ts long",
}


def _events_chunk(workload: str, index: int, rows: int) -> pd.DataFrame:
    rng = np.random.default_rng([SEED, int(workload[1:]), index])
    if workload == "W1":
        return pd.DataFrame({"key": rng.integers(0, DIM_KEYS, rows, dtype=np.int32),
                             "amount": rng.uniform(1, 1000, rows).round(2)})
    if workload == "W2":
        return pd.DataFrame({
            "user": rng.integers(0, 1_000_000, rows, dtype=np.int32),
            "amount": rng.exponential(200.0, rows).round(2),
            "country": rng.integers(0, 50, rows, dtype=np.int32),
            "merchant": rng.integers(0, 10_000, rows, dtype=np.int32),
            "hour": rng.integers(0, 24, rows, dtype=np.int32),
            "device": rng.integers(0, 5, rows, dtype=np.int32),
        })
    if workload == "W3":
        return pd.DataFrame({"user": rng.integers(0, USERS_W3, rows, dtype=np.int32),
                             "amount": rng.uniform(1, 1000, rows).round(2)})
    if workload == "W4":
        frame = pd.DataFrame(rng.normal(0.0, 1.0, (rows, N_FEATURES)).round(4),
                             columns=list(FEATURES))
        frame.insert(0, "user", rng.integers(0, 1_000_000, rows, dtype=np.int32))
        return frame
    if workload == "W7":
        first = index * CHUNK  # event time continues across chunks
        users = rng.integers(0, USERS_W7, -(-rows // BURST_W7), dtype=np.int32)
        return pd.DataFrame({"user": np.repeat(users, BURST_W7)[:rows],
                             "ts": T0_W7 + (first + np.arange(rows)) * 1000 // RATE_W7})
    raise ValueError(workload)


def broadcast_rows(workload: str) -> pd.DataFrame:
    rng = np.random.default_rng([SEED, int(workload[1:]), 999_999])
    if workload == "W1":
        return pd.DataFrame({"key": np.arange(DIM_KEYS, dtype=np.int32),
                             "weight": rng.uniform(0.5, 1.5, DIM_KEYS).round(4)})
    if workload == "W2":
        lo = rng.integers(0, 9_000, N_RULES)
        h_lo = rng.integers(0, 20, N_RULES)
        return pd.DataFrame({
            "rule_id": np.arange(N_RULES, dtype=np.int32),
            "min_amount": rng.uniform(10, 800, N_RULES).round(2),
            "country": np.where(rng.random(N_RULES) < 0.5, -1,
                                rng.integers(0, 50, N_RULES)).astype(np.int32),
            "merchant_lo": lo.astype(np.int32),
            "merchant_hi": (lo + rng.integers(500, 5_000, N_RULES)).astype(np.int32),
            "hour_lo": h_lo.astype(np.int32),
            "hour_hi": (h_lo + rng.integers(2, 12, N_RULES)).astype(np.int32),
            "device": np.where(rng.random(N_RULES) < 0.5, -1,
                               rng.integers(0, 5, N_RULES)).astype(np.int32),
        })
    if workload == "W3":
        return pd.DataFrame({"name": ["threshold"], "value": np.array([5], dtype=np.int64)})
    if workload == "W7":
        return pd.DataFrame({name: np.array([value], dtype=np.int64) for name, value in (
            ("version", 0), ("written_ms", 0), ("timeout", TIMEOUT_W7), ("ts", T0_W7))})
    if workload == "W4":
        return pd.DataFrame({"name": ["lr"], "bias": [-0.25],
                             "weights": [rng.normal(0, 0.5, N_FEATURES).round(4).tolist()]})
    raise ValueError(workload)


def events_dir(workload: str, n: int) -> Path:
    """Parquet files holding the first ``n`` events (``CHUNK`` rows per file)."""
    path = ROOT / workload / f"events_{n}"
    if (path / "_DONE").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    for index, start in enumerate(range(0, n, CHUNK)):
        frame = _events_chunk(workload, index, CHUNK).iloc[: n - start]
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                       path / f"part-{index:05d}.parquet")
    (path / "_DONE").write_text(str(n))
    return path


def events_frame(workload: str, n: int) -> pd.DataFrame:
    return pq.read_table(events_dir(workload, n)).to_pandas()


def events_csv(workload: str, n: int) -> Path:
    """The same events as CSV without a header (for Flink's JVM-side filesystem source)."""
    path = ROOT / workload / f"events_{n}.csv"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        events_frame(workload, n).to_csv(tmp, header=False, index=False)
        tmp.rename(path)
    return path


def broadcast_json(workload: str) -> str:
    """The broadcast rows as JSON records (small; PyFlink takes them with from_collection)."""
    return json.dumps(broadcast_rows(workload).to_dict(orient="records"))


def broadcast_dir(workload: str) -> Path:
    path = ROOT / workload / "broadcast"
    if not (path / "_DONE").exists():
        path.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(broadcast_rows(workload), preserve_index=False),
                       path / "part-00000.parquet")
        (path / "_DONE").write_text("1")
    return path


# W6: a 100 MB broadcast state: LARGE_ROWS entries of LARGE_VALUE_BYTES each
LARGE_ROWS = 100_000
LARGE_VALUE_BYTES = 1_000


def large_broadcast_dir() -> Path:
    path = ROOT / "W6" / "broadcast"
    if not (path / "_DONE").exists():
        path.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([SEED, 6])
        letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
        blob = letters[rng.integers(0, len(letters), LARGE_ROWS * LARGE_VALUE_BYTES)]
        values = [blob[i * LARGE_VALUE_BYTES:(i + 1) * LARGE_VALUE_BYTES].tobytes().decode()
                  for i in range(LARGE_ROWS)]
        frame = pd.DataFrame({"key": np.arange(LARGE_ROWS, dtype=np.int32), "payload": values})
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False),
                       path / "part-00000.parquet", row_group_size=10_000)
        frame.to_csv(path.parent / "broadcast.csv", header=False, index=False)
        (path / "_DONE").write_text("1")
    return path


def large_broadcast_csv() -> Path:
    large_broadcast_dir()
    return ROOT / "W6" / "broadcast.csv"


# the multi-batch streamed workloads: the broadcast side changes between micro-batches


def _broadcast_update(workload: str, version: int) -> pd.DataFrame:
    """Update ``version`` (>= 1) of the broadcast side: a tenth of the dimension re-weighted
    (W1), ten rules re-thresholded (W2), the threshold (W3), the model's bias (W4) or the
    session timeout (W7: 1 s and 1.2 s in turn) changed."""
    rows = broadcast_rows(workload)
    if workload == "W1":
        part = rows.iloc[(version * 100) % DIM_KEYS:][:100].copy()
        part["weight"] = (part["weight"] * (1 + version / 100)).round(4)
        return part
    if workload == "W2":
        part = rows.iloc[(version * 10) % N_RULES:][:10].copy()
        part["min_amount"] = (part["min_amount"] * (1 + version / 20)).round(2)
        return part
    if workload == "W3":
        return pd.DataFrame({"name": ["threshold"], "value": np.array([5 + version],
                                                                      dtype=np.int64)})
    if workload == "W4":
        rows = rows.copy()
        rows["bias"] = -0.25 + version / 100
        return rows
    if workload == "W7":
        rows = rows.copy()
        rows["version"] = version
        rows["timeout"] = TIMEOUT_W7 + 200 * (version % 2)
        return rows
    raise ValueError(workload)


def broadcast_updates_dir(workload: str, versions: int) -> Path:
    """``versions`` Parquet files: the broadcast rows, then one update per file, their
    modification times in order (a file source with ``maxFilesPerTrigger=1`` reads file i in
    micro-batch i)."""
    path = ROOT / workload / f"broadcast_updates_{versions}"
    if (path / "_DONE").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    base = os.path.getmtime(path) - 3_600
    for version in range(versions):
        frame = broadcast_rows(workload) if version == 0 else _broadcast_update(workload, version)
        target = path / f"part-{version:05d}.parquet"
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), target)
        os.utime(target, (base + version, base + version))
    (path / "_DONE").write_text(str(versions))
    return path


def events_mtimes_ordered(workload: str, n: int) -> Path:
    """``events_dir`` with the files' modification times in name order, so that
    ``maxFilesPerTrigger`` takes them in the same order in every run."""
    path = events_dir(workload, n)
    if not (path / "_ORDERED").exists():
        base = os.path.getmtime(path) - 7_200
        for index, file in enumerate(sorted(path.glob("part-*.parquet"))):
            os.utime(file, (base + index, base + index))
        (path / "_ORDERED").write_text("1")
    return path
