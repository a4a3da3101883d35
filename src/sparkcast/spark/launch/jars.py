"""The JVM jars a clone's sessions take for Kafka, Avro and Delta, from the folder ``make
install`` fills (the tests and demos add them with ``with_spark_jars``).

``make install`` resolves ``jvm/spark/pom.xml`` with Maven (Spark's Kafka connector,
spark-avro, Delta for the same Spark) into ``.jars/spark`` (``sparkcast.jvm``). Maven copies
every runtime dependency, also the ones PySpark already ships (Hadoop, Parquet, Scala, Jackson
of another version): a second copy of a class on the classpath breaks Spark, so ``spark_jars``
leaves out every artifact PySpark's own ``jars/`` folder has, whatever its version.

Without the folder (a pip-installed sparkcast), ``session()`` names the same parts by Maven
coordinates instead (``packages.py``, docs/deploy.md).
"""

from __future__ import annotations

from pathlib import Path

from sparkcast.jvm import artifact, jars_folder


def pyspark_artifacts() -> set[str]:
    """The artifacts PySpark's own ``jars/`` folder ships."""
    import pyspark

    return {artifact(jar) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def spark_jars() -> list[str]:
    """The jars for ``spark.jars``: Kafka's connector, spark-avro and Delta, without what PySpark
    ships."""
    shipped = pyspark_artifacts()
    return sorted(str(jar) for jar in jars_folder("spark").glob("*.jar")
                  if artifact(jar) not in shipped)


#: Delta's writes and reads need its SQL extension and catalog in the session
DELTA_SETTINGS = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                  "spark.sql.catalog.spark_catalog":
                      "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


def with_spark_jars(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the Kafka, Avro and Delta jars added to its ``spark.jars``, and Delta's
    settings (``conf`` wins where it sets them)."""
    jars = [j for j in conf.get("spark.jars", "").split(",") if j] + spark_jars()
    return {**DELTA_SETTINGS, **conf, "spark.jars": ",".join(jars)}
