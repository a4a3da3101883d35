"""The Kafka sink's SIGKILL pipeline, run in a subprocess that the test kills.

``python -m tests.spark.kafka_pipeline <base> <bootstrap> <prefix> <driver|tasks>`` runs
``sink_pipeline``'s keyed pipeline (``availableNow``, micro-batch i = input file i) with the main
output and the dead letters into the topics ``<prefix>-main`` and ``<prefix>-dead_letters``
(``sinks.kafka``, 3 parts). With ``driver``, the side output goes into a user's sink that runs
after them (so the driver writes Kafka): when ``<base>/kill-after-kafka`` names the batch, that
sink deletes the file and SIGKILLs its own process group, so the kill lands after Kafka
committed the batch and before Spark's checkpoint did. With ``tasks``, the side output goes to
``sinks.files`` (so the pattern's tasks write Kafka) and the kill comes as the driver commits
that sink's batch, after the tasks' Kafka transactions. The master allows 3 attempts per
task (``local[2,3]``), so a Python worker killed mid-transaction is retried within the run.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.spark import sink_pipeline as pipeline

KILL_FLAG = "kill-after-kafka"
#: who writes the Kafka outputs: the driver (a user's sink beside Kafka keeps it there), or the
#: pattern's tasks (Kafka and files sinks only, ``outputs/sinks_in_tasks.py``)
DRIVER, TASKS = "driver", "tasks"


class KillAfterKafka:
    """A user's sink (run after the Kafka sinks): dies once, at the batch the flag names."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def write(self, frame: object, output: str, batch_id: int) -> None:
        if self.flag.exists() and self.flag.read_text().strip() == str(batch_id):
            self.flag.unlink()
            os.killpg(os.getpgid(0), signal.SIGKILL)


def kill_after_files(flag: Path) -> None:
    """Where the pattern's tasks write Kafka (no user's sink runs after them): die once, as
    the driver commits the files sink's batch that the flag names (after Kafka's commit)."""
    from sparkcast.spark.state.commit_log import CommitLog

    def dying(commit: Any) -> Any:
        def wrapped(self: Any, batch: int, *args: Any) -> Any:
            if flag.exists() and flag.read_text().strip() == str(batch):
                flag.unlink()
                os.killpg(os.getpgid(0), signal.SIGKILL)
            return commit(self, batch, *args)
        return wrapped

    CommitLog.commit = dying(CommitLog.commit)  # type: ignore[method-assign]
    CommitLog.log_empty = dying(CommitLog.log_empty)  # type: ignore[method-assign]


def run(base: Path, bootstrap: str, prefix: str, writer: str) -> None:
    from sparkcast import sinks
    from sparkcast.spark import session
    from sparkcast.spark.launch.jars import with_spark_jars

    spark = session("local[2,3]", "sparkcast-kafka-faults",
                    conf=with_spark_jars({"spark.sql.shuffle.partitions": "2"}))
    result = pipeline.build(spark, base, "partitioned")
    chosen = {"main": sinks.kafka(bootstrap, f"{prefix}-main", parallelism=3),
              "dead_letters": sinks.kafka(bootstrap, f"{prefix}-dead_letters", parallelism=3),
              "big": KillAfterKafka(base / KILL_FLAG)}
    if writer == TASKS:
        kill_after_files(base / KILL_FLAG)
        chosen["big"] = sinks.files(str(base / "big"))
    query = result.write_stream(checkpoint_location=str(base / "checkpoint"), sinks=chosen,
                                trigger={"availableNow": True})
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
