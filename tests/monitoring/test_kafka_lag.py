"""Kafka lag on a REAL broker and real local Spark: a job that starts far behind its topic
(``maxOffsetsPerTrigger`` small against the records already there) catches up over several
micro-batches, and its offsets behind the latest are above 0 while it is behind and reach 0,
in the progress log's records, the Prometheus text, ``sparkcast view`` and ``sparkcast report``."""

from __future__ import annotations

import time
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.cli import main
from sparkcast.monitoring.prometheus import exposition
from sparkcast.monitoring.view import Style, screen
from sparkcast.monitoring.watch import monitor_of, records_from_folder
from sparkcast.sources import kafka_topic
from sparkcast.spark import Stream

pytestmark = pytest.mark.spark

LIMITS = MapStateDescriptor("limits", str, int)
RECORDS, PARTITIONS, PER_TRIGGER = 120, 2, 60  # two micro-batches: behind, caught up


class Tag(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value.id, ctx.get_broadcast_state(LIMITS).get("limit")

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put(value.name, value.limit)


@pytest.fixture(scope="module")
def caught_up(spark, kafka_broker, tmp_path_factory):
    """The records of an ``availableNow`` run of ``RECORDS`` records, ``PER_TRIGGER`` a
    micro-batch, from its progress log (complete: the listener writes it a moment later)."""
    base = tmp_path_factory.mktemp("lag")
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=PARTITIONS)
    kafka_broker.produce(topic, [(f"u{i % 10}", {"id": i}) for i in range(RECORDS)])
    events = kafka_topic(spark, kafka_broker.bootstrap, topic, "id long",
                         options={"maxOffsetsPerTrigger": str(PER_TRIGGER)})
    limits = spark.createDataFrame([("limit", 5)], "name string, limit long")
    result = Stream(events).connect(Stream(limits).broadcast(LIMITS)).process(
        Tag(), "id long, limit long", parallelism=2)
    query = result.write_stream(str(base / "out"), str(base / "ckpt"), query_name="lag_q",
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    batches = len([p for p in query.recentProgress if p["numInputRows"]])
    deadline = time.time() + 30
    while len(records := records_from_folder(base / "out")) < batches:
        assert time.time() < deadline, f"{len(records)} of {batches} records logged"
        time.sleep(0.2)
    return base / "out", topic, sorted(records, key=lambda r: r["batch"])


def _lags(records, topic):
    (description,) = {s["description"] for r in records for s in r["sources"]}
    assert topic in description
    return description, [next(s["offsets_behind"] for s in r["sources"]) for r in records]


def test_the_lag_is_above_zero_while_behind_and_reaches_zero(caught_up):
    _, topic, records = caught_up
    _, lags = _lags(records, topic)
    assert len(lags) >= RECORDS // PER_TRIGGER
    maxes = [lag["max"] for lag in lags]
    assert maxes[0] > 0 and lags[0]["min"] > 0 and lags[0]["min"] <= lags[0]["avg"] <= maxes[0]
    assert maxes == sorted(maxes, reverse=True)  # caught up step by step
    assert lags[-1] == {"min": 0, "max": 0, "avg": 0.0}
    # (twice RECORDS today: the engine in place scans a source with a _corrupt_record column
    # twice, and Spark counts its rows twice; CHANGELOG)
    assert sum(r["input_rows"] for r in records) >= RECORDS


def _gauges(monitor, source):
    text = exposition(monitor).decode()
    return {s.name.rsplit("_", 1)[1]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name.startswith("sparkcast_source_offsets_behind_latest_")
            and s.labels == {"query": "lag_q", "source": source}}


def test_prometheus_serves_the_lag_of_the_last_micro_batch(caught_up):
    _, topic, records = caught_up
    source, lags = _lags(records, topic)
    # what the endpoint answered after the first micro-batch, and after the last
    assert _gauges(monitor_of(records[:1]), source) == lags[0] and lags[0]["max"] > 0
    assert _gauges(monitor_of(records), source) == {"min": 0, "max": 0, "avg": 0}


def test_the_view_shows_the_lag_falling_to_zero(caught_up, capsys):
    out, topic, records = caught_up
    source, lags = _lags(records, topic)
    first = "\n".join(screen(monitor_of(records[:1]), style=Style(tty=False)))
    assert f"offsets behind latest max {lags[0]['max']} (min {lags[0]['min']}" in first
    assert source in first
    assert main(["view", "--output", str(out), "--once"]) == 0
    shown = capsys.readouterr().out
    lines = [line for line in shown.splitlines() if line.startswith("sparkcast: query lag_q")]
    assert len(lines) == len(records)  # one line per micro-batch, each with its lag
    assert f"{source} max {lags[0]['max']} (min" in lines[0]
    assert f"{source} max 0 (min 0, avg 0.0) behind latest" in lines[-1]
    assert "offsets behind latest max 0 (min 0, avg 0.0)" in shown


def test_the_report_charts_the_lag(caught_up, tmp_path):
    out, topic, records = caught_up
    source, _ = _lags(records, topic)
    page = tmp_path / "run.html"
    assert main(["report", "--output", str(out), "--html", str(page)]) == 0
    text = page.read_text()
    assert "offsets behind latest per source (max over its partitions)" in text
    assert text.count("<svg") == 5  # the four charts of any run, and the lag's
    assert f"{source} offsets behind latest after the last micro-batch" in text
    assert "max 0 (min 0, avg 0.0)" in text
