"""Launching Spark for sparkcast: the session builder and the connectors it adds (Kafka, Avro,
Delta: a clone's ``.jars/`` in ``jars.py``, Maven coordinates for a pip install in
``packages.py``, added to a running session at their first use by ``connectors.py``), the
check of the workers' Python, Java, quiet logs and shipping the Python environment to a
cluster."""
