"""The PySpark versions sparkcast runs on, checked when a session starts.

A PySpark outside the range fails late and obscurely: 3.5 has no ``transformWithStateInPandas``
(an ``AttributeError`` deep in planning), and an untested later release may change the private
helpers and state-server behaviour the runtime relies on. So ``session()`` and ``process(...)``
check the version first and raise one :class:`UnsupportedSparkError` naming the range. The
bounds are the ``spark`` extra's in pyproject.toml; ``make compat`` runs a smoke job on the
oldest and newest release of the range (docs/deploy.md, "Spark versions").
"""

from __future__ import annotations

import re

from sparkcast.errors import UnsupportedSparkError

OLDEST = (4, 0)  # transformWithStateInPandas arrived in Spark 4.0
BEYOND = (4, 4)  # the first minor release not tested
SUPPORTED = f">={OLDEST[0]}.{OLDEST[1]},<{BEYOND[0]}.{BEYOND[1]}"


def check_pyspark(version: str | None = None) -> None:
    """Raise when ``version`` (default: the installed ``pyspark.__version__``) is outside the
    supported range; development builds (``4.3.0.dev1``) count as their release."""
    if version is None:
        import pyspark

        version = pyspark.__version__
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None or not OLDEST <= (int(found[1]), int(found[2])) < BEYOND:
        raise UnsupportedSparkError(
            f"sparkcast runs on PySpark {SUPPORTED}; this environment has PySpark {version}. "
            f"Install a supported one: pip install 'pyspark{SUPPORTED}' (or "
            "pip install 'sparkcast[spark]')")
