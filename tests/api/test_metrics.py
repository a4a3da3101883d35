"""PyFlink's ``MetricGroup`` API and the snapshot the harness and Spark read."""

from sparkcast.api import Counter, Distribution, Histogram, Meter, MetricGroup


def test_counter():
    counter = Counter()
    counter.inc()
    counter.inc(5)
    counter.dec(2)
    assert counter.get_count() == 4


def test_meter_counts_events():
    meter = Meter(time_span_in_seconds=30)
    meter.mark_event()
    meter.mark_event(4)
    assert meter.get_count() == 5 and meter.time_span_in_seconds == 30


def test_distribution():
    distribution = Distribution()
    assert distribution.snapshot() == {"count": 0, "sum": 0.0, "min": None, "max": None,
                                       "mean": None}
    for value in (3, 1, 8):
        distribution.update(value)
    assert distribution.snapshot() == {"count": 3, "sum": 12.0, "min": 1, "max": 8, "mean": 4.0}


def test_histogram_quantiles_over_a_bounded_window():
    histogram = Histogram(max_values=100)
    assert histogram.quantile(0.5) is None
    for value in range(1, 201):
        histogram.update(value)
    snapshot = histogram.snapshot()
    assert snapshot["count"] == 200 and snapshot["min"] == 1  # totals count everything
    assert snapshot["p50"] == 151 and snapshot["p99"] == 200  # quantiles: newest 100 only


def test_metric_group_registers_once_per_name():
    group = MetricGroup()
    assert group.counter("seen") is group.counter("seen")
    assert group.meter("rate") is group.meter("rate")
    assert group.distribution("d") is group.distribution("d")
    assert group.histogram("h") is group.histogram("h")


def test_metric_group_snapshot_reads_every_kind_under_dotted_names():
    group = MetricGroup()
    group.counter("seen").inc(2)
    model = group.add_group("model", "v2")
    model.counter("predictions").inc()
    model.add_group("latency").histogram("ms").update(5)
    group.meter("rate").mark_event(3)
    size = [7]
    group.gauge("size", lambda: size[0])
    size[0] = 9
    group.distribution("score").update(0.5)
    snapshot = group.snapshot()
    assert list(snapshot) == sorted(snapshot)
    assert snapshot["seen"] == 2
    assert snapshot["model.v2.predictions"] == 1
    assert snapshot["model.v2.latency.ms"]["p50"] == 5
    assert snapshot["rate"] == 3
    assert snapshot["size"] == 9  # gauges are read when the snapshot is taken
    assert snapshot["score"]["mean"] == 0.5


def test_child_groups_share_the_registry():
    group = MetricGroup()
    group.add_group("a").counter("x").inc()
    assert group.add_group("a").counter("x").get_count() == 1
