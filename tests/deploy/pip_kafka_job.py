"""A user's Kafka job file, run by ``sparkcast run`` from a pip-installed sparkcast
(``tests/deploy/test_pip_install.py``): orders from a topic priced by a broadcast topic of
prices, the totals written to a third topic exactly once. It names no jar: the session
``sparkcast run`` starts brings Spark's Kafka connector. Broker, topics and checkpoint come
from the environment (``JOB_*``)."""

from __future__ import annotations

import os
from typing import Any

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, sinks
from sparkcast.sources import kafka_topic
from sparkcast.spark import Stream

PRICES = MapStateDescriptor("prices", str, float)
ORDERS_SCHEMA = "order_id string, product string, quantity long"
PRICES_SCHEMA = "product string, price double"
OUTPUT_SCHEMA = "order_id string, total double"


class PriceOrders(BroadcastProcessFunction):
    """An order's total at the latest price of its product (None: not priced)."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(PRICES).put(value["product"], value["price"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        price = ctx.get_broadcast_state(PRICES).get(value["product"])
        yield value["order_id"], None if price is None else price * value["quantity"]


def pipeline(spark: Any) -> Any:
    """The started query: both topics read to their end (available now), totals produced."""
    bootstrap = os.environ["JOB_BOOTSTRAP"]
    orders = kafka_topic(spark, bootstrap, os.environ["JOB_ORDERS"], ORDERS_SCHEMA)
    prices = kafka_topic(spark, bootstrap, os.environ["JOB_PRICES"], PRICES_SCHEMA,
                         metadata=["offset"])
    result = (Stream(orders)
              .connect(Stream(prices).broadcast(PRICES, order_by="kafka_offset"))
              .process(PriceOrders(), output_schema=OUTPUT_SCHEMA, parallelism=1))
    totals = sinks.kafka(bootstrap, os.environ["JOB_TOTALS"], key="order_id", parallelism=1)
    return result.write_stream(checkpoint_location=os.environ["JOB_CHECKPOINT"],
                               sinks={"main": totals}, trigger={"availableNow": True})
