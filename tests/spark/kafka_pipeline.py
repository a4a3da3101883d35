"""The Kafka sink's SIGKILL pipeline, run in a subprocess that the test kills.

``python -m tests.spark.kafka_pipeline <root> <bootstrap>`` runs two queries side by side in one
session, one per writer of the Kafka outputs, each over its own inputs and checkpoint under
``<root>/<writer>``: ``sink_pipeline``'s keyed pipeline (``availableNow``, micro-batch i = input
file i) with the main output and the dead letters into the topics ``faults-<writer>-main`` and
``faults-<writer>-dead_letters`` (``sinks.kafka``, 3 parts). With ``driver``, the side output
goes into a user's sink that runs after them (so the driver writes Kafka); with ``tasks``, to
``sinks.files`` (so the pattern's tasks write Kafka, ``outputs/sinks_in_tasks.py``). The master
allows 3 attempts per task (``local[4,3]``), so a Python worker killed mid-batch is retried
within the run.

Each query holds itself at the moments (``holds.Hold``, the first run only: the test's markers
under ``<root>/<writer>/holds``): ``AFTER_KAFKA_1`` once Kafka committed batch 1 and before
Spark's checkpoint did (``driver``: in the user's sink, which runs after the Kafka sinks;
``tasks``: as the driver commits the files sink's batch, after the tasks' Kafka transactions);
``sink_pipeline.in_flight(batch)`` at a batch's first event in the keyed function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.spark import sink_pipeline as pipeline
from tests.spark.holds import Hold, await_restarting

AFTER_KAFKA_1 = "batch-1-after-kafka"
#: who writes the Kafka outputs: the driver (a user's sink beside Kafka keeps it there), or the
#: pattern's tasks (Kafka and files sinks only, ``outputs/sinks_in_tasks.py``)
DRIVER, TASKS = "driver", "tasks"
WRITERS = (DRIVER, TASKS)


def prefix(writer: str) -> str:
    """The writer's topics' prefix."""
    return f"faults-{writer}"


def holds(base: Path) -> Path:
    return base / "holds"


class HoldAfterKafka:
    """A user's sink (run after the Kafka sinks): holds at batch 1."""

    def __init__(self, hold: Hold) -> None:
        self.hold = hold

    def write(self, frame: object, output: str, batch_id: int) -> None:
        if batch_id == 1:
            self.hold.at(AFTER_KAFKA_1)


def hold_before_files(root: Path) -> None:
    """Where the pattern's tasks write Kafka (no user's sink runs after them): hold as the
    driver commits the files sink's batch 1 (after Kafka's commit), the query found by the
    files sink's folder (``<root>/<writer>/big``)."""
    from sparkcast.spark.state.commit_log import CommitLog

    def holding(commit: Any) -> Any:
        def wrapped(self: Any, batch: int, *args: Any) -> Any:
            if batch == 1:
                Hold(str(holds(Path(self.path).parent))).at(AFTER_KAFKA_1)
            return commit(self, batch, *args)
        return wrapped

    CommitLog.commit = holding(CommitLog.commit)  # type: ignore[method-assign]
    CommitLog.log_empty = holding(CommitLog.log_empty)  # type: ignore[method-assign]


def start(spark: Any, base: Path, bootstrap: str, writer: str) -> Any:
    from sparkcast import sinks

    hold = Hold(str(holds(base)))
    result = pipeline.build(spark, base, "partitioned", hold)
    chosen = {"main": sinks.kafka(bootstrap, f"{prefix(writer)}-main", parallelism=3),
              "dead_letters": sinks.kafka(bootstrap, f"{prefix(writer)}-dead_letters",
                                          parallelism=3),
              "big": HoldAfterKafka(hold) if writer == DRIVER else sinks.files(str(base / "big"))}
    return result.write_stream(checkpoint_location=str(base / "checkpoint"), sinks=chosen,
                               trigger={"availableNow": True}, query_name=f"faults_{writer}")


def run(root: Path, bootstrap: str) -> None:
    from sparkcast.spark import session
    from sparkcast.spark.launch.jars import with_spark_jars

    hold_before_files(root)
    spark = session("local[4,3]", "sparkcast-kafka-faults",
                    conf=with_spark_jars({"spark.sql.shuffle.partitions": "2"}))
    def starting(writer: str) -> Callable[[], Any]:
        return lambda: start(spark, root / writer, bootstrap, writer)

    for again, query in [(starting(w), starting(w)()) for w in WRITERS]:
        await_restarting(again, query)
    spark.stop()


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2])
