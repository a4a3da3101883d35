"""Profile one sparkcast run: ``py-spy record --subprocesses -- python profile_job.py W1 batch N``.

Runs a warm-up and then the job once, in this process's Spark session, so a sampling profiler
attached with ``--subprocesses`` sees the driver and every Python worker.
"""

import json
import sys

import spark_systems

workload, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runner = spark_systems.Runner()
runner.sparkcast(workload, 20_000, mode)  # warm-up: worker start-up, imports
print(json.dumps(runner.sparkcast(workload, n, mode)), flush=True)
