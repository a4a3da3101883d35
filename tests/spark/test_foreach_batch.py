"""``result.foreach_batch``: ONE query hands every output of a micro-batch to the user's function
as typed batch DataFrames, on the streamed path and on the operator path, and a replayed batch
gives identical frames (Spark's ``foreachBatch`` contract).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.spark import sink_pipeline as pipeline

pytestmark = pytest.mark.spark


class Recorder:
    """Records each call's frames (sorted rows per output) under (batch id, attempt)."""

    def __init__(self, spark, fail_batch=None):
        self.spark = spark
        self.fail_batch = fail_batch
        self.calls: list[tuple[int, dict]] = []
        self.queries: list[int] = []
        self.streaming: list[bool] = []

    def __call__(self, outputs, batch_id):
        self.queries.append(len(self.spark.streams.active))
        self.streaming += [frame.isStreaming for frame in outputs.values()]
        rows = {name: sorted(json.dumps(r.asDict(), sort_keys=True) for r in frame.collect())
                for name, frame in outputs.items()}
        self.calls.append((batch_id, rows))
        if batch_id == self.fail_batch:
            self.fail_batch = None
            raise RuntimeError(f"the user's function failed in batch {batch_id}")


def _run(spark, base, kind, recorder):
    result = pipeline.build(spark, base, kind)
    query = result.foreach_batch(recorder, str(base / "checkpoint"),
                                 trigger={"availableNow": True})
    try:
        query.awaitTermination()
    except Exception:  # noqa: BLE001 - the failing attempt; its error is checked below
        pass
    return query


@pytest.mark.parametrize("kind", pipeline.KINDS)
def test_every_output_one_query_and_a_replay_gives_identical_frames(spark, tmp_path, kind):
    pipeline.write_inputs(tmp_path)
    recorder = Recorder(spark, fail_batch=1)
    failed = _run(spark, tmp_path, kind, recorder)
    assert "the user's function failed in batch 1" in str(failed.exception())
    _run(spark, tmp_path, kind, recorder)  # restarted: batch 1 is replayed

    assert set(recorder.queries) == {1}  # one query feeds every output
    assert not any(recorder.streaming)  # batch DataFrames
    assert {tuple(sorted(rows)) for _, rows in recorder.calls} == {
        ("big", "dead_letters", "main")}
    attempts = [rows for batch, rows in recorder.calls if batch == 1]
    assert len(attempts) == 2 and attempts[0] == attempts[1]  # the replay: identical frames
    assert any(attempts[0].values())

    done = {batch: rows for batch, rows in recorder.calls}  # the last attempt of each batch
    written = {name: Counter() for name in pipeline.TABLES}
    for rows in done.values():
        for name, values in rows.items():
            for value in values:
                row = json.loads(value)
                written[name][pipeline.letter_key(row) if name == "dead_letters"
                              else (row["id"], row["scaled"])] += 1
    want = pipeline.expected(kind)
    assert written == want


def test_a_function_reading_only_the_main_output_gets_it_whole(spark, tmp_path):
    """The outputs are built as the function reads them: reading "main" alone gives every main
    row, and the mapping still names every output (and refuses one the pipeline lacks)."""
    pipeline.write_inputs(tmp_path)
    seen: list[tuple[list[str], bool]] = []
    main: Counter = Counter()

    def only_main(outputs, _batch_id):
        seen.append((list(outputs), "nope" in outputs))
        main.update((r["id"], r["scaled"]) for r in outputs["main"].collect())
        with pytest.raises(KeyError, match="nope"):
            outputs["nope"]

    query = pipeline.build(spark, tmp_path, "streamed").foreach_batch(
        only_main, str(tmp_path / "checkpoint"), trigger={"availableNow": True})
    query.awaitTermination()
    assert seen and all(names == ["main", "big", "dead_letters"] and not absent
                        for names, absent in seen)
    assert main == pipeline.expected("streamed")["main"]
