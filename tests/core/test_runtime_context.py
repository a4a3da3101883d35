"""``RuntimeContext``: task facts, job parameters and metrics (read with harness.metrics())."""

from sparkcast import KeyedBroadcastProcessFunction, RuntimeContext


class Facts(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        rc = runtime_context
        self.is_runtime_context = isinstance(rc, RuntimeContext)
        self.facts = {
            "index": rc.get_index_of_this_subtask(),
            "parallelism": rc.get_number_of_parallel_subtasks(),
            "max_parallelism": rc.get_max_number_of_parallel_subtasks(),
            "attempt": rc.get_attempt_number(),
            "task": rc.get_task_name(),
            "task_with_subtasks": rc.get_task_name_with_subtasks(),
            "threshold": rc.get_job_parameter("threshold"),
            "missing": rc.get_job_parameter("missing", "fallback"),
        }
        metrics = rc.get_metrics_group()
        self.events = metrics.counter("events")
        self.rate = metrics.meter("rate", time_span_in_seconds=10)
        self.scores = metrics.distribution("scores")
        self.latency = metrics.add_group("model", "v1").histogram("latency_ms")
        self.rules = 0
        metrics.gauge("rules", lambda: self.rules)

    def process_broadcast_element(self, value, ctx):
        self.rules += 1

    def process_element(self, value, ctx):
        self.events.inc()
        self.rate.mark_event(2)
        self.scores.update(value)
        self.latency.update(value * 10)


def test_task_facts(keyed):
    function = Facts()
    keyed(function, parallelism=4, subtask_index=2, job_parameters={"threshold": "0.7"})
    assert function.is_runtime_context
    assert function.facts == {
        "index": 2, "parallelism": 4, "max_parallelism": 4, "attempt": 0, "task": "Facts",
        "task_with_subtasks": "Facts (3/4)", "threshold": "0.7", "missing": "fallback",
    }


def test_defaults_are_one_subtask(keyed):
    function = Facts()
    keyed(function)
    assert function.facts["task_with_subtasks"] == "Facts (1/1)"
    assert function.facts["threshold"] is None


def test_metrics_reach_the_harness(keyed):
    h = keyed(Facts())
    for value in (1, 3):
        h.process_element(value)
    h.process_broadcast_element("r")
    metrics = h.metrics()
    assert metrics["events"] == 2
    assert metrics["rate"] == 4
    assert metrics["scores"] == {"count": 2, "sum": 4.0, "min": 1, "max": 3, "mean": 2.0}
    assert metrics["model.v1.latency_ms"]["max"] == 30
    assert metrics["rules"] == 1


def test_each_harness_has_its_own_metrics(keyed):
    first, second = keyed(Facts()), keyed(Facts())
    first.process_element(1)
    assert (first.metrics()["events"], second.metrics()["events"]) == (1, 0)
