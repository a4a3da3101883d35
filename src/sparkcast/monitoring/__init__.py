"""Watching a running pipeline, on the driver: merged metrics, Prometheus, the view, the report.

Pure Python (no pyspark): everything here works from progress reports as JSON dicts, so the same
code serves a query in this process, a job's metrics endpoint and a folder of saved progress.
"""
