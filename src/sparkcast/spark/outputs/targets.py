"""The sinks of ``write_stream(sinks=...)`` (``sparkcast.sinks`` builds them; each kind lives
with its protocol: ``files.py``, ``jdbc.py``, ``kafka.py``, ``tables.py``), checked before the
query starts, and the query that writes them: ONE for all of them, whose micro-batches the
sink writer (``sink_writer.py``) or, where the pattern's tasks may write every sink, the
tasks themselves (``sinks_in_tasks.py``) write.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from sparkcast.errors import PipelineError
from sparkcast.spark.outputs import batch_outputs, sinks_in_tasks
from sparkcast.spark.outputs.files import FilesSink
from sparkcast.spark.outputs.guarded import guard_output
from sparkcast.spark.outputs.jdbc import JdbcSink
from sparkcast.spark.outputs.kafka import KafkaSink
from sparkcast.spark.outputs.sink_writer import SinkWriter
from sparkcast.spark.outputs.sinks import TaggedOutputs, start_sink, write_files_manifest
from sparkcast.spark.outputs.tables import DeltaSink, Sink, TableSink
from sparkcast.spark.outputs.typed import output_names, schemas
from sparkcast.spark.planning.shapes import outputs_in_tasks

#: the sinks ``sparkcast.sinks`` builds
BUILT_IN = (FilesSink, TableSink, JdbcSink, KafkaSink, DeltaSink)


def normalise(sinks: dict[Any, Any], names: list[str], default_letters: str) -> dict[str, Any]:
    """``{output name: sink}`` for every output; keys may be tags. An unknown output, a value
    that is no sink, or an output without a sink is refused (dead letters default to files
    beside the checkpoint)."""
    result: dict[str, Any] = {}
    for key, sink in sinks.items():
        name = getattr(key, "tag_id", key)
        if name not in names:
            raise PipelineError(f"sinks names output {name!r}, which this pipeline does not "
                                f"have; its outputs are {names}")
        if not isinstance(sink, BUILT_IN) and not isinstance(sink, Sink):
            raise PipelineError(f"the sink of output {name!r} is a {type(sink).__name__}; use "
                                "sparkcast.sinks.files/jdbc/kafka/delta/table or an object "
                                "with write(frame, output, batch_id)")
        result[name] = sink
    result.setdefault(names[-1], FilesSink(default_letters))
    missing = [n for n in names if n not in result]
    if missing:
        raise PipelineError(f"outputs {missing} have no sink; add them to sinks= (e.g. "
                            f"sinks={{{missing[0]!r}: sparkcast.sinks.files('out')}})")
    return result


def check(sinks: dict[str, Any], schemas: dict[str, StructType], spark: Any) -> None:
    """Each sink's own check before start, where it has one."""
    for name, sink in sinks.items():
        if hasattr(sink, "check"):
            sink.check(name, schemas[name], spark)


def start(outputs: TaggedOutputs, sinks: dict[Any, Any], checkpoint_location: str,
          trigger: dict[str, Any] | None, query_name: str | None) -> StreamingQuery:
    """``write_stream(sinks=...)``: check every sink, then ONE query for all of them (files
    sinks alone at one path: today's writer, ``sinks.start_sink``)."""
    plan = outputs.plan
    names = output_names(plan)
    chosen = normalise(sinks, names, f"{checkpoint_location.rstrip('/')}_dead_letters")
    distinct: list[Any] = []
    for sink in chosen.values():
        if sink not in distinct:
            distinct.append(sink)
    if len(distinct) == 1 and isinstance(next(iter(distinct)), FilesSink):
        only = next(iter(distinct))
        return start_sink(outputs, only.path, checkpoint_location, only.format, trigger,
                          query_name)
    files = [sink for sink in distinct if isinstance(sink, FilesSink)]
    for sink in files:
        guard_output(plan, sink.path, checkpoint_location)
    check(chosen, schemas(plan), plan.spark)
    for sink in files:
        write_files_manifest(plan, sink.path, checkpoint_location)
    writer = SinkWriter(plan, chosen, checkpoint_location)
    if outputs_in_tasks(plan) and writer.tasks_may_write:
        return sinks_in_tasks.start(outputs, writer, checkpoint_location, trigger, query_name)
    return batch_outputs.start(outputs, writer, checkpoint_location, trigger, query_name,
                               count=True, persist=True, before_start=writer.start_run)
