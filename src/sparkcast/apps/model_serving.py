"""Model serving: two logistic models broadcast as versions, combined per event, verified.

Every event (a user looking at a product) gets a click probability from two models:

- the **product model**, large (one learned bias per product besides its feature weights), kept
  as ``.npz`` in an artifact store; the broadcast row carries only ``path``, ``version`` and
  ``sha256``; each worker loads it once, verifies the hash and caches it by hash;
- the **user model**, small, JSON inside the broadcast row, trained on top of the product
  model's log-odds, so the two combine by adding log-odds: ``p = sigmoid(product + user)``.

A model whose file is missing, corrupt, or whose hash does not match, or whose version is not
newer than the active one, goes to the ``rejected_models`` side output and the previous version
stays active. Each prediction carries ``model_version`` (e.g. ``product-v2+user-v1``); the
``prediction_counts`` side output counts predictions per subtask, per version, per micro-batch.
Events that arrive before both models exist are held (``hold_until_ready``), not dropped.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.apps import models
from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, App, Drop
from sparkcast.apps.models import LinearModel, ModelError

MODELS = MapStateDescriptor("models", str, dict)  # "product" / "user" → metadata
REJECTED = OutputTag("rejected_models", "model string, version long, reason string, seq long")
PREDICTION_COUNTS = OutputTag("prediction_counts",
                              "subtask int, model_version string, predictions long")

CATEGORIES = ("books", "games", "music", "tools")
PRODUCT_FEATURES = ("log_price", *(f"cat_{c}" for c in CATEGORIES))
USER_FEATURES = ("activity", "tenure")
EVENTS_SCHEMA = ("event_id string, user_id string, product_id string, product_index long, "
                 "activity double, tenure double, price double, category string, ts long")
BROADCAST_SCHEMA = ("seq long, model string, version long, format string, weights string, "
                    "path string, sha256 string")
OUTPUT_SCHEMA = ("event_id string, user_id string, product_id string, score double, "
                 "model_version string, product_version long, user_version long, subtask int")


def product_matrix(frame: pd.DataFrame) -> np.ndarray:
    columns = [np.log1p(frame["price"].to_numpy(dtype=float)) / 6.0]
    category = frame["category"].to_numpy(dtype=object)
    columns += [(category == c).astype(float) for c in CATEGORIES]
    return np.column_stack(columns)


def user_matrix(frame: pd.DataFrame) -> np.ndarray:
    return np.column_stack([frame["activity"].to_numpy(dtype=float),
                            frame["tenure"].to_numpy(dtype=float) / 5.0])


def score(frame: pd.DataFrame, product: LinearModel, user: LinearModel) -> np.ndarray:
    """Click probabilities of a batch: the two models' log-odds added."""
    ids = frame["product_index"].to_numpy(dtype=np.int64)
    z = product.logit(product_matrix(frame), ids) + user.logit(user_matrix(frame))
    return models.sigmoid(z)


def load_model(meta: Any, root: str) -> LinearModel:
    """The model a broadcast row (or the stored metadata) describes, verified."""
    if meta["format"] == "npz":
        if not meta.get("path") or not meta.get("sha256"):
            raise ModelError("an npz model needs path and sha256")
        return models.load_verified(root, meta["path"], meta["sha256"])
    if meta["format"] == "json":
        return models.inline_verified(meta.get("weights") or "", meta.get("sha256"))
    raise ModelError(f"unknown model format {meta['format']!r}")


def version_label(product: Any, user: Any) -> str:
    return f"product-v{product['version']}+user-v{user['version']}"


class ModelServing(BroadcastProcessFunction):
    """Flink: a ``BroadcastProcessFunction`` with models as broadcast state; vectorized."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.root = runtime_context.get_job_parameter("artifact_root", ".")

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        state = ctx.get_broadcast_state(MODELS)
        kind, version = value["model"], value["version"]
        try:
            if kind not in ("product", "user"):
                raise ModelError(f"unknown model {kind!r}")
            current = state.get(kind)
            if version is None or (current is not None and version <= current["version"]):
                raise ModelError(f"version {version} is not newer than the active "
                                 f"v{current['version'] if current else '?'}")
            model = load_model(value, self.root)
            expected = PRODUCT_FEATURES if kind == "product" else USER_FEATURES
            if model.features != expected:
                raise ModelError(f"features {list(model.features)} are not {list(expected)}")
        except (ModelError, ValueError, TypeError, KeyError, OSError, RecursionError) as exc:
            # anything that keeps a model from loading rejects it, with the reason
            if self.subtask != 0:  # every subtask rejects it; one reports it
                return
            yield REJECTED, {"model": kind, "version": version, "reason": str(exc),
                             "seq": value["seq"]}
            return
        state.put(kind, {k: value[k] for k in ("version", "format", "weights", "path",
                                                "sha256")})

    def process_batch(self, batch: pd.DataFrame, ctx: Any) -> Iterator[Any]:
        state = ctx.get_broadcast_state(MODELS)
        product_meta, user_meta = state.get("product"), state.get("user")
        product = load_model(product_meta, self.root)  # cached by hash: a dict lookup
        user = load_model(user_meta, self.root)
        label = version_label(product_meta, user_meta)
        yield pd.DataFrame({
            "event_id": batch["event_id"], "user_id": batch["user_id"],
            "product_id": batch["product_id"], "score": np.round(score(batch, product, user), 6),
            "model_version": label, "product_version": int(product_meta["version"]),
            "user_version": int(user_meta["version"]), "subtask": self.subtask})
        yield PREDICTION_COUNTS, [{"subtask": self.subtask, "model_version": label,
                                   "predictions": len(batch)}]


# ---------------------------------------------------------------------------------- data

def interactions(rng: np.random.Generator, n: int, n_products: int, drift: float
                 ) -> pd.DataFrame:
    """Synthetic views with a click label; ``drift`` shifts tastes between training periods."""
    popularity = np.random.default_rng(11).normal(0, 1, n_products)
    product_index = rng.integers(0, n_products, n)
    category = np.asarray(CATEGORIES)[product_index % len(CATEGORIES)]
    price = np.round(np.exp(np.random.default_rng(12).normal(3.5, 0.8, n_products)), 2)
    frame = pd.DataFrame({"product_index": product_index, "category": category,
                          "price": price[product_index], "activity": rng.random(n),
                          "tenure": rng.random(n) * 5})
    taste = {"books": 0.3, "games": 0.8 - drift, "music": -0.2 + drift, "tools": -0.5}
    z = (-1.0 + popularity[product_index] - 0.6 * np.log1p(frame["price"]) / 6.0
         + frame["category"].map(taste).to_numpy() + 1.5 * frame["activity"]
         + 0.2 * frame["tenure"])
    frame["click"] = (rng.random(n) < models.sigmoid(z.to_numpy())).astype(float)
    return frame


def train(seed: int, n_products: int, drift: float, n: int = 4000
          ) -> tuple[LinearModel, LinearModel]:
    """Train the product model, then the user model on top of its log-odds."""
    data = interactions(np.random.default_rng(seed), n, n_products, drift)
    ids = data["product_index"].to_numpy()
    w, b, emb = train_logistic_product(data, ids, n_products)
    product = LinearModel(PRODUCT_FEATURES, w, b, emb)
    offset = product.logit(product_matrix(data), ids)
    uw, ub, _ = models.train_logistic(user_matrix(data), data["click"].to_numpy(), offset=offset)
    return product, LinearModel(USER_FEATURES, uw, ub)


def train_logistic_product(data: pd.DataFrame, ids: np.ndarray, n_products: int) -> Any:
    return models.train_logistic(product_matrix(data), data["click"].to_numpy(), ids=ids,
                                 n_ids=n_products)


def model_rows(seq: int, kind: str, version: int, model: LinearModel, *, path: str | None = None,
               digest: str | None = None) -> dict[str, Any]:
    if path is None:
        text = models.to_json(model)
        return {"seq": seq, "model": kind, "version": version, "format": "json",
                "weights": text, "path": None, "sha256": models.sha256(text)}
    return {"seq": seq, "model": kind, "version": version, "format": "npz", "weights": None,
            "path": path, "sha256": digest}


def views(seed: int, start: int, count: int, n_products: int) -> list[dict[str, Any]]:
    rng = random.Random(seed * 1000 + start)
    frame = interactions(np.random.default_rng(seed + start), count, n_products, 0.0)
    return [{"event_id": f"ev{start + i:06d}", "user_id": f"user{rng.randrange(300):03d}",
             "product_id": f"prod{int(r.product_index):04d}",
             "product_index": int(r.product_index), "activity": round(float(r.activity), 4),
             "tenure": round(float(r.tenure), 4), "price": float(r.price),
             "category": str(r.category), "ts": 1_700_000_000_000 + (start + i) * 1000}
            for i, r in enumerate(frame.itertuples())]


def generate(seed: int = 7, files: int = 8, per_file: int = 200, n_products: int = 500
             ) -> list[Drop]:
    """Product v1 + user v1 at step 0, product v2 (retrained after a taste drift) in the middle,
    and a product v3 whose file does not match its sha256 (rejected) near the end."""
    product1, user1 = train(seed, n_products, drift=0.0)
    product2, _ = train(seed + 1, n_products, drift=0.6)
    blob1, blob2 = models.to_npz(product1), models.to_npz(product2)
    product3, _ = train(seed + 2, n_products, drift=0.9)
    blob3 = models.to_npz(product3)
    corrupted = blob3[: len(blob3) // 2]  # a partial upload: its hash no longer matches
    late = min(files - 1, max(files // 2 + 1, files - 2))
    drops = [
        Drop(0, ARTIFACTS, "product-v1.npz", data=blob1),
        Drop(0, BROADCAST, "models-000.json", (
            model_rows(0, "product", 1, product1, path="product-v1.npz",
                       digest=models.sha256(blob1)),
            model_rows(1, "user", 1, user1))),
        Drop(files // 2, ARTIFACTS, "product-v2.npz", data=blob2),
        Drop(files // 2, BROADCAST, "models-001.json", (
            model_rows(10, "product", 2, product2, path="product-v2.npz",
                       digest=models.sha256(blob2)),)),
        Drop(late, ARTIFACTS, "product-v3.npz", data=corrupted),
        Drop(late, BROADCAST, "models-002.json", (
            model_rows(20, "product", 3, product3, path="product-v3.npz",
                       digest=models.sha256(blob3)),)),
    ]
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"views-{f:03d}.json",
                          tuple(views(seed, f * per_file, per_file, n_products))))
    return drops


APP = App(
    name="models",
    title="Model serving (product + user model, verified large model, versions)",
    make_function=ModelServing,
    descriptors=(MODELS,),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=100 * scale),
    files=8,
    side_outputs=(REJECTED, PREDICTION_COUNTS),
    hold_until_ready=((MODELS, "product"), (MODELS, "user")),
    version_column="model_version",
    per_event_outputs=("main",),
    show_columns=("event_id", "user_id", "product_id", "score", "model_version", "subtask"),
    update_note="models-001.json: product model v2 (npz, verified); models-002.json: product v3 "
                "with a sha256 mismatch (rejected, v2 stays)",
)
