"""Servers for the deployment tests, on loopback addresses only: a local S3-compatible endpoint
(moto) and one Spark standalone cluster, up from the first test that uses it to the last."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkcast.testing.ports import free_port


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """``host:port`` of a moto S3 server with a bucket ``sparkcast``; always stopped."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                               endpoint_override=f"127.0.0.1:{port}", scheme="http",
                               allow_bucket_creation=True)
        fs.create_dir("sparkcast")
        yield f"127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_store(s3_endpoint: str, request: pytest.FixtureRequest) -> str:
    """A fresh ``s3://`` blob store URI on the moto server (credentials and endpoint inline, so
    Spark's Python workers need no environment)."""
    return (f"s3://testing:testing@sparkcast/{request.node.name}"
            f"?endpoint_override={s3_endpoint}&scheme=http&region=us-east-1")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One standalone cluster (``tests.deploy.cluster``: a master and two one-core workers) for
    every test that submits to one; starting it costs some 15-30 s here. An application's
    executors end with it, so each test's driver finds the workers free. Its users are in several
    files, so no scope ends with them: ``pytest_runtest_teardown`` stops it after the last one
    (else its three JVMs idle to the end of the run); the end of the run stops it again."""
    from tests.deploy.cluster import Cluster

    running = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the cluster once no later test of the run uses it."""
    if "cluster" not in getattr(item, "fixturenames", ()):
        return
    items = item.session.items
    if not any("cluster" in getattr(i, "fixturenames", ()) for i in items[items.index(item) + 1:]):
        item.funcargs["cluster"].stop()  # type: ignore[attr-defined]
