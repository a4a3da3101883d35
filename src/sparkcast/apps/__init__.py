"""Applications of the broadcast state pattern, each pure logic plus one ``App`` description.

====================  ======================================================================
``fraud``             text rules (hand-written parser) → BLOCK / REVIEW / ALLOW, vectorized
``models``            product + user logistic models, verified ``.npz`` artifacts, versions
``flags``             feature flags with percentage rollouts, kill switch, ``AppConfig``
``enrichment``        product catalog joined to events; unknown products to a side output
``segments``          user segments refreshed in bulk; default NEW
``shapes``            Flink's documentation example: keyed MapState of pending items
====================  ======================================================================

The modules import without pyspark; the Spark wiring is :mod:`sparkcast.apps.wiring`.
:mod:`~sparkcast.apps.fraud_postgres` and :mod:`~sparkcast.apps.fraud_kafka` run the fraud demo
on a throwaway PostgreSQL and a throwaway Kafka broker (``sparkcast demo fraud --postgres`` /
``--kafka``), fed and reported the same way (:mod:`~sparkcast.apps.feeding`).

>>> from sparkcast.apps import get_app
>>> app = get_app("fraud")
>>> app.make_function(), app.output_schema, app.drops(7, 1)
"""

from __future__ import annotations

from importlib import import_module

from sparkcast.apps.base import App, Drop
from sparkcast.errors import AppError

_MODULES = {"fraud": "fraud", "models": "model_serving", "flags": "flags",
            "enrichment": "enrichment", "segments": "segments", "shapes": "shapes"}
APP_NAMES = tuple(_MODULES)
FLAGSHIP = "fraud"


def get_app(name: str) -> App:
    """The application called ``name`` (one of ``APP_NAMES``)."""
    module = _MODULES.get(name)
    if module is None:
        raise AppError(f"no application {name!r}; choose one of {', '.join(APP_NAMES)}")
    return import_module(f"sparkcast.apps.{module}").APP


__all__ = ["APP_NAMES", "FLAGSHIP", "App", "AppError", "Drop", "get_app"]
