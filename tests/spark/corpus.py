"""The differential corpus: programs that must give the same outputs on the harness and Spark.

Every main row has a distinct ``ts`` (epoch ms) so the order the runtime gives the rows of one
key — by event time — is the order the harness is fed; results of non-keyed programs depend on
the broadcast state only. Each entry lists its micro-batches as ``(broadcast rows, main rows)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)


@dataclass(frozen=True)
class Program:
    """One corpus entry: a function, its wiring and its micro-batches."""

    name: str
    make: Callable[[], Any]
    descriptors: tuple[MapStateDescriptor, ...]
    main_schema: str
    broadcast_schema: str
    output_schema: Any  # a DDL field list or a PyFlink output type
    batches: tuple[tuple[list[dict], list[dict]], ...]
    key: str | None = None
    side_outputs: tuple[OutputTag, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    timers: bool = False  # event-time timers: the main stream gets a watermark on ``ts``


# ------------------------------------------------------------- keyed counter + broadcast threshold

LIMITS = MapStateDescriptor("limits", str, int)


class CountAboveThreshold(KeyedBroadcastProcessFunction):
    """Counts each user's events; flags the count once it reaches the broadcast threshold."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put(value["name"], value["limit"])

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        limit = ctx.get_broadcast_state(LIMITS).get("threshold")
        yield value["user"], n, limit is not None and n >= limit


COUNTER = Program(
    "counter", CountAboveThreshold, (LIMITS,),
    "user string, ts long", "name string, limit long, ts long",
    "user string, n long, flagged boolean",
    (
        ([{"name": "threshold", "limit": 3, "ts": 1}],
         [{"user": f"u{i % 3}", "ts": 10 + i} for i in range(5)]),
        ([], [{"user": f"u{i % 4}", "ts": 100 + i} for i in range(6)]),
        ([{"name": "threshold", "limit": 2, "ts": 200}],
         [{"user": f"u{i % 2}", "ts": 300 + i} for i in range(4)]),
    ),
    key="user",
)

# --------------------------------------------------------- Flink's color/shape rule matching

SHAPE_RULES = MapStateDescriptor("rules", str, dict)


class MatchRules(KeyedBroadcastProcessFunction):
    """Flink's documentation example: pending first shapes per rule in keyed MapState."""

    PENDING = MapStateDescriptor("items", str, list)

    def open(self, runtime_context):
        self.pending = runtime_context.get_map_state(self.PENDING)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(SHAPE_RULES).put(value["name"], {
            "first": value["first"], "second": value["second"]})

    def process_element(self, value, ctx):
        shape = value["shape"]
        for name, rule in sorted(ctx.get_broadcast_state(SHAPE_RULES).items()):
            stored = self.pending.get(name) or []
            if shape == rule["second"] and stored:
                for item in stored:
                    yield f"MATCH: {name}: {item[1]}#{item[0]} - {shape}#{value['id']}"
                stored = []
            if shape == rule["first"]:
                stored = stored + [[value["id"], shape]]
            if stored:
                self.pending.put(name, stored)
            else:
                self.pending.remove(name)


def _items(start: int, specs: str) -> list[dict]:
    colors = {"r": "red", "b": "blue", "g": "green"}
    shapes = {"s": "square", "t": "triangle", "c": "circle"}
    return [{"id": start + i, "color": colors[s[0]], "shape": shapes[s[1]], "ts": start + i}
            for i, s in enumerate(specs.split())]


SHAPES = Program(
    "shapes", MatchRules, (SHAPE_RULES,),
    "id long, color string, shape string, ts long", "name string, first string, second string, "
    "ts long", "line string",
    (
        ([{"name": "sq-tri", "first": "square", "second": "triangle", "ts": 0}],
         _items(1, "rs bs rs gt rt")),
        ([{"name": "circles", "first": "circle", "second": "circle", "ts": 50}],
         _items(20, "rc rc bt gs rc")),
        ([], _items(40, "gt bc bc rs rt")),
    ),
    key="color",
)

# ------------------------------------------------------- fraud rules: BLOCK main, REVIEW side

FRAUD_RULES = MapStateDescriptor("fraud_rules", str, dict)
REVIEW = OutputTag("review", "tx_id string, rule string")


class FraudRules(KeyedBroadcastProcessFunction):
    """Amount rules; the most severe hit wins: BLOCK to the main output, REVIEW to a side one."""

    def process_broadcast_element(self, value, ctx):
        rules = ctx.get_broadcast_state(FRAUD_RULES)
        if value["delete"]:
            rules.remove(value["id"])
        else:
            rules.put(value["id"], {"limit": value["limit"], "action": value["action"]})

    def process_element(self, tx, ctx):
        hits = sorted((rule["action"] == "BLOCK", name) for name, rule in
                      ctx.get_broadcast_state(FRAUD_RULES).items() if tx["amount"] > rule["limit"])
        if not hits:
            return
        block, name = hits[-1]
        if block:
            yield {"tx_id": tx["tx_id"], "rule": name, "action": "BLOCK"}
        else:
            yield REVIEW, (tx["tx_id"], name)


def _rule(id_: str, limit: float, action: str, ts: int, delete: bool = False) -> dict:
    return {"id": id_, "limit": limit, "action": action, "delete": delete, "ts": ts}


FRAUD = Program(
    "fraud", FraudRules, (FRAUD_RULES,),
    "tx_id string, account string, amount double, ts long",
    "id string, limit double, action string, delete boolean, ts long",
    "tx_id string, rule string, action string",
    (
        ([_rule("big", 10_000.0, "BLOCK", 1), _rule("medium", 1_000.0, "REVIEW", 2)],
         [{"tx_id": f"t{i}", "account": f"a{i % 3}", "amount": float(50 * 7 ** (i % 6)),
           "ts": 10 + i} for i in range(8)]),
        ([_rule("big", 0.0, "BLOCK", 100, delete=True), _rule("huge", 100_000.0, "BLOCK", 101)],
         [{"tx_id": f"t{i}", "account": f"a{i % 3}", "amount": float(40 * 7 ** (i % 7)),
           "ts": 200 + i} for i in range(8, 16)]),
    ),
    key="account",
    side_outputs=(REVIEW,),
)

# --------------------------------------------------------------------- non-keyed enrichment

COUNTRIES = MapStateDescriptor("countries", str, str)


class Enrich(BroadcastProcessFunction):
    """A dimension table as broadcast state; unknown codes enrich to None."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(COUNTRIES).put(value["code"], value["country"])

    def process_element(self, value, ctx):
        yield value["id"], value["code"], ctx.get_broadcast_state(COUNTRIES).get(value["code"])


ENRICH = Program(
    "enrich", Enrich, (COUNTRIES,),
    "id long, code string, ts long", "code string, country string, ts long",
    "id long, code string, country string",
    (
        ([{"code": "de", "country": "Germany", "ts": 0}, {"code": "fr", "country": "France",
                                                          "ts": 0}],
         [{"id": i, "code": ["de", "fr", "it"][i % 3], "ts": i} for i in range(6)]),
        ([{"code": "it", "country": "Italy", "ts": 10}, {"code": "de", "country": "Deutschland",
                                                         "ts": 11}],
         [{"id": i, "code": ["de", "fr", "it", "es"][i % 4], "ts": i} for i in range(6, 14)]),
    ),
)

# ----------------------------------------------- vectorized (process_batch) enrichment

PRICES = MapStateDescriptor("prices", str, float)


class PriceBatch(BroadcastProcessFunction):
    """``process_batch``: one pandas ``map`` over the batch instead of a call per row."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(PRICES).put(value["sku"], value["price"])

    def process_batch(self, batch, ctx):
        prices = dict(ctx.get_broadcast_state(PRICES).items())
        unit = batch["sku"].map(prices)
        yield pd.DataFrame({"order_id": batch["order_id"].astype("int64"),
                            "total": (unit * batch["qty"]).astype("float64")})


BATCH = Program(
    "batch", PriceBatch, (PRICES,),
    "order_id long, sku string, qty long, ts long", "sku string, price double, ts long",
    "order_id long, total double",
    (
        ([{"sku": "a", "price": 2.5, "ts": 0}, {"sku": "b", "price": 10.0, "ts": 0}],
         [{"order_id": i, "sku": "ab"[i % 2], "qty": i + 1, "ts": i} for i in range(6)]),
        ([{"sku": "a", "price": 3.0, "ts": 10}],
         [{"order_id": i, "sku": "ab"[i % 2], "qty": 2, "ts": i} for i in range(6, 10)]),
    ),
)

# ------------------------------------------------------------------ keyed event-time timers

WINDOWS = MapStateDescriptor("window", str, int)


class SessionTotals(KeyedBroadcastProcessFunction):
    """Sums a key's amounts; an event-time timer at ``first ts + window`` emits and clears."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(WINDOWS).put("length", value["length"])

    def process_element(self, value, ctx):
        total = self.total.value()
        if total is None:
            length = ctx.get_broadcast_state(WINDOWS).get("length") or 1_000
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + length)
        self.total.update((total or 0) + value["amount"])
        return ()

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, self.total.value()
        self.total.clear()


TIMERS = Program(
    "timers", SessionTotals, (WINDOWS,),
    "k string, amount long, ts long", "length long, ts long", "k string, fired long, total long",
    (
        ([{"length": 100, "ts": 0}],
         [{"k": "a", "amount": 1, "ts": 1_000}, {"k": "b", "amount": 2, "ts": 1_010},
          {"k": "a", "amount": 3, "ts": 1_050}]),
        ([], [{"k": "a", "amount": 4, "ts": 1_200}, {"k": "c", "amount": 5, "ts": 1_210}]),
        ([], [{"k": "b", "amount": 6, "ts": 2_000}]),
        ([], [{"k": "d", "amount": 7, "ts": 5_000}]),
    ),
    key="k",
    options={"event_time": "ts"},
    timers=True,
)

# ------------------------------------------------------------------------------ hold_until_ready

CONFIG = MapStateDescriptor("config", str, float)


class Scale(KeyedBroadcastProcessFunction):
    """Needs the ``factor`` entry: without hold_until_ready early events would see no factor."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(CONFIG).put(value["name"], value["value"])

    def process_element(self, value, ctx):
        yield value["id"], value["x"] * ctx.get_broadcast_state(CONFIG)["factor"]


HOLD = Program(
    "hold", Scale, (CONFIG,),
    "id long, k string, x double, ts long", "name string, value double, ts long",
    "id long, scaled double",
    (
        ([], [{"id": i, "k": "kab"[i % 3], "x": float(i), "ts": i} for i in range(5)]),
        ([{"name": "other", "value": 1.0, "ts": 1}],
         [{"id": i, "k": "kab"[i % 3], "x": float(i), "ts": i} for i in range(5, 8)]),
        ([{"name": "factor", "value": 10.0, "ts": 2}],
         [{"id": i, "k": "kab"[i % 3], "x": float(i), "ts": i} for i in range(8, 10)]),
        ([], [{"id": 10, "k": "a", "x": 10.0, "ts": 10}]),
    ),
    key="k",
    options={"hold_until_ready": [(CONFIG, "factor")]},
)

CORPUS = (COUNTER, SHAPES, FRAUD, ENRICH, BATCH, TIMERS, HOLD)
