"""Watching a running pipeline, on the driver: merged metrics, Prometheus, the view, the report.

Pure Python (no pyspark): everything here works from progress reports as JSON dicts (and, for
the recent rows, the files ``write_stream`` committed, read with pyarrow), so the same code serves
a query in this process, a job's metrics endpoint and a folder of saved progress.
"""

from sparkcast.monitoring.merge import merge_reports
from sparkcast.monitoring.progress import batch_record
from sparkcast.monitoring.prometheus import exposition, start_server
from sparkcast.monitoring.store import MONITOR, Monitor

__all__ = ["MONITOR", "Monitor", "batch_record", "exposition", "merge_reports", "start_server"]
