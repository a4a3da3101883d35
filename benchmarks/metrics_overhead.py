"""W1 throughput with sparkcast's metrics (the ``_metrics`` row per subtask and call, its
observation, the listener) against a baseline tree without them.

One variant per process (the code under test is what the Python workers import): run it with
``PYTHONPATH=<other tree>/src`` for the baseline, and alternate processes, since this machine
is shared and noisy. Prints one JSON line per measurement: the variant, the mode, events/s.

    python benchmarks/metrics_overhead.py --label metrics
    PYTHONPATH=/path/to/baseline/src python benchmarks/metrics_overhead.py --label baseline
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_systems import Runner  # noqa: E402

import sparkcast  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-events", type=int, default=400_000)
    parser.add_argument("--element-events", type=int, default=60_000)
    args = parser.parse_args()
    runner = Runner()
    for mode in ("element", "batch"):  # start the workers, warm the JVM
        runner.sparkcast("W1", 20_000, mode)
    runner.sparkcast("W1", 20_000, "batch", streamed_broadcast=True)
    cases = (("batch", args.batch_events, False), ("element", args.element_events, False),
             ("batch-streamed", args.batch_events, True))
    for _ in range(args.repeat):
        for name, n, streamed in cases:
            result = runner.sparkcast("W1", n, name.split("-")[0], streamed_broadcast=streamed)
            print(json.dumps({"label": args.label, "mode": name, "events": n,
                              "events_per_s": n / result["seconds"],
                              "seconds": result["seconds"], "batches": result["batches"],
                              "source": str(Path(sparkcast.__file__).parent)}), flush=True)


if __name__ == "__main__":
    main()
