"""A hold after a Kafka part's commit, for the cluster test (``test_cluster_kafka.py``): shipped
in the job's packed environment with a ``.pth`` line that imports it in every Python process
there, it acts only where ``SPARKCAST_HOLD_DIR`` is set (the executors, by
``spark.executorEnv``). The first Kafka part of micro-batch ``HOLD_BATCH`` to commit, on any
worker (the file is made once), writes its worker's pid and part to ``<dir>/committed`` and
holds its task, so the test can kill the executor after the commit, before Spark hears of it.

The hold sits on the part writer because the writer runs in Python workers of its own (a
``mapInArrow`` after the pattern's), where no user function is opened.
"""

from __future__ import annotations

import os
import time
from typing import Any

HOLD_BATCH = 3
HOLD_SECONDS = 60.0
VARIABLE = "SPARKCAST_HOLD_DIR"


def install(folder: str) -> None:
    from sparkcast.spark.outputs.kafka_transactions import PartWriter

    write = PartWriter._write_with

    def held(self: Any, mine: Any, part: int, batches: Any, attempt: Any) -> Any:
        count = write(self, mine, part, batches, attempt)
        if count is not None and self.batch_id == HOLD_BATCH:
            try:
                made = os.open(os.path.join(folder, "committed"),
                               os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return count
            os.write(made, f"{os.getpid()} {part}".encode())
            os.close(made)
            time.sleep(HOLD_SECONDS)
        return count

    PartWriter._write_with = held  # type: ignore[method-assign]


if os.environ.get(VARIABLE):
    install(os.environ[VARIABLE])
