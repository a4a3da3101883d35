"""``make compat``: the smoke job (compat/smoke.py) on the oldest and the newest PySpark of the
supported range, each installed from PyPI with sparkcast's wheel into its own virtualenv.

    python compat/run.py [--python python3] [VERSION ...]

Builds the wheel of this tree once, makes ``compat/.venv-<version>`` (kept between runs; a
changed wheel is reinstalled), runs ``pip install "<wheel>[spark]" pyspark==<version>``, checks
``sparkcast --version``, runs the smoke job and then ``sparkcast run enrich_job.py --output out
--checkpoint ck --available-now`` (examples/enrich_job.py, read back against the harness) from
outside the source tree, so the installed wheel is what runs. Prints one result line per
version and exits non-zero when any failed.
The results are recorded in docs/deploy.md ("Spark versions").
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "compat"
# the range's ends (pyproject's spark extra, spark/launch/versions.py)
VERSIONS = ("4.0.0", "4.3.0")


def clean_env() -> dict[str, str]:
    """No source tree on the path, no outer virtualenv; no connectors by coordinates (the jobs
    read files, and PySpark 4.3.0's Kafka connector is not published: its session would fail)."""
    skip = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")
    return {**{k: v for k, v in os.environ.items() if k not in skip}, "SPARKCAST_PACKAGES": "off"}


def build_wheel(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
                   check=True, env=clean_env(), stdout=subprocess.DEVNULL)
    (wheel,) = out.glob("sparkcast-*.whl")
    return wheel


def install(python: str, version: str, wheel: Path) -> Path:
    venv = HERE / f".venv-{version}"
    stamp = venv / ".installed"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return venv
    if not (venv / "bin" / "python").exists():
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([venv / "bin" / "pip", "install", "-q", "--force-reinstall", "--no-deps",
                    str(wheel)], check=True, env=clean_env())
    subprocess.run([venv / "bin" / "pip", "install", "-q", f"{wheel}[spark]",
                    f"pyspark=={version}"], check=True, env=clean_env())
    stamp.write_text(digest)
    return venv


def smoke(venv: Path, version: str) -> tuple[bool, str]:
    """(passed, the result line)."""
    cli = venv / "bin" / "sparkcast"
    helped = subprocess.run([cli, "--help"], capture_output=True, text=True, env=clean_env())
    flag = "--version" if "--version" in helped.stdout else "--help"  # before the CLI had it
    shown = subprocess.run([cli, flag], capture_output=True, text=True, env=clean_env())
    if shown.returncode != 0:
        return False, f"compat pyspark={version} FAIL sparkcast {flag}: {shown.stderr[-300:]}"
    with tempfile.TemporaryDirectory(prefix="sparkcast-compat-") as work:
        script = Path(work) / "smoke.py"
        shutil.copy(HERE / "smoke.py", script)
        done = subprocess.run([venv / "bin" / "python", str(script)], capture_output=True,
                              text=True, env=clean_env(), cwd=work)
        lines = [x for x in done.stdout.splitlines() if x.startswith("compat ")]
        if done.returncode != 0 or not lines:
            return False, (lines[-1] if lines else
                           f"compat pyspark={version} FAIL {done.stderr.strip()[-500:]}")
        passed, enriched = run_example_job(venv, Path(work))
    version_line = shown.stdout.splitlines()[0].strip()
    return passed, f"{lines[-1]}; {enriched} (sparkcast {flag}: {version_line})"


def run_example_job(venv: Path, work: Path) -> tuple[bool, str]:
    """``sparkcast run enrich_job.py --output out --checkpoint ck --available-now`` with the
    installed wheel, then its output read back against the harness (compat/enrich_check.py)."""
    for name, source in (("enrich_job.py", ROOT / "examples" / "enrich_job.py"),
                         ("enrich_check.py", HERE / "enrich_check.py")):
        shutil.copy(source, work / name)
    run = subprocess.run([venv / "bin" / "sparkcast", "run", "enrich_job.py", "--output", "out",
                          "--checkpoint", "ck", "--available-now", "--no-view"],
                         capture_output=True, text=True, env=clean_env(), cwd=work)
    if run.returncode != 0:
        return False, f"enrich_job FAIL sparkcast run: {run.stderr.strip()[-500:]}"
    check = subprocess.run([venv / "bin" / "python", "enrich_check.py"], capture_output=True,
                           text=True, env=clean_env(), cwd=work)
    lines = [x for x in check.stdout.splitlines() if x.startswith("enrich_job ")]
    if check.returncode != 0 or not lines:
        return False, lines[-1] if lines else f"enrich_job FAIL {check.stderr.strip()[-500:]}"
    return True, lines[-1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(VERSIONS))
    parser.add_argument("--python", default="python3", help="the Python of the virtualenvs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkcast-wheel-") as out:
        wheel = build_wheel(Path(out))
        venvs = {v: install(args.python, v, wheel) for v in args.versions}
    results = [smoke(venvs[v], v) for v in args.versions]
    for _, line in results:
        print(line, flush=True)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
