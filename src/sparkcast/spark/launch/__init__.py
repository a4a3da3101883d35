"""Launching Spark for sparkcast: the session builder, the check of the workers' Python, Java,
quiet logs and shipping the Python environment to a cluster."""
