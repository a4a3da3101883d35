"""Shared fixtures: one real local Spark session per test run, created only if a test needs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HAS_PYSPARK = importlib.util.find_spec("pyspark") is not None
#: the suite's cost after every run, and ``--no-jvm`` for ``make check`` (tests/suite_cost.py)
pytest_plugins = ["tests.suite_cost"]


#: settings of the tests' own session only, each measured: Delta reconstructs a table's
#: snapshot in 2 tasks, not its default 50 (12 small appends and reads: 15-39 s against
#: 120-248 s, two alternating pairs on 2 cores); the tables of the tests are a few files each
TEST_SESSION = {"spark.databricks.delta.snapshotPartitions": "2"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from sparkcast.spark import session

    spark = session(
        "local[2]",
        "sparkcast-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
              "spark.driver.memory": "2g", **TEST_SESSION, **_jars()},
    )
    yield spark
    spark.stop()


def _jars() -> dict[str, str]:
    """PostgreSQL's JDBC driver (the sink tests), Spark's Kafka connector and Delta (the Kafka
    and Delta tests; ``make install`` resolves them) on the session's classpath."""
    from sparkcast.spark.launch.jars import with_spark_jars

    jar = Path("/usr/share/java/postgresql.jar")
    return with_spark_jars({"spark.jars": str(jar)} if jar.exists() else {})


def write_json_lines(directory: Path, name: str, rows: list[Any]) -> Path:
    """Write one JSON-lines file atomically (a file source must never see it half-written).
    A row that is a ``str`` is written as is, for malformed-input tests."""
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{name}.tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        for row in rows:
            out.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    target = directory / name
    os.replace(temporary, target)
    return target


@pytest.fixture
def json_lines() -> Any:
    return write_json_lines


@pytest.fixture(params=[
    "dict",
    pytest.param("spark", marks=pytest.mark.skipif(not HAS_PYSPARK, reason="needs pyspark")),
])
def state_backend(request: pytest.FixtureRequest) -> Callable[[], Any] | None:
    """None (the harness's DictBackend) or a factory of Spark state backends."""
    if request.param == "dict":
        return None
    from tests.fake_spark_state import spark_backend_factory

    return spark_backend_factory()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """One throwaway PostgreSQL server for the run (``sparkcast.testing.postgres``); a test takes
    its own database from ``postgres``. Fails, never skips, when PostgreSQL is absent."""
    from sparkcast.errors import MissingDependencyError
    from sparkcast.testing.postgres import PostgresCluster

    try:
        cluster = PostgresCluster()
    except MissingDependencyError as error:
        pytest.fail(f"these tests need a real PostgreSQL: {error}", pytrace=False)
    with cluster:
        yield cluster


@pytest.fixture
def postgres(postgres_cluster: Any, request: pytest.FixtureRequest) -> Any:
    """A fresh database of its own for one test, on the session's PostgreSQL server."""
    import re

    name = "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    postgres_cluster.execute(f'DROP DATABASE IF EXISTS "{name}"', database="postgres")
    return postgres_cluster.create_database(name)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Any]:
    """One throwaway Kafka broker for the run (``sparkcast.testing.kafka``, KRaft, loopback);
    tests make their own topics. Fails, never skips, when Java or the broker's jars are absent."""
    from sparkcast.errors import MissingDependencyError
    from sparkcast.testing.kafka import KafkaBroker

    try:
        broker = KafkaBroker()
    except MissingDependencyError as error:
        pytest.fail(f"these tests need a real Kafka broker: {error}", pytrace=False)
    with broker:
        yield broker


ROOT = Path(__file__).resolve().parent.parent
#: what a fresh clone has not: environments, caches, build output, the benchmarks' results
NOT_IN_A_CLONE = shutil.ignore_patterns(
    ".venv*", ".git", "site", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
    ".ruff_cache", ".mypy_cache", "benchmarks", "spark-warehouse", ".sparkcast-demo")


def without_source_tree(**more: str) -> dict[str, str]:
    """This environment with no source tree on the path; byte-compiling allowed (its absence
    is a warning)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
    return {**env, **more}


@pytest.fixture(scope="session")
def release_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(wheel, sdist, build log) built once for the run the way a release is (``python -m
    build``, an isolated build environment) from a copy of the source tree, as from a fresh
    clone: tests/test_release.py checks them, tests/deploy/test_pip_install.py installs the
    wheel."""
    base = tmp_path_factory.mktemp("release")
    source, out = base / "source", base / "dist"
    shutil.copytree(ROOT, source, ignore=NOT_IN_A_CLONE)
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(source)],
                          capture_output=True, text=True, env=without_source_tree(), timeout=300)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return wheel, sdist, log
