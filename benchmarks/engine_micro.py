"""In-process engine figures of docs/architecture.md, measured side by side on two source trees.

    python benchmarks/engine_micro.py                      # this tree
    python benchmarks/engine_micro.py --base /tmp/old/src  # this tree and an older one, alternating

Two workloads, each a few micro-batches through ``SubtaskEngine.run_micro_batch``:

* ``enrichment``: non-keyed, per element, every event looks up a 1,000-row broadcast state;
* ``keyed counter``: keyed ValueState counter over the Spark backend's bucketed state (in-memory
  stand-ins for Spark's MapState handles, no JVM), rebound every micro-batch as on Spark.

Each tree runs in its own subprocess (the import path decides which code runs); runs alternate so
machine noise hits both alike. Prints the best and median events/s of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EVENTS = 200_000
BATCH = 20_000


class FakeMapState:
    """PySpark's MapState calls over a dict."""

    def __init__(self) -> None:
        self.data: dict[tuple, tuple] = {}

    def getValue(self, key: tuple) -> Any:  # noqa: N802 - PySpark's names
        return self.data.get(key)

    def updateValue(self, key: tuple, value: tuple) -> None:  # noqa: N802
        self.data[key] = value

    def removeKey(self, key: tuple) -> None:  # noqa: N802
        self.data.pop(key, None)

    def containsKey(self, key: tuple) -> bool:  # noqa: N802
        return key in self.data

    def iterator(self) -> Any:
        return iter(list(self.data.items()))


class FakeHandle:
    def __init__(self) -> None:
        self.states: dict[str, FakeMapState] = {}

    def getMapState(self, name: str, *_: Any) -> FakeMapState:  # noqa: N802
        return self.states.setdefault(name, FakeMapState())


def enrichment() -> float:
    from sparkcast import BroadcastProcessFunction, MapStateDescriptor
    from sparkcast.core import BroadcastElement, DictBackend, SubtaskEngine

    rules = MapStateDescriptor("segments", str, dict)

    class Enrich(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            segment = ctx.get_broadcast_state(rules).get(value["user"])
            yield value["user"], value["amount"], None if segment is None else segment["tier"]

        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(rules).put(value["user"], value)

    engine = SubtaskEngine(Enrich(), [rules], DictBackend())
    engine.open()
    static = [BroadcastElement({"user": f"u{i}", "tier": i % 3}) for i in range(1000)]
    engine.run_micro_batch(static, [])
    engine.flush()
    engine.take_outputs()
    values = [{"user": f"u{i % 1500}", "amount": i} for i in range(BATCH)]
    start = time.perf_counter()
    for _ in range(EVENTS // BATCH):
        engine.run_micro_batch([], values)
        engine.flush()
        engine.take_outputs()
    return EVENTS / (time.perf_counter() - start)


def keyed_counter() -> float:
    from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
    from sparkcast.core import SubtaskEngine
    from sparkcast.spark.state.backend import SparkStateBackend, SparkStates

    rules = MapStateDescriptor("rules", str, object)
    count = ValueStateDescriptor("count", int)

    class Counter(KeyedBroadcastProcessFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(count)

        def process_element(self, value, ctx):
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            if n > 3:
                yield value, n

        def process_broadcast_element(self, value, ctx):
            pass

    handle = FakeHandle()

    def backend() -> SparkStateBackend:
        return SparkStateBackend(SparkStates(handle, ["rules"]), "bench", 64, "/tmp")

    engine = SubtaskEngine(Counter(), [rules], backend())
    engine.open()
    keys = [f"user-{i % 5000}" for i in range(BATCH)]
    start = time.perf_counter()
    for _ in range(EVENTS // BATCH):
        engine.bind(backend())
        engine.run_micro_batch([], keys, None, keys)
        engine.flush()
        engine.take_outputs()
    return EVENTS / (time.perf_counter() - start)


WORKLOADS = {"enrichment": enrichment, "keyed counter": keyed_counter}


def _child(src: str, name: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--child", name],
                         env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", help="another tree's src/ to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(WORKLOADS[args.child]()))
        return
    trees = {"this": str(HERE.parent / "src")}
    if args.base:
        trees = {"base": args.base, **trees}
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for name in WORKLOADS:
            for label, src in trees.items():
                results.setdefault((name, label), []).append(_child(src, name))
    for (name, label), rates in results.items():
        print(f"{name:14s} {label:5s} best {max(rates) / 1e3:6.0f}k/s  "
              f"median {statistics.median(rates) / 1e3:6.0f}k/s  events/s")


if __name__ == "__main__":
    main()
