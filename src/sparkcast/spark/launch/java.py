"""Find a Java that Spark 4 runs on (17 or 21) and say clearly when there is none.

``python -m sparkcast.spark.launch.java --check`` is run by ``make install``.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

from sparkcast.errors import JavaNotFoundError

SUPPORTED = (17, 21)
_HELP = (
    "Spark 4 needs Java 17 or 21. Install one (Debian: apt-get install openjdk-17-jre-headless) "
    "or point JAVA_HOME at it."
)


def java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def find_java_home() -> str | None:
    """JAVA_HOME if it is supported, else the ``java`` on PATH, else a JDK under /usr/lib/jvm."""
    candidates = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(os.environ["JAVA_HOME"])
    on_path = shutil.which("java")
    if on_path:
        candidates.append(os.path.dirname(os.path.dirname(os.path.realpath(on_path))))
    for version in SUPPORTED:
        candidates.extend(sorted(glob.glob(f"/usr/lib/jvm/*{version}*")))
    for home in candidates:
        if java_major(os.path.join(home, "bin", "java")) in SUPPORTED:
            return home
    return None


def ensure_java() -> str:
    """Set JAVA_HOME for Spark to a supported Java; raise with the fix if there is none."""
    home = find_java_home()
    if home is None:
        raise JavaNotFoundError(_HELP)
    os.environ["JAVA_HOME"] = home
    return home


if __name__ == "__main__":
    try:
        print(f"sparkcast: Spark will use Java at {ensure_java()}")
    except JavaNotFoundError as exc:
        print(f"sparkcast: {exc}", file=sys.stderr)
        sys.exit(1)
