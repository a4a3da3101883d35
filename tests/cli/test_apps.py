"""``sparkcast demo``, ``generate``, ``run`` and ``list`` (cli/apps.py): list, generate and the
run options without Spark; the demo in a process of its own on Spark."""

import json

import pytest

from sparkcast.apps import APP_NAMES, get_app
from sparkcast.cli import build_parser, main


def test_list_names_every_application(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in APP_NAMES)


@pytest.mark.parametrize("app", APP_NAMES)
def test_generate_writes_reproducible_json_lines(app, tmp_path, capsys):
    assert main(["generate", app, "--out", str(tmp_path / "a"), "--seed", "3"]) == 0
    assert main(["generate", app, "--out", str(tmp_path / "b"), "--seed", "3"]) == 0
    assert "sparkcast run" in capsys.readouterr().out
    root = tmp_path / "a"
    files = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    assert any(str(f).startswith("events/") for f in files)
    assert any(str(f).startswith("broadcast/") for f in files)
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        if name.suffix == ".json":
            for line in (tmp_path / "a" / name).read_text().splitlines():
                assert isinstance(json.loads(line), dict)


@pytest.mark.parametrize("app", APP_NAMES)
def test_files_sets_how_many_event_files_are_generated(app, tmp_path):
    """The app's own number by default; fewer make a shorter demo (the end-to-end tests')."""
    assert main(["generate", app, "--out", str(tmp_path / "default")]) == 0
    assert main(["generate", app, "--out", str(tmp_path / "two"), "--files", "2"]) == 0
    assert len(list((tmp_path / "default" / "events").iterdir())) == get_app(app).files
    assert len(list((tmp_path / "two" / "events").iterdir())) == 2
    assert len(list((tmp_path / "two" / "broadcast").iterdir())) >= 2  # the update midway


def test_model_artifacts_are_npz_files(tmp_path):
    assert main(["generate", "models", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == [
        "product-v1.npz", "product-v2.npz", "product-v3.npz"]


def test_the_demo_defaults_to_the_flagship():
    args = build_parser().parse_args(["demo"])
    assert (args.app, args.parallelism, args.max_files_per_trigger) == ("fraud", 4, 1)


def test_run_takes_a_master_a_packed_environment_and_spark_settings(tmp_path, monkeypatch):
    from sparkcast.cli.apps import session_settings
    from sparkcast.errors import PipelineError

    argv = ["run", "fraud", "--events", "e", "--broadcast", "b", "--output", "o",
            "--checkpoint", "hdfs://nn/cp", "--master", "spark://10.0.0.1:7077",
            "--archive", "env.tar.gz", "--conf", "spark.executor.memory=2g"]
    args = build_parser().parse_args(argv)
    assert (args.master, args.checkpoint) == ("spark://10.0.0.1:7077", "hdfs://nn/cp")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineError, match="tar -xzf env.tar.gz -C environment"):
        session_settings(args)  # the driver needs the environment unpacked beside it
    (tmp_path / "environment" / "bin").mkdir(parents=True)
    (tmp_path / "environment" / "bin" / "python").touch()
    assert session_settings(args) == {
        "spark.executor.memory": "2g", "spark.archives": "env.tar.gz#environment",
        "spark.pyspark.python": "./environment/bin/python",
        "spark.executorEnv.PYSPARK_PYTHON": "./environment/bin/python"}
    from sparkcast.cli.checks import check
    from sparkcast.errors import UsageError

    bad = build_parser().parse_args(argv[:-1] + ["no-equals-sign"])
    with pytest.raises(UsageError, match="KEY=VALUE"):
        check(bad)  # before any session


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_the_demo_terminal_output_has_no_worker_banners_and_no_warn_flood(tmp_path):
    """The demo in its own process (a fresh JVM, as a user runs it), output piped: sparkcast's
    log configuration and banner filter hold, no warning is printed (at start-up too: the proof
    of a quiet start for ``run`` as well, whose session starts the same way), and a pipe gets no
    ANSI codes."""
    import subprocess
    import sys

    from sparkcast.spark.launch.quiet import BANNERS

    run = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "demo", "fraud", "--scale", "1",
         "--files", "2", "--step-seconds", "0.5", "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=900, check=False)
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-3000:]
    assert "nothing lost, nothing duplicated" in run.stdout
    assert not [line for line in text.splitlines() if any(b in line for b in BANNERS)]
    assert "doesn't contain key" not in text
    warnings = [line for line in text.splitlines() if "WARN" in line or "Warning" in line]
    assert not warnings, warnings  # none at start (quiet.py), none per batch or key, and no
    # Python warning about the demo's own reads (its schemas carry _corrupt_record)
    assert "\x1b" not in text
