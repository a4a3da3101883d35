"""Run inside a compat virtualenv after ``sparkcast run enrich_job.py --output out --checkpoint
ck --available-now``: the job's output read back equals the harness over the same sample.
Prints one ``enrich_job ...`` line; exits non-zero on a difference."""

from __future__ import annotations

import sys
from collections import Counter

import enrich_job as job

from sparkcast.spark import read_output, session
from sparkcast.testing import KeyedBroadcastHarness


def expected() -> tuple[Counter, Counter]:
    harness = KeyedBroadcastHarness(job.EnrichClicks(), lambda v: v["user"], [job.CATALOGUE])
    harness.open()
    products, clicks = job.sample()
    for product in products:
        harness.process_broadcast_element(product, timestamp=product["ts"])
    for click in sorted(clicks, key=lambda c: c["ts"]):
        harness.process_element(click, timestamp=click["ts"])
    return (Counter(tuple(v) for v in harness.output()),
            Counter(tuple(v) for v in harness.side_output(job.UNKNOWN)))


def main() -> int:
    spark = session(app_name="sparkcast-compat-enrich")
    main_rows, unknown = expected()
    got_main = Counter(tuple(r) for r in read_output(spark, "out").collect())
    got_unknown = Counter(tuple(r) for r in read_output(spark, "out", "unknown").collect())
    ok = got_main == main_rows and got_unknown == unknown
    print(f"enrich_job {'PASS' if ok else 'FAIL'}: {sum(got_main.values())} main rows, "
          f"{sum(got_unknown.values())} unknown (the harness: {sum(main_rows.values())}, "
          f"{sum(unknown.values())})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
