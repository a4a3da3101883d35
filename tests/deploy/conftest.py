"""Servers for the deployment tests: a local S3-compatible endpoint (moto), on 127.0.0.1 only."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
