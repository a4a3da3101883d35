"""Differential tests: every corpus program gives the same outputs on the harness and on Spark,
for parallelism 1, 2 and 4, on batch DataFrames and on file-source streams (one file per
micro-batch and source)."""

from __future__ import annotations

import json

import pytest

from tests.spark.corpus import CORPUS, HOLD
from tests.spark.differential import harness_outputs, spark_outputs

pytestmark = pytest.mark.spark

PARALLELISMS = (1, 2, 4)


def _check(runs, streaming):
    for program in CORPUS:
        expected = harness_outputs(program, streaming=streaming)
        if program.timers and not streaming:  # a batch query has no watermark: none fire
            assert not expected["main"]
        else:
            assert sum(map(len, expected.values())), f"{program.name}: nothing to compare"
        assert runs[program.name] == expected, program.name


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_batch_dataframes_match_the_harness(spark, parallelism):
    runs = spark_outputs(spark, list(CORPUS), parallelism)
    _check(runs, streaming=False)


@pytest.mark.parametrize("parallelism", PARALLELISMS)
def test_file_streams_match_the_harness(spark, tmp_path, parallelism):
    runs = spark_outputs(spark, list(CORPUS), parallelism, stream_dir=tmp_path)
    _check(runs, streaming=True)
    # hold_until_ready: the events of the two batches before the factor arrived are all
    # processed once it does, none lost, none twice
    held = sorted(json.loads(r)["id"] for r in runs[HOLD.name]["main"].elements())
    assert held == list(range(11))
    assert all(json.loads(r)["scaled"] == 10 * json.loads(r)["id"]
               for r in runs[HOLD.name]["main"])
