"""Launching Spark for sparkcast: the session builder and the connectors it adds (Kafka, Avro,
Delta: a clone's ``.jars/`` in ``jars.py``, Maven coordinates for a pip install in
``packages.py``), the check of the workers' Python, Java, quiet logs and shipping the Python
environment to a cluster."""
