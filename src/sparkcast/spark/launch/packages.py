"""The JVM connectors a pip-installed sparkcast's session gets, by Maven coordinates, and when.

Spark's Kafka source, Avro and Delta are not among PySpark's own jars. A clone after
``make install`` has them in ``.jars/spark``, which its tests and demos add themselves
(``jars.with_spark_jars``): ``session()`` leaves a clone's sessions as they are. A
pip-installed sparkcast has no such folder, so the connectors come by coordinates that match
the running PySpark, resolved by Spark with Ivy (the local Maven repository ``~/.m2`` first,
then Maven Central; once per machine, then from Ivy's cache):

* ``kafka``: ``org.apache.spark:spark-sql-kafka-0-10_<scala>:<PySpark's version>``;
* ``avro``: ``org.apache.spark:spark-avro_<scala>:<PySpark's version>``;
* ``delta``: Delta's artifact for the running Spark's minor release (``DELTA``: Delta publishes
  one per Spark minor), with its SQL extension and catalog.

A session resolves only what its job uses. Kafka and Avro join a running session at their first
use (``kafka_topic``, an Avro sink: ``connectors.require``), so a job that reads files only
starts with no resolution and needs no network: ``with_connectors`` records in the session's
settings (``ON_USE``) which connectors a first use may add. Delta cannot join a running session
(its SQL extension is a static setting), so it is resolved when the JVM starts, as is whatever
``session(packages=...)`` declares; a Spark whose connector Maven does not serve (PySpark 4.3.0
on 2026-11-28), or no network on a first run, then fails the session's start, and a first use
fails at that use: ``resolution_error`` builds the one line for both.

``<scala>`` is the Scala of PySpark's own ``scala-library`` jar (``2.13``). The variable
``SPARKCAST_PACKAGES`` chooses what may be added: ``kafka,avro`` when unset, any of
``kafka,avro,delta``, or ``off``. Nothing is added when the session's settings or
``spark-defaults.conf`` name ``spark.jars`` or ``spark.jars.packages`` (the user chose the
jars), nor under ``spark-submit`` (give ``--packages``), nor to a Spark Connect session (the
server owns its jars).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from sparkcast.errors import MissingDependencyError
from sparkcast.jvm import has_jars
from sparkcast.spark.launch.jars import DELTA_SETTINGS

#: the environment variable that chooses the connectors added by coordinates
PACKAGES_VARIABLE = "SPARKCAST_PACKAGES"
CONNECTORS = ("kafka", "avro", "delta")
DEFAULT = ("kafka", "avro")
OFF = "off"
#: the connectors that can join a running session (Delta's SQL extension is a static setting)
AT_FIRST_USE = ("kafka", "avro")
#: the session setting in which ``session()`` names the connectors a first use may add
ON_USE = "spark.sparkcast.connectorsOnUse"
#: Spark's minor release -> Delta's coordinates ({scala}: PySpark's Scala), as Maven Central
#: served them on 2026-11-28 (none for Spark 4.3: no delta-spark_4.3_2.13 there)
DELTA = {(4, 0): "io.delta:delta-spark_{scala}:4.0.0",
         (4, 1): "io.delta:delta-spark_4.1_{scala}:4.4.0",
         (4, 2): "io.delta:delta-spark_4.2_{scala}:4.4.0"}
_USER_JARS = ("spark.jars", "spark.jars.packages")
_SCALA = re.compile(r"^scala-library-(\d+\.\d+)\.[\w.]+\.jar$")


def chosen(value: str | None = None) -> tuple[str, ...]:
    """The connectors ``SPARKCAST_PACKAGES`` (or ``value``) names; refused with the choices."""
    text = os.environ.get(PACKAGES_VARIABLE) if value is None else value
    if text is None or not text.strip():
        return DEFAULT
    if text.strip().lower() == OFF:
        return ()
    names = tuple(dict.fromkeys(n.strip().lower() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in CONNECTORS]
    if unknown:
        raise MissingDependencyError(
            f"{PACKAGES_VARIABLE}={text!r} names {', '.join(unknown)}: give any of "
            f"{','.join(CONNECTORS)}, or {OFF}")
    return names


def coordinates(names: tuple[str, ...], spark_version: str, scala: str) -> list[str]:
    """The Maven coordinates of ``names`` for a PySpark of ``spark_version`` on ``scala``."""
    found = {"kafka": f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark_version}",
             "avro": f"org.apache.spark:spark-avro_{scala}:{spark_version}"}
    if "delta" in names:
        major, minor_text = spark_version.split(".")[:2]
        minor = (int(major), int(minor_text))
        if minor not in DELTA:
            known = ", ".join(f"{a}.{b}" for a, b in DELTA)
            raise MissingDependencyError(
                f"sparkcast knows no Delta release for Spark {spark_version} (it knows Spark "
                f"{known}): give Delta's coordinates yourself in spark.jars.packages, or leave "
                f"delta out of {PACKAGES_VARIABLE}")
        found["delta"] = DELTA[minor].format(scala=scala)
    return [found[name] for name in names]


def scala_version(jars: Path | None = None) -> str:
    """The Scala (``2.13``) of PySpark's ``scala-library`` jar in ``jars`` (default: PySpark's)."""
    folder = jars or _pyspark_jars()
    for jar in folder.glob("scala-library-*.jar"):
        match = _SCALA.match(jar.name)
        if match:
            return match.group(1)
    raise MissingDependencyError(f"no scala-library jar in {folder}: reinstall PySpark "
                                 "(pip install --force-reinstall pyspark)")


def with_connectors(settings: Mapping[str, str], declared: Iterable[str] = ()
                    ) -> tuple[dict[str, str], list[str]]:
    """``settings`` for a session about to start (see the module's docstring), and the
    coordinates added to its ``spark.jars.packages`` (empty when none were): those of
    ``declared`` and of Delta when chosen; the other chosen connectors go to ``ON_USE``."""
    names = chosen()
    start = chosen(",".join(declared)) if declared else ()
    if _user_jars(settings) or has_jars("spark"):
        return dict(settings), []
    start = (*start, *(n for n in names if n not in AT_FIRST_USE and n not in start))
    later = [n for n in names if n in AT_FIRST_USE and n not in start]
    found = {**settings, **({ON_USE: ",".join(later)} if later else {})}
    if not start:
        return found, []
    import pyspark

    added = coordinates(start, pyspark.__version__, scala_version())
    delta = DELTA_SETTINGS if "delta" in start else {}
    return {**delta, **found, "spark.jars.packages": ",".join(added)}, added


def on_use(settings: Mapping[str, str]) -> tuple[str, ...]:
    """The connectors a first use may add to a session started with ``settings``."""
    return tuple(n for n in settings.get(ON_USE, "").split(",") if n)


def resolution_error(added: list[str], settings: Mapping[str, str], *,
                     first_use: bool = False) -> MissingDependencyError:
    """The one-line error of a resolution of ``added`` that failed when the JVM started (it
    exited) or at a first use (``first_use``): the coordinates Ivy cached no descriptor for
    (all of them when it cannot tell), and the fixes."""
    cache = Path(_setting(settings, "spark.jars.ivy")
                 or Path.home() / ".ivy2.5.2").expanduser() / "cache"
    missing = [c for c in added if not _in_ivy_cache(cache, c)] or added
    import pyspark

    last = ("" if first_use else
            f", or set {PACKAGES_VARIABLE}={OFF} if the job reads no Kafka, Avro or Delta")
    return MissingDependencyError(
        f"Spark could not resolve {', '.join(missing)} (the connectors sparkcast adds for "
        f"PySpark {pyspark.__version__}; Maven Central may serve none for this Spark, or it "
        f"was not reachable): install a PySpark whose connectors are published"
        f"{' or' if first_use else ','} give the jars yourself in spark.jars or "
        f"spark.jars.packages{last}")


def _in_ivy_cache(cache: Path, coordinate: str) -> bool:
    """Whether Ivy resolved ``coordinate``: it caches ``ivy-<version>.xml`` for each module."""
    group, artifact, version = coordinate.split(":")
    return (cache / group / artifact / f"ivy-{version}.xml").is_file()


def _user_jars(settings: Mapping[str, str]) -> bool:
    return any(_setting(settings, key) for key in _USER_JARS)


def _setting(settings: Mapping[str, str], key: str) -> str | None:
    """``key`` from ``settings``, else from the ``spark-defaults.conf`` Spark's launcher reads."""
    return settings.get(key) or spark_defaults().get(key)


def spark_defaults() -> dict[str, str]:
    """The settings in ``$SPARK_CONF_DIR/spark-defaults.conf`` (else ``$SPARK_HOME/conf``, else
    PySpark's ``conf``), which Spark's launcher reads: ``key value`` or ``key=value`` lines."""
    folder = os.environ.get("SPARK_CONF_DIR") or (
        Path(os.environ["SPARK_HOME"]) / "conf" if "SPARK_HOME" in os.environ
        else _pyspark_jars().parent / "conf")
    path = Path(folder) / "spark-defaults.conf"
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = re.split(r"\s*[=:\s]\s*", line.strip(), maxsplit=1)
        if parts[0] and not parts[0].startswith(("#", "!")):
            found[parts[0]] = parts[1] if len(parts) > 1 else ""
    return found


def _pyspark_jars() -> Path:
    """The running Spark's jars: ``$SPARK_HOME/jars`` (set under ``spark-submit``, whose
    PySpark is imported from a zip), else the installed PySpark's."""
    if "SPARK_HOME" in os.environ:
        return Path(os.environ["SPARK_HOME"]) / "jars"
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
