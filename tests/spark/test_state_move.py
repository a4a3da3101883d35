"""``sparkcast state move|copy`` (``tools/relocate.py``): a checkpoint relocated after a run
restarts from its new folder and gives the output of a run that never moved, on both paths that
keep keyed state (the partitioned path's keyed store, the operator path's Spark state with its
``_stateSchema`` records); no file of the new folder names the old one; ``copy`` leaves the old
folder as it was and makes the copy a job of its own.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sparkcast.cli import main
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark import read_output
from tests.spark.differential import write_batch_file
from tests.spark.test_guarded_outputs import _events, _run

pytestmark = pytest.mark.spark


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _rows(spark, folder: Path) -> Counter:
    return Counter(tuple(r) for r in read_output(spark, str(folder)).collect())


def _first_batch(spark, base: Path, engine: str) -> None:
    write_batch_file(base / "limits", 0, [{"limit": 1}])
    write_batch_file(base / "events", 0, _events(0))
    _run(spark, base, "events", "out_ref", "ck_ref", engine=engine)  # the run that never moves
    _run(spark, base, "events", "out", "old_ck", engine=engine)
    write_batch_file(base / "events", 1, _events(1))
    _run(spark, base, "events", "out_ref", "ck_ref", engine=engine)


@pytest.mark.parametrize("engine", ["auto", "operator"])  # the partitioned path, the operator
def test_a_moved_checkpoint_restarts_as_if_it_had_never_moved(spark, tmp_path, engine, capsys):
    _first_batch(spark, tmp_path, engine)
    old_files = _files(tmp_path / "old_ck")
    assert main(["state", "move", str(tmp_path / "old_ck"), str(tmp_path / "moved")]) == 0
    assert '"old_folder": "deleted"' in capsys.readouterr().out
    assert not (tmp_path / "old_ck").exists()
    moved = _files(tmp_path / "moved")
    assert set(moved) <= set(old_files)  # only checksums of rewritten files dropped
    assert not [name for name, data in moved.items() if b"/old_ck" in data]

    _run(spark, tmp_path, "events", "out", "moved", engine=engine)
    reference = _rows(spark, tmp_path / "out_ref")
    assert sum(reference.values()) == 12 and max(n for _, _, n in reference) == 4
    assert _rows(spark, tmp_path / "out") == reference


def test_a_copy_leaves_the_old_folder_as_it_was_and_is_a_job_of_its_own(spark, tmp_path,
                                                                        capsys):
    _first_batch(spark, tmp_path, "auto")
    old_files = _files(tmp_path / "old_ck")
    assert main(["state", "copy", str(tmp_path / "old_ck"), str(tmp_path / "copy")]) == 0
    assert '"old_folder": "kept"' in capsys.readouterr().out
    assert _files(tmp_path / "old_ck") == old_files
    assert not [name for name, data in _files(tmp_path / "copy").items() if b"/old_ck" in data]
    with pytest.raises(IncompatibleCheckpointError, match="belongs to another job"):
        _run(spark, tmp_path, "events", "out", "copy")

    _run(spark, tmp_path, "events", "out_copy", "copy")  # batch 1 only, from the copied state
    second = Counter(r for r in _rows(spark, tmp_path / "out_ref").elements() if r[1] >= 100)
    assert _rows(spark, tmp_path / "out_copy") == second
    _run(spark, tmp_path, "events", "out", "old_ck")  # the original goes on too
    assert _rows(spark, tmp_path / "out") == _rows(spark, tmp_path / "out_ref")


def test_move_refuses_what_is_no_checkpoint_and_a_folder_in_use(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["state", "move", str(tmp_path / "empty"), str(tmp_path / "new")]) == 2
    assert "is not a checkpoint" in capsys.readouterr().err
    (tmp_path / "ck" / "commits").mkdir(parents=True)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("x")
    assert main(["state", "copy", str(tmp_path / "ck"), str(tmp_path / "taken")]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["state", "move", str(tmp_path / "ck"), str(tmp_path / "ck" / "in")]) == 2
    assert "inside one another" in capsys.readouterr().err
    assert (tmp_path / "ck" / "commits").is_dir() and not (tmp_path / "ck" / "in").exists()
