"""Every application end to end on Spark: file sources, several micro-batches, a broadcast
update mid-stream. The five queries run at the same time (one Spark session) to keep the
suite short; segments runs through the CLI, twice, restarting from its checkpoint."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from sparkcast.apps import get_app
from sparkcast.apps.base import Drop, write_drops
from sparkcast.apps.live import Progress
from sparkcast.apps.outputs import OutputTracker
from sparkcast.apps.wiring import start

pytestmark = pytest.mark.spark

SIZES = {"fraud": dict(files=4, per_file=40), "models": dict(files=4, per_file=40, n_products=40),
         "flags": dict(files=4, per_file=40), "enrichment": dict(files=4, per_file=40),
         "shapes": dict(files=4, per_file=40)}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """``runs[name]``: one availableNow query per application, run on first use, one at a time
    (several concurrent queries overload a 2-core machine: Python workers time out)."""
    from sparkcast.apps import models

    models.clear_cache()
    return _Runs(spark, tmp_path_factory)


class _Runs(dict):
    def __init__(self, spark, factory):
        super().__init__()
        self.spark, self.factory = spark, factory

    def __missing__(self, name):
        app = get_app(name)
        root = self.factory.mktemp(name)
        module = __import__(app.make_function.__module__, fromlist=["generate"])
        write_drops(root, _with_bad_inputs(module.generate(7, **SIZES[name])))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            query = start(app, self.spark, root / "events", root / "broadcast",
                          root / "output", root / "checkpoint", artifacts=root / "artifacts",
                          parallelism=2, max_files_per_trigger=1,
                          trigger={"availableNow": True})
        ours = [str(w.message) for w in caught if "/sparkcast/" in w.filename]
        assert not ours, ours  # the app's own reads and schemas need no warning
        assert query.awaitTermination(600)
        assert query.exception() is None
        progress = Progress(str(root / "events"), str(root / "broadcast"))
        progress.update(query)
        tracker = OutputTracker(app, root / "output")
        tracker.scan()
        self[name] = (tracker, progress)
        return self[name]


def _with_bad_inputs(drops: list[Drop]) -> list[Drop]:
    """The update files, with inputs that once escaped the rejection outputs added: a rule
    nested too deep, an integer literal beyond int64; a model at a ``..`` path with the sha256
    of product v2, which the workers have cached (once accepted from the cache), and a model
    with a NUL byte in its path."""
    cached = [r["sha256"] for d in drops if d.name == "models-001.json" for r in d.rows]
    changed = []
    for drop in drops:
        if drop.name == "rules-001.json":
            deep = {"seq": 120, "op": "upsert", "rule_id": "deep", "action": "BLOCK",
                    "condition": "(" * 300 + "amount > 1" + ")" * 300}
            huge = {**deep, "seq": 121, "rule_id": "huge",
                    "condition": "mcc * 99999999999999999999 > 0"}
            drop = replace(drop, rows=(*drop.rows, deep, huge))
        elif drop.name == "models-002.json":
            (v3,) = drop.rows
            escape = {**v3, "seq": 21, "version": 4, "path": "../product-v2.npz",
                      "sha256": cached[0]}
            nul = {**v3, "seq": 22, "version": 5, "path": "product-v2.npz\0"}
            drop = replace(drop, rows=(v3, escape, nul))
        changed.append(drop)
    return changed


def check_switch(tracker: OutputTracker, progress: Progress, versions: int) -> int:
    """The last version took effect on both subtasks in the batch that read the update."""
    switches = tracker.switches()
    assert len(switches) == versions
    version, seen = switches[-1]
    assert set(seen) == {0, 1}
    (batch,) = set(seen.values())
    assert batch == progress.broadcast_batches()[-1] > 0
    return batch


def test_fraud_on_spark(runs):
    tracker, progress = runs["fraud"]
    assert len(progress.batches) == 4 and progress.events_in() == 160
    assert tracker.counts["main"] + tracker.counts["review"] == 160
    assert tracker.counts["invalid_rules"] == 3  # broken, deep, huge
    assert tracker.counts.get("dead_letters", 0) == 0
    check_switch(tracker, progress, versions=2)
    assert [v for v, _ in tracker.switches()] == [3, 6]


def test_fraud_on_spark_fills_the_update_to_effect_latency(runs):
    """The fraud app runs on the streamed path (its driver applies the rules once): the workers
    that run the transactions after an update measure its latency, which reaches the progress
    log and the Prometheus gauge, in seconds, not the ~1.8e9 s of rules without event times."""
    import json
    import time
    from pathlib import Path

    from sparkcast.monitoring.prometheus import exposition

    tracker, progress = runs["fraud"]
    log, deadline = Path(tracker.path) / "_sparkcast_progress.jsonl", time.time() + 30
    while True:  # the listener writes the log from Spark's listener bus, a little later
        records = [json.loads(line) for line in log.read_text().splitlines()]
        if len(records) >= len(progress.batches) or time.time() > deadline:
            break
        time.sleep(0.2)
    latencies = [op["effect_latency_ms"] for r in records for op in r["operators"].values()
                 if op["effect_latency_ms"] is not None]
    assert latencies and all(0 <= ms < 600_000 for ms in latencies), latencies
    scraped = [float(line.rsplit(" ", 1)[1]) for line in exposition().decode().splitlines()
               if line.startswith("sparkcast_update_effect_latency_seconds{")
               and 'query="sparkcast_fraud"' in line]
    assert scraped and all(0 <= seconds < 600 for seconds in scraped), scraped


def test_model_serving_on_spark(runs):
    tracker, progress = runs["models"]
    assert tracker.counts["main"] == 160 and tracker.counts.get("dead_letters", 0) == 0
    assert [v for v, _ in tracker.switches()] == ["product-v1+user-v1", "product-v2+user-v1"]
    # v3: sha256 mismatch; v4: outside the store (its hash cached); v5: NUL byte. v2 stays
    assert tracker.counts["rejected_models"] == 3
    assert progress.broadcast_batches() == [0, 1, 2]
    version, seen = tracker.switches()[-1]
    assert set(seen.values()) == {1} and set(seen) == {0, 1}


def test_flags_on_spark(runs):
    tracker, progress = runs["flags"]
    assert tracker.counts["main"] == 160 and tracker.counts["rejected_config"] == 1
    check_switch(tracker, progress, versions=2)


def test_enrichment_on_spark(runs):
    tracker, progress = runs["enrichment"]
    assert tracker.counts["main"] + tracker.counts["unknown_products"] == 160
    assert tracker.counts["unknown_products"] > 0
    check_switch(tracker, progress, versions=2)


def test_shapes_on_spark(runs, spark, tmp_path):
    tracker, progress = runs["shapes"]
    assert progress.events_in() == 160 and tracker.counts["main"] > 0
    assert [v for v, _ in tracker.switches()][:1] == [1]
    assert tracker.switches()[-1][0] == 3
    # every match equals the harness's fed the micro-batches Spark ran (one file per source and
    # trigger: batch i reads events file i and rules file i); keyed MapState per color, so any
    # lost, duplicated or reordered item changes the matches
    from sparkcast.apps.base import BROADCAST, EVENTS
    from sparkcast.apps.shapes import generate
    from sparkcast.spark import read_output
    from tests.apps.conftest import harness_for

    columns = ["rule", "color", "first_item", "second_item", "rules_version"]
    on_spark = sorted(tuple(r) for r in read_output(spark, str(tracker.path)).select(*columns)
                      .collect())
    drops = generate(7, **SIZES["shapes"])
    files = {folder: [d.rows for d in sorted(drops, key=lambda d: d.name) if d.folder == folder]
             for folder in (EVENTS, BROADCAST)}
    app = get_app("shapes")
    h = harness_for(app, tmp_path)
    for i, events in enumerate(files[EVENTS]):
        rules = files[BROADCAST][i] if i < len(files[BROADCAST]) else ()
        h.process_micro_batch(main=list(events), broadcast=list(rules))  # in the file's order
    assert on_spark == sorted(tuple(o[:5]) for o in h.output())
    assert len(on_spark) == tracker.counts["main"]


def test_segments_through_the_cli_restarting_from_its_checkpoint(spark, tmp_path, capsys):
    from sparkcast.apps.segments import generate
    from sparkcast.cli import main

    drops = generate(7, files=4, per_file=30)
    write_drops(tmp_path, [d for d in drops if d.step < 2])
    args = ["run", "segments", "--events", str(tmp_path / "events"), "--broadcast",
            str(tmp_path / "broadcast"), "--output", str(tmp_path / "output"), "--checkpoint",
            str(tmp_path / "checkpoint"), "--available-now", "--parallelism", "2", "--no-view"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "events in 60 = main 60" in first
    write_drops(tmp_path, [d for d in drops if d.step >= 2])  # the refresh and more events
    assert main(args) == 0  # resumes: only the new files are read
    second = capsys.readouterr().out
    assert "events in 60 = main 60" in second and "refresh_id=2 took effect" in second
    tracker = OutputTracker(get_app("segments"), tmp_path / "output")
    tracker.scan()
    assert tracker.counts["main"] == 120 and tracker.counts["rejected_segments"] == 1
