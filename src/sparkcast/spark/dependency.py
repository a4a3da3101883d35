"""PySpark is an optional dependency: importing the Spark runtime without it says which extra
to install (Quix Streams' habit), instead of a bare ``No module named 'pyspark'``."""

from __future__ import annotations

INSTALL_HINT = "pip install 'sparkcast[spark]'"


def require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"sparkcast.spark runs on Apache Spark and needs PySpark, which is not installed "
            f"({exc}): {INSTALL_HINT}", name="pyspark") from exc
