"""Factories for opened harnesses, so each test shows only its function and its inputs.

Every harness runs on each state backend (``state_backend`` fixture): the in-memory one and the
Spark backend over in-memory stand-ins for Spark's state handles, rebound after every call as on
Spark (bytewax runs one suite against every engine the same way).
"""

from collections.abc import Callable
from typing import Any

import pytest

from sparkcast import MapStateDescriptor
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

DEFAULT_RULES = MapStateDescriptor("rules", str, dict)


def _engine_defaults(options: dict[str, Any], state_backend: Any) -> None:
    """The engine's unit tests yield outputs of many shapes and assert what callbacks raise:
    they opt out of the user-facing defaults (outputs checked against one schema, errors as
    dead letters, as on Spark)."""
    options.setdefault("state_backend", state_backend)
    options.setdefault("on_error", "fail")
    options.setdefault("check_outputs", False)


@pytest.fixture
def keyed(state_backend: Any) -> Callable[..., KeyedBroadcastHarness]:
    """``keyed(function, key_selector=..., descriptors=[...], **options)``: an opened keyed
    harness; elements are keyed by themselves unless a selector is given."""

    def make(function: Any, key_selector: Any = lambda v: v, descriptors: Any = None,
             **options: Any) -> KeyedBroadcastHarness:
        _engine_defaults(options, state_backend)
        harness = KeyedBroadcastHarness(function, key_selector,
                                        list(descriptors or [DEFAULT_RULES]), **options)
        harness.open()
        return harness

    return make


@pytest.fixture
def non_keyed(state_backend: Any) -> Callable[..., BroadcastHarness]:
    """``non_keyed(function, descriptors=[...], **options)``: an opened non-keyed harness."""

    def make(function: Any, descriptors: Any = None, **options: Any) -> BroadcastHarness:
        _engine_defaults(options, state_backend)
        harness = BroadcastHarness(function, list(descriptors or [DEFAULT_RULES]), **options)
        harness.open()
        return harness

    return make
