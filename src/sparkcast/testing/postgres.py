"""A throwaway PostgreSQL cluster, and PostgreSQL's JDBC driver, for the demo and the tests.

``PostgresCluster`` runs ``initdb`` in a temporary folder, starts the server with ``pg_ctl`` on
a free loopback port (as the ``postgres`` user when we are root: ``initdb`` refuses root),
creates a database, and on exit stops the server and removes the folder. Nothing outside the
folder is touched, so any number of clusters can run side by side.

``python -m sparkcast.testing.postgres install`` (run by ``make install``) installs what is
missing through apt-get: Debian's ``postgresql`` (``initdb``, ``pg_ctl``) and
``libpostgresql-jdbc-java`` (the JDBC jar Spark's ``jdbc`` writes need).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from sparkcast.errors import DatabaseError, MissingDependencyError
from sparkcast.testing.ports import free_port

#: Debian's packages: the server (initdb, pg_ctl) and the JDBC driver
SERVER_PACKAGE = "postgresql"
JDBC_PACKAGE = "libpostgresql-jdbc-java"
_SUPERUSER = "sparkcast"
_RUN_AS = "postgres"  # the system user that owns the cluster when we are root


def postgres_bin() -> Path:
    """The folder of PostgreSQL's server programs: 15 first (what Debian 12 ships), else the
    newest under /usr/lib/postgresql, else ``initdb`` on PATH."""
    found = ["/usr/lib/postgresql/15/bin",
             *sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)]
    on_path = shutil.which("initdb")
    if on_path:
        found.append(str(Path(on_path).resolve().parent))
    for folder in found:
        if os.access(Path(folder, "initdb"), os.X_OK) and os.access(Path(folder, "pg_ctl"),
                                                                     os.X_OK):
            return Path(folder)
    raise MissingDependencyError(
        "PostgreSQL's initdb and pg_ctl were not found (looked in /usr/lib/postgresql/*/bin "
        f"and PATH). Install them: `python -m sparkcast.testing.postgres install` (apt-get "
        f"install -y {SERVER_PACKAGE}), or `make install`.")


def _version(folder: str) -> int:
    name = Path(folder).parent.name
    return int(name) if name.isdigit() else 0


def jdbc_jar() -> Path:
    """The PostgreSQL JDBC driver's jar, as installed by Debian's libpostgresql-jdbc-java."""
    for candidate in [*_dpkg_jars(), Path("/usr/share/java/postgresql.jar")]:
        if candidate.is_file():
            return candidate
    raise MissingDependencyError(
        "PostgreSQL's JDBC driver jar was not found. Install it: `python -m "
        f"sparkcast.testing.postgres install` (apt-get install -y {JDBC_PACKAGE}), or "
        "`make install`.")


def _dpkg_jars() -> list[Path]:
    try:
        listed = subprocess.run(["dpkg", "-L", JDBC_PACKAGE], capture_output=True, text=True,
                                timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [Path(line) for line in listed.stdout.splitlines() if line.endswith(".jar")]


def missing_packages() -> list[str]:
    """The Debian packages whose programs or jar are not found."""
    missing = []
    for package, find in ((SERVER_PACKAGE, postgres_bin), (JDBC_PACKAGE, jdbc_jar)):
        try:
            find()
        except MissingDependencyError:
            missing.append(package)
    return missing


def install(packages: list[str] | None = None) -> list[str]:
    """Install the missing packages with apt-get (through sudo when we are not root); returns
    what it installed. A machine without apt-get gets the error that names the packages."""
    needed = missing_packages() if packages is None else packages
    if not needed:
        return []
    apt = shutil.which("apt-get")
    if apt is None:
        raise MissingDependencyError(
            f"{', '.join(needed)} missing and there is no apt-get here: install PostgreSQL "
            "(initdb, pg_ctl) and its JDBC driver with the system's package manager.")
    sudo: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise MissingDependencyError(
                f"{', '.join(needed)} missing; installing needs root: "
                f"sudo apt-get install -y {' '.join(needed)}")
        sudo = ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = [*sudo, apt, "install", "-y", "-q", "--no-install-recommends", *needed]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # a fresh machine's package lists may be empty: update once
        subprocess.run([*sudo, apt, "update", "-q"], env=env, capture_output=True)
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise MissingDependencyError(
            f"`{' '.join(command)}` failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return needed


@dataclass
class PostgresDatabase:
    """Where one database is and how to reach it: ``conninfo`` for psycopg
    (``sparkcast.sources.postgres_table``), ``jdbc_url`` and ``jdbc_properties`` for Spark's
    JDBC writes, and small helpers for tests and the demo."""

    host: str = "127.0.0.1"
    port: int = 0
    database: str = "sparkcast"
    user: str = _SUPERUSER

    @property
    def conninfo(self) -> str:
        return (f"host={self.host} port={self.port} dbname={self.database} user={self.user} "
                "connect_timeout=10")

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    @property
    def jdbc_properties(self) -> dict[str, str]:
        return {"user": self.user, "driver": "org.postgresql.Driver"}

    def connect(self, database: str | None = None, **kwargs: Any) -> Any:
        """A psycopg connection (autocommit unless told otherwise)."""
        try:
            import psycopg
        except ImportError as missing:
            raise MissingDependencyError(
                "PostgreSQL's Python driver is not installed: pip install 'sparkcast[postgres]'"
            ) from missing
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(host=self.host, port=self.port, user=self.user,
                               dbname=database or self.database, **kwargs)

    def execute(self, sql: str, params: Any = None, *, database: str | None = None) -> None:
        """Run one statement in its own autocommitted connection."""
        with self.connect(database) as connection:
            connection.execute(sql, params)

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.connect() as connection:
            return list(connection.execute(sql, params).fetchall())


class PostgresCluster(PostgresDatabase):
    """A PostgreSQL server of our own in a temporary folder, on 127.0.0.1, trusting local
    connections (it lives only as long as the ``with`` block, and listens on loopback only);
    it is also its first database, ``database``."""

    def __init__(self, database: str = "sparkcast") -> None:
        super().__init__(database=database)
        self.folder: Path | None = None
        self._bin = postgres_bin()
        self._running = False

    def create_database(self, name: str) -> PostgresDatabase:
        """A new, empty database on this server (one per test keeps tests apart)."""
        self.execute(f'CREATE DATABASE "{name}"', database="postgres")
        return PostgresDatabase(self.host, self.port, name, self.user)

    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="sparkcast-pg-"))
        try:
            if os.geteuid() == 0:
                shutil.chown(self.folder, user=_RUN_AS, group=_RUN_AS)
            self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust",
                      "-E", "UTF8", "--locale=C", "--no-sync")
            self._start_server()
            self.create_database(self.database)
        except BaseException:
            self.stop()
            raise

    @property
    def data(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    def _start_server(self, attempts: int = 5) -> None:
        for attempt in range(attempts):
            self.port = free_port()
            options = (f"-c listen_addresses={self.host} -p {self.port} "
                       f"-c unix_socket_directories={self.folder} -c fsync=off "
                       "-c full_page_writes=off -c synchronous_commit=off")
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                          "-w", "-t", "60", "start")
                self._running = True
                return
            except DatabaseError:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.2)

    @property
    def log(self) -> Path:
        assert self.folder is not None
        return self.folder / "server.log"

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove the folder; safe to call twice."""
        if self._running:
            self._running = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            except DatabaseError:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop",
                          check=False)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        command = [str(self._bin / program), *args]
        if os.geteuid() == 0:
            command = _as_user(_RUN_AS, command)
        done = subprocess.run(command, capture_output=True, text=True, timeout=180,
                              cwd=self.folder)
        if check and done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            raise DatabaseError(
                f"{program} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}"
                + (f"\nserver log:\n{tail}" if tail else ""))


def _as_user(user: str, command: list[str]) -> list[str]:
    """Run ``command`` as ``user`` (we are root): runuser, else su."""
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", user, "--", *command]
    return ["su", user, "-s", "/bin/sh", "-c", shlex.join(command)]


def _main(argv: list[str]) -> int:
    """``install``: install what is missing; ``check``: say what is missing."""
    if argv[:1] == ["install"]:
        try:
            installed = install()
        except MissingDependencyError as error:  # the demo and tests say it again, clearly
            print(f"warning: PostgreSQL not installed: {error}", file=sys.stderr)
            return 0
        print(f"installed {' '.join(installed)}" if installed
              else f"PostgreSQL {postgres_bin()} and {jdbc_jar()} found")
        return 0
    if argv[:1] == ["check"]:
        missing = missing_packages()
        print("missing: " + " ".join(missing) if missing else "PostgreSQL and JDBC jar found")
        return 1 if missing else 0
    print("usage: python -m sparkcast.testing.postgres install|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))

