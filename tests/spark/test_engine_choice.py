"""The engine choice (``planning/choice.py``) is one pure function of the plan's facts, the
engine asked for, the checkpoint's record and the consumer: every kind of job, without Spark;
then the same kinds built on Spark, through ``result.explain()``."""

from __future__ import annotations

from typing import Any

import pytest

from sparkcast import KeyedCoProcessFunction, KeyedProcessFunction
from sparkcast.errors import PipelineError
from sparkcast.spark.plan import BroadcastSide, Engine, PlanFacts, recorded_engine
from sparkcast.spark.planning.choice import Consumer, choose
from tests.spark.kinds import kind_of

STREAMED = BroadcastSide.STREAMED
STATIC = BroadcastSide.STATIC


def facts(broadcast: BroadcastSide = STREAMED, **flags: Any) -> PlanFacts:
    return PlanFacts(function="F", main_streaming=flags.pop("main_streaming", True),
                     broadcast=broadcast, **flags)


OP, MB = "operator", "micro_batch"
KINDS = {  # kind: (facts, the engine of a write_stream query, of result.main; the shape)
    "static, no state": (facts(STATIC), MB, MB, "in place"),
    "static, keyed": (facts(STATIC, keyed=True), MB, OP, "by subtask"),
    "static, hold_until_ready": (facts(STATIC, hold_until_ready=True), MB, OP, "by subtask"),
    "static, keyed, event-time timers": (facts(STATIC, keyed=True, timers=True,
                                               event_time=True), MB, OP, "by subtask"),
    "static, keyed, seeded": (facts(STATIC, keyed=True, seeded=True), OP, OP, None),
    "static, event-aligned without state": (facts(STATIC, event_aligned=True), MB, MB,
                                            "in place"),
    "static, broadcast emits": (facts(STATIC, static_emits=True), OP, OP, None),
    "streamed, no state": (facts(), MB, OP, "foreachBatch"),
    "streamed, keyed": (facts(keyed=True), MB, OP, "by subtask"),
    "streamed, hold_until_ready": (facts(hold_until_ready=True), MB, OP, "by subtask"),
    "streamed, event-aligned": (facts(event_aligned=True), MB, OP, "by subtask"),
    "streamed, keyed, event-time timers": (facts(keyed=True, timers=True, event_time=True), MB,
                                           OP, "by subtask"),
    "streamed, keyed, processing-time timers": (facts(keyed=True, timers=True), MB, OP,
                                                "by subtask"),
    "streamed, seeded without state": (facts(seeded=True), OP, OP, None),
    "streamed, keyed, seeded": (facts(keyed=True, seeded=True), MB, OP, "by subtask"),
    "KeyedProcessFunction": (facts(BroadcastSide.NONE, keyed=True), MB, OP, "by subtask"),
    "KeyedProcessFunction, event-time timers": (
        facts(BroadcastSide.NONE, keyed=True, timers=True, event_time=True), MB, OP,
        "by subtask"),
    "KeyedProcessFunction, processing-time timers": (
        facts(BroadcastSide.NONE, keyed=True, timers=True), MB, OP, "by subtask"),
    "KeyedProcessFunction, batch input": (
        facts(BroadcastSide.NONE, keyed=True, main_streaming=False), OP, OP, None),
    "KeyedProcessFunction, Spark Connect": (
        facts(BroadcastSide.NONE, keyed=True, connect=True), OP, OP, None),
    "KeyedCoProcessFunction": (facts(BroadcastSide.NONE, keyed=True, second_input=True), MB, OP,
                               "by subtask"),
    "batch inputs, keyed": (facts(BroadcastSide.BATCH, keyed=True, main_streaming=False), OP,
                            OP, None),
    "Spark Connect, keyed": (facts(keyed=True, connect=True), OP, OP, None),
    "Spark Connect, static": (facts(STATIC, connect=True), MB, MB, "in place"),
}


def shape(plan_facts: PlanFacts) -> str:
    """The micro-batch engine's shape for ``plan_facts`` (``RuntimePlan``'s properties)."""
    if plan_facts.per_subtask_state:
        return "by subtask"
    return "foreachBatch" if plan_facts.driver_per_batch else "in place"


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_job_takes_its_engine(kind):
    plan_facts, query_engine, dataframe_engine, query_shape = KINDS[kind]
    chosen = choose(plan_facts)
    assert chosen.engine == query_engine
    assert chosen.reason
    assert choose(plan_facts, consumer=Consumer.DATAFRAME).engine == dataframe_engine
    if query_shape is not None:
        assert shape(plan_facts) == query_shape


@pytest.mark.parametrize("kind", KINDS)
def test_engine_operator_always_serves_and_micro_batch_fails_with_the_reason(kind):
    plan_facts, query_engine, _, _ = KINDS[kind]
    assert choose(plan_facts, "operator").engine == "operator"
    if query_engine == OP:
        with pytest.raises(PipelineError, match="engine='micro_batch' cannot run this plan: "):
            choose(plan_facts, "micro_batch")
    else:
        assert choose(plan_facts, "micro_batch").engine == MB


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
    assert "static rows applied once on the driver" in choose(facts(STATIC, keyed=True)).reason
    assert "initial_state with a static broadcast side" in choose(
        facts(STATIC, keyed=True, seeded=True)).reason
    assert "state store" in choose(facts(BroadcastSide.NONE, keyed=True),
                                   consumer=Consumer.DATAFRAME).reason
    assert "write_stream" in choose(facts(), consumer=Consumer.DATAFRAME).reason
    with pytest.raises(PipelineError, match="result.main"):
        choose(facts(keyed=True), "micro_batch", consumer=Consumer.DATAFRAME)


def test_a_checkpoint_restarts_on_the_engine_that_wrote_it():
    keyed = facts(keyed=True)
    assert choose(keyed, recorded=Engine.MICRO_BATCH).engine == MB
    restarted = choose(keyed, recorded=Engine.OPERATOR)  # sparkcast 0.3's keyed checkpoints
    assert restarted.engine == OP
    assert "written by the operator engine" in restarted.reason
    assert choose(facts(), recorded=Engine.OPERATOR).engine == OP
    assert choose(facts(STATIC), recorded=Engine.OPERATOR).engine == MB  # no state to keep
    with pytest.raises(PipelineError, match="written by the operator engine"):
        choose(keyed, "micro_batch", recorded=Engine.OPERATOR)
    with pytest.raises(PipelineError, match="written by the micro_batch engine"):
        choose(keyed, "operator", recorded=Engine.MICRO_BATCH)


def test_the_names_0_3_recorded_for_the_micro_batch_engine_still_read():
    assert [recorded_engine(name) for name in ("stateless", "streamed", "partitioned",
                                               "operator", "micro_batch", None)] == [
        Engine.MICRO_BATCH, Engine.MICRO_BATCH, Engine.MICRO_BATCH, Engine.OPERATOR,
        Engine.MICRO_BATCH, None]
    assert len(Engine) == 2


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

    results = {}
    for program in (COUNTER, HOLD, TIMERS, ENRICH):
        main, bcast = streams(program)
        results[program.name] = process(program, main, bcast, 2)
        static = spark.createDataFrame([], program.broadcast_schema)
        results[f"{program.name} static"] = process(program, main, static, 2)
    keyed = Stream(read_stream(spark, "k string, v long", tmp_path / "kp")).key_by("k")
    other = Stream(read_stream(spark, "k string, w long", tmp_path / "kc")).key_by("k")
    results["keyed process"] = keyed.process(Count(), "k string, n long")
    results["keyed co-process"] = keyed.connect(other).process(Join(), "k string, n long")
    seen = {name: result.explain() for name, result in results.items()}
    kinds = {name: kind_of(result) for name, result in results.items()}
    assert {name: (e.engine.value, kinds[name]) for name, e in seen.items()} == {
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
    assert printed.count("engine: ") == 2 * len(seen)  # explain() and kind_of both print
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
    assert "a restart keeps the snapshot" in str(seen["counter static"])
    for name in ("counter static", "enrich static"):  # applied at plan build: the plan holds it
        assert "applied once there when the plan is built" in str(seen[name])
        assert results[name].plan.static is not None, name
    assert "decoded once by each Python worker" in str(seen["enrich static"])
    assert results["enrich static"].plan.for_workers().static is not None
    assert "workers are shipped no static side" in str(seen["counter static"])
    assert results["counter static"].plan.for_workers().static is None


@pytest.mark.spark
def test_engine_argument_on_spark(spark, tmp_path):
    from tests.spark.corpus import COUNTER, ENRICH
    from tests.spark.differential import process, read_stream

    main = read_stream(spark, COUNTER.main_schema, tmp_path / "main")
    bcast = read_stream(spark, COUNTER.broadcast_schema, tmp_path / "bcast")
    assert kind_of(process(COUNTER, main, bcast, 2, engine="operator")) == "operator"
    forced = process(COUNTER, main, bcast, 2, engine="micro_batch")
    assert kind_of(forced) == "partitioned"
    with pytest.raises(PipelineError, match="result.main"):
        forced.main  # noqa: B018 - the property builds the DataFrame
    static = spark.createDataFrame([], ENRICH.broadcast_schema)
    main = read_stream(spark, ENRICH.main_schema, tmp_path / "enrich")
    operator = process(ENRICH, main, static, 2, engine="operator")
    assert kind_of(operator) == "operator"
    assert "seeds each subtask's new state" in str(operator.explain())
    assert "seeds its new state with the static side's" in operator.explain().cost
    with pytest.raises(PipelineError, match="engine must be one of"):
        process(ENRICH, main, static, 2, engine="fast")


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["operator", "micro_batch"])
def test_a_query_runs_a_copy_of_the_plan_and_the_results_plan_never_changes(
        spark, tmp_path, engine):
    from tests.spark.corpus import COUNTER
    from tests.spark.differential import process, read_stream

    (tmp_path / "main").mkdir()
    (tmp_path / "bcast").mkdir()
    main = read_stream(spark, COUNTER.main_schema, tmp_path / "main")
    bcast = read_stream(spark, COUNTER.broadcast_schema, tmp_path / "bcast")
    result = process(COUNTER, main, bcast, 2, engine=engine)
    plan = result.plan
    before = (plan.engine, plan.blob_store, dict(plan.subtask_of_group),
              dict(plan.side_schemas), plan.tagged_input)
    query = result.write_stream(str(tmp_path / "out"), str(tmp_path / "ckpt"),
                                trigger={"availableNow": True})
    query.awaitTermination()
    assert query.exception() is None
    assert result.plan is plan
    assert (plan.engine, plan.blob_store, dict(plan.subtask_of_group), dict(plan.side_schemas),
            plan.tagged_input) == before
    assert not plan.blob_store.startswith(str(tmp_path / "ckpt"))  # the query's was its own
