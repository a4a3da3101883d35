"""Model serving through the harness: versions, two models combined, verification, the cache."""

import io
import json

import numpy as np
import pytest

from sparkcast.apps import get_app, models
from sparkcast.apps.model_serving import (
    MODELS,
    PREDICTION_COUNTS,
    PRODUCT_FEATURES,
    REJECTED,
    generate,
    interactions,
    model_rows,
    train,
)
from sparkcast.apps.models import LinearModel, ModelError

from .conftest import harness_for

APP = get_app("models")


@pytest.fixture(scope="module")
def trained():
    return train(7, 50, drift=0.0), train(8, 50, drift=0.6)


def view(event_id, product_index=3, activity=0.5):
    return {"event_id": event_id, "user_id": "u1", "product_id": f"prod{product_index:04d}",
            "product_index": product_index, "activity": activity, "tenure": 2.0, "price": 30.0,
            "category": "games", "ts": 0}


def store(tmp_path, name, model):
    data = models.to_npz(model)
    (tmp_path / name).write_bytes(data)
    return models.sha256(data)


@pytest.fixture
def serving(tmp_path, trained):
    models.clear_cache()
    (product1, user1), (product2, _) = trained
    h = harness_for(APP, tmp_path)
    digest = store(tmp_path, "p1.npz", product1)
    h.process_broadcast_element(model_rows(0, "product", 1, product1, path="p1.npz",
                                           digest=digest))
    h.process_broadcast_element(model_rows(1, "user", 1, user1))
    return h


def test_training_learns_the_generating_effects(trained):
    (product, user), _ = trained
    assert user.weights[0] > 0.5  # activity raises clicks
    data = interactions(np.random.default_rng(99), 3000, 50, 0.0)
    from sparkcast.apps.model_serving import score
    p = score(data, product, user)
    clicked = data["click"].to_numpy() == 1
    assert p[clicked].mean() > p[~clicked].mean() + 0.05


def test_models_round_trip_without_pickle(trained):
    (product, user), _ = trained
    again = models.from_npz(models.to_npz(product))
    assert again.features == PRODUCT_FEATURES
    assert np.allclose(again.embedding, product.embedding)
    assert models.from_json(models.to_json(user)).features == user.features
    buffer = io.BytesIO()
    np.savez(buffer, features=np.array([object()], dtype=object), weights=np.zeros(1),
             bias=np.zeros(1))
    with pytest.raises(ModelError):  # an object array needs pickle: refused
        models.from_npz(buffer.getvalue())
    with pytest.raises(ModelError):
        models.from_json(json.dumps({"features": ["a"], "weights": [1, 2], "bias": 0}))


def test_predictions_carry_the_combined_version_and_counts(serving, tmp_path, trained):
    serving.process_micro_batch(main=[view("e1"), view("e2")])
    out = serving.output()
    assert [r["model_version"] for r in out] == ["product-v1+user-v1"] * 2
    assert all(0 < r["score"] < 1 for r in out)
    assert serving.side_output(PREDICTION_COUNTS) == [
        {"subtask": 0, "model_version": "product-v1+user-v1", "predictions": 2}]
    (_, _), (product2, _) = trained
    digest = store(tmp_path, "p2.npz", product2)
    serving.process_micro_batch(
        broadcast=[model_rows(5, "product", 2, product2, path="p2.npz", digest=digest)],
        main=[view("e3")])
    assert serving.output()[-1]["model_version"] == "product-v2+user-v1"
    assert serving.output()[-1]["score"] != out[0]["score"]


def test_a_model_failing_verification_is_rejected_and_the_previous_stays(serving, tmp_path,
                                                                        trained):
    (_, _), (product2, _) = trained
    good = store(tmp_path, "p2.npz", product2)
    (tmp_path / "p2.npz").write_bytes(b"tampered" + (tmp_path / "p2.npz").read_bytes())
    serving.process_broadcast_element(model_rows(5, "product", 2, product2, path="p2.npz",
                                                 digest=good))
    serving.process_broadcast_element(model_rows(6, "product", 3, product2, path="../x.npz",
                                                 digest=good))
    serving.process_broadcast_element(model_rows(7, "product", 4, product2, path="none.npz",
                                                 digest=good))
    serving.process_broadcast_element(model_rows(8, "product", 1, product2, path="p1.npz",
                                                 digest=good))
    reasons = [(r["version"], r["reason"]) for r in serving.side_output(REJECTED)]
    assert "sha256 mismatch" in reasons[0][1]
    assert "outside the artifact store" in reasons[1][1]
    assert "cannot read model" in reasons[2][1]
    assert "not newer" in reasons[3][1]
    assert serving.broadcast_state(MODELS)["product"]["version"] == 1
    serving.process_element(view("e1"))
    assert serving.output()[0]["model_version"] == "product-v1+user-v1"


def test_a_tampered_inline_model_is_rejected(serving, trained):
    (_, user), _ = trained
    row = model_rows(9, "user", 2, user)
    row["weights"] = row["weights"].replace("0", "9", 1)
    serving.process_broadcast_element(row)
    assert "sha256 mismatch" in serving.side_output(REJECTED)[0]["reason"]


def test_the_large_model_is_loaded_once_per_worker(serving, tmp_path, monkeypatch):
    size = models.cache_size()
    reads = []
    original = type(tmp_path).read_bytes
    monkeypatch.setattr(type(tmp_path), "read_bytes",
                        lambda self: reads.append(self) or original(self))
    other = harness_for(APP, tmp_path, subtask_index=1, parallelism=2)
    digest = serving.broadcast_state(MODELS)["product"]["sha256"]
    row = model_rows(0, "product", 1, LinearModel(PRODUCT_FEATURES, np.zeros(5), 0.0),
                     path="p1.npz", digest=digest)
    other.process_broadcast_element(row)
    assert reads == [] and models.cache_size() == size


def test_events_wait_for_both_models(tmp_path, trained):
    (product1, user1), _ = trained
    h = harness_for(APP, tmp_path)
    h.process_micro_batch(main=[view("e1")])
    digest = store(tmp_path, "p1.npz", product1)
    h.process_micro_batch(broadcast=[model_rows(0, "product", 1, product1, path="p1.npz",
                                                digest=digest)])
    assert h.output() == []
    h.process_micro_batch(broadcast=[model_rows(1, "user", 1, user1)])
    assert [r["event_id"] for r in h.output()] == ["e1"]


def test_generated_stream_switches_version_and_rejects_the_bad_one(run_app):
    models.clear_cache()
    h = run_app(APP, generate(7, files=5, per_file=20, n_products=50))
    versions = [r["model_version"] for r in h.output()]
    assert len(versions) == 100
    assert versions[0] == "product-v1+user-v1" and versions[-1] == "product-v2+user-v1"
    (rejected,) = h.side_output(REJECTED)
    assert rejected["version"] == 3 and "sha256 mismatch" in rejected["reason"]
