"""A Spark standalone cluster on this machine, started from the PySpark wheel, and a packed
Python environment to ship to it.

The master and two workers (one core, 1 GiB each) are separate JVMs on loopback addresses of
their own: the master on 127.0.0.1, worker ``i`` (and its executors) on 127.0.0.``i+1``, so Spark
sees two hosts, as it must to run a speculative copy of a task (it never runs one on a host
where the task has an attempt). Every process runs in its own process group, so ``stop`` kills
the executors with their worker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

import sparkcast
from sparkcast.spark.launch.java import ensure_java
from sparkcast.testing.ports import free_port

SPARK_HOME = Path(pyspark.__file__).parent
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def spark_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "SPARK_", "PYTHONPATH"))}
    env.update(SPARK_HOME=str(SPARK_HOME), JAVA_HOME=ensure_java(), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_NO_DAEMONIZE="1")
    return env


@dataclass
class Cluster:
    root: Path
    master_url: str = ""
    processes: list[subprocess.Popen] = field(default_factory=list)

    def start(self, workers: int = 2, timeout: float = 120.0) -> None:
        port, ui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui))
        for i in range(workers):
            work, host = self.root / f"worker-{i}", f"127.0.0.{i + 1}"
            (work / "local").mkdir(parents=True)
            self._launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                         "--host", host, "--cores", "1", "--memory", "1g",
                         "--webui-port", str(free_port()), "--work-dir", str(work),
                         self.master_url, local=work / "local", host=host)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._alive_workers(ui) == workers:
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.5)
        raise RuntimeError(f"the cluster did not come up; logs in {self.root}")

    def stop(self) -> None:
        """Kill every process group of the cluster; a second call has nothing left to do."""
        for process in reversed(self.processes):
            _kill_group(process)
        self.processes.clear()

    def executor_of(self, pid: int) -> int:
        """The executor JVM that ``pid`` (a Python worker) descends from."""
        current = pid
        while current > 1:
            if EXECUTOR_CLASS in _cmdline(current):
                return current
            current = _parent(current)
        raise LookupError(f"process {pid} runs in no executor")

    def shuffle_files(self) -> list[Path]:
        """The shuffle files every executor of the cluster keeps (its block manager's)."""
        return [p for p in self.root.glob("worker-*/local/**/blockmgr-*/**/shuffle_*")
                if p.is_file()]

    def _launch(self, name: str, main_class: str, *args: str, local: Path | None = None,
                host: str = "127.0.0.1") -> None:
        """``local``: the executors' local folders (their shuffle files), inside ``root``;
        ``host``: the loopback address the process (and the executors it starts) binds."""
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed by the process exit
        env = {**spark_env(), "SPARK_LOCAL_IP": host,
               **({"SPARK_LOCAL_DIRS": str(local)} if local else {})}
        self.processes.append(subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args], env=env,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    @staticmethod
    def _alive_workers(ui: int) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
                return int(json.load(answer).get("aliveworkers", 0))
        except OSError:
            return 0


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def pack_environment(root: Path, hooks: tuple[Path, ...] = ()) -> Path:
    """``env.tar.gz``: a virtualenv with sparkcast installed, as ``venv-pack`` makes one.

    On one machine its dependencies (pandas, pyarrow, pyspark) are reached through a ``.pth``
    file into the test virtualenv rather than copied (hundreds of MB); sparkcast itself is a copy,
    so the executors import the shipped package, never the driver's. ``hooks``: test modules
    copied in and imported by every Python process of the environment (a ``.pth`` line)."""
    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = env / "lib" / version / "site-packages"
    shutil.copytree(Path(sparkcast.__file__).parent, site / "sparkcast",
                    ignore=shutil.ignore_patterns("__pycache__"))
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and
                (p / "pandas").exists())
    (site / "dependencies.pth").write_text(f"{deps}\n")
    for hook in hooks:
        shutil.copy(hook, site / hook.name)
        (site / f"{hook.stem}.pth").write_text(f"import {hook.stem}\n")
    archive = root / "env.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(env, arcname=".")
    return archive
