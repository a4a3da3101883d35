"""Model serving and feature flags over Kafka (a real broker, real local Spark): the events and
the model versions / flag and config updates are topics, produced step by step while the query
runs; every event is answered once, by the version the harness gives it for the same steps."""

from __future__ import annotations

import pytest

from sparkcast.apps import get_app
from sparkcast.apps.base import ARTIFACTS, BROADCAST, EVENTS, Drop, steps, write_drop
from sparkcast.apps.wiring import build
from sparkcast.sources import kafka_topic
from sparkcast.spark import read_output
from tests.apps.conftest import simulate
from tests.sources.test_kafka_topic import topic_name

pytestmark = pytest.mark.spark

#: the app, its generator's sizes, the event id and the fields that say which version answered;
#: three steps: the first versions, the update, and (models) the rejected version after it
CASES = {
    "models": (dict(files=3, per_file=30, n_products=40), "event_id",
               ("model_version", "product_version", "user_version")),
    "flags": (dict(files=3, per_file=30), "request_id",
              ("flags", "variant", "recommendations", "config_version")),
}


def _broadcast_key(row: dict) -> str:
    return str(row.get("model") or row.get("name") or row["kind"])


def _run_over_kafka(spark, broker, app, drops: list[Drop], root) -> dict:
    events, updates = topic_name(f"{app.name}-events"), topic_name(f"{app.name}-updates")
    broker.create_topic(events, partitions=3)
    broker.create_topic(updates, config={"cleanup.policy": "compact"})
    result = build(app, spark, root / EVENTS, root / BROADCAST, artifacts=root / ARTIFACTS,
                   parallelism=2,
                   rules_df=kafka_topic(spark, broker.bootstrap, updates, app.broadcast_schema),
                   events_df=kafka_topic(spark, broker.bootstrap, events, app.events_schema))
    out = str(root / "output")
    query = result.write_stream(out, str(root / "checkpoint"),
                                trigger={"processingTime": "500 milliseconds"})
    try:
        for group in steps(drops):  # each step's updates, then its events, while it runs
            for drop in group:
                if drop.folder == ARTIFACTS:
                    write_drop(root, drop)
            broker.produce(updates, [(_broadcast_key(r), r) for d in group
                                     if d.folder == BROADCAST for r in d.rows])
            broker.produce(events, [(None, r) for d in group if d.folder == EVENTS
                                    for r in d.rows])
            query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    return {name: read_output(spark, out, name).collect() for name in app.output_names()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_updates_produced_while_events_flow_answer_each_event_as_the_harness(
        spark, kafka_broker, tmp_path, name):
    app = get_app(name)
    sizes, event_id, version_fields = CASES[name]
    module = __import__(app.make_function.__module__, fromlist=["generate"])
    drops = module.generate(7, **sizes)
    spark_out = _run_over_kafka(spark, kafka_broker, app, drops, tmp_path / "spark")

    harness = simulate(app, drops, tmp_path / "harness", output_schema=app.output_schema)
    fields = [f.strip().split()[0] for f in app.output_schema.split(",")]
    expected = {}
    for value in harness.output():  # process_batch's rows come as dicts
        record = value if isinstance(value, dict) else dict(zip(fields, value, strict=True))
        expected[record[event_id]] = tuple(record[f] for f in version_fields)
    answered = [row[event_id] for row in spark_out["main"]]
    assert len(answered) == len(set(answered)) == sum(
        len(d.rows) for d in drops if d.folder == EVENTS)  # each event once
    assert {row[event_id]: tuple(row[f] for f in version_fields)
            for row in spark_out["main"]} == expected
    assert len({row[version_fields[0]] for row in spark_out["main"]}) >= 2  # switched mid-run
    rejected = next(t for t in app.side_outputs if t.tag_id.startswith("rejected"))
    assert len(spark_out[rejected.tag_id]) == len(harness.side_output(rejected)) >= 1
    assert spark_out["dead_letters"] == []
