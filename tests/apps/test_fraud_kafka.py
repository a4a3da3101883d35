"""The fraud demo on Kafka, end to end: ``sparkcast demo fraud --kafka`` (what ``make
demo-kafka`` runs) in its own process, as a user runs it: a real broker started and removed,
transactions and rules read from topics, a rule update produced mid-run, decisions written to
topics exactly once and counted by a ``read_committed`` consumer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkcast.cli import main
from tests.apps.fraud_demo import run_fraud_demo


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_the_kafka_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = run_fraud_demo("kafka", tmp_path / "work")
    assert "OK: 200 transactions, each decided exactly once" in out
    assert "rules versions [3, 6]" in out  # before and after the produced update
    assert "rejected rule broken" in out
    assert "trusted-grocery (deleted)" in out  # its tombstone, kept by the compacted topic
    (folder,) = re.findall(r"started in (\S+)", out)
    assert not Path(folder).exists()  # the broker is stopped and its folder removed
    assert "Kafka broker stopped and removed" in out


@pytest.mark.parametrize("flags, message", [
    (["flags", "--kafka"], "fraud demo only"),
    (["fraud", "--kafka", "--postgres"], "choose one"),
])
def test_kafka_is_for_the_fraud_demo_only(flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        main(["demo", *flags])
