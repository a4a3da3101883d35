"""One attempt of one Kafka part, in a process of its own: another Python worker, as Spark would
run a retry, a speculative copy or a re-attempted stage's task elsewhere.

``python -m tests.spark.kafka_attempt '<json>'`` writes ``rows`` values as part ``part`` of
micro-batch ``batch`` through the sink's own ``PartWriter.write_once`` and prints what it
returned (``{"written": n}``, ``{"written": null}`` when the part was in, or ``{"error": ...}``).
``hold``: a folder; the attempt, once its rows are produced and before its marker, creates
``held`` there and waits until ``go`` appears, so a test can let another attempt run between.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pyarrow as pa

from sparkcast.errors import SinkError
from sparkcast.spark.outputs import kafka_client
from sparkcast.spark.outputs import kafka_transactions as tx


def main(args: dict) -> dict:
    settings = kafka_client.librdkafka_settings({"bootstrap.servers": args["bootstrap"]})
    writer = tx.PartWriter(settings, args["topic"], args["markers"], args["prefix"], "main",
                           args["batch"], args["parts"], frozenset(),
                           marker_partitions=args.get("marker_partitions", 1))
    if args.get("hold"):
        _hold_before_the_marker(Path(args["hold"]))
    values = [f"{args['batch']}-{i}" for i in range(args["rows"])]
    rows = pa.RecordBatch.from_pydict({"key": [None] * len(values), "value": values})
    try:
        return {"written": writer.write_once(args["part"], [rows])}
    except SinkError as error:
        return {"error": str(error)}


def _hold_before_the_marker(folder: Path) -> None:
    produce = tx._produce

    def held(*args, **kwargs):
        (folder / "held").touch()
        while not (folder / "go").exists():
            time.sleep(0.05)
        produce(*args, **kwargs)

    tx._produce = held


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
