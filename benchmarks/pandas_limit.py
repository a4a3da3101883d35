"""Single-process pandas: the limit of the vectorized bodies on one core, no streaming engine.

Times reading the Parquet files into pandas plus the workload's vectorized body over all rows.
W3 (keyed counter) is ``groupby(user).cumcount() + 1`` compared to the threshold.
"""

from __future__ import annotations

import time

import data
import logic


def run(workload: str, n: int) -> dict:
    start = time.perf_counter()
    frame = data.events_frame(workload, n)
    bcast = data.broadcast_rows(workload)
    if workload == "W1":
        out = logic.enrich_frame(frame, bcast.set_index("key")["weight"])
    elif workload == "W2":
        out = logic.match_rules_frame(frame, [tuple(r) for r in bcast.itertuples(index=False,
                                                                                name=None)])
    elif workload == "W3":
        threshold = int(bcast["value"].iloc[0])
        count = frame.groupby("user").cumcount() + 1
        out = frame[["user"]].assign(count=count, flagged=count > threshold)
    elif workload == "W4":
        row = bcast.iloc[0]
        out = logic.score_frame(frame, row["weights"], float(row["bias"]))
    else:
        raise ValueError(workload)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rows_in": len(frame), "rows_out": len(out), "batches": 1}
