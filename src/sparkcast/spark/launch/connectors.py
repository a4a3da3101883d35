"""A connector joins a running classic session at its first use (``kafka_topic``, an Avro
value), so a session resolves only what its job uses (``packages.py`` says which and when).

``require`` adds what ``session()`` allowed (``packages.ON_USE``) and the session lacks, with
Spark SQL's ``ADD JAR 'ivy://group:artifact:version?transitive=true'``: Spark resolves it in
the running JVM with the session's Ivy settings (``spark.jars.ivy``, ``spark.jars.ivySettings``,
``~/.m2`` first), adds the jars to the session's class loader and to the context, and makes
that loader the calling thread's context class loader. Checked on PySpark 4.2 (local master):
``readStream.format("kafka")`` then finds the source, the stream thread started from this thread
inherits the loader, and the executors read the topic (a batch read too). Ivy's report is held
off the console (``quiet.held``) and printed only when the resolution fails; the failure is the
one line of ``packages.resolution_error``, raised at the use that needed the connector.

The transitive dependencies that PySpark ships itself (Hadoop's client, snappy, lz4, ...) are
excluded: a second copy of them only costs copying (hadoop-client-runtime is 30 MB) and can
shadow PySpark's. A Spark Connect session is left alone: its server owns the jars.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from sparkcast.spark.launch.jars import pyspark_artifacts
from sparkcast.spark.launch.packages import coordinates, on_use, resolution_error, scala_version
from sparkcast.spark.launch.quiet import held

#: a class of each connector, to tell whether the session has it
PROBES = {"kafka": "org.apache.spark.sql.kafka010.KafkaSourceProvider",
          "avro": "org.apache.spark.sql.avro.AvroFileFormat"}
#: dependencies of the connectors that PySpark's own jars folder may ship ({scala}: its Scala)
SHIPPED = ("org.apache.hadoop:hadoop-client-runtime", "org.apache.hadoop:hadoop-client-api",
           "com.google.code.findbugs:jsr305", "org.slf4j:slf4j-api",
           "org.xerial.snappy:snappy-java", "at.yawk.lz4:lz4-java", "org.lz4:lz4-java",
           "org.scala-lang.modules:scala-parallel-collections_{scala}",
           "org.apache.avro:avro", "org.apache.avro:avro-mapred", "org.tukaani:xz")


def require(spark: Any, names: Iterable[str]) -> None:
    """Give the classic session ``spark`` the connectors ``names`` that ``session()`` allowed
    and it lacks; refuse one Spark cannot resolve with one line. Any other session is left as
    it is (its use then fails with Spark's own error, which the caller words)."""
    if not hasattr(spark, "_jsparkSession"):  # Spark Connect: the server owns its jars
        return
    allowed = on_use(_conf(spark))
    wanted = [n for n in names if n in allowed and not has_connector(spark, n)]
    if not wanted:
        return
    import pyspark

    scala = scala_version()
    added = coordinates(tuple(wanted), pyspark.__version__, scala)
    failed: Exception | None = None
    with held(spark._jvm) as report:
        try:
            for coordinate in added:
                spark.sql(f"ADD JAR '{ivy_uri(coordinate, scala)}'")
        except Exception as error:  # noqa: BLE001 - Ivy's, worded below with its report
            failed = error
    if failed is not None:
        sys.stderr.writelines(report)
        raise resolution_error(added, _conf(spark), first_use=True) from failed


def has_connector(spark: Any, name: str) -> bool:
    """Whether the classic session's class loader finds ``name``'s connector; when it does, it
    becomes this thread's context class loader (where Spark looks up a data source)."""
    jvm = spark._jvm
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    try:
        jvm.java.lang.Class.forName(PROBES[name], False, loader)
    except Exception:  # noqa: BLE001 - Py4J's ClassNotFoundException: not there
        return False
    jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    return True


def ivy_uri(coordinate: str, scala: str) -> str:
    """``ADD JAR``'s URI of ``coordinate`` and its dependencies, less what PySpark ships."""
    shipped = pyspark_artifacts()
    exclude = [m.format(scala=scala) for m in SHIPPED
               if m.format(scala=scala).split(":")[1] in shipped]
    return (f"ivy://{coordinate}?transitive=true"
            + (f"&exclude={','.join(exclude)}" if exclude else ""))


def _conf(spark: Any) -> dict[str, str]:
    """The settings the session started with (its SparkConf, spark-defaults included)."""
    return dict(spark.sparkContext.getConf().getAll())
