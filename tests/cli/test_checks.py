"""CLI conventions (cli/checks.py, cli/__init__.py): ``--version``; a mistake is one line on
stderr with exit status 2, found before Spark starts; ``--debug`` shows the traceback; the help
describes what the code writes; ``--metrics-host``.

"Before Spark starts" is checked, not timed: each command runs in this process (``main``, its
output from capsys) under ``no_spark`` (tests/cli/conftest.py), which makes every way of
starting Spark raise ``SparkStarted`` instead: a ``subprocess.Popen`` of ``spark-submit`` (the
only way PySpark starts a JVM), PySpark's ``launch_gateway``, a new ``SparkContext``, a
session's ``getOrCreate`` (so a JVM already running in this process does not hide a start). A
control test shows that guard trips on a command that does start Spark.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

import sparkcast
from sparkcast.cli import build_parser, main
from sparkcast.cli.apps import DOCS
from sparkcast.spark import layout
from tests.cli.conftest import SparkStarted

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sparkcast_cli(cli, no_spark):
    """``sparkcast ARGV...`` in this process, with Spark refused (``SparkStarted``)."""
    return cli


MISTAKES = {
    "parallelism 0": (["run", "fraud", "--parallelism", "0"], "--parallelism must be 1 or more"),
    "missing job": (["run", "missing.py", "--output", "o", "--checkpoint", "c"],
                    "the job file missing.py does not exist"),
    "missing view folder": (["view", "--output", "/missing"], "--output /missing does not exist"),
    "unknown target": (["run", "nope"], "neither an application"),
    "app without folders": (["run", "fraud", "--output", "o", "--checkpoint", "c"],
                            "--events"),
    "bad conf": (["run", "fraud", "--conf", "novalue"], "--conf takes KEY=VALUE"),
    "missing archive": (["run", "fraud", "--archive", "env.tar.gz"],
                        "--archive env.tar.gz does not exist"),
    "bad port": (["demo", "--metrics-port", "70000"], "--metrics-port must be a port"),
    "one file": (["demo", "--files", "1"], "--files must be 2 or more"),
    "missing checkpoint": (["state", "show", "/no/checkpoint"], "does not exist"),
    "bad rescale": (["state", "rescale", "a", "b", "--parallelism", "0"], "--parallelism"),
    "bad url": (["report", "--url", "localhost:9108", "--html", "x.html"], "--url takes"),
    "argparse": (["run"], "the following arguments are required"),
    "bad project": (["init", "my-job"], "a name such as my_job"),
}


@pytest.mark.parametrize("case", MISTAKES, ids=list(MISTAKES))
def test_a_mistake_is_one_line_and_exit_2_without_starting_spark(case, sparkcast_cli):
    argv, says = MISTAKES[case]
    run = sparkcast_cli(*argv)  # a start of Spark raises SparkStarted
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("sparkcast"), run.stderr
    assert says in run.stderr
    assert run.stdout == ""


def test_the_guard_trips_when_a_command_does_start_spark(tmp_path, sparkcast_cli):
    with pytest.raises(SparkStarted, match="was about to start"):
        sparkcast_cli("state", "show", str(tmp_path))  # a folder that exists: Spark starts


def test_a_job_file_that_does_not_import_is_one_line_before_spark(tmp_path, sparkcast_cli):
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    (tmp_path / "other.py").write_text("def build(spark):\n    pass\n")
    broken = sparkcast_cli("run", "broken.py", cwd=tmp_path)
    assert broken.returncode == 2 and broken.stderr.count("\n") == 1, broken.stderr
    assert "does not import: ModuleNotFoundError: No module named 'no_such_module_here'" in \
        broken.stderr
    unnamed = sparkcast_cli("run", "other.py", cwd=tmp_path)
    assert unnamed.returncode == 2, unnamed.stderr
    assert "defines no function pipeline(spark); its functions: build" in unnamed.stderr


def test_debug_shows_the_traceback(sparkcast_cli):
    run = sparkcast_cli("run", "fraud", "--parallelism", "0", "--debug")
    assert run.returncode == 2
    assert run.stderr.startswith("Traceback") and "UsageError" in run.stderr


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"sparkcast {sparkcast.__version__}"


def test_run_help_describes_the_layout_write_stream_writes(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "batch_id=" not in text
    for name in (f"{layout.OUTPUT}={layout.MAIN}/", f"{layout.OUTPUT}=dead_letters/",
                 f"{layout.OUTPUT}={layout.METRICS}/",
                 layout.MANIFEST, layout.PROGRESS_LOG):
        assert name in text, name
    assert "PATH.py[:NAME]" in text and "ProcessResult" in text and "StreamingQuery" in text


def test_run_help_lists_debug_and_where_output_and_checkpoint_are_required(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--debug" in out
    required = out[out.index("required by an application"):]
    assert "ProcessResult" in required.split("\n\n")[0]
    assert "--output OUTPUT" in required and "--checkpoint CHECKPOINT" in required
    assert required.index("--checkpoint") < required.index("applications only")


def test_every_docs_page_the_help_names_exists(capsys):
    pages = set()
    for command in (["--help"], ["run", "--help"], ["demo", "--help"], ["view", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
        text = "".join(capsys.readouterr().out.split())  # argparse wraps URLs anywhere
        pages |= set(re.findall(re.escape(DOCS) + r"([\w-]+\.md)", text))
        assert re.search(r"(?<!/)docs/\w+\.md", text) is None, text  # no bare repo paths
    assert {"getting-started.md", "deploy.md", "monitoring.md"} <= pages
    assert all((ROOT / "docs" / page).is_file() for page in pages), pages


def test_a_job_returning_a_process_result_needs_output_before_spark(tmp_path, sparkcast_cli):
    assert main(["init", "shop", "--directory", str(tmp_path)]) == 0
    run = sparkcast_cli("run", "shop/job.py", "--available-now", cwd=tmp_path / "shop")
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "returns a ProcessResult: give --output and --checkpoint" in run.stderr


def test_an_error_leads_with_its_point_and_fix_and_the_details_follow():
    from sparkcast.cli import error_text
    from sparkcast.spark.state.compatibility import differences, refuse

    old, new = {"function": "shop.functions.PriceOrders"}, {"function": "bar.functions.Price"}
    text = error_text("run", refuse(differences(old, new), "checkpoint ck"))
    lead, *details = text.splitlines()
    assert lead.startswith("sparkcast run: error: this pipeline cannot restart from checkpoint")
    assert "function differs" in lead and "new checkpoint" in lead, lead
    assert lead.endswith("(--debug: the traceback)") and len(lead) < 250, lead
    assert details[0].startswith("  function: the checkpoint has"), details
    assert details[-1].startswith("See docs/operations.md")


def test_application_options_are_refused_for_a_job_file(tmp_path, sparkcast_cli):
    job = tmp_path / "job.py"
    job.write_text("def pipeline(spark):\n    pass\n")
    run = sparkcast_cli("run", str(job), "--parallelism", "3", "--events", str(tmp_path))
    assert run.returncode == 2
    assert "--events, --parallelism: options of the built-in applications" in run.stderr
    half = sparkcast_cli("run", str(job), "--output", "o")
    assert half.returncode == 2 and "--output and --checkpoint go together" in half.stderr


def test_metrics_host_defaults_to_loopback_and_binds_what_it_is_given():
    from sparkcast.monitoring.prometheus import _SERVERS, start_server

    args = build_parser().parse_args(["demo"])
    assert args.metrics_host == "127.0.0.1"
    args = build_parser().parse_args(["run", "x.py", "--metrics-host", "0.0.0.0"])
    assert args.metrics_host == "0.0.0.0"
    loopback, every = start_server(0), start_server(0, host="0.0.0.0")
    try:
        assert _SERVERS[loopback].server_address[0] == "127.0.0.1"
        assert _SERVERS[every].server_address[0] == "0.0.0.0"
        with urllib.request.urlopen(f"http://127.0.0.1:{every}/metrics", timeout=10) as answer:
            assert answer.status == 200
    finally:
        for port in (loopback, every):
            _SERVERS.pop(port).shutdown()
