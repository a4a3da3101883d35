"""The fraud demo run as a user runs it, ``sparkcast demo fraud --<backend>`` in its own process
(what ``make demo-postgres`` and ``make demo-kafka`` run), for the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def run_fraud_demo(backend: str, workdir: Path) -> str:
    """The demo's output; fails the test, with the output's end, when it exits non-zero.
    Two steps, one on each side of the rule update, the second fed once the first is decided:
    every step is a micro-batch of some 9 s here, so the default eight cost ~55 s more."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "demo", "fraud", f"--{backend}", "--scale", "1",
         "--files", "2", "--step-seconds", "0", "--parallelism", "2", "--timeout", "900",
         "--workdir", str(workdir)],
        capture_output=True, text=True, timeout=1200, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout
