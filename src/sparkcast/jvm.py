"""Where the JVM parts are: the jars ``make install`` resolves with Maven into ``.jars/<part>``.

``jvm/<part>/pom.xml`` names them (``spark``: Spark's Kafka connector, its Avro functions and
Delta; ``kafka-broker``: Kafka's own broker); the Makefile exports the folder as
``SPARKCAST_JARS``. Spark-free, so the throwaway broker (``sparkcast.testing.kafka``) finds its
jars without PySpark.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sparkcast.errors import MissingDependencyError

#: the environment variable that names the folder (the Makefile exports it)
JARS_VARIABLE = "SPARKCAST_JARS"
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[\w.\-]*\.jar$")


def jars_folder(part: str) -> Path:
    """``.jars/<part>`` of ``$SPARKCAST_JARS``, else of this checkout; refused with the fix when
    it holds no jar."""
    folder = _folder(part)
    if not has_jars(part):
        raise MissingDependencyError(
            f"no jars in {folder}: run `make install` (it resolves jvm/{part}/pom.xml with "
            f"Maven into .jars/{part}), or set {JARS_VARIABLE} to a folder that holds "
            f"{part}/*.jar")
    return folder


def has_jars(part: str) -> bool:
    """Whether ``.jars/<part>`` (as ``jars_folder`` finds it) holds a jar: a clone after
    ``make install``, not a pip-installed sparkcast."""
    return any(_folder(part).glob("*.jar"))


def _folder(part: str) -> Path:
    base = os.environ.get(JARS_VARIABLE)
    return Path(base) / part if base else Path(__file__).parents[2] / ".jars" / part


def artifact(jar: str | Path) -> str:
    """A jar's artifact name without its version (``kafka-clients-3.9.2.jar``: kafka-clients)."""
    name = Path(jar).name
    match = _VERSIONED.match(name)
    return match.group("artifact") if match else name.removesuffix(".jar")
