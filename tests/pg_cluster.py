"""A throwaway PostgreSQL cluster for tests: ``initdb``/``pg_ctl`` on a loopback port in a
temporary folder (as the ``postgres`` user when running as root), stopped at the end.

(A stand-in until the project's own cluster module lands; same shape: ``url``, ``jar``, ``sql``.)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

JAR = Path("/usr/share/java/postgresql.jar")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass(frozen=True)
class Cluster:
    port: int
    folder: Path

    @property
    def url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres"

    def psql(self, sql: str) -> str:
        out = subprocess.run(
            _as_postgres(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                          "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql]),
            capture_output=True, text=True, check=True)
        return out.stdout


@contextmanager
def cluster() -> Iterator[Cluster]:
    folder = Path(tempfile.mkdtemp(prefix="sparkcast-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    port = _free_port()
    subprocess.run(_as_postgres(["initdb", "-D", str(data), "-U", "postgres", "-A", "trust",
                                 "--no-sync"]), check=True, capture_output=True)
    subprocess.run(_as_postgres(["pg_ctl", "-D", str(data), "-l", str(folder / "log"), "-w",
                                 "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
                                       " -c fsync=off", "start"]),
                   check=True, capture_output=True)
    try:
        yield Cluster(port, folder)
    finally:
        subprocess.run(_as_postgres(["pg_ctl", "-D", str(data), "-m", "immediate", "-w",
                                     "stop"]), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
