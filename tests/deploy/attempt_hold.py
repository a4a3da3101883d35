"""Holds for the cluster's attempt tests (``test_cluster_attempts.py``): shipped in the job's
packed environment with a ``.pth`` line that imports it in every Python process there, it acts
only where ``SPARKCAST_ATTEMPT_HOLD_DIR`` is set (the executors, by ``spark.executorEnv``).

The first task attempt of micro-batch ``HOLD_BATCH`` to have written its part of a sink (a Kafka
part committed with its marker; a files sink's part written into the staging folder) claims
``<dir>/<sink>`` (made once: later attempts, copies and retries go on), writes there its Python
worker's pid, its partition, stage and attempt number, and holds its task after the write, in
its first attempt only: until Spark kills it (a speculative copy of it succeeded), the test
SIGKILLs its executor, ``<dir>/release`` appears, or ``HOLD_SECONDS`` pass. So the moment held
is an event (a part written and not yet reported), not a sleep that a loaded machine outruns.

The hooks sit on the writers because they run in Python workers of their own (a ``mapInArrow``
after the pattern's), where no user function is opened. ``<sink>`` is ``kafka-<topic>``, or
``files-<folder name>`` of the files sink's path.
"""

from __future__ import annotations

import os
import time
from typing import Any

HOLD_BATCH = 1
HOLD_SECONDS = 180.0
VARIABLE = "SPARKCAST_ATTEMPT_HOLD_DIR"
RELEASE = "release"


def claim(folder: str, sink: str) -> bool:
    """Claim ``sink``'s hold for this attempt (False: another attempt has it)."""
    from pyspark import TaskContext

    try:
        made = os.open(os.path.join(folder, sink), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    context = TaskContext.get()
    found = ((context.partitionId(), context.stageId(), context.attemptNumber()) if context
             else (-1, -1, -1))
    os.write(made, " ".join(map(str, (os.getpid(), *found))).encode())
    os.close(made)
    return True


def hold(folder: str) -> None:
    parent, deadline = os.getppid(), time.monotonic() + HOLD_SECONDS
    release = os.path.join(folder, RELEASE)
    while (not os.path.exists(release) and time.monotonic() < deadline
           and os.getppid() == parent):
        time.sleep(0.05)


def install(folder: str) -> None:
    from sparkcast.spark.execution.task_writer import TaskWriter
    from sparkcast.spark.outputs.kafka_transactions import PartWriter

    write_part = PartWriter._write_with
    write_files = TaskWriter.write

    def part_held(self: Any, mine: Any, part: int, batches: Any, attempt: Any) -> Any:
        count = write_part(self, mine, part, batches, attempt)
        if (count is not None and self.batch_id == HOLD_BATCH
                and claim(folder, f"kafka-{self.topic}")):
            hold(folder)
        return count

    def files_held(self: Any, batches: Any, partition: int) -> Any:
        rows = write_files(self, batches, partition)
        *_, sink, _, batch = self.staging.rstrip("/").split("/")  # <path>/<staging>/<batch>
        if batch == str(HOLD_BATCH) and claim(folder, f"files-{sink}"):
            hold(folder)
        return rows

    PartWriter._write_with = part_held  # type: ignore[method-assign]
    TaskWriter.write = files_held  # type: ignore[method-assign]


if os.environ.get(VARIABLE):
    install(os.environ[VARIABLE])
