"""The processing-time clock's operator, in the workers: a ``transformWithState`` in
``ProcessingTime`` mode that never sees a row (``planning/tagging.py`` builds its input).

Spark runs a micro-batch without input only when a stateful operator of the query asks for one,
and only a ``ProcessingTime`` ``transformWithState`` asks on the wall clock: at every trigger,
as the operator engine's own does. A ``foreachBatch`` query has no stateful operator, so with
this one in its input the micro-batch engine's subtasks run at every trigger and fire the
processing-time timers that are due at the batch's time, without waiting for more input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming import StatefulProcessor

if TYPE_CHECKING:
    import pandas as pd

#: the clock's output: no row ever comes out
CLOCK_SCHEMA = "tick int"


class ClockProcessor(StatefulProcessor):
    """Keeps no state and emits nothing: its only effect is Spark's no-data micro-batches."""

    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                        ) -> Iterator[pd.DataFrame]:
        return iter(())

    def close(self) -> None:
        pass
