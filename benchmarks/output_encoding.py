"""Output encoding figures of docs/architecture.md (in-process, no Spark session): per-element
main tuples -> checked Arrow table, and a process_batch output frame -> checked Arrow -> pandas.

    .venv/bin/python benchmarks/output_encoding.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from sparkcast.core.records import OutputRecord
from sparkcast.spark.execution.encoding import OutputEncoder

SCHEMA = StructType([StructField("user", StringType()), StructField("amount", DoubleType()),
                     StructField("seen", LongType())])
ELEMENTS = 200_000
FRAME_ROWS = 1_000_000


def best(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    encoder = OutputEncoder(SCHEMA, {})
    records = [OutputRecord(None, (f"u{i % 1000}", float(i), i), i) for i in range(ELEMENTS)]
    frame = pd.DataFrame({"user": [f"u{i % 1000}" for i in range(FRAME_ROWS)],
                          "amount": np.arange(FRAME_ROWS, dtype=float),
                          "seen": np.arange(FRAME_ROWS)})
    elements = best(lambda: encoder.encode_tables(records, 0))
    frames = best(lambda: encoder.encode([OutputRecord(None, frame, None, True)], 0))
    print(f"outputs -> checked Arrow table: {ELEMENTS / elements / 1e3:.0f}k rows/s")
    rate = FRAME_ROWS / frames / 1e6
    print(f"process_batch frame -> checked Arrow -> pandas: {rate:.2f}M rows/s")


if __name__ == "__main__":
    main()
