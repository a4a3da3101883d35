"""The connectors a session gets (``sparkcast.spark.launch.packages``): where no ``.jars``
folder is found, nothing resolved at start but what the job declares (and Delta), Kafka and
Avro allowed at their first use, coordinates matching the running PySpark; nothing when the
user chose jars or turned it off; and the one-line error of a failed resolution. No Spark
session here: the deployment test (``tests/deploy/test_pip_install.py``) starts one from an
installed wheel."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest

from sparkcast.errors import MissingDependencyError
from sparkcast.jvm import JARS_VARIABLE
from sparkcast.spark.launch.jars import DELTA_SETTINGS
from sparkcast.spark.launch.packages import (
    DEFAULT,
    ON_USE,
    PACKAGES_VARIABLE,
    chosen,
    coordinates,
    on_use,
    resolution_error,
    scala_version,
    spark_defaults,
    with_connectors,
)

ROOT = Path(__file__).resolve().parent.parent
KAFKA = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
AVRO = "org.apache.spark:spark-avro_2.13:4.2.0"


def pom_dependencies() -> set[str]:
    """``group:artifact:version`` of each dependency ``make install`` resolves for Spark."""
    text = (ROOT / "jvm" / "spark" / "pom.xml").read_text()
    return {":".join(found) for found in re.findall(
        r"<groupId>(.+?)</groupId>\s*<artifactId>(.+?)</artifactId>\s*<version>(.+?)</version>",
        text)}


@pytest.fixture
def pip_installed(tmp_path, monkeypatch):
    """As a pip-installed sparkcast: no ``.jars`` folder, no variable, no spark-defaults."""
    monkeypatch.setenv(JARS_VARIABLE, str(tmp_path / "no-jars"))
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    monkeypatch.delenv(PACKAGES_VARIABLE, raising=False)
    return tmp_path


@pytest.mark.parametrize(("value", "names"), [(None, DEFAULT), ("", DEFAULT), ("off", ()),
                                              ("OFF", ()), ("kafka", ("kafka",)),
                                              (" kafka, delta,kafka ", ("kafka", "delta"))])
def test_the_variable_chooses_the_connectors(value, names, monkeypatch):
    if value is None:
        monkeypatch.delenv(PACKAGES_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(PACKAGES_VARIABLE, value)
    assert chosen() == names


def test_an_unknown_connector_is_refused_with_the_choices():
    with pytest.raises(MissingDependencyError, match=r"SPARKCAST_PACKAGES='kafak' names kafak: "
                                                     r"give any of kafka,avro,delta, or off"):
        chosen("kafak")


def test_the_coordinates_are_the_ones_make_install_resolves_for_this_pyspark():
    """The test environment's PySpark and jvm/spark/pom.xml name the same artifacts."""
    added = coordinates(("kafka", "avro", "delta"), pyspark.__version__, scala_version())
    assert set(added) <= pom_dependencies()
    assert added[:2] == [KAFKA, AVRO]


def test_delta_follows_the_spark_minor_and_is_refused_where_none_is_known():
    assert coordinates(("delta",), "4.0.1", "2.13") == ["io.delta:delta-spark_2.13:4.0.0"]
    assert coordinates(("delta",), "4.2.1", "2.13") == ["io.delta:delta-spark_4.2_2.13:4.4.0"]
    with pytest.raises(MissingDependencyError, match=r"no Delta release for Spark 4\.3\.0 .*"
                                                     r"leave delta out of SPARKCAST_PACKAGES"):
        coordinates(("kafka", "delta"), "4.3.0", "2.13")


def test_the_scala_suffix_comes_from_the_scala_library_jar(tmp_path):
    shipped = [j.name for j in (Path(pyspark.__file__).parent / "jars").glob("scala-library-*")]
    assert [scala_version()] == [".".join(n.split("-")[2].split(".")[:2]) for n in shipped]
    (tmp_path / "scala-library-2.12.18.jar").touch()
    assert scala_version(tmp_path) == "2.12"
    with pytest.raises(MissingDependencyError, match="no scala-library jar in"):
        scala_version(tmp_path / "empty")


def test_a_pip_installed_sparkcast_resolves_nothing_at_start(pip_installed):
    """A job that reads files only starts with no resolution: Kafka and Avro are allowed at
    their first use (``ON_USE``), not named in ``spark.jars.packages``."""
    settings, added = with_connectors({"spark.sql.shuffle.partitions": "2"})
    assert added == []
    assert settings == {"spark.sql.shuffle.partitions": "2", ON_USE: "kafka,avro"}
    assert on_use(settings) == ("kafka", "avro")


def test_what_the_job_declares_is_resolved_at_start(pip_installed):
    settings, added = with_connectors({}, declared=["kafka"])
    assert added == [KAFKA]
    assert settings == {ON_USE: "avro", "spark.jars.packages": KAFKA}


def test_delta_adds_its_coordinates_and_settings_at_start(pip_installed, monkeypatch):
    """Delta's SQL extension is a static setting: it cannot join a running session."""
    monkeypatch.setenv(PACKAGES_VARIABLE, "kafka,delta")
    settings, added = with_connectors({})
    assert added == ["io.delta:delta-spark_4.2_2.13:4.4.0"]
    assert settings == {**DELTA_SETTINGS, ON_USE: "kafka", "spark.jars.packages": added[0]}


@pytest.mark.parametrize("given", [{"spark.jars": "/opt/my.jar"},
                                   {"spark.jars.packages": "com.example:thing:1.0"}])
def test_jars_the_user_chose_are_left_alone(pip_installed, given):
    assert with_connectors(given) == (given, [])


def test_jars_in_spark_defaults_are_left_alone(pip_installed):
    conf = pip_installed / "no-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("# mine\nspark.jars.packages   com.example:x:1\n"
                                              "spark.jars.ivy=/opt/ivy\n")
    assert spark_defaults() == {"spark.jars.packages": "com.example:x:1",
                                "spark.jars.ivy": "/opt/ivy"}
    assert with_connectors({}) == ({}, [])


def test_off_adds_nothing(pip_installed, monkeypatch):
    monkeypatch.setenv(PACKAGES_VARIABLE, "off")
    assert with_connectors({"a": "b"}) == ({"a": "b"}, [])


def test_a_clone_with_its_jars_folder_is_left_alone(pip_installed, monkeypatch):
    """Its tests and demos add the folder's jars themselves (``with_spark_jars``)."""
    folder = pip_installed / "jars"
    (folder / "spark").mkdir(parents=True)
    (folder / "spark" / "spark-sql-kafka-0-10_2.13-4.2.0.jar").touch()
    monkeypatch.setenv(JARS_VARIABLE, str(folder))
    assert with_connectors({"a": "b"}) == ({"a": "b"}, [])


def test_the_resolution_error_names_what_ivy_did_not_find(tmp_path):
    cache = tmp_path / "ivy" / "cache" / "org.apache.spark" / "spark-sql-kafka-0-10_2.13"
    cache.mkdir(parents=True)
    (cache / "ivy-4.2.0.xml").touch()  # Ivy resolved the connector, not spark-avro
    error = resolution_error([KAFKA, AVRO], {"spark.jars.ivy": str(tmp_path / "ivy")})
    message = str(error)
    assert message.startswith(f"Spark could not resolve {AVRO} (the connectors sparkcast adds "
                              f"for PySpark {pyspark.__version__};")
    assert KAFKA not in message and "\n" not in message
    assert message.endswith("or set SPARKCAST_PACKAGES=off if the job reads no Kafka, Avro or "
                            "Delta")
    nothing = resolution_error([KAFKA, AVRO], {"spark.jars.ivy": str(tmp_path / "none")})
    assert f"resolve {KAFKA}, {AVRO} (" in str(nothing)


def test_a_first_use_that_fails_is_one_line_without_the_start_advice(tmp_path):
    message = str(resolution_error([KAFKA], {"spark.jars.ivy": str(tmp_path)}, first_use=True))
    assert message.startswith(f"Spark could not resolve {KAFKA} (the connectors sparkcast adds")
    assert message.endswith("install a PySpark whose connectors are published or give the jars "
                            "yourself in spark.jars or spark.jars.packages")
    assert "\n" not in message and "SPARKCAST_PACKAGES" not in message
