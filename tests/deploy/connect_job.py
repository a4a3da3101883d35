"""The pipelines the Spark Connect test runs twice: in a Connect session (a subprocess: Spark
refuses a Connect session beside the test run's classic one) and in the classic session.

Each pipeline returns its outputs as sorted lists, so the two runs compare as JSON."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from sparkcast import BroadcastProcessFunction, KeyedBroadcastProcessFunction, MapStateDescriptor
from sparkcast.spark import Stream, read_output

PRICES = MapStateDescriptor("prices", str, int)


class Totals(KeyedBroadcastProcessFunction):
    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(PRICES).put(value["item"], value["price"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value["user"], value["item"], value["qty"] * ctx.get_broadcast_state(PRICES).get(
            value["item"])


class Priced(BroadcastProcessFunction):
    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(PRICES).put(value["item"], value["price"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield value["item"], value["qty"], ctx.get_broadcast_state(PRICES).get(value["item"])


ORDERS = [{"user": f"u{i % 5}", "item": f"i{i % 3}", "qty": i} for i in range(30)]
PRICE_ROWS = [{"item": f"i{i}", "price": 10 * (i + 1)} for i in range(3)]


def run_all(spark: Any, work: Path) -> dict[str, Any]:
    orders = spark.createDataFrame(ORDERS, "user string, item string, qty long")
    prices = spark.createDataFrame(PRICE_ROWS, "item string, price long")
    keyed = Stream(orders).key_by("user").connect(Stream(prices).broadcast(PRICES)).process(
        Totals(), "user string, item string, total long", parallelism=2)
    flat = Stream(orders).connect(Stream(prices).broadcast(PRICES)).process(
        Priced(), "item string, qty long, price long", parallelism=2)
    out = {"keyed": _rows(keyed.main), "keyed_stateless": keyed.plan.in_place,
           "shuffle_free": _rows(flat.main),
           "shuffle_free_stateless": flat.plan.in_place}
    events = work / "orders"
    events.mkdir(parents=True)
    for part in range(3):
        (events / f"part-{part}.json").write_text(
            "\n".join(json.dumps(o) for o in ORDERS[part::3]) + "\n")
    stream = spark.readStream.schema("user string, item string, qty long").json(str(events))
    query = (Stream(stream).key_by("user").connect(Stream(prices).broadcast(PRICES))
             .process(Totals(), "user string, item string, total long", parallelism=2)
             .write_stream(str(work / "out"), str(work / "checkpoint"),
                           trigger={"availableNow": True}))
    query.awaitTermination()
    out["write_stream"] = _rows(read_output(spark, str(work / "out")))
    return out


def _rows(df: Any) -> list[list[Any]]:
    return sorted(list(r) for r in df.collect())


def main(argv: list[str]) -> int:
    from sparkcast.spark import session

    started = time.monotonic()
    spark = session(app_name="sparkcast-connect-test", remote="local[2]",
                    conf={"spark.sql.shuffle.partitions": "2"})
    result = run_all(spark, Path(argv[1]))
    result["session"] = type(spark).__module__
    result["seconds"] = round(time.monotonic() - started, 1)
    Path(argv[2]).write_text(json.dumps(result))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
