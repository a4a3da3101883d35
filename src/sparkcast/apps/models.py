"""Models for the serving app: numpy logistic regression, safe serialization, a verified cache.

Models never travel as pickles. A small model is JSON (``{"weights": [...], "bias": b,
"features": [...]}``) inside the broadcast row; a large one is an ``.npz`` file in an artifact
store, loaded with ``allow_pickle=False``, and the broadcast row carries only its path, version
and sha256. Each Python worker loads a file once and caches it by hash, so the P subtasks of a
worker, and every later micro-batch, share one copy.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sparkcast.errors import ModelError


@dataclass(frozen=True)
class LinearModel:
    """Logistic regression weights; ``embedding`` adds one learned bias per item id (the part
    that makes a catalog-sized model large)."""

    features: tuple[str, ...]
    weights: np.ndarray
    bias: float
    embedding: np.ndarray | None = None

    def logit(self, x: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        z = x @ self.weights + self.bias
        if self.embedding is not None and ids is not None:
            known = (ids >= 0) & (ids < len(self.embedding))
            z = z + np.where(known, self.embedding[np.clip(ids, 0, len(self.embedding) - 1)], 0.0)
        return z


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def train_logistic(x: np.ndarray, y: np.ndarray, *, ids: np.ndarray | None = None,
                   n_ids: int = 0, offset: np.ndarray | None = None, epochs: int = 300,
                   lr: float = 0.5, l2: float = 1e-3
                   ) -> tuple[np.ndarray, float, np.ndarray | None]:
    """Full-batch gradient descent on the log loss (numpy only; small data). ``offset`` adds
    fixed log-odds (another model's) so this model learns what that one misses."""
    weights = np.zeros(x.shape[1])
    bias = 0.0
    embedding = np.zeros(n_ids) if ids is not None else None
    n = len(y)
    for _ in range(epochs):
        z = x @ weights + bias
        if offset is not None:
            z = z + offset
        if embedding is not None:
            z = z + embedding[ids]
        error = sigmoid(z) - y
        weights -= lr * (x.T @ error / n + l2 * weights)
        bias -= lr * float(error.mean())
        if embedding is not None and ids is not None:
            grad = np.bincount(ids, weights=error, minlength=n_ids) / n
            embedding -= lr * 20 * (grad + l2 * embedding)
    return weights, bias, embedding


# ---------------------------------------------------------------------------- serialization

def to_json(model: LinearModel) -> str:
    if model.embedding is not None:
        raise ModelError("a model with an embedding is stored as .npz, not JSON")
    return json.dumps({"features": list(model.features), "weights": model.weights.tolist(),
                       "bias": model.bias}, sort_keys=True)


def from_json(text: str) -> LinearModel:
    try:
        data = json.loads(text)
        features = tuple(str(f) for f in data["features"])
        weights = np.asarray(data["weights"], dtype=float)
        bias = float(data["bias"])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ModelError(f"not a JSON linear model: {type(exc).__name__}: {exc}") from exc
    return _checked(features, weights, bias, None)


def to_npz(model: LinearModel) -> bytes:
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {"features": np.asarray(model.features, dtype=str),
                              "weights": model.weights, "bias": np.asarray([model.bias])}
    if model.embedding is not None:
        arrays["embedding"] = model.embedding
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def from_npz(data: bytes) -> LinearModel:
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            features = tuple(str(f) for f in npz["features"])
            weights = np.asarray(npz["weights"], dtype=float)
            bias = float(npz["bias"][0])
            embedding = np.asarray(npz["embedding"], dtype=float) if "embedding" in npz else None
    except (ValueError, KeyError, OSError, IndexError) as exc:
        raise ModelError(f"not an .npz linear model: {exc}") from exc
    return _checked(features, weights, bias, embedding)


def _checked(features: tuple[str, ...], weights: np.ndarray, bias: float,
             embedding: np.ndarray | None) -> LinearModel:
    if weights.ndim != 1 or len(weights) != len(features):
        raise ModelError(f"{len(features)} features but weights of shape {weights.shape}")
    if not np.all(np.isfinite(weights)) or not np.isfinite(bias):
        raise ModelError("weights must be finite numbers")
    return LinearModel(features, weights, bias, embedding)


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


# ------------------------------------------------------------------------------------ store

_CACHE: dict[str, LinearModel] = {}  # sha256 → model, one per Python worker


def resolve(root: str | Path, relative: str) -> Path:
    """A model path inside the artifact root; a path that escapes the root, or that is no path
    at all (a NUL byte, not a string), is refused."""
    if not isinstance(relative, str) or "\0" in relative or "\0" in str(root):
        raise ModelError(f"model path {relative!r} is not a valid path")
    try:
        base = Path(root).resolve()
        target = (base / relative).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ModelError(f"model path {relative!r} cannot be resolved: {exc}") from exc
    if base != target and base not in target.parents:
        raise ModelError(f"model path {relative!r} is outside the artifact store {str(base)!r}")
    return target


def load_verified(root: str | Path, relative: str, expected_sha256: str) -> LinearModel:
    """Load an .npz model from the store, checking its sha256 first; cached by that hash.
    The path is checked before the cache: otherwise a worker that cached the hash accepts a
    ``../..`` path that another refuses, and broadcast state differs by worker."""
    path = resolve(root, relative)
    cached = _CACHE.get(expected_sha256)
    if cached is not None:
        return cached
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read model {relative!r}: {exc.strerror}") from exc
    actual = sha256(data)
    if actual != expected_sha256:
        raise ModelError(f"sha256 mismatch for {relative!r}: expected {expected_sha256[:12]}…, "
                         f"file has {actual[:12]}…")
    model = from_npz(data)
    _CACHE[expected_sha256] = model
    return model


def inline_verified(text: str, expected_sha256: str | None) -> LinearModel:
    """A JSON model from a broadcast row; checked against its sha256 when one is given."""
    if expected_sha256 and sha256(text) != expected_sha256:
        raise ModelError("sha256 mismatch for the inline model")
    key = "json:" + sha256(text)
    cached = _CACHE.get(key)
    if cached is None:
        cached = _CACHE[key] = from_json(text)
    return cached


def cache_size() -> int:
    return len(_CACHE)


def clear_cache() -> None:
    _CACHE.clear()
