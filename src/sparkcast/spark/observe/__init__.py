"""Watching queries on the driver: the observed counts (``observation.py``), the listener that
turns each micro-batch into a monitoring record (``listener.py``) and the Prometheus endpoint
(``prometheus.py``)."""
