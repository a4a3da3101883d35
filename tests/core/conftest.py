"""Factories for opened harnesses, so each test shows only its function and its inputs."""

from collections.abc import Callable
from typing import Any

import pytest

from sparkcast import MapStateDescriptor
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness

DEFAULT_RULES = MapStateDescriptor("rules", str, dict)


@pytest.fixture
def keyed() -> Callable[..., KeyedBroadcastHarness]:
    """``keyed(function, key_selector=..., descriptors=[...], **options)``: an opened keyed
    harness; elements are keyed by themselves unless a selector is given."""

    def make(function: Any, key_selector: Any = lambda v: v, descriptors: Any = None,
             **options: Any) -> KeyedBroadcastHarness:
        harness = KeyedBroadcastHarness(function, key_selector,
                                        list(descriptors or [DEFAULT_RULES]), **options)
        harness.open()
        return harness

    return make


@pytest.fixture
def non_keyed() -> Callable[..., BroadcastHarness]:
    """``non_keyed(function, descriptors=[...], **options)``: an opened non-keyed harness."""

    def make(function: Any, descriptors: Any = None, **options: Any) -> BroadcastHarness:
        harness = BroadcastHarness(function, list(descriptors or [DEFAULT_RULES]), **options)
        harness.open()
        return harness

    return make
