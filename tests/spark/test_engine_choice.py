"""The engine choice (``planning/choice.py``) is one pure function of the plan's facts, the
engine asked for, the checkpoint's record and the consumer: every kind of job, without Spark;
then the same kinds built on Spark, through ``result.explain()``."""

from __future__ import annotations

from typing import Any

import pytest

from sparkcast import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.errors import PipelineError
from sparkcast.spark.plan import BroadcastSide, PlanFacts
from sparkcast.spark.planning.choice import Consumer, choose

STREAMED = BroadcastSide.STREAMED
STATIC = BroadcastSide.STATIC


def facts(broadcast: BroadcastSide = STREAMED, **flags: Any) -> PlanFacts:
    return PlanFacts(function="F", main_streaming=flags.pop("main_streaming", True),
                     broadcast=broadcast, **flags)


KINDS = {  # kind: (facts, the path a write_stream query takes, result.main's path)
    "static, no state": (facts(STATIC), "stateless", "stateless"),
    "static, keyed": (facts(STATIC, keyed=True), "partitioned", "operator"),
    "static, hold_until_ready": (facts(STATIC, hold_until_ready=True), "partitioned",
                                 "operator"),
    "static, keyed, event-time timers": (facts(STATIC, keyed=True, timers=True,
                                               event_time=True), "partitioned", "operator"),
    "static, keyed, seeded": (facts(STATIC, keyed=True, seeded=True), "operator", "operator"),
    "static, event-aligned without state": (facts(STATIC, event_aligned=True), "stateless",
                                            "stateless"),
    "static, broadcast emits": (facts(STATIC, static_emits=True), "operator", "operator"),
    "streamed, no state": (facts(), "streamed", "operator"),
    "streamed, keyed": (facts(keyed=True), "partitioned", "operator"),
    "streamed, hold_until_ready": (facts(hold_until_ready=True), "partitioned", "operator"),
    "streamed, event-aligned": (facts(event_aligned=True), "partitioned", "operator"),
    "streamed, keyed, event-time timers": (facts(keyed=True, timers=True, event_time=True),
                                           "partitioned", "operator"),
    "streamed, keyed, processing-time timers": (facts(keyed=True, timers=True),
                                                "partitioned", "operator"),
    "streamed, seeded without state": (facts(seeded=True), "operator", "operator"),
    "streamed, keyed, seeded": (facts(keyed=True, seeded=True), "partitioned", "operator"),
    "KeyedProcessFunction": (facts(BroadcastSide.NONE, keyed=True), "partitioned",
                             "operator"),
    "KeyedProcessFunction, event-time timers": (
        facts(BroadcastSide.NONE, keyed=True, timers=True, event_time=True), "partitioned",
        "operator"),
    "KeyedProcessFunction, processing-time timers": (
        facts(BroadcastSide.NONE, keyed=True, timers=True), "partitioned", "operator"),
    "KeyedProcessFunction, batch input": (
        facts(BroadcastSide.NONE, keyed=True, main_streaming=False), "operator", "operator"),
    "KeyedCoProcessFunction": (facts(BroadcastSide.NONE, keyed=True, second_input=True),
                               "partitioned", "operator"),
    "batch inputs, keyed": (facts(BroadcastSide.BATCH, keyed=True, main_streaming=False),
                            "operator", "operator"),
    "Spark Connect, keyed": (facts(keyed=True, connect=True), "operator", "operator"),
    "Spark Connect, static": (facts(STATIC, connect=True), "stateless", "stateless"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_job_takes_its_engine(kind):
    plan_facts, query_path, dataframe_path = KINDS[kind]
    chosen = choose(plan_facts)
    assert chosen.path == query_path
    assert chosen.engine == ("operator" if query_path == "operator" else "micro_batch")
    assert chosen.reason
    assert choose(plan_facts, consumer=Consumer.DATAFRAME).path == dataframe_path


@pytest.mark.parametrize("kind", KINDS)
def test_engine_operator_always_serves_and_micro_batch_fails_with_the_reason(kind):
    plan_facts, query_path, _ = KINDS[kind]
    assert choose(plan_facts, "operator").path == "operator"
    if query_path == "operator":
        with pytest.raises(PipelineError, match="engine='micro_batch' cannot run this plan: "):
            choose(plan_facts, "micro_batch")
    else:
        assert choose(plan_facts, "micro_batch").path == query_path


def test_the_reasons_name_what_keeps_a_plan_off_the_micro_batch_engine():
    processing = choose(facts(keyed=True, timers=True)).reason
    assert "processing-time timers" in processing and "every trigger" in processing
    assert "no-op aggregate" in choose(facts(keyed=True, timers=True, event_time=True)).reason
    assert "Spark Connect" in choose(facts(keyed=True, connect=True)).reason
    co = choose(facts(BroadcastSide.NONE, keyed=True, second_input=True))
    assert "KeyedCoProcessFunction (no broadcast side)" in co.reason
    assert "no broadcast work on the driver" in co.reason
    assert "ProcessingTime mode" in choose(facts(BroadcastSide.NONE, keyed=True,
                                                 timers=True)).reason
    assert "Spark Connect" in choose(facts(BroadcastSide.NONE, keyed=True,
                                           connect=True)).reason
    static = choose(facts(STATIC, keyed=True)).reason
    assert "static rows applied once on the driver" in static
    assert "initial_state with a static broadcast side" in choose(
        facts(STATIC, keyed=True, seeded=True)).reason
    assert "state store" in choose(facts(BroadcastSide.NONE, keyed=True),
                                   consumer=Consumer.DATAFRAME).reason
    assert "write_stream" in choose(facts(), consumer=Consumer.DATAFRAME).reason
    with pytest.raises(PipelineError, match="result.main"):
        choose(facts(keyed=True), "micro_batch", consumer=Consumer.DATAFRAME)


def test_a_checkpoint_restarts_on_the_engine_that_wrote_it():
    keyed = facts(keyed=True)
    assert choose(keyed, recorded="partitioned").path == "partitioned"
    restarted = choose(keyed, recorded="operator")  # sparkcast 0.3's keyed checkpoints
    assert restarted.path == "operator"
    assert "written by the operator engine" in restarted.reason
    assert choose(facts(), recorded="operator").path == "operator"
    with pytest.raises(PipelineError, match="written by the operator engine"):
        choose(keyed, "micro_batch", recorded="operator")
    with pytest.raises(PipelineError, match="written by the micro_batch engine"):
        choose(keyed, "operator", recorded="partitioned")


def test_an_unknown_engine_is_refused_with_the_names():
    with pytest.raises(PipelineError, match=r"engine must be one of \['auto', 'micro_batch', "
                                            r"'operator'\], not 'fast'"):
        choose(facts(), "fast")


# ------------------------------------------------------------------------------ on Spark


class Count(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value["k"], 1


class Join(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield value["k"], 1

    def process_element2(self, value, ctx):
        yield value["k"], 2


@pytest.mark.spark
def test_explain_shows_the_engine_each_kind_of_job_takes_on_spark(spark, tmp_path, capsys):
    from sparkcast.spark import Stream
    from tests.spark.corpus import COUNTER, ENRICH, HOLD, TIMERS
    from tests.spark.differential import process, read_stream

    def streams(program):
        return (read_stream(spark, program.main_schema, tmp_path / program.name / "main"),
                read_stream(spark, program.broadcast_schema, tmp_path / program.name / "b"))

    seen = {}
    for program in (COUNTER, HOLD, TIMERS, ENRICH):
        main, bcast = streams(program)
        seen[program.name] = process(program, main, bcast, 2).explain()
        static = spark.createDataFrame([], program.broadcast_schema)
        seen[f"{program.name} static"] = process(program, main, static, 2).explain()
    keyed = Stream(read_stream(spark, "k string, v long", tmp_path / "kp")).key_by("k")
    other = Stream(read_stream(spark, "k string, w long", tmp_path / "kc")).key_by("k")
    seen["keyed process"] = keyed.process(Count(), "k string, n long").explain()
    seen["keyed co-process"] = keyed.connect(other).process(Join(), "k string, n long").explain()
    assert {name: (e.engine.value, e.path.value) for name, e in seen.items()} == {
        "counter": ("micro_batch", "partitioned"),
        "counter static": ("micro_batch", "partitioned"),
        "hold": ("micro_batch", "partitioned"),
        "hold static": ("micro_batch", "partitioned"),
        "timers": ("micro_batch", "partitioned"),
        "timers static": ("micro_batch", "partitioned"),
        "enrich": ("micro_batch", "streamed"),
        "enrich static": ("micro_batch", "stateless"),
        "keyed process": ("micro_batch", "partitioned"),
        "keyed co-process": ("micro_batch", "partitioned"),
    }
    printed = capsys.readouterr().out
    assert printed.count("engine: ") == len(seen)
    text = str(seen["counter"])
    assert "main rows cross to Python once after one shuffle" in text
    assert "broadcast applied once per micro-batch on the driver" in text
    assert "output main: write_stream" in text and "output dead_letters:" in text
    assert "result.main and side_output DataFrames: operator" in text
    assert "timers" in seen["timers"].reason and "timers" not in seen["counter"].reason
    assert "the clock" in seen["timers"].cost and "clock" not in seen["counter"].cost
    assert "second keyed side" in str(seen["keyed co-process"])
    assert "only reading its clocks" in seen["keyed co-process"].cost
    assert "\nbroadcast side:" not in str(seen["keyed process"])  # no such line
    assert "snapshot -1" in seen["counter static"].cost
    assert "a restart keeps it" in str(seen["counter static"])


@pytest.mark.spark
def test_engine_argument_on_spark(spark, tmp_path):
    from tests.spark.corpus import COUNTER, ENRICH
    from tests.spark.differential import process, read_stream

    main = read_stream(spark, COUNTER.main_schema, tmp_path / "main")
    bcast = read_stream(spark, COUNTER.broadcast_schema, tmp_path / "bcast")
    assert process(COUNTER, main, bcast, 2, engine="operator").plan.path == "operator"
    forced = process(COUNTER, main, bcast, 2, engine="micro_batch")
    assert forced.plan.path == "partitioned"
    with pytest.raises(PipelineError, match="result.main"):
        forced.main  # noqa: B018 - the property builds the DataFrame
    static = spark.createDataFrame([], ENRICH.broadcast_schema)
    main = read_stream(spark, ENRICH.main_schema, tmp_path / "enrich")
    assert process(ENRICH, main, static, 2, engine="operator").plan.path == "operator"
    with pytest.raises(PipelineError, match="engine must be one of"):
        process(ENRICH, main, static, 2, engine="fast")
