"""Kill the query process with SIGKILL mid-batch three times, restart it from the same checkpoint
each time (the last, unkilled run in the test's own session: one JVM start fewer), and compare
what it wrote with the harness over the same input: nothing lost, nothing twice, the same values
and the same dead letters.

The pipeline (``fault_pipeline.py``) runs in its own process group, so SIGKILL takes the driver,
its JVM and its Python workers at once, as a crash of the machine would. The moments are read
from the checkpoint: a micro-batch whose offsets are logged but that neither the sink
(``_spark_metadata``) nor the checkpoint (``commits``) has committed is in flight; one that the
sink has committed but the checkpoint has not is between the two commits. Each kill is checked
where it landed: once the process is dead its checkpoint cannot move, so the test fails unless
it still shows the moment the kill is named for. Both runtime paths that keep state across
micro-batches run it: the stateful operator (Spark's file sink) and the streamed-broadcast path
(``foreachBatch`` with its own commits in the same ``_spark_metadata`` log).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkcast.spark import read_output
from tests.spark import fault_pipeline as pipeline
from tests.spark.differential import write_batch_file

ROOT = Path(__file__).resolve().parents[2]


def _logged(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(name) for name in os.listdir(directory) if name.isdigit()}


def _in_flight(base: Path, batch: int) -> bool:
    """Planned (its offsets are logged), written by neither the sink nor the checkpoint."""
    return (batch in _logged(base / "checkpoint" / "offsets")
            and batch not in _logged(base / "out" / "_spark_metadata")
            and batch not in _logged(base / "checkpoint" / "commits"))


def _between_commits(base: Path, batch: int) -> bool:
    return batch in _logged(base / "out" / "_spark_metadata") and batch not in _logged(
        base / "checkpoint" / "commits")


@dataclass(frozen=True)
class Moment:
    """Where in a micro-batch's life a kill lands: ``holds`` reads it from the checkpoint and
    the sink's log; the kill is sent ``delay`` seconds after it first holds."""

    name: str
    holds: Callable[[Path], bool]
    delay: float = 0.0


# each run first replays the batch the previous one was killed in; the window between the two
# commits lasts some 40-80 ms here, so the moments are polled every 2 ms
MOMENTS = (
    Moment("batch 0 in flight, 1 s after it was planned", lambda b: _in_flight(b, 0), 1.0),
    Moment("batch 1 in flight, as soon as it is planned", lambda b: _in_flight(b, 1)),
    Moment("batch 2 committed by the sink, not yet by the checkpoint",
           lambda b: _between_commits(b, 2)),
)
LANDED = "landed at the moment"


def _start(base: Path, log: Path, path: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.spark.fault_pipeline", str(base), path],
                            cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _kill_when(process: subprocess.Popen, base: Path, moment: Moment,
               timeout: float = 300) -> str:
    """SIGKILL the process group once ``moment`` holds (then after its delay), and say where the
    kill landed: ``LANDED`` only if the moment still holds once the process is dead (the
    checkpoint cannot move any more, so it shows the moment the kill hit)."""
    deadline = time.monotonic() + timeout
    while not moment.holds(base):
        if process.poll() is not None:
            return "the run finished before the moment came"
        if time.monotonic() > deadline:
            _kill(process)
            return f"the moment did not come within {timeout:.0f} s"
        time.sleep(0.002)
    time.sleep(moment.delay)
    _kill(process)
    return LANDED if moment.holds(base) else "the moment had passed when the kill landed"


def _kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.mark.spark
@pytest.mark.fresh_jvm
@pytest.mark.parametrize("path", pipeline.PATHS)
def test_sigkill_mid_batch_three_times_loses_and_duplicates_nothing(spark, tmp_path, path):
    for index in range(pipeline.EVENT_FILES):
        write_batch_file(tmp_path / "events", index, pipeline.events(index))
    for index in range(pipeline.RULE_FILES):
        write_batch_file(tmp_path / "rules", index, pipeline.rules(index))
    log = tmp_path / "runs.log"
    where = {}
    for moment in MOMENTS:
        process = _start(tmp_path, log, path)
        try:
            where[moment.name] = _kill_when(process, tmp_path, moment)
        finally:
            if process.poll() is None:
                _kill(process)
    missed = {name: outcome for name, outcome in where.items() if outcome != LANDED}
    assert not missed, "".join(f"\n{name}: {outcome}" for name, outcome in missed.items()) + (
        "\n" + log.read_text()[-3000:])
    pipeline.write(spark, tmp_path, path)  # the last run, unkilled: in this test's session
    assert _logged(tmp_path / "checkpoint" / "commits") >= set(range(pipeline.EVENT_FILES))

    main, letters = pipeline.expected(path)
    out = str(tmp_path / "out")
    written = Counter(tuple(r) for r in read_output(spark, out).collect())
    assert sum(written.values()) == sum(main.values())  # nothing lost, nothing twice
    assert written == main
    dead = Counter((r.callback, r.error) for r in read_output(spark, out, "dead_letters").collect())
    assert dead == letters
    assert dead[("process_broadcast_element", "ValueError: negative limit -1")] == 1


@pytest.mark.parametrize("script, outcome", [
    ("touch flag; sleep 30", LANDED),
    ("touch flag; sleep 0.2; rm flag; sleep 30", "the moment had passed when the kill landed"),
    ("sleep 0.2", "the run finished before the moment came"),
    ("sleep 30", "the moment did not come within 1 s"),
])
def test_a_kill_is_reported_where_it_landed(tmp_path, script, outcome):
    """Guards the test above (no Spark): a kill counts only if its moment still held."""
    process = subprocess.Popen(["sh", "-c", script], cwd=tmp_path, start_new_session=True)
    flagged = Moment("the flag is up", lambda base: (base / "flag").exists(), delay=1.0)
    try:
        assert _kill_when(process, tmp_path, flagged, timeout=1) == outcome
    finally:
        if process.poll() is None:
            _kill(process)
