"""The operator engine's work in a Python worker: runs the engine for one subtask per call of
the processor (``processor.py``, which Spark ships and calls, and which hands each call here).

Spark calls ``handleInputRows`` once per subtask with rows and ``handleExpiredTimer`` for a
subtask whose Spark timer expired. Both give the batch's clocks; the engine fires its own due
timers first (as a watermark reaching a Flink operator would), then applies the batch's
broadcast rows in their deterministic order, then the main rows. One Spark timer per subtask
wakes it for its earliest engine timer when no input arrives.

Each call runs through the one subtask runner (``subtask.py``). Engines are cached per Python
worker (``engines.py``) so ``open`` runs once per subtask, not once per micro-batch; state is
re-bound from Spark at every call, so a retried or moved task starts from the checkpointed
state, never from memory. A static broadcast side seeds a subtask's new state from the plan's
static side (``static_side.py``), applied once on the driver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

from sparkcast.api.timers import TimeDomain
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import BroadcastElement, OutputRecord
from sparkcast.core.seed import Seed, apply_seed
from sparkcast.spark.execution.dead_letters import subtask_share
from sparkcast.spark.execution.encoding import to_pandas
from sparkcast.spark.execution.engines import apply_elements, cached_engine, plan_engine
from sparkcast.spark.execution.packing import unpack_main
from sparkcast.spark.execution.static_side import static_seed
from sparkcast.spark.execution.subtask import Clocks, MainInput, SubtaskRunner
from sparkcast.spark.execution.values import convert_rows, converters, rows_of
from sparkcast.spark.layout import BROADCAST_SIDE, MAIN_SIDE, SECOND_SIDE
from sparkcast.spark.plan import WorkerPlan
from sparkcast.spark.state.backend import SparkStateBackend
from sparkcast.spark.state.compatibility import guard_subtask
from sparkcast.spark.state.variables import SparkStates

_BLOB = 4  # columns: _subtask, _side, _ts, _seq, _blob, then _order and b_0 … (broadcast rows)
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


class OperatorRunner:
    """One task's calls of the processor: the engine of each subtask it is called for, bound to
    the state variables the processor declared on ``handle``."""

    def __init__(self, plan: WorkerPlan, layout: str, broadcast_types: list[Any], handle: Any,
                 states: SparkStates) -> None:
        self.plan = plan
        self.layout = layout  # the checkpoint's layout record (``compatibility.layout_json``)
        self.broadcast_integral = _integral(broadcast_types)
        self.broadcast_convert = converters(broadcast_types, plan.time_zone)
        self.handle = handle
        self.states = states
        self.runner = SubtaskRunner(plan)

    def input_rows(self, key: Any, rows: Iterator[pd.DataFrame], timer_values: Any
                   ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        yield from self._run(int(key[0]), frame, timer_values)

    def initial_state(self, key: Any, initial_state: pd.DataFrame) -> None:
        """The first micro-batch of a new checkpoint: write this subtask's prepared state
        (``planning/bootstrap.py``, ``tools/rescale.py``) before its first element."""
        engine = self._engine(self.plan.subtask_of_group[int(key[0])])
        for blob in initial_state.iloc[:, -1].tolist():
            apply_seed(engine, Seed.from_bytes(bytes(blob), engine.types))
        engine.flush()
        self._sync_spark_timer(engine)

    def expired_timer(self, key: Any, timer_values: Any) -> Iterator[pd.DataFrame]:
        yield from self._run(int(key[0]), None, timer_values)

    def _run(self, group: int, frame: pd.DataFrame | None, timer_values: Any
             ) -> Iterator[pd.DataFrame]:
        plan = self.plan
        subtask = plan.subtask_of_group[group]
        engine = self._engine(subtask)
        shared, applied = self._static(engine, subtask)
        watermark, now = _clocks(timer_values)
        clocks = Clocks(watermark if plan.time_mode == "EventTime" else None, now)
        broadcast, main = self._split(frame, engine)
        for out in self.runner.run(engine, subtask, main, broadcast, clocks, applied=applied,
                                   shared=shared):
            yield to_pandas(out)
        self._sync_spark_timer(engine)
        yield to_pandas(self.runner.report(engine, subtask, len(main), len(broadcast)))

    def _engine(self, subtask: int) -> SubtaskEngine:
        plan = self.plan
        backend = SparkStateBackend(self.states, plan.pipeline_id, plan.state_buckets,
                                    plan.blob_store)
        guard_subtask(backend, plan.pipeline_id, subtask, self.layout)  # before anything runs
        engine = cached_engine(plan, subtask, lambda: plan_engine(plan, subtask, backend))
        engine.meter.begin()
        engine.bind(backend)
        return engine

    def _static(self, engine: SubtaskEngine, subtask: int
                ) -> tuple[list[OutputRecord], bool]:
        """A subtask's new state (no broadcast version yet) takes the static side, as each
        subtask of a Flink job starts from the same static broadcast state: the outputs its
        application emitted for this subtask, and whether the engine applied the rows itself
        (they reached keyed state)."""
        static = self.plan.static
        if static is None or engine.broadcast_version != "":
            return [], False
        if static.elements:
            apply_elements(engine, static.elements)
            return [], True
        apply_seed(engine, static_seed(static, engine.types))
        return subtask_share([list(o) for o in static.outputs], subtask), False

    def _split(self, frame: pd.DataFrame | None, engine: SubtaskEngine
               ) -> tuple[list[BroadcastElement], MainInput]:
        if frame is None or len(frame) == 0:
            return [], MainInput()
        sides = frame.iloc[:, 1].to_numpy()
        is_broadcast = sides == BROADCAST_SIDE
        broadcast = self._broadcast_elements(frame[is_broadcast]) if is_broadcast.any() else []
        tables = []
        for side in (MAIN_SIDE, SECOND_SIDE):
            blobs = frame.iloc[:, _BLOB][sides == side].tolist()
            tables.append(unpack_main(blobs) if blobs else None)
        return broadcast, self.runner.read(engine, tables[0], tables[1])

    def _broadcast_elements(self, frame: pd.DataFrame) -> list[BroadcastElement]:
        fields = self.plan.broadcast_fields
        values = convert_rows(rows_of(frame, _BLOB + 2, fields, self.broadcast_integral), fields,
                              self.broadcast_convert)
        timestamps = _optional_ints(frame.iloc[:, 2])
        orders = frame.iloc[:, _BLOB + 1].tolist()
        return [BroadcastElement(v, t, None if _is_nan(o) else o)
                for v, t, o in zip(values, timestamps, orders, strict=True)]

    def _sync_spark_timer(self, engine: SubtaskEngine) -> None:
        """One Spark timer per subtask, at its earliest engine timer of Spark's time domain."""
        if self.plan.time_mode == "None":
            return
        domain = (TimeDomain.EVENT_TIME if self.plan.time_mode == "EventTime"
                  else TimeDomain.PROCESSING_TIME)
        wanted = engine.timers[domain].next_timestamp()
        for registered in list(self.handle.listTimers()):
            if registered != wanted:
                self.handle.deleteTimer(registered)
            else:
                wanted = None
        if wanted is not None:
            self.handle.registerTimer(wanted)


def _clocks(timer_values: Any) -> tuple[int | None, int]:
    watermark = timer_values.getCurrentWatermarkInMs()
    now = timer_values.getCurrentProcessingTimeInMs()
    if now is None or now < 0:  # timeMode "None" gives no clock: TTL uses the worker's
        now = int(time.time() * 1000)
    return (None if watermark is None or watermark < 0 else watermark, now)


def _optional_ints(series: pd.Series) -> list[int | None]:
    if series.isna().all():
        return [None] * len(series)
    return [None if pd.isna(v) else int(v) for v in series.tolist()]


def _is_nan(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _integral(types: list[Any]) -> frozenset[int]:
    return frozenset(i for i, t in enumerate(types) if isinstance(t, _INTEGRAL))

