"""One subtask's call in a Python worker: the one runner of every engine and shape.

The operator engine's processor (one ``handleInputRows`` per subtask), the micro-batch engine
in place and by subtask (one ``mapInArrow`` partition) differ in how a subtask's rows arrive
and which state its engine is bound to (Spark's state store, a shipped static side, a
micro-batch's snapshot and the subtask's keyed store); what happens next is this module's, the
same on all: the rows read in their source order (``ordering.py``) into the engine's inputs,
``SubtaskEngine.run_micro_batch`` with the batch's clocks, the outputs encoded once
(``encoding.py``), and the call's ``_metrics`` row (``metrics_rows.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.spark.execution.dead_letters import broadcast_letters_once
from sparkcast.spark.execution.encoding import OutputEncoder
from sparkcast.spark.execution.metrics_rows import metrics_table
from sparkcast.spark.execution.ordering import in_order
from sparkcast.spark.execution.values import co_elements, converters, key_values, main_values
from sparkcast.spark.plan import WorkerPlan


@dataclass(frozen=True)
class MainInput:
    """A subtask's main elements of one call: values (``Row``s, one pandas frame for
    ``process_batch``, a co-function's ``CoElement``s), their timestamps and keys (None:
    not keyed)."""

    values: Any = ()
    timestamps: list[int | None] | None = None
    keys: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Clocks:
    """The clocks of a call: Spark's watermark (None: none) and processing time (epoch ms)."""

    watermark: int | None = None
    processing_time: int = field(default_factory=lambda: int(time.time() * 1000))


class SubtaskRunner:
    """Runs subtasks of one plan in a worker; made once per task (or processor), it holds the
    plan's converters and the one output encoder of the call's outputs."""

    def __init__(self, plan: WorkerPlan) -> None:
        self.plan = plan
        self.encoder = OutputEncoder.of(plan)
        self.convert = converters(plan.main_types, plan.time_zone)
        self.second_convert = converters(plan.second_types, plan.time_zone)

    def read(self, engine: SubtaskEngine, first: pa.Table | None,
             second: pa.Table | None = None, *, positioned: bool = True) -> MainInput:
        """The main input of tables ``_ts, _seq, <fields> …`` (a co-function's two), each put
        in source order; ``positioned=False``: ``_ts, <fields> …`` as the rows lie (the
        in-place runner's partition, one source partition in its order)."""
        plan = self.plan
        if positioned:
            first = None if first is None else in_order(first)
            second = None if second is None else in_order(second)
        if plan.second_fields:
            return MainInput(*co_elements(
                (first, second), ((plan.main_fields, plan.key_positions),
                                  (plan.second_fields, plan.second_key_positions)),
                (self.convert, self.second_convert)))
        if first is None or not first.num_rows:
            return MainInput()
        start = 2 if positioned else 1
        values, timestamps = main_values(first, start, plan.main_fields, engine.vectorized,
                                         self.convert)
        keys = (key_values(first, start, plan.key_positions)
                if plan.keyed and not engine.vectorized else None)
        return MainInput(values, timestamps, keys)

    def run(self, engine: SubtaskEngine, subtask: int, main: MainInput,
            elements: Sequence[BroadcastElement] = (), clocks: Clocks | None = None, *,
            applied: bool = False, shared: Sequence[OutputRecord] = ()
            ) -> Iterator[pa.Table]:
        """Run one call of ``subtask`` on its bound ``engine`` and yield its outputs, encoded:
        ``shared`` first (broadcast outputs made once for all subtasks, this subtask's share).
        A keyless broadcast dead letter is every subtask's alike: subtask 0 alone reports
        those of ``elements`` (and of others the engine ``applied`` before the call)."""
        clocks = clocks or Clocks()
        engine.run_micro_batch(list(elements), main.values, main.timestamps, main.keys,
                               watermark=clocks.watermark,
                               processing_time=clocks.processing_time)
        engine.flush()
        outputs = engine.take_outputs()
        if subtask and (elements or applied):
            outputs = broadcast_letters_once(outputs)
        yield from self.encoder.encode_tables([*shared, *outputs], subtask)

    def report(self, engine: SubtaskEngine, subtask: int, events: int, applied: int
               ) -> pa.Table:
        """The call's ``_metrics`` row (``events`` main rows, ``applied`` broadcast elements),
        after its last ``run``."""
        engine.meter.finish()
        return metrics_table(engine, self.encoder, subtask, events, applied)
