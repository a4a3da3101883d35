"""PyFlink 2.3: the reference, run in its own venv (``benchmarks/.venv-flink``).

One job per process: ``python flink_systems.py '{"workload": "W1", "n": 100000}'`` prints
``@@RESULT {...}``. Set up as DESIGN.md §5 says is fair:

- ``_python_worker_execution_mode=process``: Python functions run in separate worker processes,
  as on a cluster (else all Python work shares the client's one GIL);
- bundles raised (``python.fn-execution.bundle.size``/``.time``), which keyed state needs;
- the main stream is read in the JVM (the filesystem CSV table source as a DataStream of typed
  rows, no Python parsing) from the same rows the Spark systems read as Parquet; the broadcast
  side is a small ``from_collection`` (W6: the same JVM CSV source); the output goes to the JVM
  ``DiscardingSink``. Only the broadcast process function (and, for W3, PyFlink's Python key
  selector) runs in Python;
- parallelism 2 (W6: 8).

Field access is positional (``value[0]``): PyFlink's ``Row`` looks names up with
``list.index``, and positional access is what fast PyFlink code does.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import child  # noqa: E402
import data  # noqa: E402
import logic  # noqa: E402

os.environ["_python_worker_execution_mode"] = "process"

from pyflink.common import Configuration, Types  # noqa: E402
from pyflink.datastream import StreamExecutionEnvironment  # noqa: E402
from pyflink.datastream.connectors import Sink  # noqa: E402
from pyflink.datastream.functions import (  # noqa: E402
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor  # noqa: E402
from pyflink.java_gateway import get_gateway  # noqa: E402
from pyflink.table.types import DataTypes  # noqa: E402

DIM = MapStateDescriptor("dim", Types.INT(), Types.DOUBLE())
RULES = MapStateDescriptor("rules", Types.INT(), Types.PICKLED_BYTE_ARRAY())
THRESHOLD = MapStateDescriptor("threshold", Types.STRING(), Types.LONG())
MODEL = MapStateDescriptor("model", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
LARGE = MapStateDescriptor("large", Types.INT(), Types.STRING())


class Enrich(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        out = logic.enrich(value[0], value[1], ctx.get_broadcast_state(DIM))
        if out is not None:
            yield out

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(DIM).put(value[0], value[1])


class Rules(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        rules = ctx.get_broadcast_state(RULES).values()
        yield value[0], logic.match_rules(value[1], value[2], value[3], value[4], value[5], rules)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], tuple(value))


class Counter(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        threshold = ctx.get_broadcast_state(THRESHOLD).get("threshold")
        count, flagged = logic.count_and_flag(self.count.value(), threshold)
        self.count.update(count)
        yield value[0], count, flagged

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(THRESHOLD).put(value[0], value[1])


class Score(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        model = ctx.get_broadcast_state(MODEL).get("lr")
        if model is None:  # an event before the model: dropped, as in Flink
            return
        weights, bias = model
        yield value[0], logic.score(value[1:], weights, bias)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(MODEL).put(value[0], (tuple(value[2]), value[1]))


class Large(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        payload = ctx.get_broadcast_state(LARGE).get(value[0] % data.LARGE_ROWS)
        yield value[0], len(payload) if payload is not None else -1

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LARGE).put(value[0], value[1])


_SQL = {"int": (DataTypes.INT(), Types.INT()), "double": (DataTypes.DOUBLE(), Types.DOUBLE()),
        "long": (DataTypes.BIGINT(), Types.LONG()), "string": (None, Types.STRING()),
        "boolean": (None, Types.BOOLEAN())}


def _fields(ddl: str) -> list[tuple[str, str]]:
    return [tuple(part.split()) for part in ddl.split(",")]  # type: ignore[misc]


def _tuple_type(ddl: str):
    return Types.TUPLE([_SQL[t][1] for _, t in _fields(ddl)])


def _csv_source(env, path: Path, ddl: str, name: str):
    """A JVM-side CSV source of typed rows: Flink's filesystem table source, turned into a
    DataStream of ``Row`` (PyFlink's key_by cannot take the internal ``RowData`` that the
    DataStream ``CsvReaderFormat`` produces)."""
    from pyflink.table import StreamTableEnvironment

    t_env = getattr(env, "_bench_t_env", None)
    if t_env is None:
        t_env = env._bench_t_env = StreamTableEnvironment.create(env)
    columns = ", ".join(f"`{f}` {'STRING' if k == 'string' else _SQL[k][0]}"
                        for f, k in _fields(ddl))
    t_env.execute_sql(f"CREATE TEMPORARY TABLE `{name}` ({columns}) WITH ("
                      f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')")
    return t_env.to_data_stream(t_env.from_path(name))


OUTPUT_TYPES = {
    "W1": "key int, value double",
    "W2": "user int, matched int",
    "W3": "user int, count long, flagged boolean",
    "W4": "user int, score double",
    "W6": "key int, size int",
}


def _broadcast(env, workload: str):
    if workload == "W6":
        return _csv_source(env, data.large_broadcast_csv(), "key int, payload string", "large")
    rows = data.broadcast_rows(workload)
    if workload == "W1":
        return env.from_collection([(int(k), float(w)) for k, w in rows.itertuples(index=False)],
                                   type_info=Types.TUPLE([Types.INT(), Types.DOUBLE()]))
    if workload == "W2":
        values = [tuple(int(x) if i != 1 else float(x) for i, x in enumerate(r))
                  for r in rows.itertuples(index=False, name=None)]
        kinds = [Types.DOUBLE() if i == 1 else Types.INT() for i in range(len(values[0]))]
        return env.from_collection(values, type_info=Types.TUPLE(kinds))
    if workload == "W3":
        return env.from_collection([("threshold", int(rows["value"].iloc[0]))],
                                   type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    row = rows.iloc[0]
    return env.from_collection([("lr", float(row["bias"]), [float(w) for w in row["weights"]])],
                               type_info=Types.TUPLE([Types.STRING(), Types.DOUBLE(),
                                                      Types.BASIC_ARRAY(Types.DOUBLE())]))


def run(workload: str, n: int, parallelism: int = 2, bundle_size: int = 1_000_000,
        bundle_time: int = 10_000) -> dict:
    begin = time.perf_counter()
    config = Configuration()
    config.set_string("python.fn-execution.bundle.size", str(bundle_size))
    config.set_string("python.fn-execution.bundle.time", str(bundle_time))
    # keyed state: the Python worker caches 1,000 keys by default, so with 100k users nearly
    # every value() is a round trip to the JVM; a cache holding every key halved W3's time
    config.set_string("python.state.cache-size", "200000")
    config.set_string("taskmanager.memory.process.size", "4g")
    config.set_string("taskmanager.numberOfTaskSlots", str(max(parallelism, 2)))
    env = StreamExecutionEnvironment.get_execution_environment(config)
    env.set_parallelism(parallelism)
    env.set_python_executable(sys.executable)
    env.add_python_file(str(HERE / "logic.py"))
    env.add_python_file(str(HERE / "data.py"))
    source = "W1" if workload == "W6" else workload
    events = _csv_source(env, data.events_csv(source, n), data.EVENT_SCHEMAS[source], "events")
    function, desc = {"W1": (Enrich, DIM), "W2": (Rules, RULES), "W3": (Counter, THRESHOLD),
                      "W4": (Score, MODEL), "W6": (Large, LARGE)}[workload]
    broadcast = _broadcast(env, workload).broadcast(desc)
    if workload == "W3":
        events = events.key_by(lambda v: v[0], key_type=Types.INT())
    out = events.connect(broadcast).process(function(), output_type=_tuple_type(
        OUTPUT_TYPES[workload]))
    jvm = get_gateway().jvm
    out.sink_to(Sink(jvm.org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink()))
    sampler = None
    if workload == "W6":
        import procmem

        sampler = procmem.TreeSampler(os.getpid())
        sampler.start()
    start = time.perf_counter()
    env.execute(f"bench-{workload}-{n}")
    seconds = time.perf_counter() - start
    result = {"seconds": seconds, "build_seconds": start - begin, "rows_in": n, "rows_out": None,
              "batches": None}
    if sampler is not None:
        sampler.stop()
        result.update(sampler.summary())
    return result


if __name__ == "__main__":
    job = json.loads(sys.argv[1])
    child.answer({"ok": True, **run(**job)})
