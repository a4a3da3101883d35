"""``sparkcast run PATH.py[:NAME]`` (cli/jobs.py) and ``sparkcast init`` (cli/skeleton.py).

Loading, zipping and the skeleton's own harness test run without Spark. On Spark, each run is
the command in a process of its own (a fresh JVM, as a user starts it): the example job file
returning a ``ProcessResult``, whose output must equal the harness's and whose stderr must hold
no WARN line; and a job inside a package (relative imports) that starts its own query and whose
function imports a module of its package only on the executors, which works only if the package
was shipped.
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
from sparkcast.cli.skeleton import FUNCTIONS, JOB, TEST
from sparkcast.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "enrich_job.py"


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
    assert main(["init", "shop", "--directory", str(tmp_path)]) == 2  # never overwrites


def test_the_getting_started_page_shows_the_skeletons_code():
    """The page runs its blocks; this keeps them the code ``sparkcast init`` writes."""
    page = (ROOT / "docs" / "getting-started.md").read_text()
    values = {"name": "shop", "upper": "SHOP"}
    for template, start in ((FUNCTIONS, "from __future__"), (TEST, "def test_"),
                            (JOB, "def pipeline")):
        text = template.format(**values)
        assert text[text.index(start):].strip() in page, start


def expected_enrichment() -> tuple[Counter, Counter]:
    """The example's outputs on the harness: every broadcast row of the (one) micro-batch
    first, then each user's clicks in event-time order."""
    from examples import enrich_job as job
    from sparkcast.testing import KeyedBroadcastHarness

    harness = KeyedBroadcastHarness(job.EnrichClicks(), lambda v: v["user"], [job.CATALOGUE])
    harness.open()
    products, clicks = job.sample()
    for product in products:
        harness.process_broadcast_element(product, timestamp=product["ts"])
    for click in sorted(clicks, key=lambda c: c["ts"]):
        harness.process_element(click, timestamp=click["ts"])
    return (Counter(tuple(v) for v in harness.output()),
            Counter(tuple(v) for v in harness.side_output(job.UNKNOWN)))


@pytest.mark.spark
def test_the_example_job_runs_to_completion_and_reads_back_right(tmp_path, spark):
    from sparkcast.spark import read_output

    run = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "run", str(EXAMPLE), "--output", "out",
         "--checkpoint", "ck", "--available-now", "--no-view"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "outputs in out" in run.stdout
    # a plain run starts quietly: no JVM WARN lines (loopback address, native library, AQE)
    assert not [line for line in run.stderr.splitlines() if "WARN" in line], run.stderr
    main_rows, unknown = expected_enrichment()
    out = str(tmp_path / "out")
    assert Counter(tuple(r) for r in read_output(spark, out).collect()) == main_rows
    assert Counter(tuple(r) for r in read_output(spark, out, "unknown").collect()) == unknown
    assert sum(main_rows.values()) == 50 and sum(unknown.values()) == 10


@pytest.mark.spark
def test_a_package_job_that_starts_its_own_query_runs_with_its_package_shipped(tmp_path, spark):
    from sparkcast.spark import read_output
    from tests.conftest import write_json_lines

    job = write_package(tmp_path / "project")
    data = tmp_path / "data"
    write_json_lines(data / "events", "e.json", [{"id": i, "k": f"k{i % 3}"} for i in range(9)])
    write_json_lines(data / "names", "n.json", [{"k": "k0", "name": "zero"},
                                                {"k": "k1", "name": "one"}])
    elsewhere = tmp_path / "elsewhere"  # neither the cwd nor PYTHONPATH holds the package
    elsewhere.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "run", f"{job}:own_query", "--no-view"],
        cwd=elsewhere, capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "SHOP_DATA": str(data)})
    assert run.returncode == 0, run.stderr[-3000:]
    rows = sorted(tuple(r) for r in read_output(spark, str(data / "out")).collect())
    names = {0: "zero", 1: "one", 2: "?"}
    assert rows == [(i, names[i % 3] + "-shipped") for i in range(9)]


@pytest.mark.spark
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
def test_a_run_whose_every_output_is_a_dead_letter_says_why_and_exits_non_zero(tmp_path):
    """Each amount has a fraction, and the main output's column is a bigint: no row is written,
    so the run ends with the first reason and exit status 1, not 0."""
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
    run = subprocess.run(
        [sys.executable, "-m", "sparkcast.cli", "run", "lossy_job.py", "--output", "out",
         "--checkpoint", "ck", "--available-now", "--no-view"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "main output all dead letters: 3 dead letter(s) against 0 main row(s)" in run.stderr
    assert "field 'amount' expects bigint, got float" in run.stderr
    assert "every output of the run was a dead letter (3)" in run.stderr
