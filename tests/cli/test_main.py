"""The ``sparkcast`` command as a whole (cli/__init__.py): every command has help, bad arguments
exit with the usage, and both ways in (the installed script, ``python -m``) reach ``main``."""

import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

from sparkcast.cli import main

ROOT = Path(__file__).resolve().parents[2]
EVERY_COMMAND = [[], ["demo"], ["generate"], ["run"], ["list"], ["state"], ["state", "show"],
                 ["state", "rescale"], ["view"], ["report"], ["init"]]


@pytest.mark.parametrize("command", EVERY_COMMAND, ids=lambda c: " ".join(c) or "sparkcast")
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: sparkcast " + " ".join(command))
    if command[:1] in (["demo"], ["generate"], ["run"]):
        assert "fraud" in out  # the applications are named


def test_the_top_level_help_lists_every_command_group(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed = out.split("COMMAND", 2)[2]
    for command in ("demo", "generate", "run", "list", "state", "view", "report", "init"):
        assert f"\n    {command} " in listed, command


@pytest.mark.parametrize("argv", [["generate", "nope", "--out", "x"], ["run", "fraud"],
                                  ["demo", "nope"], ["state"], ["view"], []])
def test_bad_arguments_exit_2_with_one_line_that_points_at_the_help(argv, capsys):
    try:
        code = main(argv)  # argparse's mistakes exit; checks' mistakes return
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparkcast"), err
    assert "--help)" in err


def test_the_installed_script_reaches_main():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["sparkcast"].partition(":")
    assert getattr(import_module(module), name) is main


def test_python_dash_m_runs_the_command():
    run = subprocess.run([sys.executable, "-m", "sparkcast.cli", "list"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("fraud ")
