"""A Python worker that unpickles what a path ships imports only that path's modules.

Each path's shipped object (the operator's processor, the stateless runner, the streamed
path's runner bound to a snapshot) is pickled as Spark pickles it, then unpickled in a fresh
interpreter, which lists the sparkcast modules it imported. The operator's processor is also
asked only to declare its state, as Spark's driver asks it at every query start: that loads
neither the engine nor pandas nor the user's function. The driver's rooms (launch,
observe, planning, outputs, tools, the stream classes) and the other paths never load there.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql.types import LongType

from sparkcast.spark import Stream
from sparkcast.spark.execution.encoding import tagged_schema
from sparkcast.spark.execution.partitioned import PartitionedRunner
from sparkcast.spark.execution.streamed import streamed_runner
from sparkcast.spark.execution.subtask import Clocks
from sparkcast.spark.execution.task_writer import TaskWriter
from sparkcast.spark.outputs.task_files import file_layout
from sparkcast.spark.planning.frames import operator_processor, stateless_runner
from tests.spark.kinds import kind_of
from tests.spark.worker_function import RULES, Count, Enrich

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
DRIVER_ONLY = ("sparkcast.spark.launch", "sparkcast.spark.observe", "sparkcast.spark.planning",
               "sparkcast.spark.outputs.", "sparkcast.spark.tools", "sparkcast.spark.datastream",
               "sparkcast.spark.environment", "sparkcast.monitoring", "sparkcast.apps",
               "sparkcast.cli", "sparkcast.testing")
COMMON = {"sparkcast.spark", "sparkcast.spark.execution", "sparkcast.spark.execution.encoding",
          "sparkcast.spark.execution.engines", "sparkcast.spark.execution.metrics_rows",
          "sparkcast.spark.execution.payloads", "sparkcast.spark.execution.values",
          "sparkcast.spark.execution.subtask", "sparkcast.spark.execution.static_side",
          "sparkcast.spark.execution.dead_letters", "sparkcast.spark.execution.ordering",
          "sparkcast.spark.layout", "sparkcast.spark.plan",
          "sparkcast.spark.state", "sparkcast.spark.state.worker_cache"}
STATE = {"sparkcast.spark.state", "sparkcast.spark.state.backend", "sparkcast.spark.state.blobs",
         "sparkcast.spark.state.checkpoint_files", "sparkcast.spark.state.compatibility",
         "sparkcast.spark.state.storage", "sparkcast.spark.state.variables"}
UNPICKLE = ("import json, pickle, sys\n"
            "pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('sparkcast'))))\n")


def _imported_by_a_worker(shipped: object, tmp_path: Path) -> set[str]:
    blob = tmp_path / "shipped.pickle"
    blob.write_bytes(CloudPickleSerializer().dumps(shipped))
    done = subprocess.run([sys.executable, "-c", UNPICKLE, str(blob)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(done.stdout))


def _spark_modules(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith("sparkcast.spark")}


def _frames(spark):
    events = spark.createDataFrame([("a", 1)], "k string, n long")
    rules = spark.createDataFrame([("a", 5)], "name string, limit long")
    return events, rules


#: what Spark's driver process for a transformWithState operator does (its ``init`` alone, to
#: learn the state variables), then what a task's first call adds: the plan and the runner
DECLARE_THEN_RUN = (
    "import json, pickle, sys\n"
    "class Handle:\n"
    "    def getMapState(self, *args): return None\n"
    "processor = pickle.loads(open(sys.argv[1], 'rb').read())\n"
    "processor.init(Handle())\n"
    "declared = sorted(m for m in sys.modules if m.startswith('sparkcast'))\n"
    "heavy = sorted(m for m in ('pandas', 'pyarrow', 'tests.spark.worker_function')\n"
    "               if m in sys.modules)\n"
    "pickle.loads(processor.shipped)\n"
    "import sparkcast.spark.execution.operator_runner\n"
    "print(json.dumps([declared, heavy,\n"
    "                  sorted(m for m in sys.modules if m.startswith('sparkcast'))]))\n")


def test_the_operator_paths_worker_imports_the_processor_and_state_alone(spark, tmp_path):
    events, rules = _frames(spark)
    result = (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES))
              .process(Count(), "k string, seen long"))
    assert kind_of(result) == "operator"
    blob = tmp_path / "shipped.pickle"
    blob.write_bytes(CloudPickleSerializer().dumps(operator_processor(result.plan)))
    done = subprocess.run([sys.executable, "-c", DECLARE_THEN_RUN, str(blob)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    declared, heavy, modules = json.loads(done.stdout)
    assert _spark_modules(set(declared)) == {
        "sparkcast.spark", "sparkcast.spark.execution", "sparkcast.spark.execution.processor",
        "sparkcast.spark.state", "sparkcast.spark.state.variables"}
    assert heavy == []  # neither pandas nor the user's function to declare the state
    assert _spark_modules(set(modules)) == COMMON | STATE | {
        "sparkcast.spark.execution.processor", "sparkcast.spark.execution.operator_runner",
        "sparkcast.spark.execution.packing"}
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)]


def test_the_stateless_paths_worker_imports_the_runner_alone(spark, tmp_path):
    events, rules = _frames(spark)
    result = Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Enrich(), "k string, limit long")
    assert kind_of(result) == "stateless"
    modules = _imported_by_a_worker(stateless_runner(result.plan), tmp_path)
    assert _spark_modules(modules) == COMMON | {"sparkcast.spark.execution.stateless"}
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)]


def test_the_streamed_paths_worker_imports_the_runner_and_snapshots(spark, tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "rules").mkdir()
    events = spark.readStream.schema("k string, n long").json(str(tmp_path / "events"))
    rules = spark.readStream.schema("name string, limit long").json(str(tmp_path / "rules"))
    result = Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Enrich(), "k string, limit long")
    assert kind_of(result) == "streamed"
    modules = _imported_by_a_worker(streamed_runner(result.plan, None), tmp_path)
    assert _spark_modules(modules) == COMMON | STATE | {
        "sparkcast.spark.execution.stateless", "sparkcast.spark.execution.streamed",
        "sparkcast.spark.execution.phases",
        "sparkcast.spark.state.snapshots"}
    assert "sparkcast.spark.execution.processor" not in modules
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)]


def _keyed_runner(spark, tmp_path):
    """A keyed counter over two file streams, and the runner its subtasks ship."""
    (tmp_path / "events").mkdir()
    (tmp_path / "rules").mkdir()
    events = spark.readStream.schema("k string, n long").json(str(tmp_path / "events"))
    rules = spark.readStream.schema("name string, limit long").json(str(tmp_path / "rules"))
    result = (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES))
              .process(Count(), "k string, seen long"))
    runner = PartitionedRunner(result.plan.for_workers(), 0, None, None, [], "never", {},
                               Clocks(None, 0), (str(tmp_path / "keyed"), "store"), "{}")
    return result, runner


def test_the_partitioned_paths_worker_imports_the_runner_and_the_keyed_store(spark, tmp_path):
    result, runner = _keyed_runner(spark, tmp_path)
    assert kind_of(result) == "partitioned"
    modules = _imported_by_a_worker(runner, tmp_path)
    assert _spark_modules(modules) == COMMON | STATE | {
        "sparkcast.spark.execution.partitioned", "sparkcast.spark.execution.routing",
        "sparkcast.spark.execution.stateless", "sparkcast.spark.execution.streamed",
        "sparkcast.spark.execution.phases",
        "sparkcast.spark.state.snapshots", "sparkcast.spark.state.keyed_store",
        "sparkcast.spark.state.store_backend"}
    assert "sparkcast.spark.execution.processor" not in modules
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)]


def test_the_streamed_paths_task_writer_imports_the_runner_and_the_writer(spark, tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "rules").mkdir()
    events = spark.readStream.schema("k string, n long").json(str(tmp_path / "events"))
    rules = spark.readStream.schema("name string, limit long").json(str(tmp_path / "rules"))
    result = Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Enrich(), "k string, limit long")
    layout = file_layout(spark, tagged_schema(result.plan.output_schema, LongType()), "parquet")
    assert layout is not None
    writer = TaskWriter(streamed_runner(result.plan, None), str(tmp_path / "staging"), layout)
    modules = _imported_by_a_worker(writer, tmp_path)
    assert _spark_modules(modules) == COMMON | STATE | {
        "sparkcast.spark.execution.stateless", "sparkcast.spark.execution.streamed",
        "sparkcast.spark.execution.phases",
        "sparkcast.spark.state.snapshots", "sparkcast.spark.execution.task_writer"}
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)]


#: the Kafka sink's modules a task imports: the part writer, its marker reads, the client
KAFKA_TASK_MODULES = ("sparkcast.spark.outputs.kafka_transactions",
                      "sparkcast.spark.outputs.kafka_marker_reads",
                      "sparkcast.spark.outputs.kafka_client")


def test_the_pattern_tasks_sink_writer_imports_the_runner_the_files_and_kafka_alone(
        spark, tmp_path):
    """What a keyed query whose tasks write Kafka and files ships (``sinks_in_tasks.py``): the
    runner labelled by subtask, and the writer with its part writer."""
    from sparkcast.spark.outputs.kafka_transactions import PartWriter
    from sparkcast.spark.outputs.task_sinks import (
        FilesTarget,
        KafkaTarget,
        SinkTaskWriter,
        with_subtask,
    )

    result, runner = _keyed_runner(spark, tmp_path)
    layout = file_layout(spark, tagged_schema(result.plan.output_schema, LongType()), "parquet")
    assert layout is not None
    part = PartWriter({}, "out", "markers", "q", "main", 0, 2, frozenset(), "subtask")
    writer = SinkTaskWriter((FilesTarget(frozenset(["dead_letters"]), "staging", layout),),
                            (KafkaTarget("main", 0, part),))
    modules = _imported_by_a_worker((with_subtask(runner), writer), tmp_path)
    assert _spark_modules(modules) == COMMON | STATE | {
        "sparkcast.spark.execution.partitioned", "sparkcast.spark.execution.routing",
        "sparkcast.spark.execution.stateless", "sparkcast.spark.execution.streamed",
        "sparkcast.spark.execution.phases", "sparkcast.spark.execution.task_writer",
        "sparkcast.spark.state.snapshots", "sparkcast.spark.state.keyed_store",
        "sparkcast.spark.state.store_backend", "sparkcast.spark.outputs",
        "sparkcast.spark.outputs.task_sinks", *KAFKA_TASK_MODULES}
    assert not [m for m in modules if m.startswith(DRIVER_ONLY)
                and m not in ("sparkcast.spark.outputs.task_sinks", *KAFKA_TASK_MODULES)]


def test_a_by_subtask_micro_batch_ships_no_static_side_its_workers_never_read(spark, tmp_path):
    """By subtask, the workers read the static side's state as snapshot -1, so the runner each
    micro-batch pickles carries none of it (it carried all of it: 1.7 MB for 100k rows); the
    operator for ``result.main`` and the in-place runner, which bind it, still get it."""
    (tmp_path / "events").mkdir()
    events = spark.readStream.schema("k string, n long").json(str(tmp_path / "events"))
    rules = spark.createDataFrame([(f"rule {i}", i) for i in range(2000)],
                                  "name string, limit long")
    result = (Stream(events).key_by("k").connect(Stream(rules).broadcast(RULES))
              .process(Count(), "k string, seen long"))
    assert kind_of(result) == "partitioned"
    static = result.plan.static
    assert static is not None and len(static.state) > 20_000
    runner = PartitionedRunner(result.plan.for_workers(), 0, None, None, [], "never", {},
                               Clocks(None, 0), (str(tmp_path / "keyed"), "store"), "{}")
    assert runner.plan.static is None
    assert len(CloudPickleSerializer().dumps(runner)) < len(static.state) // 4
    shipped, _, _ = pickle.loads(operator_processor(result.plan).shipped)
    assert shipped.static is not None and shipped.static.state == static.state
    in_place = Stream(events).connect(Stream(rules).broadcast(RULES)).process(
        Enrich(), "k string, limit long")
    assert kind_of(in_place) == "stateless"
    assert stateless_runner(in_place.plan).plan.static is in_place.plan.static is not None
