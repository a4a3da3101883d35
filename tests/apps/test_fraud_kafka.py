"""The fraud demo on Kafka, end to end: ``sparkcast demo fraud --kafka`` (what ``make
demo-kafka`` runs) in its own process, as a user runs it: a real broker started and removed,
transactions and rules read from topics, a rule update produced mid-run, decisions written to
topics exactly once and counted by a ``read_committed`` consumer."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcast.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.spark
def test_the_kafka_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "demo", "fraud", "--kafka", "--scale", "1",
         "--step-seconds", "0.5", "--parallelism", "2", "--timeout", "900",
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=1200, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "OK: 800 transactions, each decided exactly once" in out
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
