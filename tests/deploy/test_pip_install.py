"""sparkcast as ``pip install 'sparkcast[kafka]'`` gives it, with no clone and no ``make
install``: the run's release wheel (``release_build``, tests/conftest.py: ``python -m build``
from a copy of the source, which tests/test_release.py checks), installed into a fresh
virtualenv with its ``spark`` and ``kafka`` extras, runs a job file that reads files only
(``pip_files_job.py``) with no Maven repository, an empty Ivy cache and a HOME of its own: its
session starts with no resolution and prints no Ivy line. And it runs a Kafka job file
(``pip_kafka_job.py``) with ``sparkcast run`` against a real broker: ``kafka_topic`` brings
Spark's Kafka connector by coordinates at its first use, with Ivy's report off the console,
and the job reads its topics and writes its totals.

Nothing is downloaded while it runs: pip installs from the wheelhouse ``make install`` builds
from pip's cache (``--no-index``), and Spark resolves the coordinates from the local Maven
repository that ``make install`` filled, through an Ivy settings file with that one resolver,
given by ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` (the user's place for such settings,
not sparkcast's code). A connector the resolver refuses is one line naming the coordinates, at
``kafka_topic`` (or at the start, for a connector the job declares), and ``spark-submit``
without ``--packages`` is told which to give when ``kafka_topic`` runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("pip_kafka_job.py")
FILES_JOB = Path(__file__).with_name("pip_files_job.py")
#: what Ivy prints of a resolution (its report; Spark's lines around it)
IVY_LINES = (":: loading settings", ":: resolving dependencies", ":: retrieving",
             ":: resolution report", "Ivy Default Cache", "The jars for the packages stored in",
             "added as a dependency", "found org.apache")
KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="local-m2"/>
  <resolvers>
    <ibiblio name="local-m2" m2compatible="true" root="{root}"/>
  </resolvers>
</ivysettings>
"""


def wheelhouse() -> Path:
    """``make install``'s wheelhouse; fails (never skips) with the fix when it is missing."""
    folder = Path(os.environ.get("SPARKCAST_WHEELHOUSE", ROOT / ".wheelhouse"))
    if not any(folder.glob("pyspark-*.whl")):
        pytest.fail(f"no wheelhouse at {folder}: run `make install` (it builds one from pip's "
                    "cache), or set SPARKCAST_WHEELHOUSE", pytrace=False)
    return folder


def run(command: list[str], timeout: float, **options: object) -> str:
    """``command``'s output; it must succeed. A user's environment unless ``env`` is given."""
    options.setdefault("env", without_sources())
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          **options)  # type: ignore[call-overload]
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{command[:3]} failed:\n{output[-4000:]}"
    return output


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, release_build: tuple[Path, Path, str]
         ) -> Path:
    """A fresh virtualenv with the wheel and its ``spark`` and ``kafka`` extras, offline."""
    wheel, _, _ = release_build
    env, wheels = tmp_path_factory.mktemp("pip-install") / "env", wheelhouse()
    run([sys.executable, "-m", "venv", "--without-pip", str(env)], 120)
    # this environment's pip installs into the new one (faster than its own ensurepip), without
    # byte-compiling PySpark's thousands of files (half the install's time)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python",
           str(env / "bin" / "python")]
    offline = ["--no-index", "--find-links", str(wheels)]
    run([*pip, "install", "--no-compile", *offline, f"{wheel}[spark,kafka]", "pyspark==4.2.0"],
        600)
    return env


def user_environment(venv: Path, base: Path, ivy_root: str) -> dict[str, str]:
    """The environment of a user's shell with ``venv`` activated: no source tree, no ``.jars``
    folder; the Ivy settings (the local Maven repository only) in ``spark-defaults.conf``."""
    conf = base / "spark-conf"
    conf.mkdir()
    (conf / "ivysettings.xml").write_text(IVY_SETTINGS.format(root=ivy_root))
    (conf / "spark-defaults.conf").write_text(
        f"spark.jars.ivySettings {conf / 'ivysettings.xml'}\nspark.jars.ivy {base / 'ivy'}\n")
    shell = without_sources()
    return {**shell, "SPARK_CONF_DIR": str(conf), "VIRTUAL_ENV": str(venv),
            "PATH": os.pathsep.join([str(venv / "bin"), shell.get("PATH", "")])}


def without_sources() -> dict[str, str]:
    """This environment without the source tree on the path (pip would take it for an
    installed sparkcast), the ``.jars`` folder, or this session's Spark and Python choices."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "SPARKCAST_JARS", "SPARKCAST_PACKAGES", "SPARK_HOME",
            "SPARK_CONF_DIR", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    return {k: v for k, v in os.environ.items() if k not in drop}


def ivy_output(output: str) -> list[str]:
    return [line for line in output.splitlines() if any(i in line for i in IVY_LINES)]


def test_a_file_only_job_starts_with_no_resolution_and_no_network(venv, tmp_path):
    """Nothing to resolve from: an empty Maven repository as Ivy's only resolver, an empty
    Ivy cache, a HOME of its own (no ``~/.m2``, no ``~/.ivy2.5.2``)."""
    empty, home = tmp_path / "m2", tmp_path / "home"
    empty.mkdir()
    home.mkdir()
    for name, rows in (("orders", [{"order_id": "o1", "product": "tea", "quantity": 2},
                                   {"order_id": "o2", "product": "juice", "quantity": 1}]),
                       ("prices", [{"product": "tea", "price": 2.0}])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {**user_environment(venv, tmp_path, empty.as_uri()), "HOME": str(home),
           **{f"JOB_{what.upper()}": str(tmp_path / what)
              for what in ("orders", "prices", "output", "checkpoint", "mark")}}
    job = tmp_path / "job.py"
    shutil.copy(FILES_JOB, job)

    started = time.time()
    output = run([str(venv / "bin" / "sparkcast"), "run", str(job), "--no-view"], 600,
                 cwd=tmp_path, env=env)

    assert ivy_output(output) == [], output[-3000:]
    assert not (tmp_path / "ivy").exists()  # Spark resolved nothing
    assert list((tmp_path / "output").rglob("*.parquet")), output[-3000:]
    # the time to the session is a figure to read, not a test's verdict on a shared machine
    # (docs/deploy.md gives it measured on a quiet one)
    print(f"file-only job from the wheel: {float((tmp_path / 'mark').read_text()) - started:.1f} "
          "s to its session")


def test_a_kafka_job_runs_from_the_installed_wheel(venv, kafka_broker, tmp_path):
    topics = {what: f"pip-{what}-{uuid.uuid4().hex[:8]}" for what in ("orders", "prices",
                                                                       "totals")}
    for topic in topics.values():
        kafka_broker.create_topic(topic)
    prices = {"tea": 2.0, "cake": 3.5}
    orders = [(f"o{i}", product, i + 1) for i, product in enumerate(["tea", "cake", "juice"])]
    kafka_broker.produce(topics["prices"], [(p, {"product": p, "price": v})
                                            for p, v in prices.items()])
    kafka_broker.produce(topics["orders"], [(o, {"order_id": o, "product": p, "quantity": q})
                                            for o, p, q in orders])
    env = {**user_environment(venv, tmp_path, (Path.home() / ".m2" / "repository").as_uri()),
           "JOB_BOOTSTRAP": kafka_broker.bootstrap, "JOB_CHECKPOINT": str(tmp_path / "ck"),
           **{f"JOB_{what.upper()}": topic for what, topic in topics.items()}}
    job = tmp_path / "job.py"
    shutil.copy(JOB, job)

    output = run([str(venv / "bin" / "sparkcast"), "run", str(job), "--no-view"], 600,
                 cwd=tmp_path, env=env)

    totals = {r.key: json.loads(r.value).get("total")  # a null is left out of the JSON
              for r in kafka_broker.read(topics["totals"])}
    assert totals == {o: (prices[p] * q if p in prices else None) for o, p, q in orders}, output
    resolved = sorted(p.name for p in (tmp_path / "ivy" / "jars").glob("*.jar"))
    assert "org.apache.spark_spark-sql-kafka-0-10_2.13-4.2.0.jar" in resolved
    assert not [j for j in resolved if "avro" in j or "hadoop" in j]  # unused; PySpark's own
    assert ivy_output(output) == [], output[-3000:]


def test_a_connector_spark_cannot_resolve_is_one_line_at_its_first_use(venv, tmp_path):
    """An empty Maven repository stands for a Spark whose connector Maven Central does not
    serve (PySpark 4.3.0): the session starts, and ``kafka_topic`` fails with one line naming
    the coordinates and the fix; Ivy's report, held while it resolved, is printed above it."""
    empty = tmp_path / "m2"
    empty.mkdir()
    code = ("from sparkcast.spark import session; from sparkcast.sources import kafka_topic\n"
            "spark = session(); print('session started', flush=True)\n"
            "kafka_topic(spark, '127.0.0.1:9', 'orders', 'a string')")
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env=user_environment(venv, tmp_path, empty.as_uri()))
    assert done.returncode != 0 and "session started" in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sparkcast.errors.MissingDependencyError: Spark could not resolve "
                           f"{KAFKA} (the connectors sparkcast adds"), last
    assert ivy_output(done.stderr), done.stderr[-3000:]  # the report, since it failed


def test_a_connector_the_job_declares_is_resolved_at_start(venv, tmp_path):
    """``session(packages=...)`` resolves as the JVM starts: refused there, in one line."""
    empty = tmp_path / "m2"
    empty.mkdir()
    code = "from sparkcast.spark import session; session(packages=['kafka', 'avro'])"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env=user_environment(venv, tmp_path, empty.as_uri()))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("sparkcast.errors.MissingDependencyError: Spark could not resolve "
                           f"{KAFKA}, org.apache.spark:spark-avro_2.13:4.2.0 "), last
    assert "SPARKCAST_PACKAGES=off" in last


def test_spark_submit_without_packages_is_told_the_coordinates(venv, tmp_path):
    """Under ``spark-submit`` the JVM runs before the job's Python: ``session()`` cannot add the
    connector, and ``kafka_topic`` says which ``--packages`` to give."""
    job = tmp_path / "read.py"
    job.write_text("from sparkcast.sources import kafka_topic\n"
                   "from sparkcast.spark import session\n"
                   "kafka_topic(session(), '127.0.0.1:9', 'orders', 'a string')\n")
    done = subprocess.run([str(venv / "bin" / "spark-submit"), "--master", "local[1]", str(job)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=user_environment(venv, tmp_path, (tmp_path / "m2").as_uri()))
    assert done.returncode != 0
    output = done.stdout + done.stderr  # spark-submit passes Python's stderr to its stdout
    raised = [line for line in output.splitlines() if line.startswith("sparkcast.errors.")]
    assert raised == [  # Spark's own INFO lines of its shutdown follow the traceback
        "sparkcast.errors.MissingDependencyError: this Spark session has no Kafka connector: "
        f"start it with sparkcast.spark.session(), which adds {KAFKA} at its first use (unless "
        f"SPARKCAST_PACKAGES leaves kafka out), or give spark.jars.packages={KAFKA} "
        f"(spark-submit: --packages {KAFKA})"], output[-3000:]
