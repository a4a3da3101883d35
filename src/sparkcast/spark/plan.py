"""What one ``process(...)`` call runs: its arguments, the driver's plan (``RuntimePlan``,
built once by the planner; a query runs a copy), the frozen part of it shipped to the workers
(``WorkerPlan``, with a static broadcast side applied once, ``StaticSide``), and the engine,
chosen once by one pure function of the plan's facts and the checkpoint
(``planning/choice.py``) before a query starts. Every engine and shape runs its subtasks
through the one subtask runner (``execution/subtask.py``).

Two engines (``Engine``; see docs/architecture.md) run a plan:

* ``OPERATOR``: the inputs unioned, shuffled by subtask and run by one
  ``transformWithStateInPandas`` operator (``execution/processor.py``), state in Spark's state
  store; where a composed streaming DataFrame needs driver work per micro-batch, and for what
  the micro-batch engine cannot serve;
* ``MICRO_BATCH``: broadcast elements applied once per micro-batch on the driver into a snapshot,
  main rows through Python once. Two facts of the plan shape its query: ``per_batch_driver`` (a
  streamed broadcast side or state per subtask: one ``foreachBatch`` over the inputs,
  ``execution/streamed.py``; otherwise, a static side and no state, one ``mapInArrow`` where
  the rows lie, also a plain streaming DataFrame, ``execution/stateless.py``) and
  ``by_subtask`` (state per subtask, with a streamed broadcast side, a static one or none:
  main rows repartitioned by subtask into each subtask's keyed store,
  ``execution/partitioned.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sparkcast.api.descriptors import MapStateDescriptor, StateDescriptor
from sparkcast.api.functions import BaseBroadcastProcessFunction
from sparkcast.api.options import ProcessOptions
from sparkcast.api.output_tag import OutputTag
from sparkcast.api.pyflink_types import is_pyflink_type, output_ddl
from sparkcast.core.records import BroadcastElement, OutputRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


class Engine(StrEnum):
    """The engine that runs a plan; its value is what a checkpoint's layout record keeps."""

    MICRO_BATCH = "micro_batch"
    OPERATOR = "operator"


#: ``process(..., engine=AUTO)``: the choice decides
AUTO = "auto"
#: what sparkcast 0.3 recorded for the micro-batch engine's shapes (its three paths)
_RECORDED_MICRO_BATCH = ("stateless", "streamed", "partitioned")


def recorded_engine(recorded: str | None) -> Engine | None:
    """The engine a layout record's ``path`` names (None: no record); 0.3's names included."""
    if recorded is None:
        return None
    return Engine.MICRO_BATCH if recorded in _RECORDED_MICRO_BATCH else Engine(recorded)


class BroadcastSide(StrEnum):
    """What feeds the broadcast state, as far as the engine choice cares."""

    STATIC = "static"  # collected once on the driver (a static DataFrame, or small batch input)
    STREAMED = "streamed"  # a streaming DataFrame: elements in every micro-batch
    BATCH = "batch"  # a batch DataFrame unioned with batch main rows (run once, not collected)
    NONE = "none"  # KeyedProcessFunction, KeyedCoProcessFunction


@dataclass(frozen=True)
class PlanFacts:
    """What the engine choice depends on, read off the inputs and the function on the driver."""

    function: str  # the user's function class, e.g. "KeyedBroadcastProcessFunction"
    main_streaming: bool
    broadcast: BroadcastSide
    keyed: bool = False  # key_by(...)
    keyed_state: bool = False  # open() creates keyed state
    hold_until_ready: bool = False
    event_aligned: bool = False  # time_alignment="event"
    timers: bool = False  # the function defines on_timer
    event_time: bool = False  # event_time="<column>" given (timers then follow the watermark)
    seeded: bool = False  # initial_state given
    connect: bool = False  # a Spark Connect session
    static_emits: bool = False  # applying the static broadcast rows emitted outputs
    second_input: bool = False  # a KeyedCoProcessFunction's second keyed stream

    @property
    def per_subtask_state(self) -> bool:
        """State that lives with a subtask: keyed state, timers, held elements, a keyed
        function without a broadcast side, and event-time alignment with a streamed broadcast
        side (it interleaves the two sides per subtask; static rows all come first)."""
        aligned = self.event_aligned and self.broadcast is not BroadcastSide.STATIC
        return (self.keyed or self.keyed_state or self.hold_until_ready or aligned
                or self.timers or self.broadcast is BroadcastSide.NONE)

    @property
    def driver_per_batch(self) -> bool:
        """Whether the micro-batch engine's driver works per micro-batch: a broadcast side
        that is not static, or state per subtask (its store commits per micro-batch)."""
        return self.broadcast is not BroadcastSide.STATIC or self.per_subtask_state


@dataclass(frozen=True)
class ProcessSpec:
    """The arguments of ``process(...)``."""

    function: BaseBroadcastProcessFunction
    output_schema: str
    parallelism: int | None
    hold_until_ready: Iterable[Any] | None
    hold_capacity: int
    time_alignment: str
    event_time: str | None
    side_outputs: tuple[OutputTag, ...]
    on_error: str
    job_parameters: dict[str, Any]
    state_buckets: int
    blob_store: str | None = None
    seeded: bool = False  # initial_state given: state must reach the operator's initialState
    engine: str = "auto"  # the engine asked for (``Engine``)
    output_codec: bool = False  # output_schema was Types.PICKLED_BYTE_ARRAY(): codec text

    def __post_init__(self) -> None:
        """A PyFlink output type (``Types.ROW_NAMED(...)``) becomes its DDL, once."""
        if is_pyflink_type(self.output_schema):
            ddl, codec = output_ddl(self.output_schema, "output_schema")
            object.__setattr__(self, "output_schema", ddl)
            object.__setattr__(self, "output_codec", codec)

    def encoded(self) -> frozenset[str]:
        """The outputs stored as codec text: ``"main"``, side outputs' tag ids."""
        main = {"main"} if self.output_codec else set()
        return frozenset(main | {t.tag_id for t in self.side_outputs if t.codec})


@dataclass(frozen=True)
class StaticSide:
    """A static broadcast side as the plan keeps it: its rows applied once, on the driver, in
    the deterministic broadcast order (``execution/static_side.py``), so that every engine and
    shape binds the same state instead of applying the rows in each worker."""

    #: the broadcast state after the rows: codec bytes of ``[version, {descriptor: [[key,
    #: value], ...]}]``, values inline (no blob store: it travels with the plan)
    state: bytes
    #: what applying them emitted: one tuple for every subtask, or one per subtask (a function
    #: that asks which subtask it is), as ``dead_letters.subtask_share`` reads it
    outputs: tuple[tuple[OutputRecord, ...], ...] = ((),)
    #: the rows themselves, only where applying them reached keyed state
    #: (``apply_to_keyed_state``): each subtask then applies them to its own keys
    elements: tuple[BroadcastElement, ...] = ()

    #: names the state in a worker's engine cache (what an engine is bound to); hashed once,
    #: where the side is made, not at every task's binding
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", "static:" + hashlib.sha256(self.state).hexdigest())

    @property
    def emits(self) -> bool:
        return any(self.outputs)


@dataclass(frozen=True)
class WorkerPlan:
    """What the Python workers read of a plan, and nothing else: frozen, without the driver's
    objects (inputs, session, seeds), with a static side (``StaticSide``) only for the workers
    that read it (the operator's, the in-place runner's; by subtask none); shipped with the
    operator's processor and the micro-batch engine's runners (``RuntimePlan.for_workers``)."""

    pipeline_id: str
    engine: Engine
    function: BaseBroadcastProcessFunction
    broadcast_descriptors: tuple[MapStateDescriptor, ...]
    options: ProcessOptions
    parallelism: int
    subtask_of_group: Mapping[int, int]
    main_fields: tuple[str, ...]
    main_types: tuple[DataType, ...]
    broadcast_fields: tuple[str, ...]
    key_positions: tuple[int, ...]
    second_fields: tuple[str, ...]
    second_types: tuple[DataType, ...]
    second_key_positions: tuple[int, ...]
    output_schema: StructType
    side_schemas: Mapping[str, StructType | None]
    encoded: frozenset[str]
    time_mode: str
    time_zone: str
    state_buckets: int
    blob_store: str
    static: StaticSide | None

    @property
    def keyed(self) -> bool:
        return bool(self.key_positions)


@dataclass
class RuntimePlan:
    """Everything one ``process(...)`` call decided, on the driver: built once by the planner;
    a query runs a copy (``dataclasses.replace``), the workers a ``WorkerPlan``."""

    pipeline_id: str
    function: BaseBroadcastProcessFunction
    broadcast_descriptors: tuple[MapStateDescriptor, ...]
    keyed_descriptors: tuple[StateDescriptor, ...]
    options: ProcessOptions
    parallelism: int
    subtask_of_group: dict[int, int]
    main_fields: tuple[str, ...]
    main_types: tuple[DataType, ...]
    broadcast_fields: tuple[str, ...]
    key_positions: tuple[int, ...]
    key_types: tuple[str, ...]
    output_schema: StructType
    side_schemas: dict[str, StructType | None]
    event_time: str | None
    time_mode: str
    state_buckets: int
    blob_store: str
    blob_store_chosen: bool = False
    engine: Engine = Engine.OPERATOR
    # what the choice read, the engine the user asked for, and why ``engine`` was chosen
    facts: PlanFacts | None = None
    requested: str = AUTO
    reason: str = ""
    static_broadcast: list[BroadcastElement] = field(default_factory=list)  # driver-side
    static: StaticSide | None = None  # the static rows applied once (``StaticSide``)
    # a KeyedCoProcessFunction's second keyed input (packed with layout.SECOND_SIDE)
    second_fields: tuple[str, ...] = ()
    second_types: tuple[DataType, ...] = ()
    second_key_positions: tuple[int, ...] = ()
    time_zone: str = "UTC"  # the session's: pandas hands broadcast timestamps over naive in it
    # initial state per subtask (planning/bootstrap.py); driver-side: it reaches the operator as
    # transformWithState's initialState, not with the plan
    initial_seeds: dict[int, bytes] = field(default_factory=dict)
    # the tagged inputs and the session, driver-side only (not shipped)
    tagged_input: DataFrame | None = None
    corrupt_input: DataFrame | None = None
    #: the outputs stored as codec text (``ProcessSpec.encoded``)
    encoded: frozenset[str] = frozenset()
    streamed_input: DataFrame | None = None  # the micro-batch engine's one input (a union)
    spark: SparkSession | None = None

    @property
    def keyed(self) -> bool:
        return bool(self.key_positions)

    @property
    def per_batch_driver(self) -> bool:
        """The micro-batch engine with a streamed broadcast side or state per subtask: its
        query is one ``foreachBatch`` in which the driver applies each micro-batch's broadcast
        elements (False: a static side and no state, one ``mapInArrow`` where the rows lie)."""
        return (self.engine is Engine.MICRO_BATCH and self.facts is not None
                and self.facts.driver_per_batch)

    @property
    def in_place(self) -> bool:
        """The micro-batch engine over a static broadcast side without state: one
        ``mapInArrow`` where the rows lie, nothing on the driver between micro-batches."""
        return self.engine is Engine.MICRO_BATCH and not self.per_batch_driver

    @property
    def by_subtask(self) -> bool:
        """The micro-batch engine with state per subtask: main rows repartitioned by subtask
        into each subtask's keyed store."""
        return (self.engine is Engine.MICRO_BATCH and self.facts is not None
                and self.facts.per_subtask_state)

    @property
    def clocked(self) -> bool:
        """Timers on the micro-batch engine: its query carries a no-op stateful operator so
        that Spark runs no-data micro-batches (``tagging.clock``)."""
        return self.by_subtask and self.time_mode != "None"

    def for_workers(self, engine: Engine | None = None) -> WorkerPlan:
        """What the workers read of this plan; ``engine`` overrides the plan's (the operator
        built for a micro-batch plan's ``result.main``)."""
        run = self.engine if engine is None else engine
        return WorkerPlan(
            pipeline_id=self.pipeline_id, engine=run,
            function=self.function, broadcast_descriptors=self.broadcast_descriptors,
            options=self.options, parallelism=self.parallelism,
            subtask_of_group=dict(self.subtask_of_group), main_fields=self.main_fields,
            main_types=self.main_types, broadcast_fields=self.broadcast_fields,
            key_positions=self.key_positions, second_fields=self.second_fields,
            second_types=self.second_types, second_key_positions=self.second_key_positions,
            output_schema=self.output_schema, side_schemas=dict(self.side_schemas),
            encoded=self.encoded, time_mode=self.time_mode, time_zone=self.time_zone,
            state_buckets=self.state_buckets, blob_store=self.blob_store,
            static=self._static_read_by(run))

    def _static_read_by(self, engine: Engine) -> StaticSide | None:
        """The static side, to the workers of ``engine`` that read it: the operator's subtasks
        seed their new state with it, the in-place runner binds it. The micro-batch engine's
        per-batch driver (by subtask, with a static side) writes its state as snapshot -1,
        which its workers read instead: they get none, not the state (1.7 MB for 100k rows,
        measured) and, where the rows reached keyed state, the rows (5.6 MB) with every
        micro-batch."""
        per_batch = self.facts is not None and self.facts.driver_per_batch
        return None if engine is Engine.MICRO_BATCH and per_batch else self.static
