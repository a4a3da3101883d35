"""Start the Prometheus endpoint for a session: the listener feeds it, ``monitoring`` serves it.

``session(metrics_port=...)``, ``write_stream(..., metrics_port=...)`` and the CLI's
``--metrics-port`` all come here; the names and labels are in ``monitoring/prometheus.py``.
"""

from __future__ import annotations

from typing import Any

from sparkcast.monitoring.prometheus import served_ports, start_server
from sparkcast.spark.observe.listener import listen


def serve_metrics(spark: Any, port: int = 0, host: str = "127.0.0.1") -> int:
    """Watch the session's queries and serve them on http://<host>:<port>/metrics (0 picks
    a free port; ``host="0.0.0.0"`` binds every interface); returns the port."""
    listen(spark)
    return start_server(port, host=host)


def metrics_url() -> str | None:
    """The endpoint's address (the first one started in this process), None when none runs."""
    ports = served_ports()
    return f"http://127.0.0.1:{ports[0]}/metrics" if ports else None
