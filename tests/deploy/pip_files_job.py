"""A user's job file that reads and writes files only, run by ``sparkcast run`` from a
pip-installed sparkcast with no network (``tests/deploy/test_pip_install.py``): orders priced
by a broadcast side of prices, both JSON folders. It writes the time its session was ready to
``JOB_MARK``, so the test measures the start. Folders come from the environment (``JOB_*``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sparkcast import BroadcastProcessFunction, MapStateDescriptor

PRICES = MapStateDescriptor("prices", str, float)
OUTPUT_SCHEMA = "order_id string, total double"


class PriceOrders(BroadcastProcessFunction):
    """An order's total at the latest price of its product (None: not priced)."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(PRICES).put(value["product"], value["price"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        price = ctx.get_broadcast_state(PRICES).get(value["product"])
        yield value["order_id"], None if price is None else price * value["quantity"]


def pipeline(spark: Any) -> Any:
    """The started query: both folders read to their end (available now), totals written."""
    Path(os.environ["JOB_MARK"]).write_text(repr(time.time()))
    from sparkcast.spark import Stream

    orders = spark.readStream.schema(
        "order_id string, product string, quantity long, _corrupt_record string"
    ).json(os.environ["JOB_ORDERS"])
    prices = spark.readStream.schema(
        "product string, price double, _corrupt_record string").json(os.environ["JOB_PRICES"])
    result = (Stream(orders).connect(Stream(prices).broadcast(PRICES))
              .process(PriceOrders(), output_schema=OUTPUT_SCHEMA, parallelism=1))
    return result.write_stream(os.environ["JOB_OUTPUT"], os.environ["JOB_CHECKPOINT"],
                               trigger={"availableNow": True})
