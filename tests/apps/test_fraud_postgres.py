"""The fraud demo the real way, end to end: ``sparkcast demo fraud --postgres`` (what ``make
demo-postgres`` runs) in its own process, as a user runs it: a real PostgreSQL started and
removed, rules read from it and changed mid-run, decisions written to it exactly once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkcast.cli import main
from tests.apps.fraud_demo import run_fraud_demo


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_the_postgres_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = run_fraud_demo("postgres", tmp_path / "work")
    assert "OK: 200 transactions, each decided exactly once" in out
    assert "rules versions [3, 6]" in out  # before and after the UPDATE, nothing in between
    assert "rejected rule broken" in out
    assert "trusted-grocery (v8, deleted)" in out
    (folder,) = re.findall(r"started in (\S+)", out)
    assert not Path(folder).exists()  # the cluster is stopped and removed
    assert "PostgreSQL stopped and removed" in out


def test_postgres_is_for_the_fraud_demo_only() -> None:
    with pytest.raises(SystemExit, match="fraud demo only"):
        main(["demo", "flags", "--postgres"])
