"""``sparkcast run PATH.py[:NAME]`` (cli/jobs.py) and ``sparkcast init`` (cli/skeleton.py).

Loading, zipping and the skeleton's own harness test run without Spark. On Spark, a run whose
point is what it writes and says runs in this process on the shared session (``session_cli``,
tests/cli/conftest.py, with what the JVM logged meanwhile): the example job file returning a
``ProcessResult``, whose output must equal the harness's and which logs no WARN line; a job
inside a package (relative imports) that starts its own query and whose function imports a
module of its package only on the executors, which works only if the package was shipped; a
second job refused on the first's checkpoint; a run all of whose outputs are dead letters. What
only a process of its own shows runs in one (``fresh_jvm``): the README's ``spark-submit``
recipe, Ctrl-C, and a ``--duration`` shorter than a fresh JVM's first micro-batch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from sparkcast.cli import main
from sparkcast.cli.jobs import JobRun, JobSpec, load_job, module_of, start_result, zip_package
from sparkcast.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "enrich_job.py"
#: the WARN of a second ``getOrCreate`` on a running session, whose static settings it ignores
EXISTING_SESSION = "Using an existing Spark session"


def write_package(root: Path) -> Path:
    """``shop/`` with a job in ``shop/jobs/job.py`` that imports its function relatively; the
    function imports ``shop.lookup`` when it runs (on the executors), not when pickled."""
    (root / "shop" / "jobs").mkdir(parents=True)
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "jobs" / "__init__.py").write_text("")
    (root / "shop" / "lookup.py").write_text("SUFFIX = '-shipped'\n")
    (root / "shop" / "functions.py").write_text(
        "import importlib\n"
        "from sparkcast import BroadcastProcessFunction, MapStateDescriptor\n"
        "NAMES = MapStateDescriptor('names', str, str)\n"
        "class Name(BroadcastProcessFunction):\n"
        "    def process_broadcast_element(self, value, ctx):\n"
        "        ctx.get_broadcast_state(NAMES).put(value['k'], value['name'])\n"
        "    def process_element(self, value, ctx):\n"
        "        suffix = importlib.import_module('shop.lookup').SUFFIX\n"
        "        yield value['id'], (ctx.get_broadcast_state(NAMES).get(value['k']) or '?')"
        " + suffix\n")
    (root / "shop" / "jobs" / "job.py").write_text(
        "import os\n"
        "from ..functions import NAMES, Name\n"
        "def own_query(spark):\n"
        "    from sparkcast.spark import Stream\n"
        "    data = os.environ['SHOP_DATA']\n"
        "    events = spark.readStream.schema('id long, k string').json(data + '/events')\n"
        "    names = spark.readStream.schema('k string, name string').json(data + '/names')\n"
        "    result = Stream(events).connect(Stream(names).broadcast(NAMES)).process(\n"
        "        Name(), output_schema='id long, name string', parallelism=2)\n"
        "    return result.write_stream(data + '/out', data + '/ck',\n"
        "                               trigger={'availableNow': True}, query_name='own')\n")
    return root / "shop" / "jobs" / "job.py"


def test_a_file_in_a_package_is_imported_under_its_dotted_name(tmp_path):
    job = write_package(tmp_path)
    assert module_of(job) == (tmp_path.resolve(), "shop.jobs.job")
    assert module_of(EXAMPLE) == (ROOT, "examples.enrich_job")
    (tmp_path / "lone.py").write_text("")
    assert module_of(tmp_path / "lone.py") == (tmp_path.resolve(), "lone")


def test_the_shipped_zip_holds_the_package_without_caches(tmp_path):
    write_package(tmp_path)
    (tmp_path / "shop" / "__pycache__").mkdir()
    (tmp_path / "shop" / "__pycache__" / "x.pyc").write_bytes(b"")
    with zipfile.ZipFile(zip_package(tmp_path / "shop")) as archive:
        assert sorted(archive.namelist()) == [
            "shop/__init__.py", "shop/functions.py", "shop/jobs/__init__.py",
            "shop/jobs/job.py", "shop/lookup.py"]


def test_load_job_refuses_a_file_named_like_a_module_already_imported(tmp_path):
    (tmp_path / "json.py").write_text("def pipeline(spark):\n    pass\n")
    with pytest.raises(UsageError, match="already taken by .*json"):
        load_job(JobSpec(tmp_path / "json.py"))


def test_a_package_imported_from_a_py_files_zip_elsewhere_loads_its_job(tmp_path, monkeypatch):
    """spark-submit --py-files /elsewhere/shop.zip shop/job.py: the job's module imported the
    package from the zip (on the path) before the CLI loads the job file."""
    job = write_package(tmp_path / "project")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shipped = zip_package(tmp_path / "project" / "shop").rename(elsewhere / "shop.zip")
    monkeypatch.chdir(elsewhere)
    monkeypatch.syspath_prepend(str(shipped))
    import shop.functions  # noqa: F401 - as the job's module does, from the zip

    assert zipfile.is_zipfile(Path(sys.modules["shop"].__file__).parents[1])
    assert load_job(JobSpec(job, "own_query")).__module__ == "shop.jobs.job"


def test_the_job_must_return_a_result_or_a_query():
    with pytest.raises(UsageError, match="returned dict: return a ProcessResult"):
        start_result({}, JobSpec(Path("job.py")), JobRun())


def test_init_writes_a_project_whose_harness_test_passes(tmp_path):
    assert main(["init", "shop", "--directory", str(tmp_path)]) == 0
    root = tmp_path / "shop"
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == {
        "README.md", "pyproject.toml", "shop/__init__.py", "shop/functions.py", "shop/job.py",
        "tests/test_functions.py", "data/orders/orders-0.json", "data/prices/prices-0.json"}
    assert "spark-submit --master" in (root / "README.md").read_text()
    test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=root, capture_output=True, text=True, timeout=300,
                          check=False)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "1 passed" in test.stdout
    assert "warning" not in test.stdout.lower(), test.stdout  # e.g. an inferred output schema
    assert main(["init", "shop", "--directory", str(tmp_path)]) == 2  # never overwrites


def expected_enrichment() -> tuple[Counter, Counter]:
    """The example's outputs on the harness: every broadcast row of the (one) micro-batch
    first, then each user's clicks in event-time order."""
    from examples import enrich_job as job
    from sparkcast.testing import KeyedBroadcastHarness

    harness = KeyedBroadcastHarness(job.EnrichClicks(), lambda v: v["user"], [job.CATALOGUE],
                                    output_schema=job.OUTPUT_SCHEMA)
    harness.open()
    products, clicks = job.sample()
    for product in products:
        harness.process_broadcast_element(product, timestamp=product["ts"])
    for click in sorted(clicks, key=lambda c: c["ts"]):
        harness.process_element(click, timestamp=click["ts"])
    return (Counter(tuple(v) for v in harness.output()),
            Counter(tuple(v) for v in harness.side_output(job.UNKNOWN)))


@pytest.mark.spark
def test_the_example_job_runs_to_completion_and_reads_back_right(tmp_path, spark, session_cli,
                                                                monkeypatch):
    """On the session, whose JVM resolves a relative path from its own folder, not this
    test's: absolute folders (the relative ones of a user's run: the fresh runs below)."""
    from sparkcast.spark import read_output

    out = str(tmp_path / "out")
    monkeypatch.setenv("ENRICH_DATA", str(tmp_path / "enrich-data"))
    run = session_cli("run", str(EXAMPLE), "--output", out, "--checkpoint",
                      str(tmp_path / "ck"), "--available-now", "--no-view", cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"outputs in {out}" in run.stdout
    # --no-view: one line per micro-batch (the last one too), no screen at the end
    assert "micro-batch 0:" in run.stdout and "recent outputs" not in run.stdout, run.stdout
    assert "waiting for the first micro-batch" not in run.stdout, run.stdout
    # the run is quiet: no JVM WARN line while it runs (its start-up in a fresh JVM: the demo's
    # test, tests/cli/test_apps.py); but the one a running session gives a second getOrCreate
    warned = [line for line in run.stderr.splitlines() if "WARN" in line]
    assert [line for line in warned if EXISTING_SESSION not in line] == [], run.stderr
    main_rows, unknown = expected_enrichment()
    assert Counter(tuple(r) for r in read_output(spark, out).collect()) == main_rows
    assert Counter(tuple(r) for r in read_output(spark, out, "unknown").collect()) == unknown
    assert sum(main_rows.values()) == 50 and sum(unknown.values()) == 10


@pytest.mark.spark
def test_a_package_job_that_starts_its_own_query_runs_with_its_package_shipped(
        tmp_path, spark, session_cli, monkeypatch):
    """The session's executors run in another folder (this process's JVM's), without the
    package on their path: only the shipped zip has ``shop.lookup``."""
    from sparkcast.spark import read_output
    from tests.conftest import write_json_lines

    job = write_package(tmp_path / "project")
    data = tmp_path / "data"
    write_json_lines(data / "events", "e.json", [{"id": i, "k": f"k{i % 3}"} for i in range(9)])
    write_json_lines(data / "names", "n.json", [{"k": "k0", "name": "zero"},
                                                {"k": "k1", "name": "one"}])
    elsewhere = tmp_path / "elsewhere"  # neither the cwd nor PYTHONPATH holds the package
    elsewhere.mkdir()
    monkeypatch.setenv("SHOP_DATA", str(data))
    run = session_cli("run", f"{job}:own_query", "--no-view", cwd=elsewhere)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = sorted(tuple(r) for r in read_output(spark, str(data / "out")).collect())
    names = {0: "zero", 1: "one", 2: "?"}
    assert rows == [(i, names[i % 3] + "-shipped") for i in range(9)]


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_the_init_projects_spark_submit_recipe_runs(tmp_path, spark):
    """The README's recipe with the real ``spark-submit`` (local master): the package comes
    with ``--py-files`` (the CLI must not ship a second ``shop.zip``), imported from the zip
    (the data path must not come from ``__file__``)."""
    from sparkcast.spark import read_output

    assert main(["init", "shop", "--directory", str(tmp_path)]) == 0
    root = tmp_path / "shop"
    with zipfile.ZipFile(root / "shop.zip", "w") as archive:  # zip -r shop.zip shop
        for file in (root / "shop").rglob("*.py"):
            archive.write(file, file.relative_to(root))
    python = sys.executable
    run = subprocess.run(
        [str(Path(python).parent / "spark-submit"), "--master", "local[2]", "--py-files",
         "shop.zip", "shop/job.py", "--output", "out", "--checkpoint", "ck", "--available-now",
         "--no-view"], cwd=root, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = read_output(spark, str(root / "out")).orderBy("order_id").collect()
    assert [(r.order_id, r.total) for r in rows] == [
        ("o0", 4.0), ("o1", 3.5), ("o2", 10.0), ("o3", 8.25), ("o4", 14.0), ("o5", None)]


@pytest.mark.spark
def test_another_jobs_checkpoint_is_refused_with_the_fix_first(tmp_path, session_cli,
                                                              monkeypatch):
    """Two init projects, the second run on the first's checkpoint (on the session, so with
    absolute folders: its JVM resolves relative ones from its own): the error's first line says
    what differs and the fix, the details follow a line each. (Not named ``shop``: another test
    ships a different ``shop.zip`` to the same executors.)"""
    for name in ("cafe", "bar"):
        assert main(["init", name, "--directory", str(tmp_path)]) == 0
    project = tmp_path / "cafe"
    for name in ("CAFE", "BAR"):  # the second job reads the first's data/, as from its folder
        monkeypatch.setenv(f"{name}_DATA", str(project / "data"))
    options = ("--available-now", "--no-view", "--checkpoint", str(project / "ck"), "--output")
    first = session_cli("run", "cafe/job.py", *options, str(project / "out"), cwd=project)
    assert first.returncode == 0, first.stderr[-3000:]
    run = session_cli("run", "../bar/bar/job.py", *options, str(project / "out2"), cwd=project)
    assert run.returncode == 2, run.stderr[-3000:]
    lines = run.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("sparkcast run: error:"))
    lead = lines[at]
    assert "whose function differs" in lead and "give it a new checkpoint" in lead, lead
    assert len(lead) < 300 and lead.endswith("(--debug: the traceback)"), lead
    assert lines[at + 1].startswith("  function: the checkpoint has \"cafe.functions.")
    assert lines[at + 2].startswith("See docs/operations.md"), lines[at:]


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_ctrl_c_stops_a_job_and_its_checkpoint_keeps_the_progress(tmp_path, spark):
    """No --available-now: the query runs until Ctrl-C (SIGINT), which stops it cleanly."""
    from sparkcast.spark import read_output

    command = [sys.executable, "-m", "sparkcast.cli", "run", str(EXAMPLE), "--output", "out",
               "--checkpoint", "ck", "--no-view", "--trigger-seconds", "1"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        for line in process.stdout:  # one line per micro-batch, flushed
            if "micro-batch 0" in line:
                break
        process.send_signal(signal.SIGINT)
        rest, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    assert "stopping (the checkpoint keeps the progress" in rest
    assert (tmp_path / "ck" / "commits" / "0").exists()
    main_rows, _ = expected_enrichment()
    out = str(tmp_path / "out")
    assert Counter(tuple(r) for r in read_output(spark, out).collect()) == main_rows


@pytest.mark.spark
@pytest.mark.fresh_jvm
def test_duration_stops_a_job_between_micro_batches(tmp_path):
    """--duration shorter than the first micro-batch: the stop waits for it to commit, so no
    write is aborted (Spark would log the abort as an ERROR with a Java traceback)."""
    run = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "run", str(EXAMPLE), "--output", "out",
         "--checkpoint", "ck", "--duration", "3", "--no-view"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ERROR" not in run.stderr and "Exception" not in run.stderr, run.stderr[-3000:]
    assert (tmp_path / "ck" / "commits" / "0").exists()


@pytest.mark.spark
def test_a_run_whose_every_output_is_a_dead_letter_says_why_and_exits_non_zero(tmp_path,
                                                                               session_cli):
    """Each amount has a fraction, and the main output's column is a bigint: no row is written,
    so the run ends with the first reason and exit status 1, not 0 (on the session: absolute
    folders)."""
    from tests.conftest import write_json_lines

    write_json_lines(tmp_path / "data" / "events", "e.json",
                     [{"user": f"u{i}", "amount": i + 0.5} for i in range(3)])
    write_json_lines(tmp_path / "data" / "rules", "r.json", [{"name": "x"}])
    (tmp_path / "lossy_job.py").write_text(
        "from pathlib import Path\n"
        "from sparkcast import BroadcastProcessFunction, MapStateDescriptor\n"
        "from sparkcast.spark import Stream\n"
        "RULES = MapStateDescriptor('rules', str, str)\n"
        "class Pass(BroadcastProcessFunction):\n"
        "    def process_broadcast_element(self, value, ctx):\n"
        "        pass\n"
        "    def process_element(self, value, ctx):\n"
        "        yield value.user, value.amount\n"
        "def pipeline(spark):\n"
        "    data = str(Path.cwd() / 'data')\n"
        "    events = spark.readStream.schema('user string, amount double').json(data + "
        "'/events')\n"
        "    rules = spark.readStream.schema('name string').json(data + '/rules')\n"
        "    return Stream(events).connect(Stream(rules).broadcast(RULES)).process(\n"
        "        Pass(), 'user string, amount long', parallelism=1)\n")
    run = session_cli("run", "lossy_job.py", "--output", str(tmp_path / "out"), "--checkpoint",
                      str(tmp_path / "ck"), "--available-now", "--no-view", cwd=tmp_path)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "main output all dead letters: 3 dead letter(s) against 0 main row(s)" in run.stderr
    assert "field 'amount' expects bigint, got float" in run.stderr
    assert "every output of the run was a dead letter (3)" in run.stderr
