"""The fraud demo the real way, end to end: ``sparkcast demo fraud --postgres`` (what ``make
demo-postgres`` runs) in its own process, as a user runs it: a real PostgreSQL started and
removed, rules read from it and changed mid-run, decisions written to it exactly once."""

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
def test_the_postgres_demo_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "demo", "fraud", "--postgres", "--scale", "1",
         "--step-seconds", "0.5", "--parallelism", "2", "--timeout", "900",
         "--workdir", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=1200, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "OK: 800 transactions, each decided exactly once" in out
    assert "rules versions [3, 6]" in out  # before and after the UPDATE, nothing in between
    assert "rejected rule broken" in out
    assert "trusted-grocery (v8, deleted)" in out
    (folder,) = re.findall(r"started in (\S+)", out)
    assert not Path(folder).exists()  # the cluster is stopped and removed
    assert "PostgreSQL stopped and removed" in out


def test_postgres_is_for_the_fraud_demo_only() -> None:
    with pytest.raises(SystemExit, match="fraud demo only"):
        main(["demo", "flags", "--postgres"])
