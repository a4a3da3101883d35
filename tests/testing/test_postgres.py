"""The throwaway PostgreSQL cluster (``sparkcast.testing.postgres``): a real server, started on
loopback in a temporary folder, reachable, and gone after the ``with`` block."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from sparkcast.errors import DatabaseError, MissingDependencyError
from sparkcast.testing import postgres as pg


def test_a_cluster_serves_its_database_and_is_removed_after() -> None:
    with pg.PostgresCluster("demo") as cluster:
        folder, port = cluster.folder, cluster.port
        assert folder is not None and folder.name.startswith("sparkcast-pg-")
        if os.geteuid() == 0:
            assert folder.owner() == "postgres"  # initdb refuses root
        cluster.execute("CREATE TABLE t (k int PRIMARY KEY, v text)")
        cluster.execute("INSERT INTO t VALUES (%s, %s)", (1, "one"))
        assert cluster.query("SELECT k, v FROM t") == [(1, "one")]
        assert cluster.query("SELECT current_database()") == [("demo",)]
        assert cluster.jdbc_url == f"jdbc:postgresql://127.0.0.1:{port}/demo"
        other = cluster.create_database("other")
        assert other.query("SELECT count(*) FROM pg_tables WHERE tablename = 't'") == [(0,)]
    assert not folder.exists()
    with socket.socket() as probe, pytest.raises(OSError):
        probe.connect(("127.0.0.1", port))  # nothing listens any more
    cluster.stop()  # twice is fine


def test_the_session_fixture_gives_each_test_its_own_database(postgres) -> None:
    postgres.execute("CREATE TABLE mine (x int)")
    assert postgres.query("SELECT current_database()")[0][0].startswith("t_test_the_session")


def test_the_jdbc_jar_is_found() -> None:
    assert pg.jdbc_jar().suffix == ".jar"
    assert pg.missing_packages() == []


def test_missing_binaries_say_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(pg.shutil, "which", lambda name: None)
    monkeypatch.setattr(pg.os, "access", lambda path, mode: False)
    with pytest.raises(MissingDependencyError, match="apt-get install -y postgresql"):
        pg.postgres_bin()
    assert "postgresql" in pg.missing_packages()
    with pytest.raises(MissingDependencyError, match="no apt-get"):
        pg.install(["postgresql"])


def test_a_failing_server_start_is_a_database_error_with_the_log(tmp_path: Path) -> None:
    cluster = pg.PostgresCluster()
    cluster.folder = tmp_path  # no data folder: pg_ctl cannot start anything
    with pytest.raises(DatabaseError, match="pg_ctl failed"):
        cluster._run("pg_ctl", "-D", str(tmp_path / "missing"), "-w", "start")
