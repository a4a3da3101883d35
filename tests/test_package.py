"""Package hygiene: the pure-Python packages import without pyspark, and every ``__all__`` is
sorted (isort style, as ruff's RUF022 sorts it) and resolves."""

import importlib
import subprocess
import sys
import textwrap

import pytest

PURE_PACKAGES = ["sparkcast", "sparkcast.api", "sparkcast.core", "sparkcast.testing",
                 "sparkcast.monitoring"]
# the Spark runtime's pure leaf: monitoring reads written outputs by its names, without pyspark
PURE_MODULES = [*PURE_PACKAGES, "sparkcast.spark.layout"]

_BLOCK_PYSPARK = textwrap.dedent(
    """
    import importlib.abc, sys

    class BlockPyspark(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pyspark" or name.startswith("pyspark."):
                raise ImportError(f"pyspark is blocked in this test: {name}")
            return None

    sys.meta_path.insert(0, BlockPyspark())
    """
)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _BLOCK_PYSPARK + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=60)


def test_pure_packages_import_without_pyspark():
    result = _run(
        f"""
        import importlib
        for name in {PURE_MODULES!r}:
            importlib.import_module(name)
        from sparkcast import *  # a star import stays Spark-free
        from sparkcast.testing import KeyedBroadcastHarness
        assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules)
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("statement", ["from sparkcast.spark import Stream",
                                       "from sparkcast.spark import session",
                                       "import sparkcast.spark; sparkcast.spark.read_output"])
def test_the_spark_runtime_without_pyspark_names_the_extra_to_install(statement):
    result = _run(
        f"""
        try:
            {statement}
        except ModuleNotFoundError as exc:
            print(exc.name, "|", exc)
        """
    )
    assert result.returncode == 0, result.stderr
    name, message = result.stdout.strip().split(" | ")
    assert name == "pyspark"
    assert message.endswith("pip install 'sparkcast[spark]'")


def test_the_blocker_really_blocks():
    """Guards the test above: with the finder installed, importing pyspark must fail."""
    result = _run("import pyspark\n")
    assert result.returncode != 0
    assert "pyspark is blocked" in result.stderr


def _isort_key(name: str) -> tuple[int, str]:
    """SCREAMING_SNAKE_CASE first, then CamelCase, then everything else (ruff RUF022)."""
    if name.isupper():
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize("package", [*PURE_PACKAGES, "sparkcast.spark"])
def test_all_is_sorted_and_unique(package):
    names = importlib.import_module(package).__all__
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("package", [*PURE_PACKAGES, "sparkcast.spark"])
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_top_level_reexports_the_api_objects():
    import sparkcast
    import sparkcast.api

    for name in sparkcast.__all__:
        if name != "SparkcastError":
            assert getattr(sparkcast, name) is getattr(sparkcast.api, name)
    assert "Stream" not in sparkcast.__all__


def test_unknown_top_level_attribute_raises_attribute_error():
    import sparkcast

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        sparkcast.Nope  # noqa: B018
