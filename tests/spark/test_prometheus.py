"""The Prometheus endpoint over real HTTP on 127.0.0.1, fed by a real query (``write_stream``
with ``metrics_port``), and the shipped Grafana dashboard checked against that scrape."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkcast.spark import Stream, metrics_url
from tests.spark.test_metrics import MODELS, Serve, _inputs

pytestmark = pytest.mark.spark

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "sparkcast.json"


@pytest.fixture(scope="module")
def scrape(spark, tmp_path_factory):
    """Samples of one scrape after a two-batch run: {(name, labels as sorted tuple): value}."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    events, models = _inputs(spark, tmp_path)
    result = Stream(events).key_by("user").connect(Stream(models).broadcast(MODELS)).process(
        Serve(), "id long, version long", parallelism=2,
        engine="operator")  # every subtask applies and reports each broadcast element
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "ckpt"),
                                trigger={"availableNow": True}, query_name="prom_q",
                                metrics_port=0)
    query.awaitTermination()
    assert query.exception() is None
    url = metrics_url()
    assert url is not None and url.startswith("http://127.0.0.1:")
    batches = len([p for p in query.recentProgress if p["numInputRows"]])
    deadline = time.time() + 30  # the listener runs asynchronously on Spark's listener bus
    while True:
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        samples = _samples(text)
        done = samples.get(("sparkcast_events_total", (("operator", result.observation),
                                                       ("query", "prom_q"), ("side", "main"))))
        if done == 70 or time.time() > deadline:
            break
        time.sleep(0.3)
    assert batches >= 2
    return samples, result.observation, tmp_path / "out"


def _samples(text):
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


def test_the_endpoint_serves_names_labels_and_values(scrape):
    samples, op, _ = scrape
    q = {"query": "prom_q", "operator": op}
    assert _value(samples, "sparkcast_events_total", side="main", **q) == 70
    assert _value(samples, "sparkcast_events_total", side="broadcast", **q) == 2 * 2
    assert _value(samples, "sparkcast_outputs_total", output="main", **q) == 70
    assert _value(samples, "sparkcast_broadcast_applied_total", **q) == 4
    assert _value(samples, "sparkcast_user_counter_total",
                  metric="model.version.1.predictions", **q) == 40
    assert _value(samples, "sparkcast_user_counter_total",
                  metric="model.version.2.predictions", **q) == 30
    assert _value(samples, "sparkcast_user_histogram_observations_total",
                  metric="model.score", **q) == 70
    assert _value(samples, "sparkcast_user_histogram", metric="model.score", quantile="1",
                  **q) == 9
    for subtask in ("0", "1"):
        assert _value(samples, "sparkcast_broadcast_state_entries", subtask=subtask,
                      descriptor="models", **q) == 1
        assert _value(samples, "sparkcast_held_elements", subtask=subtask, **q) == 0
    versions = {dict(labels)["version"] for name, labels in samples
                if name == "sparkcast_broadcast_version_info"
                and dict(labels)["query"] == "prom_q"}
    assert len(versions) == 1  # both subtasks hold the same version chain
    assert _value(samples, "sparkcast_batches_total", query="prom_q") >= 2
    # 5 users, each written in both batches: 5 keys per batch, bytes counted
    assert _value(samples, "sparkcast_keyed_state_written_keys_total", descriptor="per_user",
                  **q) == 10
    assert _value(samples, "sparkcast_keyed_state_written_bytes_total", descriptor="per_user",
                  **q) > 0
    assert _value(samples, "sparkcast_dead_letters_total", callback="process_element", **q) == 0


def test_the_progress_log_beside_the_output_has_one_record_per_batch(scrape):
    _, op, out = scrape
    log = out / "_sparkcast_progress.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum(r["operators"][op]["events_main"] for r in records) == 70
    assert len({r["batch"] for r in records}) == len(records)


def test_the_grafana_dashboard_only_uses_metrics_the_scrape_shows(scrape):
    samples, _, _ = scrape
    names = {name for name, _ in samples}
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"]
                   for target in panel.get("targets", [])]
    assert len(expressions) >= 8
    used = {m for expr in expressions for m in re.findall(r"\bsparkcast_[a-z_]+", expr)}
    assert used and used <= names, sorted(used - names)


def test_sparkcast_view_of_the_output_folder_and_of_the_endpoint(scrape, capsys):
    from sparkcast.cli import main

    _, op, out = scrape
    assert main(["view", "--output", str(out), "--once"]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text  # not a terminal: no ANSI codes
    lines = text.splitlines()
    assert sum(line.startswith("sparkcast: query prom_q micro-batch") for line in lines) >= 2
    assert f"operator {op}: events main 70 + broadcast 2 (counted once)" in text
    # each subtask's version is attributed to the micro-batch that applied the last update
    applied = [line for line in lines if "applied in micro-batch" in line]
    assert len(applied) == 2 and all("#1" in line for line in applied), applied
    header = next(i for i, line in enumerate(lines) if line.split() == ["batch", "id", "version"])
    assert lines[header - 1].strip() == "main" and lines[header + 1].split()[2] in {"1", "2"}
    assert main(["view", "--url", metrics_url(), "--once", "--query", "prom_q"]) == 0
    assert f"operator {op}: events main 70 + broadcast 2 (counted once)" in capsys.readouterr().out


def test_sparkcast_report_writes_one_html_with_the_pictures(scrape, tmp_path, capsys):
    from sparkcast.cli import main

    _, op, out = scrape
    page = tmp_path / "report.html"
    assert main(["report", "--output", str(out), "--html", str(page)]) == 0
    html = page.read_text()
    assert html.count("<svg") == 4  # rows/s, latency, outputs + dead letters, versions
    assert f"{op}: broadcast version per subtask" in html and "<rect" in html
    assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # self-contained
