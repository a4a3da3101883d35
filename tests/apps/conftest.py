"""Helpers for the application tests: run an app's generated data through the harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, App, Drop, steps, write_drop
from sparkcast.testing import BroadcastHarness, KeyedBroadcastHarness


def harness_for(app: App, artifact_root: Path | str = ".", **options: Any) -> BroadcastHarness:
    """A harness with the app's function and options, opened; one subtask."""
    kwargs: dict[str, Any] = {"hold_until_ready": list(app.hold_until_ready) or None,
                              "job_parameters": {"artifact_root": str(artifact_root)}, **options}
    if app.key_by:
        columns = app.key_by
        h: BroadcastHarness = KeyedBroadcastHarness(
            app.make_function(), lambda v: v[columns[0]] if len(columns) == 1 else tuple(
                v[c] for c in columns), list(app.descriptors), **kwargs)
    else:
        h = BroadcastHarness(app.make_function(), list(app.descriptors), **kwargs)
    h.open()
    return h


def simulate(app: App, drops: list[Drop], root: Path, **options: Any) -> BroadcastHarness:
    """Each generated step as one micro-batch, as Spark runs it with one file per trigger."""
    h = harness_for(app, root / ARTIFACTS, **options)
    for group in steps(drops):
        for drop in group:
            if drop.folder == ARTIFACTS:
                write_drop(root, drop)
        broadcast = [r for d in group if d.folder == BROADCAST for r in d.rows]
        events = [r for d in group if d.folder == EVENTS for r in d.rows]
        h.process_micro_batch(main=events, broadcast=broadcast)
    return h


@pytest.fixture
def run_app(tmp_path: Path) -> Any:
    def run(app: App, drops: list[Drop], **options: Any) -> BroadcastHarness:
        return simulate(app, drops, tmp_path, **options)
    return run
