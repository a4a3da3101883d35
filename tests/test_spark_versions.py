"""The supported PySpark range, checked when a session starts: one clear error outside it.
No other PySpark is needed here: the check takes the version string (make compat runs real
ones)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from sparkcast.errors import SparkcastError, UnsupportedSparkError
from sparkcast.spark.launch.versions import SUPPORTED, check_pyspark

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("version", ["4.0.0", "4.0.5", "4.1.4", "4.2.1", "4.3.0", "4.3.1",
                                     "4.3.0.dev1", "4.0.0rc1"])
def test_a_version_in_the_range_passes(version):
    check_pyspark(version)


@pytest.mark.parametrize("version", ["3.5.3", "3.4.0", "2.4.8", "4.4.0", "5.0.0", "unknown"])
def test_a_version_outside_the_range_is_one_error_naming_the_range(version):
    with pytest.raises(UnsupportedSparkError) as refused:
        check_pyspark(version)
    message = str(refused.value)
    assert isinstance(refused.value, SparkcastError)
    assert f"PySpark {SUPPORTED}" in message and f"PySpark {version}." in message
    assert "pip install" in message


def test_the_installed_pyspark_is_in_the_range():
    check_pyspark()


def test_the_extras_state_the_same_range():
    """pyproject's spark and connect extras and the check name one range."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for extra in ("spark", "connect"):
        (pin,) = [r for r in extras[extra] if r.startswith("pyspark")]
        assert re.sub(r"^pyspark(\[\w+\])?", "", pin) == SUPPORTED, pin


def test_a_session_outside_the_range_is_refused_before_java_starts(monkeypatch):
    import pyspark

    from sparkcast.spark.launch import builder

    monkeypatch.setattr(pyspark, "__version__", "3.5.3")
    with pytest.raises(UnsupportedSparkError, match="this environment has PySpark 3.5.3"):
        builder.session("local[1]")


def test_the_spark_runtime_names_the_range_on_first_use(monkeypatch):
    """A name of ``sparkcast.spark`` is refused before its module imports what an older
    PySpark lacks (3.5 has no ``StatefulProcessor``)."""
    import pyspark

    import sparkcast.spark

    monkeypatch.setattr(pyspark, "__version__", "3.5.3")
    with pytest.raises(UnsupportedSparkError, match=re.escape(SUPPORTED)):
        sparkcast.spark.require_pyspark()


@pytest.mark.parametrize("provider, accepted", [
    ("org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider", True),
    ("com.databricks.sql.streaming.state.RocksDBStateStoreProvider", True),  # a vendor's build
    ("org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider", False),
    ("", False)])
def test_the_state_store_check_takes_a_vendor_build_of_rocksdb(provider, accepted):
    """Databricks ships its own RocksDB provider class (docs/deploy.md, "Databricks")."""
    from sparkcast.spark.environment import is_rocksdb

    assert is_rocksdb(provider) is accepted
