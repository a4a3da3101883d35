"""The package as users get it: an sdist and a wheel built the way a release is (``python -m
build``, an isolated build environment) without a warning, LICENSE in both, the metadata PyPI
shows, and the wheel installed into a fresh virtualenv runs the harness and the CLI.

The virtualenv takes sparkcast from the wheel alone (no source tree on its path); its
dependencies come from this environment through a ``.pth`` line, since installing PySpark
anew costs minutes (3.5 min measured). ``make compat`` does the full
``pip install "<wheel>[spark]"`` from PyPI, per supported PySpark. The build is the run's one
(``release_build``, tests/conftest.py), whose wheel tests/deploy/test_pip_install.py installs
too."""

from __future__ import annotations

import email
import re
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import sparkcast
from tests.conftest import without_source_tree

ROOT = Path(__file__).resolve().parent.parent


def test_the_build_prints_no_warning(release_build):
    _, _, log = release_build
    warned = [line for line in log.splitlines() if re.search(r"warn|deprecat", line, re.I)
              and "pypi-more" not in line and "/opt/pypi" not in line]  # this machine's pip
    assert warned == []


def test_both_carry_the_license_and_the_version(release_build):
    wheel, sdist, _ = release_build
    version = sparkcast.__version__
    assert wheel.name == f"sparkcast-{version}-py3-none-any.whl"
    assert sdist.name == f"sparkcast-{version}.tar.gz"
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert archive.read(f"sparkcast-{version}.dist-info/licenses/LICENSE").decode() == \
            license_text
        metadata = archive.read(f"sparkcast-{version}.dist-info/METADATA").decode()
        assert "sparkcast/spark/launch/log4j2.properties" in names
        assert "sparkcast/py.typed" in names
    with tarfile.open(sdist) as archive:
        top = f"sparkcast-{version}"
        assert archive.extractfile(f"{top}/LICENSE").read().decode() == license_text
        assert f"{top}/CHANGELOG.md" in archive.getnames()
    _check_metadata(email.message_from_string(metadata), version)


def _check_metadata(meta: email.message.Message, version: str) -> None:
    assert meta["Version"] == version
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["License-File"] == "LICENSE"
    assert "Programming Language :: Python :: 3.11" in meta.get_all("Classifier")
    assert any(url.startswith("Changelog, ") for url in meta.get_all("Project-URL"))
    requires = meta.get_all("Requires-Dist")
    assert "pyspark<4.4,>=4.0; extra == \"spark\"" in requires, requires
    description = meta.get_payload()
    assert description.startswith("# sparkcast")
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", description)
    assert relative == [], f"links that break on PyPI: {relative}"


def test_the_installed_wheel_runs_the_harness_and_the_cli(release_build, tmp_path):
    wheel, _, _ = release_build
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True
                          ).stdout.strip()
    # this environment's dependencies, but not its sparkcast (an editable install's finder is
    # a .pth file, which a path added this way does not run)
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, env=without_source_tree(), timeout=120, capture_output=True)
    run = subprocess.run([python, "-c", HARNESS_CHECK], capture_output=True, text=True,
                         env=without_source_tree(), cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [sparkcast.__version__, str(Path(site, "sparkcast")), "ok"]
    cli = subprocess.run([bin_dir / "sparkcast", *_version_flag(bin_dir)], capture_output=True,
                         text=True, env=without_source_tree(), cwd=tmp_path, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert (sparkcast.__version__ in cli.stdout) if "--version" in cli.args else (
        "usage: sparkcast" in cli.stdout)


def _version_flag(bin_dir: Path) -> list[str]:
    """``--version`` once the CLI has it; until then ``--help`` shows the command runs."""
    helped = subprocess.run([bin_dir / "sparkcast", "--help"], capture_output=True, text=True,
                            env=without_source_tree(), timeout=120)
    return ["--version"] if "--version" in helped.stdout else ["--help"]


HARNESS_CHECK = textwrap.dedent(
    """
    import os
    import sparkcast
    from sparkcast import MapStateDescriptor, Row, BroadcastProcessFunction
    from sparkcast.testing import BroadcastHarness

    LABELS = MapStateDescriptor("labels", str, str)

    class Label(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(LABELS).put(value.key, value.label)

        def process_element(self, value, ctx):
            yield value.id, ctx.get_broadcast_state(LABELS).get(value.key)

    h = BroadcastHarness(Label(), [LABELS])
    h.open()
    h.process_broadcast_element(Row(key="a", label="A"))
    h.process_element(Row(id=1, key="a"))
    assert h.output() == [(1, "A")], h.output()
    print(sparkcast.__version__, os.path.dirname(sparkcast.__file__), "ok")
    """
)
