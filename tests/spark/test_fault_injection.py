"""Kill the query process with SIGKILL mid-batch three times, restart it from the same checkpoint
each time (the last, unkilled run in the test's own session: one JVM start fewer), and compare
what it wrote with the harness over the same input: nothing lost, nothing twice, the same values
and the same dead letters.

The pipeline (``fault_pipeline.py``) runs in its own process group, so SIGKILL takes the driver,
its JVM and its Python workers at once, as a crash of the machine would. Every runtime path that
keeps state across micro-batches runs in each killed process, side by side, each query on its
own inputs and checkpoint: the stateful operator (Spark's file sink), the streamed-broadcast path
and the partitioned path (``foreachBatch`` with its own commits in the same ``_spark_metadata``
log). So one process carries the three paths to each moment: 3 JVMs, where one per path and
moment made 9, and every path still meets every moment. The queries hold themselves at the
moment (``holds.py``, the first run only) and the test sleeps until every hold is claimed (a
file event). The operator path's sink commit is in the JVM, where no hook reaches: for "between
the two commits" it holds before batch 2 until the others are held, then goes on, and the test
kills on the file event of its sink's log, within the 40-80 ms before Spark's checkpoint commit.

The moments are read from the checkpoint: a micro-batch whose offsets are logged but that neither
the sink (``_spark_metadata``) nor the checkpoint (``commits``) has committed is in flight; one
that the sink has committed but the checkpoint has not is between the two commits. Each kill is
checked where it landed: once the process is dead its checkpoint cannot move, so the test fails
unless every query still shows the moment the kill is named for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkcast.spark import read_output
from tests.spark import fault_pipeline as pipeline
from tests.spark.holds import FileEvents, arm, disarm, reached

ROOT = Path(__file__).resolve().parents[2]
PATHS = pipeline.PATHS
OPERATOR = "operator"


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
    """Where in a micro-batch's life a kill lands: ``holds`` reads it from a query's checkpoint
    and sink log; ``hold`` names the hold each path's query is armed with."""

    name: str
    holds: Callable[[Path], bool]
    hold: Callable[[str], str]
    #: whether the operator path, held before the batch, is let go and caught by a file event
    caught: bool = False


# each run first replays the batch the previous one was killed in
MOMENTS = (
    Moment("batch 0 in flight", lambda b: _in_flight(b, 0), lambda path: pipeline.in_flight(0)),
    Moment("batch 1 in flight", lambda b: _in_flight(b, 1), lambda path: pipeline.in_flight(1)),
    Moment("batch 2 committed by the sink, not yet by the checkpoint",
           lambda b: _between_commits(b, 2),
           lambda path: pipeline.in_flight(2) if path == OPERATOR else pipeline.AFTER_SINK_2,
           caught=True),
)
LANDED = "landed at the moment"


def _start(root: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.spark.fault_pipeline", str(root),
                             *PATHS], cwd=ROOT, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)


def _kill_at(process: subprocess.Popen, root: Path, moment: Moment,
             timeout: float = 300) -> str:
    """Arm every path's hold, sleep until all are claimed (a caught operator path: let go and
    woken by its sink log's file event), SIGKILL the process group, and say where the kill
    landed: ``LANDED`` only if every query still shows the moment once the process is dead."""
    folders = {path: pipeline.holds(root / path) for path in PATHS}
    alive = lambda: process.poll() is None  # noqa: E731
    with FileEvents(folders.values()) as events:
        if not events.wait(lambda: all(reached(folders[p], moment.hold(p)) for p in PATHS),
                           alive, timeout):
            return "the holds were not all reached (the run ended or timed out)"
    if moment.caught:
        operator = root / OPERATOR
        with FileEvents([operator / "out" / "_spark_metadata"]) as events:
            disarm(folders[OPERATOR])
            if not events.wait(lambda: moment.holds(operator), alive, timeout, check=0.01):
                return "the operator path's moment did not come"
    _kill(process)
    passed = [path for path in PATHS if not moment.holds(root / path)]
    return f"the moment had passed in {passed} when the kill landed" if passed else LANDED


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_sigkill_mid_batch_three_times_loses_and_duplicates_nothing(spark, tmp_path):
    for path in PATHS:
        pipeline.write_inputs(tmp_path / path)
    log = tmp_path / "runs.log"
    where = {}
    for moment in MOMENTS:
        for path in PATHS:
            arm(pipeline.holds(tmp_path / path), moment.hold(path))
        process = _start(tmp_path, log)
        try:
            where[moment.name] = _kill_at(process, tmp_path, moment)
        finally:
            _kill(process)
            for path in PATHS:
                disarm(pipeline.holds(tmp_path / path))
    missed = {name: outcome for name, outcome in where.items() if outcome != LANDED}
    assert not missed, "".join(f"\n{name}: {outcome}" for name, outcome in missed.items()) + (
        "\n" + log.read_text()[-3000:])
    for path in PATHS:  # the last runs, unkilled: in this test's session
        _verify(spark, tmp_path / path, path)


def _verify(spark, base: Path, path: str) -> None:
    pipeline.write(spark, base, path)
    assert _logged(base / "checkpoint" / "commits") >= set(range(pipeline.EVENT_FILES)), path
    main, letters = pipeline.expected(path)
    out = str(base / "out")
    written = Counter(tuple(r) for r in read_output(spark, out).collect())
    assert sum(written.values()) == sum(main.values()), path  # nothing lost, nothing twice
    assert written == main, path
    dead = Counter((r.callback, r.error) for r in read_output(spark, out, "dead_letters").collect())
    assert dead == letters, path
    assert dead[("process_broadcast_element", "ValueError: negative limit -1")] == 1, path


HELD = "for p in operator streamed partitioned; do touch $p/holds/h.reached; done; "
FLAGS = "touch streamed/flag partitioned/flag; "
LET_GO = "while [ -e operator/holds/h ]; do sleep 0.01; done; "


@pytest.mark.parametrize("script, caught, outcome", [
    (FLAGS + "touch operator/flag; " + HELD + "sleep 30", False, LANDED),
    (FLAGS + HELD + "sleep 30", False, "the moment had passed in ['operator'] when the kill "
     "landed"),
    ("sleep 0.2", False, "the holds were not all reached (the run ended or timed out)"),
    (FLAGS + HELD + LET_GO + "touch operator/flag operator/out/_spark_metadata/2; sleep 30",
     True, LANDED),
    (FLAGS + HELD + LET_GO + "sleep 30", True, "the operator path's moment did not come"),
])
def test_a_kill_is_reported_where_it_landed(tmp_path, script, caught, outcome):
    """Guards the test above (no Spark): a kill counts only if every query's moment held."""
    for path in PATHS:
        arm(pipeline.holds(tmp_path / path), "h")
    flagged = Moment("the flags are up", lambda base: (base / "flag").exists(), lambda p: "h",
                     caught=caught)
    process = subprocess.Popen(["sh", "-c", script], cwd=tmp_path, start_new_session=True)
    try:
        assert _kill_at(process, tmp_path, flagged, timeout=2) == outcome
    finally:
        _kill(process)
