"""Read a job's state from its checkpoint: Flink's State Processor API, reading side.

Spark 4's state data source (``spark.read.format("statestore")``) reads one
transformWithState variable of one operator at a batch: for a MapState variable, rows of
``key`` (the grouping key: ``_subtask``), ``user_map_key``, ``user_map_value`` and
``partition_id`` (docs/state.md has what PySpark 4.3 gives). sparkcast keeps each subtask's
state in three kinds of variables (``state/backend.py``): ``meta`` (timers, held elements, the
broadcast version, the layout), ``b_<name>`` per broadcast descriptor and one ``keyed``. This
module reads them back into one ``Seed`` per subtask (``core/seed.py``), the form rescale and
bootstrap write, and decodes them with the codec: nothing read runs code.

The checkpoint's layout record (``<checkpoint>/sparkcast/layout.json``, written by
``write_stream``) says which grouping key is which subtask and which descriptors are broadcast
or keyed, so only checkpoints written by ``write_stream`` are readable here (by path or URI). The
micro-batch engine keeps its broadcast state as snapshot files (``state/snapshots.py``): every
subtask reads the snapshot of the batch, so each gets that one copy; its keyed state, timers and
held elements, where it has some, in each subtask's store (``state/keyed_store.py``). Values
come to the driver (state of a job is read for inspection, rescale and export, not at stream
speed).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from sparkcast.api.descriptors import StateDescriptor
from sparkcast.core import codec
from sparkcast.core.converters import converter
from sparkcast.core.frozen import thaw
from sparkcast.core.seed import Seed
from sparkcast.errors import PipelineError
from sparkcast.spark.plan import Engine, recorded_engine
from sparkcast.spark.state import checkpoint_files, keyed_store, snapshots, storage
from sparkcast.spark.state.blobs import blob_store_under, load_encoded, load_value
from sparkcast.spark.state.compatibility import read_layout
from sparkcast.spark.state.keyed_store import SubtaskStore
from sparkcast.spark.state.store_backend import key_of, value_of
from sparkcast.spark.state.variables import state_name
from sparkcast.spark.tools.state_types import fit, spark_type

ALL_PARTS = ("meta", "keyed", "broadcast")
TIMERS = "timers"
HELD = "held"
_SCHEMAS = {
    TIMERS: "subtask int, domain string, timestamp long, key string",
    HELD: "subtask int, value string, timestamp long, key string",
}


def checkpoint_layout(checkpoint: str) -> dict[str, Any]:
    """The layout record ``write_stream`` keeps in a checkpoint that holds state."""
    layout = read_layout(checkpoint)
    if layout is None:
        raise PipelineError(f"{checkpoint} has no layout record (sparkcast/layout.json): state "
                            "tools read checkpoints written by result.write_stream")
    if layout.get("path") == "stateless":  # sparkcast 0.3's name, kept in its checkpoints
        raise PipelineError(f"{checkpoint} is a stateless query's checkpoint: it holds no state")
    return layout


def read_subtasks(spark: SparkSession, checkpoint: str, batch_id: int | None = None,
                  blob_store: str | None = None, parts: Iterable[str] = ALL_PARTS,
                  types: codec.Resolver | None = None) -> tuple[dict[str, Any], dict[int, Seed]]:
    """(layout, one ``Seed`` per subtask) as of ``batch_id`` (default: the last committed);
    ``parts``: which of ``"meta"`` (timers, held elements, broadcast version), ``"keyed"`` and
    ``"broadcast"`` to read (each is a Spark job). ``types``: how stored objects decode (None:
    generic values for display; ``codec.KEEP_NAMES`` to write them back unchanged)."""
    layout = checkpoint_layout(checkpoint)
    seeds = {i: Seed() for i in range(layout["parallelism"])}
    if recorded_engine(layout.get("path")) is Engine.MICRO_BATCH:
        seeds = _from_snapshot(seeds, checkpoint, batch_id, blob_store)
        if not storage.is_dir(keyed_store.folder(checkpoint)):  # no state per subtask
            return layout, seeds
        return layout, _from_store(seeds, checkpoint, batch_id, types)
    subtask_of = {group: i for i, group in enumerate(layout["subtask_groups"])}
    parts = set(parts)
    meta = _rows(spark, checkpoint, "meta", batch_id) if "meta" in parts else []
    for group, (name,), (blob,) in meta:
        _meta(seeds[subtask_of[group]], name, codec.decode(bytes(blob), types))
    keyed = _rows(spark, checkpoint, "keyed", batch_id) if "keyed" in parts else []
    for group, (name, _), (blob,) in keyed:
        pairs = codec.decode(bytes(blob), types)
        seeds[subtask_of[group]].keyed.setdefault(name, []).extend(
            (codec.hashable(k), v) for k, v in pairs)
    store = blob_store or blob_store_under(checkpoint)
    for name in layout["broadcast_state"] if "broadcast" in parts else ():
        rows: dict[int, list[Any]] = {}
        for group, _, (blob,) in _rows(spark, checkpoint, state_name("b", name), batch_id):
            rows.setdefault(subtask_of[group], []).extend(
                load_value(bytes(blob), store) if types is None
                else codec.decode(load_encoded(bytes(blob), store), types))
        for subtask, entries in rows.items():
            entries.sort(key=lambda entry: entry[1])  # insertion order, as the engine keeps it
            seeds[subtask].broadcast[name] = [
                (codec.hashable(k), thaw(v) if types is None else v) for k, _, v in entries]
    for seed in seeds.values():
        for records in seed.keyed.values():
            records.sort(key=lambda kv: codec.canonical(kv[0]))
    return layout, seeds


def _from_snapshot(seeds: dict[int, Seed], checkpoint: str, batch_id: int | None,
                   blob_store: str | None) -> dict[int, Seed]:
    """The micro-batch engine's broadcast state as of ``batch_id``: the latest snapshot up to
    it, the state every subtask read."""
    batch = checkpoint_files.last_committed(checkpoint) if batch_id is None else batch_id
    location = snapshots.folder(checkpoint)
    written = [b for b in snapshots.batches(location) if batch is not None and b <= batch]
    if not written:
        return seeds
    store = blob_store or blob_store_under(checkpoint)
    snapshot = snapshots.read(snapshots.name(location, max(written)), store)
    for seed in seeds.values():
        seed.broadcast_version = snapshot.version
        seed.broadcast = {name: [(k, thaw(v)) for k, v in table.items()]
                          for name, table in snapshot.tables.items()}
    return seeds


def _from_store(seeds: dict[int, Seed], checkpoint: str, batch_id: int | None,
                types: codec.Resolver | None) -> dict[int, Seed]:
    """The micro-batch engine's keyed state, timers and held elements as of ``batch_id``: each
    subtask's store files up to it, loaded into a throwaway local copy."""
    batch = checkpoint_files.last_committed(checkpoint) if batch_id is None else batch_id
    if batch is None:
        return seeds
    location = keyed_store.folder(checkpoint)
    with tempfile.TemporaryDirectory() as root:
        for subtask, seed in seeds.items():
            store = SubtaskStore(location, "read", subtask, root)
            store.open(batch + 1)
            try:
                for name in store.names():
                    for key, blob in store.scan(name):
                        if name == keyed_store.META:
                            _meta(seed, key.decode(), codec.decode(blob, types))
                        else:
                            seed.keyed.setdefault(name, []).append(
                                (key_of(key), value_of(blob, types)))
            finally:
                store.close()
            for records in seed.keyed.values():
                records.sort(key=lambda kv: codec.canonical(kv[0]))
    return seeds


def _meta(seed: Seed, name: str, value: Any) -> None:
    if name == "broadcast_version":
        seed.broadcast_version = value
    elif name == "held":
        seed.held = [list(h) for h in value]
    elif name.startswith("timers."):
        seed.timers[name.removeprefix("timers.")] = [list(t) for t in value]


def _rows(spark: SparkSession, checkpoint: str, variable: str, batch_id: int | None
          ) -> list[tuple[int, tuple, tuple]]:
    reader = spark.read.format("statestore").option("stateVarName", variable)
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    frame = reader.load(checkpoint)  # the operator declares every variable in init; any URI
    return [(row.key[0], tuple(row.user_map_key), tuple(row.user_map_value))
            for row in frame.select("key", "user_map_key", "user_map_value").collect()]


def read_state(spark: SparkSession, checkpoint: str, descriptor: StateDescriptor | str,
               batch_id: int | None = None, blob_store: str | None = None) -> DataFrame:
    """A job's state as a DataFrame, read from its checkpoint (the State Processor API's read):

    * a broadcast descriptor: ``subtask, key, value, version`` (every subtask's copy);
    * a keyed descriptor: ``subtask, key, value`` (a value; a list for list state, a dict for
      map state, the accumulator for aggregating state; TTL expiry left out);
    * ``"timers"``: ``subtask, domain, timestamp, key``; ``"held"``: ``subtask, value,
      timestamp, key``.

    Given a descriptor, keys and values are typed by it (``tools/state_types.py``): Spark types
    for declared scalars, structs for dataclasses and NamedTuples, enums as their values, arrays
    for list state, maps for map state; a keyed state's ``key`` has the ``key_by`` columns'
    type (a struct for several). A part the descriptor leaves undeclared (and every column when
    ``descriptor`` is a name) is the state codec's JSON text: ``state_value(text, descriptor)``
    gives the Python value back. ``batch_id``: the state as of that batch (default: the last
    committed one). ``checkpoint``: a path or URI (``file:///...``)."""
    layout = checkpoint_layout(checkpoint)
    name = descriptor if isinstance(descriptor, str) else descriptor.name
    broadcast = name in layout["broadcast_state"]
    parts = ("meta",) if name in (TIMERS, HELD) else ("meta", "broadcast") if broadcast else (
        "keyed",)
    layout, seeds = read_subtasks(spark, checkpoint, batch_id, blob_store, parts)
    if name in (TIMERS, HELD):
        return spark.createDataFrame(_meta_rows(seeds, name), _SCHEMAS[name])
    typed = None if isinstance(descriptor, str) else descriptor
    if broadcast:
        key, value = _columns(typed, broadcast=True)
        entries = [(subtask, key(k), value(v), seed.broadcast_version)
                   for subtask, seed in sorted(seeds.items())
                   for k, v in seed.broadcast.get(name, [])]
        return spark.createDataFrame(entries, _schema("subtask int", key, value,
                                                      "version string"))
    if name in layout["keyed_state"] or any(name in s.keyed for s in seeds.values()):
        unwrap = _unwrapper(layout["keyed_state"].get(name, ""))
        key, value = _columns(typed, key_columns=layout["key_columns"])
        rows = [(subtask, key(k), value(unwrap(v)))
                for subtask, seed in sorted(seeds.items()) for k, v in seed.keyed.get(name, [])]
        return spark.createDataFrame(rows, _schema("subtask int", key, value))
    raise PipelineError(f"{checkpoint} has no state {name!r}; broadcast states "
                        f"{sorted(layout['broadcast_state'])}, keyed states "
                        f"{sorted(layout['keyed_state'])}, or 'timers' / 'held'")


class _Column:
    """One key or value column: its Spark type and how a stored value becomes its cell (the
    codec's JSON text when the type is not declared)."""

    def __init__(self, kind: DataType | None, convert: Any = None) -> None:
        self.kind = kind
        self._convert = convert

    def __call__(self, value: Any) -> Any:
        if self.kind is None:
            return _text(value)
        return fit(value if self._convert is None else self._convert(value), self.kind)

    def ddl(self, name: str) -> str:
        return f"{name} {'string' if self.kind is None else self.kind.simpleString()}"


def _columns(descriptor: StateDescriptor | None, *, broadcast: bool = False,
             key_columns: list[str] | None = None) -> tuple[_Column, _Column]:
    if descriptor is None:
        return _Column(None), _Column(None)
    if broadcast:
        declared = getattr(descriptor, "value_type_info", None)
        return (_Column(spark_type(getattr(descriptor, "key_type_info", None))),
                _Column(spark_type(declared), converter(declared)))
    key = _Column(_key_type(key_columns or []))
    kind = descriptor.kind
    if kind == "map":
        keys, values = (getattr(descriptor, n, None) for n in ("key_type_info", "value_type_info"))
        k_type, v_type = spark_type(keys), spark_type(values)
        entries = None if k_type is None or v_type is None else MapType(k_type, v_type, True)
        return key, _Column(entries, lambda v: state_value(_text(v), descriptor))
    each = spark_type(descriptor.type_info)
    whole = ArrayType(each, True) if kind == "list" and each is not None else each
    return key, _Column(whole, lambda v: state_value(_text(v), descriptor))


def _key_type(key_columns: list[str]) -> DataType | None:
    """The ``key_by`` columns' type ("k string" each), a struct for several."""
    if not key_columns:
        return None
    struct = StructType.fromDDL(", ".join(key_columns))
    assert isinstance(struct, StructType)
    return struct.fields[0].dataType if len(struct.fields) == 1 else struct


def _schema(first: str, key: _Column, value: _Column, *rest: str) -> str:
    return ", ".join([first, key.ddl("key"), value.ddl("value"), *rest])


def _meta_rows(seeds: dict[int, Seed], name: str) -> list[tuple[Any, ...]]:
    if name == TIMERS:
        return [(subtask, domain, ts, _text(key)) for subtask, seed in sorted(seeds.items())
                for domain, entries in sorted(seed.timers.items()) for ts, key in entries]
    return [(subtask, _text(h[0]), h[1], _text(h[2]) if len(h) > 2 else None)
            for subtask, seed in sorted(seeds.items()) for h in seed.held]


def _unwrapper(record: Any) -> Any:
    """Stored records of a TTL descriptor hold ``[value, expires_at]`` (per entry for map and
    list state): give the values only. ``record`` is the layout's entry for the descriptor
    (``compatibility.descriptor_record``; a string in checkpoints of earlier versions)."""
    if isinstance(record, dict):
        kind, ttl = record.get("kind"), bool(record.get("ttl"))
    else:
        text = str(record)
        kind, ttl = text.split("<", 1)[0], text.endswith(" with TTL")
    if not ttl:
        return lambda value: value
    if kind == "map":
        return lambda value: {k: v[0] for k, v in value.items()}
    if kind == "list":
        return lambda value: [v[0] for v in value]
    return lambda value: value[0]


def _text(value: Any) -> str:
    return codec.encode(value).decode("utf-8")


def state_value(text: str, descriptor: StateDescriptor | None = None, *, key: bool = False,
                broadcast: bool = False) -> Any:
    """A key or value of ``read_state``'s JSON text as Python, typed by ``descriptor`` (a
    dataclass, enum or NamedTuple it declares is rebuilt); ``key=True`` for a key column,
    ``broadcast=True`` for one value of a broadcast descriptor."""
    value = codec.decode(text)
    if key:
        return codec.hashable(value)
    if descriptor is None:
        return value
    if broadcast:
        convert = converter(getattr(descriptor, "value_type_info", None))
        return value if convert is None else convert(value)
    if descriptor.kind == "map":
        keys = converter(getattr(descriptor, "key_type_info", None))
        values = converter(getattr(descriptor, "value_type_info", None))
        return {(k if keys is None else keys(k)): (v if values is None else values(v))
                for k, v in value.items()}
    each = converter(getattr(descriptor, "type_info", None))
    if each is None:
        return value
    return [each(v) for v in value] if descriptor.kind == "list" else each(value)
