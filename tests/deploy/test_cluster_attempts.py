"""Exactly once on the real standalone cluster (two one-core workers on two loopback hosts, no
shuffle service) when one part of a micro-batch has two attempts: a speculative copy beside its
held first attempt, for every sink the pattern's tasks or the driver's jobs write, and an
executor SIGKILLed after its task committed a Kafka part of a driver job, so Spark re-attempts
the stage. Every output is read back as a reader would (``read_committed``, ``read_output``'s
committed file log, the JDBC table and its ledger) and must equal the harness's: 0 lost, 0
duplicated, and each key's counters continue from the committed state.

ONE driver runs the four queries of ``cluster_job.ATTEMPT_QUERIES`` one after another, each on
its own checkpoint, with ``spark.speculation`` on and low thresholds. The moment held is an
event, not a sleep: the first attempt to have written its part of micro-batch
``attempt_hold.HOLD_BATCH`` holds its task after the write (a hook in the packed environment,
``attempt_hold.py``; for JDBC, whose staging tasks run no Python, a PostgreSQL trigger on the
staging table holds the first attempt at its first row until another attempt of the same task
begins to insert, so both commit before the driver's move, as a first attempt whose insert
Spark's kill cannot stop does). Spark's event log proves that a speculative copy of the held
part ran and succeeded; else the test proves nothing and fails. Before the JDBC sink's row id
(``outputs/jdbc.py``) the JDBC query's table held 20 extra rows; the other three passed then.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkcast.spark import read_output
from sparkcast.testing.postgres import jdbc_jar
from tests.deploy import attempt_hold
from tests.deploy import cluster_job as job
from tests.deploy.test_cluster import expected_outputs, finished, submit, write_inputs
from tests.spark.holds import FileEvents

pytestmark = [pytest.mark.spark, pytest.mark.fresh_jvm]
RUN_SECONDS = 900
#: micro-batches per query: one before the held one, the held one, one after it (its counters
#: continue from the committed state)
BATCHES = attempt_hold.HOLD_BATCH + 2
SPECULATION = {"spark.speculation": "true", "spark.speculation.quantile": "0.5",
               "spark.speculation.multiplier": "2", "spark.speculation.minTaskRuntime": "1s",
               "spark.speculation.interval": "200ms",
               # a held task has read all its input: its rate is no reason to wait
               "spark.speculation.efficiency.enabled": "false"}
#: holds the first attempt of the staging of micro-batch HOLD_BATCH of the query's main output
#: at its first row until another attempt of the same task (the same key: its partition) has
#: begun to insert; the sequences are not transactional, so the attempts see them at once
JDBC_HOLD = """
CREATE SEQUENCE sparkcast_hold_claims;
CREATE SEQUENCE sparkcast_hold_key;
CREATE SEQUENCE sparkcast_hold_copies;
CREATE FUNCTION sparkcast_hold() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE started timestamptz := clock_timestamp(); mine bigint := abs(hashtext(NEW.k)) + 1;
BEGIN
  IF NEW._sparkcast_batch = {batch} THEN
    IF nextval('sparkcast_hold_claims') = 1 THEN
      PERFORM setval('sparkcast_hold_key', mine);
      WHILE NOT (SELECT is_called FROM sparkcast_hold_copies)
            AND clock_timestamp() - started < interval '{seconds} seconds' LOOP
        PERFORM pg_sleep(0.02);
      END LOOP;
    ELSIF (SELECT last_value FROM sparkcast_hold_key) = mine THEN
      PERFORM nextval('sparkcast_hold_copies');
    END IF;
  END IF;
  RETURN NEW;
END $$;
CREATE FUNCTION sparkcast_hold_staging() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE made record;
BEGIN
  FOR made IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    IF made.object_identity LIKE '%{table}' THEN
      EXECUTE format('CREATE TRIGGER sparkcast_hold BEFORE INSERT ON %s FOR EACH ROW '
                     'EXECUTE FUNCTION sparkcast_hold()', made.object_identity);
    END IF;
  END LOOP;
END $$;
CREATE EVENT TRIGGER sparkcast_hold_staging ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION sparkcast_hold_staging();
"""


@dataclass(frozen=True)
class Run:
    """The one driver's run: its exit code and log, where its outputs are, what the holds
    claimed (``sink -> (pid, partition, stage, attempt)``), the event log's task ends, and the
    executor killed."""

    code: int
    log: str
    out: Path
    claims: dict[str, tuple[int, ...]]
    tasks: list[dict[str, Any]]
    killed: int
    seconds: float


@pytest.fixture(scope="module")
def database(postgres_cluster: Any) -> Any:
    name = "t_cluster_attempts"
    postgres_cluster.execute(f'DROP DATABASE IF EXISTS "{name}"', database="postgres")
    created = postgres_cluster.create_database(name)
    table = f"{job.sink_name('spec-jdbc', 'main')}_sparkcast_staging"
    created.execute(JDBC_HOLD.replace("{batch}", str(attempt_hold.HOLD_BATCH))
                    .replace("{seconds}", str(int(attempt_hold.HOLD_SECONDS)))
                    .replace("{table}", table))
    return created


@pytest.fixture(scope="module")
def run(cluster: Any, kafka_broker: Any, database: Any, tmp_path_factory: Any) -> Run:
    root = tmp_path_factory.mktemp("attempts")
    data, out, workdir = root / "data", root / "out", root / "submit"
    held, events = root / "held", workdir / "events"
    for folder in (workdir, held, events):
        folder.mkdir(parents=True)
    write_inputs(data, BATCHES)
    for query, (main, _) in job.ATTEMPT_QUERIES.items():
        if main == "kafka":
            kafka_broker.create_topic(job.sink_name(query, "main"), partitions=3)
    settings = {"bootstrap": kafka_broker.bootstrap, "url": database.jdbc_url,
                "properties": database.jdbc_properties}
    conf = {f"spark.executorEnv.{attempt_hold.VARIABLE}": str(held), **SPECULATION,
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.rolling.enabled": "false", "spark.eventLog.compress": "false",
            "spark.jars": str(jdbc_jar())}
    started = time.monotonic()
    driver = submit(cluster, workdir, data, out, extra=["attempts", json.dumps(settings)],
                    hooks=(Path(attempt_hold.__file__),), conf=conf)
    kill = held / f"kafka-{job.sink_name('kill-kafka', 'main')}"
    with finished(driver), FileEvents([held]) as watch:
        claimed = watch.wait(lambda: kill.exists() and bool(kill.read_text().strip()),
                             lambda: driver.poll() is None, RUN_SECONDS)
        assert claimed, (workdir / "driver.log").read_text(errors="replace")[-5_000:]
        executor = cluster.executor_of(int(kill.read_text().split()[0]))
        os.kill(executor, signal.SIGKILL)
        for shuffle in cluster.shuffle_files():
            shuffle.unlink(missing_ok=True)
        code = driver.wait(timeout=RUN_SECONDS)
    (held / attempt_hold.RELEASE).touch()
    claims = {path.name: tuple(map(int, path.read_text().split()))
              for path in held.iterdir() if path.name != attempt_hold.RELEASE}
    return Run(code, (workdir / "driver.log").read_text(errors="replace"), out, claims,
               task_ends(events), executor, time.monotonic() - started)


def task_ends(events: Path) -> list[dict[str, Any]]:
    """Every task end of Spark's event log, with its job's description."""
    descriptions: dict[int, str] = {}
    ends = []
    for log in events.iterdir():  # one plain file (not rolled, not compressed)
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event["Event"] == "SparkListenerJobStart":
                text = (event.get("Properties") or {}).get("spark.job.description", "")
                descriptions.update({stage: text for stage in event["Stage IDs"]})
            elif event["Event"] == "SparkListenerTaskEnd":
                info = event["Task Info"]
                ends.append({"stage": event["Stage ID"], "index": info["Index"],
                             "attempt": info["Attempt"], "speculative": info["Speculative"],
                             "host": info["Host"], "reason": event["Task End Reason"]["Reason"],
                             "description": descriptions.get(event["Stage ID"], "")})
    return ends


def speculated(run: Run, query: str, phase: str, succeeded: bool = True
               ) -> list[dict[str, Any]]:
    """The speculative copies of ``query``'s micro-batch HOLD_BATCH in jobs of ``phase`` that
    ended (``succeeded``: that succeeded)."""
    return [t for t in run.tasks if t["speculative"]
            and (t["reason"] == "Success" or not succeeded)
            and f"{query}\nid = " in t["description"] and phase in t["description"]
            and f"batch = {attempt_hold.HOLD_BATCH}" in t["description"]]


def held_part_speculated(run: Run, query: str, sink: str, phase: str) -> None:
    """The part held in its first attempt had a speculative copy, which succeeded."""
    assert run.code == 0, run.log[-5_000:]
    assert sink in run.claims, (sorted(run.claims), run.log[-3_000:])
    _, partition, stage, attempt = run.claims[sink]
    assert attempt == 0
    copies = speculated(run, query, phase)
    assert any(c["stage"] == stage and c["index"] == partition for c in copies), (
        run.claims[sink], copies, [t for t in run.tasks if t["speculative"]])


def kafka_rows(broker: Any, topic: str) -> Counter:
    return Counter((r["k"], r["id"], r["n"], r["limit"])
                   for r in (json.loads(record.value) for record in broker.read(topic)))


def files_outputs(spark: Any, path: Path, main: bool) -> dict[str, Counter]:
    found = {"alerts": Counter(tuple(r) for r in read_output(spark, path.as_uri(),
                                                             job.ALERTS).collect()),
             "dead_letters": Counter((r.callback, json.loads(r.value)["id"]) for r in
                                     read_output(spark, path.as_uri(), "dead_letters").collect())}
    if main:
        found["keyed"] = Counter(tuple(r) for r in read_output(spark, path.as_uri()).collect())
    return found


def assert_exactly_once(found: dict[str, Counter], query: str) -> None:
    expected = expected_outputs(BATCHES)
    figures = {name: {"expected": sum(expected[name].values()),
                      "lost": sum((expected[name] - rows).values()),
                      "extra": sum((rows - expected[name]).values())}
               for name, rows in found.items()}
    print(f"cluster attempts figures, {query}: {figures}")
    assert all(f["lost"] == 0 and f["extra"] == 0 for f in figures.values()), figures
    counts: dict[str, list[int]] = {}
    for k, _, n, _ in found["keyed"].elements():
        counts.setdefault(k, []).append(n)
    # the counters in the outputs are the state: no key's count was given out twice
    assert all(len(n) == len(set(n)) for n in counts.values())


def test_a_speculative_copy_of_a_task_written_kafka_part_duplicates_nothing(
        run, kafka_broker, spark):
    query = "spec-kafka"
    held_part_speculated(run, query, f"kafka-{job.sink_name(query, 'main')}",
                         "outputs written by its tasks")
    found = files_outputs(spark, run.out / f"{query}-files", main=False)
    found["keyed"] = kafka_rows(kafka_broker, job.sink_name(query, "main"))
    assert_exactly_once(found, query)


def test_a_speculative_copy_of_a_task_written_files_part_publishes_nothing_twice(run, spark):
    query = "spec-files"
    held_part_speculated(run, query, f"files-{query}-files", "files written by its tasks")
    assert_exactly_once(files_outputs(spark, run.out / f"{query}-files", main=True), query)


def test_a_speculative_copy_of_a_jdbc_staging_task_duplicates_nothing(run, database, spark):
    query = "spec-jdbc"
    assert run.code == 0, run.log[-5_000:]
    # both attempts inserted: the copy (the sequence), then the first attempt, released by it;
    # either may be the one Spark takes (the other is killed once its rows are in)
    ((copies,),) = database.query("SELECT is_called FROM sparkcast_hold_copies")
    assert copies, "no second attempt of the held staging task inserted a row"
    assert speculated(run, query, "jdbc (staging)", succeeded=False), [
        t for t in run.tasks if t["speculative"]]
    found = files_outputs(spark, run.out / f"{query}-files", main=False)
    found["keyed"] = Counter(database.query(
        f'SELECT k, id, n, "limit" FROM {job.sink_name(query, "main")}'))
    assert_exactly_once(found, query)
    assert_ledger(database)


def test_an_executor_lost_after_a_driver_job_committed_a_kafka_part_duplicates_nothing(
        run, kafka_broker, database, spark):
    """The part's task ran in the driver's Kafka job (a JDBC output in the query); its
    executor is SIGKILLed with every shuffle file, so the part's retry meets a FetchFailed and
    Spark re-attempts the stages; the JDBC output's rows, staged before, moved after."""
    query = "kill-kafka"
    assert run.code == 0, run.log[-5_000:]
    assert "ExecutorLostFailure" in run.log and "FetchFailed" in run.log, run.log[-5_000:]
    found = files_outputs(spark, run.out / f"{query}-files", main=False)
    found["keyed"] = kafka_rows(kafka_broker, job.sink_name(query, "main"))
    found["alerts"] = Counter(database.query(
        f"SELECT k, id, amount FROM {job.sink_name(query, 'alerts')}"))
    print(f"cluster attempts: executor {run.killed} killed; the driver ran "
          f"{run.seconds:.0f} s")
    assert_exactly_once(found, query)
    assert_ledger(database)


def assert_ledger(database: Any) -> None:
    """Both JDBC queries recorded every micro-batch in the ledger (once: its key)."""
    ledger = database.query("SELECT query_id, array_agg(batch_id ORDER BY batch_id) FROM "
                            "sparkcast_ledger GROUP BY query_id")
    assert len(ledger) == 2 and all(b == list(range(BATCHES)) for _, b in ledger), ledger
