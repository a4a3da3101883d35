"""Output encoding figures of docs/architecture.md (in-process, no Spark session): per-element
and a process_batch output frame -> checked Arrow -> pandas."""
import time
import numpy as np
import pandas as pd
from pyspark.sql.types import StructType, StructField, StringType, DoubleType, LongType
from sparkcast.core.records import OutputRecord
from sparkcast.spark.rows import OutputEncoder

schema = StructType([StructField("user", StringType()), StructField("amount", DoubleType()),
                     StructField("seen", LongType())])
enc = OutputEncoder(schema, {})
N = 200_000
records = [(None, (f"u{i % 1000}", float(i), i), i, False) for i in range(N)]
frame = pd.DataFrame({"user": [f"u{i % 1000}" for i in range(1_000_000)],
                      "amount": np.arange(1_000_000, dtype=float), "seen": np.arange(1_000_000)})
def best(fn, n=5):
    out = []
    for _ in range(n):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)
t1 = best(lambda: enc.encode_tables(records, 0))
t2 = best(lambda: enc.encode([OutputRecord(None, frame, None, True)], 0))
print(f"outputs -> checked Arrow table: {N / t1 / 1e3:.0f}k rows/s")
print(f"process_batch frame -> checked Arrow -> pandas: {1_000_000 / t2 / 1e6:.2f}M rows/s")
