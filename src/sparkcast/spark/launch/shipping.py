"""Shipping sparkcast and its dependencies to executors that do not share the driver's Python.

The route that works for both of sparkcast's engines (checked on a standalone cluster,
tests/deploy/test_cluster.py): a packed virtualenv (``venv-pack`` / ``conda-pack``) given to
Spark as an archive that each executor unpacks as ``./environment``, with
``spark.pyspark.python=./environment/bin/python``. ``--py-files`` alone is not enough:
``transformWithStateInPandas`` also starts a Python runner on the *driver*, with the executors'
Python path, and that runner sees neither py-files nor an archive. In client mode (the only one
for Python on a standalone master) the same environment must therefore also be unpacked in the
driver's working directory; in cluster mode (YARN, Kubernetes) the driver's container unpacks
the archive like an executor.
"""

from __future__ import annotations

from pathlib import Path

from sparkcast.errors import PipelineError

ENVIRONMENT = "environment"
PYTHON = f"./{ENVIRONMENT}/bin/python"


def packed_environment_conf(archive: str, driver_dir: Path | None = None) -> dict[str, str]:
    """Spark settings that ship ``archive`` (a packed env) to the executors, for a driver that
    runs in ``driver_dir`` (default: the working directory)."""
    here = Path.cwd() if driver_dir is None else driver_dir
    if not (here / ENVIRONMENT / "bin" / "python").exists():
        raise PipelineError(
            f"the driver also runs {PYTHON} (transformWithStateInPandas starts a Python runner "
            f"on the driver), and {here / ENVIRONMENT} does not hold it: unpack the same "
            f"archive there first: mkdir {ENVIRONMENT} && tar -xzf {archive} -C {ENVIRONMENT}")
    return {"spark.archives": f"{archive}#{ENVIRONMENT}", "spark.pyspark.python": PYTHON,
            "spark.executorEnv.PYSPARK_PYTHON": PYTHON}
