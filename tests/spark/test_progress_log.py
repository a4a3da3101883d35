"""The progress log of a ``write_stream`` query, as the driver's listener writes it."""

from __future__ import annotations

import json
import logging
import shutil
from types import SimpleNamespace

from sparkcast.monitoring.progress import OBSERVATION
from sparkcast.monitoring.store import Monitor
from sparkcast.spark.observe import listener as listener_module
from sparkcast.spark.observe.listener import PROGRESS_LOGS, ProgressListener


def _event(query_id: str, batch: int) -> SimpleNamespace:
    return SimpleNamespace(progress={
        "id": query_id, "name": "orders", "batchId": batch, "numInputRows": 3,
        "durationMs": {"triggerExecution": 5}, "sources": [],
        "observedMetrics": {OBSERVATION: {"main": 3, "dead_letters": 0}}})


def test_a_progress_log_that_cannot_be_written_is_said_once_and_the_batches_go_on(
        tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(listener_module, "MONITOR", Monitor())  # the process's stays as it was
    out = tmp_path / "out"
    out.mkdir()
    log = out / "_sparkcast_progress.jsonl"
    PROGRESS_LOGS["q-gone"] = str(log)
    listener = ProgressListener()
    listener.onQueryProgress(_event("q-gone", 0))
    assert [json.loads(line)["batch"] for line in log.read_text().splitlines()] == [0]
    shutil.rmtree(out)  # the output folder deleted while the query runs
    with caplog.at_level(logging.WARNING, logger="sparkcast"):
        for batch in (1, 2, 3):
            listener.onQueryProgress(_event("q-gone", batch))  # raises nothing
    said = [r.getMessage() for r in caplog.records if "progress log" in r.getMessage()]
    assert len(said) == 1
    assert "query orders" in said[0] and str(log) in said[0] and "cannot be written" in said[0]
    assert "q-gone" not in PROGRESS_LOGS
    assert not out.exists()  # nothing was made again
