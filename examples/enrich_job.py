"""A job file for ``sparkcast run``: clicks enriched with a broadcast product catalogue, and a
running count of each user's clicks in keyed state.

    sparkcast run enrich_job.py --output out --checkpoint ck --available-now
    spark-submit enrich_job.py --output out --checkpoint ck --available-now   # the same run

``pipeline(spark)`` returns the ``ProcessResult``; sparkcast writes it to ``--output`` (read it
back with ``sparkcast.spark.read_output``) and keeps its state in ``--checkpoint``. The input is
two folders of JSON lines under ``$ENRICH_DATA`` (default ``./enrich-data``): ``clicks/`` and
``products/``. A local folder that does not exist yet gets a generated sample (``sample()``), so
the file runs with nothing else; clicks on a product the catalogue lacks go to the side output
``unknown``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)

CATALOGUE = MapStateDescriptor("catalogue", str, dict)
CLICKS = ValueStateDescriptor("clicks", int)
UNKNOWN = OutputTag("unknown", "user string, click long, product string")
CLICKS_SCHEMA = "click long, user string, product string, ts long"
MALFORMED = "_corrupt_record string"  # a line that does not parse: a dead letter, not nulls
PRODUCTS_SCHEMA = "product string, name string, price double, version long, ts long"
OUTPUT_SCHEMA = "user string, click long, name string, price double, nth long"


class EnrichClicks(KeyedBroadcastProcessFunction):
    """Per user: the click's product name and price as the catalogue has it, and how many
    clicks the user has made so far."""

    def open(self, runtime_context: Any) -> None:
        self.clicks = runtime_context.get_state(CLICKS)

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(CATALOGUE).put(
            value["product"], {"name": value["name"], "price": value["price"]})

    def process_element(self, value: Any, ctx: Any) -> Any:
        product = ctx.get_broadcast_state(CATALOGUE).get(value["product"])
        if product is None:
            yield UNKNOWN, (value["user"], value["click"], value["product"])
            return
        nth = (self.clicks.value() or 0) + 1
        self.clicks.update(nth)
        yield value["user"], value["click"], product["name"], product["price"], nth


def data_folder() -> str:
    return os.environ.get("ENRICH_DATA", "enrich-data")


def sample() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(products, clicks)``: five products, 60 clicks of 7 users, some on unknown products."""
    products = [{"product": f"p{i}", "name": f"product {i}", "price": 1.5 * (i + 1),
                 "version": 1, "ts": 0} for i in range(5)]
    clicks = [{"click": n, "user": f"u{n % 7}", "product": f"p{n % 6}", "ts": 1_000 + n}
              for n in range(60)]
    return products, clicks


def write_sample(folder: Path) -> None:
    products, clicks = sample()
    for name, rows in (("products", products), ("clicks", clicks)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(row) + "\n" for row in rows)
        (folder / name / f"{name}-0.json").write_text(text, encoding="utf-8")


def pipeline(spark: Any) -> Any:
    """The ``ProcessResult`` over ``$ENRICH_DATA``; ``sparkcast run`` writes and watches it."""
    from sparkcast.spark import Stream

    data = data_folder()
    if "://" not in data and not Path(data).exists():
        write_sample(Path(data))
    clicks = spark.readStream.schema(f"{CLICKS_SCHEMA}, {MALFORMED}").json(f"{data}/clicks")
    products = spark.readStream.schema(f"{PRODUCTS_SCHEMA}, {MALFORMED}").json(f"{data}/products")
    return (Stream(clicks).key_by("user")
            .connect(Stream(products).broadcast(CATALOGUE, order_by="version"))
            .process(EnrichClicks(), output_schema=OUTPUT_SCHEMA, side_outputs=[UNKNOWN],
                     parallelism=2, event_time="ts"))


if __name__ == "__main__":  # spark-submit enrich_job.py --output ... : the same run as the CLI's
    from sparkcast.cli import main

    sys.exit(main(["run", f"{__file__}:pipeline", *sys.argv[1:]]))
