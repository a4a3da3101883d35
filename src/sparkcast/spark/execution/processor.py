"""The transformWithStateInPandas processor: runs the engine for one subtask per call.

Spark calls ``handleInputRows`` once per subtask with rows and ``handleExpiredTimer`` for a
subtask whose Spark timer expired. Both give the batch's clocks; the engine fires its own due
timers first (as a watermark reaching a Flink operator would), then applies the batch's
broadcast rows in their deterministic order, then the main rows. One Spark timer per subtask
wakes it for its earliest engine timer when no input arrives.

Engines are cached per Python worker (``engines.py``) so ``open`` runs once per subtask, not
once per micro-batch; state is re-bound from Spark at every call, so a retried or moved task
starts from the checkpointed state, never from memory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

from sparkcast.api.timers import TimeDomain
from sparkcast.core.engine import SubtaskEngine
from sparkcast.core.records import BroadcastElement
from sparkcast.core.seed import Seed, apply_seed
from sparkcast.spark.execution.dead_letters import broadcast_letters_once
from sparkcast.spark.execution.encoding import OutputEncoder, to_pandas
from sparkcast.spark.execution.engines import apply_static_broadcast, cached_engine, plan_engine
from sparkcast.spark.execution.metrics_rows import metrics_table
from sparkcast.spark.execution.packing import unpack_main
from sparkcast.spark.execution.values import (
    co_elements,
    convert_rows,
    converters,
    key_values,
    main_values,
    rows_of,
)
from sparkcast.spark.layout import BROADCAST_SIDE, MAIN_SIDE, SECOND_SIDE
from sparkcast.spark.plan import RuntimePlan
from sparkcast.spark.state.backend import SparkStateBackend, SparkStates
from sparkcast.spark.state.compatibility import guard_subtask, layout_json

_BLOB = 4  # columns: _subtask, _side, _ts, _seq, _blob, then _order and b_0 … (broadcast rows)
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


class BroadcastProcessor(StatefulProcessor):
    def __init__(self, plan: RuntimePlan, broadcast_types: list[Any]) -> None:
        self.plan = plan
        self.broadcast_integral = _integral(broadcast_types)
        self.broadcast_convert = converters(broadcast_types, plan.time_zone)
        self.main_convert = converters(plan.main_types, plan.time_zone)
        self.second_convert = converters(plan.second_types, plan.time_zone)
        self.layout = layout_json(plan)
        self.applied_static = False  # whether this call applied the static broadcast rows

    def init(self, handle: Any) -> None:
        plan = self.plan
        self.handle = handle
        self.states = SparkStates(handle, [d.name for d in plan.broadcast_descriptors])
        self.encoder = OutputEncoder.of(plan)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any
                        ) -> Iterator[pd.DataFrame]:
        frames = [f for f in rows if len(f)]
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        yield from self._run(int(key[0]), frame, timerValues)

    def handleInitialState(self, key: Any, initialState: pd.DataFrame, timerValues: Any
                           ) -> None:
        """The first micro-batch of a new checkpoint: write this subtask's prepared state
        (``planning/bootstrap.py``, ``tools/rescale.py``) before its first element."""
        engine = self._engine(self.plan.subtask_of_group[int(key[0])], static=False)
        for blob in initialState.iloc[:, -1].tolist():
            apply_seed(engine, Seed.from_bytes(bytes(blob), engine.types))
        engine.flush()
        self._sync_spark_timer(engine)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any
                           ) -> Iterator[pd.DataFrame]:
        yield from self._run(int(key[0]), None, timerValues)

    def close(self) -> None:
        pass

    # -----------------------------------------------------------------------------------------

    def _run(self, group: int, frame: pd.DataFrame | None, timer_values: Any
             ) -> Iterator[pd.DataFrame]:
        plan = self.plan
        subtask = plan.subtask_of_group[group]
        engine = self._engine(subtask)
        watermark, now = _clocks(timer_values)
        if plan.time_mode != "EventTime":
            watermark = None
        broadcast, main, timestamps, keys = self._split(frame, engine)
        engine.run_micro_batch(broadcast, main, timestamps, keys, watermark=watermark,
                               processing_time=now)
        engine.meter.finish()
        engine.flush()
        self._sync_spark_timer(engine)
        outputs = engine.take_outputs()
        if subtask and (broadcast or self.applied_static):
            outputs = broadcast_letters_once(outputs)
        yield from self.encoder.encode(outputs, subtask)
        yield to_pandas(metrics_table(engine, self.encoder, subtask, len(main), len(broadcast)))

    def _engine(self, subtask: int, static: bool = True) -> SubtaskEngine:
        plan = self.plan
        backend = SparkStateBackend(self.states, plan.pipeline_id, plan.state_buckets,
                                    plan.blob_store)
        guard_subtask(backend, plan.pipeline_id, subtask, self.layout)  # before anything runs
        engine = cached_engine(plan, subtask, lambda: plan_engine(plan, subtask, backend))
        engine.meter.begin()
        engine.bind(backend)
        self.applied_static = (static and bool(plan.static_broadcast)
                               and engine.broadcast_version == "")
        if self.applied_static:
            apply_static_broadcast(engine, plan)
        return engine

    def _split(self, frame: pd.DataFrame | None, engine: SubtaskEngine
               ) -> tuple[list[BroadcastElement], Any, list[Any] | None, list[Any] | None]:
        if frame is None or len(frame) == 0:
            return [], [], None, None
        plan = self.plan
        if plan.second_fields:
            main, timestamps, keys = _co_main(frame, plan,
                                              (self.main_convert, self.second_convert))
            return [], main, timestamps, keys
        is_broadcast = frame.iloc[:, 1].to_numpy() == BROADCAST_SIDE
        broadcast = self._broadcast_elements(frame[is_broadcast]) if is_broadcast.any() else []
        blobs = frame.iloc[:, _BLOB][~is_broadcast].tolist()
        if not blobs:
            return broadcast, [], None, None
        table = unpack_main(blobs)
        main, timestamps = main_values(table, 2, plan.main_fields, engine.vectorized,
                                       self.main_convert)
        if not plan.keyed or engine.vectorized:
            return broadcast, main, timestamps, None
        return broadcast, main, timestamps, key_values(table, 2, plan.key_positions)

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


def _co_main(frame: pd.DataFrame, plan: RuntimePlan, convert: tuple[dict[int, Any], ...]
             ) -> tuple[list[Any], list[Any], list[Any]]:
    """A co-function's two keyed inputs, packed by side, as one stream (``co_elements``)."""
    sides = frame.iloc[:, 1].to_numpy()
    tables = []
    for side in (MAIN_SIDE, SECOND_SIDE):
        blobs = frame.iloc[:, _BLOB][sides == side].tolist()
        tables.append(unpack_main(blobs) if blobs else None)
    return co_elements((tables[0], tables[1]),
                       ((plan.main_fields, plan.key_positions),
                        (plan.second_fields, plan.second_key_positions)),
                       (convert[0], convert[1]))


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

