"""Dimension enrichment: a product catalog broadcast to every subtask, joined to each event.

Catalog rows (``op`` upsert or delete) update the broadcast state while events flow; every
event of a micro-batch is enriched with the catalog as it stands after that batch's updates
(name, category, price, and the line total). Events for products the catalog does not know go
to the ``unknown_products`` side output, so main + unknown hold one row per event.

The join is one ``pandas.merge`` per micro-batch; the catalog frame is rebuilt only when the
catalog version changes, not per batch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.apps.base import BROADCAST, EVENTS, App, Drop, next_version

CATALOG = MapStateDescriptor("catalog", str, dict)
CATALOG_VERSION = MapStateDescriptor("catalog_version", str, int)
UNKNOWN = OutputTag("unknown_products", "event_id string, product_id string, "
                                        "catalog_version long, subtask int")

EVENTS_SCHEMA = "event_id string, user_id string, product_id string, quantity long, ts long"
BROADCAST_SCHEMA = ("seq long, op string, product_id string, name string, category string, "
                    "price double")
OUTPUT_SCHEMA = ("event_id string, user_id string, product_id string, name string, "
                 "category string, price double, quantity long, total double, "
                 "catalog_version long, subtask int")
_CATALOG_COLUMNS = ["product_id", "name", "category", "price"]


def catalog_frame(entries: Any) -> pd.DataFrame:
    rows = [{"product_id": key, **{c: value[c] for c in _CATALOG_COLUMNS[1:]}}
            for key, value in entries]
    return pd.DataFrame(rows, columns=_CATALOG_COLUMNS)


def enrich(batch: pd.DataFrame, catalog: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(known, unknown)``: events joined to the catalog, and those with no catalog entry."""
    merged = batch.merge(catalog, on="product_id", how="left", indicator=True, sort=False)
    known = merged[merged["_merge"] == "both"].drop(columns="_merge")
    known = known.assign(total=(known["price"] * known["quantity"]).round(2))
    unknown = merged[merged["_merge"] == "left_only"][["event_id", "product_id"]]
    return known.reset_index(drop=True), unknown.reset_index(drop=True)


class Enrichment(BroadcastProcessFunction):
    """Flink: the classic broadcast-join ``BroadcastProcessFunction``; vectorized."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self._frame: tuple[int, pd.DataFrame] | None = None

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        catalog = ctx.get_broadcast_state(CATALOG)
        if value["op"] == "delete":
            catalog.remove(value["product_id"])
        else:
            catalog.put(value["product_id"], {"name": value["name"],
                                              "category": value["category"],
                                              "price": float(value["price"])})
        next_version(ctx.get_broadcast_state(CATALOG_VERSION))

    def process_batch(self, batch: pd.DataFrame, ctx: Any) -> Iterator[Any]:
        version = ctx.get_broadcast_state(CATALOG_VERSION).get("version") or 0
        if self._frame is None or self._frame[0] != version:
            self._frame = (version, catalog_frame(ctx.get_broadcast_state(CATALOG).items()))
        known, unknown = enrich(batch[["event_id", "user_id", "product_id", "quantity"]],
                                self._frame[1])
        if len(known):
            yield known.assign(catalog_version=version, subtask=self.subtask)
        if len(unknown):
            yield UNKNOWN, unknown.assign(catalog_version=version, subtask=self.subtask)


# ---------------------------------------------------------------------------------- data

NAMES = ["lamp", "kettle", "novel", "headphones", "chair", "puzzle", "drill", "mug"]
CATEGORIES = ["home", "kitchen", "books", "audio", "home", "games", "tools", "kitchen"]


def product_row(seq: int, index: int, price: float, op: str = "upsert") -> dict[str, Any]:
    return {"seq": seq, "op": op, "product_id": f"sku{index:03d}",
            "name": f"{NAMES[index % 8]} {index}", "category": CATEGORIES[index % 8],
            "price": price}


def generate(seed: int = 7, files: int = 6, per_file: int = 100, products: int = 40
             ) -> list[Drop]:
    """Products 0–39 at step 0; mid-run new products 40–44, price changes, sku000 removed.
    Events also name products 45–49, which never exist (unknown)."""
    rng = random.Random(seed)
    drops = [Drop(0, BROADCAST, "catalog-000.json",
                  tuple(product_row(i, i, round(rng.uniform(2, 200), 2)) for i in range(products)))]
    update = [product_row(1000 + i, i, round(rng.uniform(2, 200), 2))
              for i in range(products, products + 5)]
    update += [product_row(1010 + i, i, 9.99) for i in range(1, 4)]
    update.append({**product_row(1020, 0, 0.0), "op": "delete"})
    drops.append(Drop(files // 2, BROADCAST, "catalog-001.json", tuple(update)))
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"orders-{f:03d}.json", tuple(
            {"event_id": f"ord{f * per_file + i:06d}", "user_id": f"user{rng.randrange(100):03d}",
             "product_id": f"sku{rng.randrange(products + 10):03d}",
             "quantity": rng.randrange(1, 4), "ts": 1_700_000_000_000 + f * per_file + i}
            for i in range(per_file))))
    return drops


APP = App(
    name="enrichment",
    title="Dimension enrichment (product catalog join, unknown products)",
    make_function=Enrichment,
    descriptors=(CATALOG, CATALOG_VERSION),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=100 * scale),
    side_outputs=(UNKNOWN,),
    hold_until_ready=((CATALOG_VERSION, "version"),),
    version_column="catalog_version",
    per_event_outputs=("main", "unknown_products"),
    show_columns=("event_id", "product_id", "name", "price", "total", "catalog_version",
                  "subtask"),
    update_note="catalog-001.json: sku040–044 added, 3 price changes, sku000 removed",
)
