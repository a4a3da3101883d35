"""``sparkcast init NAME``: a runnable project to start from.

::

    NAME/README.md               how to test, run locally and submit to a cluster
    NAME/pyproject.toml          pytest finds the package from the project folder
    NAME/NAME/__init__.py
    NAME/NAME/functions.py       the BroadcastProcessFunction and its descriptor
    NAME/NAME/job.py             pipeline(spark) -> ProcessResult; runs under spark-submit too
    NAME/tests/test_functions.py its harness test (no Spark)
    NAME/data/orders/, prices/   sample input (JSON lines)

The job imports its function absolutely (``from NAME.functions import ...``), so the same file
runs with ``sparkcast run NAME/job.py`` (which imports it inside its package) and with
``spark-submit --py-files NAME.zip NAME/job.py`` (whose driver finds the package in the zip).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

COMMANDS = ("init",)

FUNCTIONS = '''\
"""{name}'s function: orders priced by the latest price list, a broadcast stream."""

from __future__ import annotations

from typing import Any

from sparkcast import BroadcastProcessFunction, MapStateDescriptor

PRICES = MapStateDescriptor("prices", str, float)
ORDERS_SCHEMA = "order_id string, product string, quantity long"
PRICES_SCHEMA = "product string, price double, version long"
OUTPUT_SCHEMA = "order_id string, product string, quantity long, total double"


class PriceOrders(BroadcastProcessFunction):
    """Every task keeps the same prices; an order of an unpriced product has no total."""

    def process_broadcast_element(self, value: Any, ctx: Any) -> None:
        ctx.get_broadcast_state(PRICES).put(value["product"], value["price"])

    def process_element(self, value: Any, ctx: Any) -> Any:
        price = ctx.get_broadcast_state(PRICES).get(value["product"])
        total = None if price is None else round(price * value["quantity"], 2)
        yield value["order_id"], value["product"], value["quantity"], total
'''

JOB = '''\
"""{name}'s job: ``pipeline(spark)`` returns the ProcessResult that sparkcast writes.

    sparkcast run {name}/job.py --output out --checkpoint ck --available-now
    zip -r {name}.zip {name} && spark-submit --py-files {name}.zip {name}/job.py \\\\
        --output out --checkpoint ck --available-now

Input: ``${upper}_DATA`` (default: ``data``, in the folder the job runs from: the project's),
``orders/`` and ``prices/`` as JSON lines; any Spark source works the same. Not a path from
``__file__``: under ``spark-submit --py-files`` the module is imported from the zip.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from sparkcast.spark import ProcessResult, Stream

from {name}.functions import OUTPUT_SCHEMA, ORDERS_SCHEMA, PRICES, PRICES_SCHEMA, PriceOrders

DATA = os.environ.get("{upper}_DATA", "data")
# a line that does not parse becomes a dead letter with the raw line, not a row of nulls
MALFORMED = "_corrupt_record string"


def pipeline(spark: Any) -> ProcessResult:
    orders = spark.readStream.schema(f"{{ORDERS_SCHEMA}}, {{MALFORMED}}").json(f"{{DATA}}/orders")
    prices = spark.readStream.schema(f"{{PRICES_SCHEMA}}, {{MALFORMED}}").json(f"{{DATA}}/prices")
    return (Stream(orders)
            .connect(Stream(prices).broadcast(PRICES, order_by="version"))
            .process(PriceOrders(), output_schema=OUTPUT_SCHEMA, parallelism=2))


if __name__ == "__main__":  # spark-submit: the same run, with the same options as sparkcast run
    from sparkcast.cli import main

    sys.exit(main(["run", f"{{__file__}}:pipeline", *sys.argv[1:]]))
'''

TEST = '''\
"""The function on sparkcast's harness: no Spark, milliseconds."""

from sparkcast.testing import BroadcastHarness

from {name}.functions import OUTPUT_SCHEMA, PRICES, PriceOrders


def test_an_order_takes_the_latest_price():
    harness = BroadcastHarness(PriceOrders(), [PRICES], output_schema=OUTPUT_SCHEMA)
    harness.open()
    harness.process_broadcast_element({{"product": "tea", "price": 2.0, "version": 1}})
    harness.process_element({{"order_id": "o1", "product": "tea", "quantity": 3}})
    harness.process_broadcast_element({{"product": "tea", "price": 2.5, "version": 2}})
    harness.process_element({{"order_id": "o2", "product": "tea", "quantity": 2}})
    harness.process_element({{"order_id": "o3", "product": "cake", "quantity": 1}})
    assert harness.output() == [("o1", "tea", 3, 6.0), ("o2", "tea", 2, 5.0),
                                ("o3", "cake", 1, None)]
    assert harness.broadcast_state(PRICES) == {{"tea": 2.5}}
'''

README = '''\
# {name}

A sparkcast job: orders (`data/orders/`) priced by a broadcast price list (`data/prices/`).

- `{name}/functions.py`: the function, `PriceOrders`, and its state descriptor.
- `tests/test_functions.py`: its harness test, without Spark.
- `{name}/job.py`: `pipeline(spark)`, which returns the `ProcessResult` that sparkcast writes.

Test the function (pytest: `pip install 'sparkcast[test]'`), then run the job on local Spark
until its input is processed, from this folder (the job reads `data/` here):

    python -m pytest tests
    sparkcast run {name}/job.py --output out --checkpoint ck --available-now

Read the output back (`out/_output=main/`, parquet):

    from sparkcast.spark import read_output, session
    read_output(session(), "out").show()

`sparkcast run` starts Spark with no connector to resolve: this job reads files only, so it
needs no network. A job that reads Kafka gets Spark's Kafka connector (and spark-avro for Avro
values) when `kafka_topic` first runs, from Maven Central on the first run; under
spark-submit it gives `--packages` (sparkcast's docs/deploy.md, "Kafka, Avro and Delta").

Run it again after new files arrive in `data/`: it resumes from `ck`. On a cluster, point
`{upper}_DATA`, `--output` and `--checkpoint` at shared storage (hdfs://, s3a://), pack a
Python environment with sparkcast as `env.tar.gz` (sparkcast's docs/deploy.md), unpack it here
too (the driver runs its Python as well), and either let sparkcast start the session:

    mkdir environment && tar -xzf env.tar.gz -C environment
    sparkcast run {name}/job.py --master spark://master-host:7077 --archive env.tar.gz \\
        --output hdfs:///jobs/{name}/out --checkpoint hdfs:///jobs/{name}/ck

or submit the same file with spark-submit (the package travels as `--py-files`):

    zip -r {name}.zip {name}
    spark-submit --master spark://master-host:7077 --py-files {name}.zip \\
        --archives env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        --conf spark.pyspark.driver.python=./environment/bin/python \\
        {name}/job.py --output hdfs:///jobs/{name}/out --checkpoint hdfs:///jobs/{name}/ck
'''

PYPROJECT = '''\
[project]
name = "{name}"
version = "0.1.0"
dependencies = ["sparkcast[spark]"]

[tool.pytest.ini_options]
pythonpath = ["."]
'''

ORDERS = [{"order_id": f"o{i}", "product": product, "quantity": quantity}
          for i, (product, quantity) in enumerate(
              [("tea", 2), ("cake", 1), ("tea", 5), ("coffee", 3), ("cake", 4), ("juice", 1)])]
PRICES = [{"product": "tea", "price": 2.0, "version": 1},
          {"product": "cake", "price": 3.5, "version": 1},
          {"product": "coffee", "price": 2.75, "version": 1}]


def add_commands(commands: Any) -> None:
    """The ``init`` command, under the main parser's ``commands``."""
    init = commands.add_parser(
        "init", help="write a runnable project: a function, its test, a job, a README",
        description="Write NAME/: a BroadcastProcessFunction, its harness test, a job file "
                    "(pipeline(spark)) with sample input, and a README with the sparkcast run "
                    "and spark-submit commands for the same file.")
    init.add_argument("name", metavar="NAME", help="the project, and its Python package")
    init.add_argument("--directory", type=Path, default=Path("."),
                      help="where to create NAME/ (default: here)")


def run(args: argparse.Namespace) -> int:
    root = write_project(args.directory, args.name)
    print(f"wrote {root}/ — next:\n  cd {root}\n"
          "  python -m pytest tests          # pytest: pip install 'sparkcast[test]'\n"
          f"  sparkcast run {args.name}/job.py --output out --checkpoint ck --available-now")
    return 0


def write_project(directory: Path, name: str) -> Path:
    """The project ``directory/name`` (see the module's docstring); returns its folder."""
    root = directory / name
    values = {"name": name, "upper": name.upper()}
    files = {f"{name}/__init__.py": "", f"{name}/functions.py": FUNCTIONS,
             f"{name}/job.py": JOB, "tests/test_functions.py": TEST, "README.md": README,
             "pyproject.toml": PYPROJECT,
             "data/orders/orders-0.json": _lines(ORDERS),
             "data/prices/prices-0.json": _lines(PRICES)}
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(**values) if "{" in text and not relative.startswith(
            "data/") else text, encoding="utf-8")
    return root


def _lines(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)
