"""Enrichment from a keyed reference stream, a ``KeyedCoProcessFunction``: the learning
module's advice for per-key reference data (two keyed streams instead of a broadcast, so each
subtask keeps only the products of its keys).

Orders (input 1) and products (input 2) are keyed by product id. A product is kept as a typed
``Product`` in keyed state; orders that arrive before their product wait in list state.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkcast import KeyedCoProcessFunction, ListStateDescriptor, ValueStateDescriptor

OUTPUT_SCHEMA = "order_id string, product string, total double"


@dataclass(frozen=True)
class Product:
    product_id: str
    name: str
    price: float
    currency: str = "EUR"  # added later: old state without it still reads


PRODUCT = ValueStateDescriptor("product", Product)
WAITING = ListStateDescriptor("waiting", tuple)


class EnrichOrders(KeyedCoProcessFunction):
    def open(self, runtime_context):
        self.product = runtime_context.get_state(PRODUCT)
        self.waiting = runtime_context.get_list_state(WAITING)

    def process_element1(self, order, ctx):
        product = self.product.value()
        if product is None:
            self.waiting.add((order["order_id"], order["qty"]))
            return
        yield order["order_id"], product.name, order["qty"] * product.price

    def process_element2(self, row, ctx):
        product = Product(row["product_id"], row["name"], row["price"])
        self.product.update(product)
        for order_id, qty in self.waiting.get():
            yield order_id, product.name, qty * product.price
        self.waiting.clear()
