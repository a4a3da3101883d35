"""``rescale`` into a new checkpoint keeps the class of every stored object: it decodes the
state without the job's classes (``codec.KEEP_NAMES``) and writes each value back as it was
stored, so undeclared (``PICKLED_BYTE_ARRAY``) state holding a dataclass, an enum and a plain
object still holds them after a rescale from 2 to 3 subtasks, and the job's outputs equal the
harness's over both runs."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass

import pytest

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
)
from sparkcast.spark import Stream, read_output, rescale
from sparkcast.testing import KeyedBroadcastHarness
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

LIMITS = MapStateDescriptor("limits", Types.STRING(), Types.PICKLED_BYTE_ARRAY())
SEEN = ValueStateDescriptor("seen", Types.PICKLED_BYTE_ARRAY())
OUTPUT = "k string, id long, n long, level string, last string"
EVENTS = "id long, k string, ts long"
RULES = "name string, value long, ts long"


class Level(enum.Enum):
    LOW = 1
    HIGH = 2


@dataclass
class Limit:
    value: int
    level: Level


class Seen:
    """A plain object: its state is its ``__dict__``."""

    def __init__(self) -> None:
        self.n = 0
        self.last = Level.LOW

    def see(self, level: Level) -> None:
        self.n += 1
        self.last = level


class Tally(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(SEEN)

    def process_broadcast_element(self, value, ctx):
        level = Level.HIGH if value["value"] > 3 else Level.LOW
        ctx.get_broadcast_state(LIMITS).put(value["name"], Limit(value["value"], level))

    def process_element(self, value, ctx):
        limit = ctx.get_broadcast_state(LIMITS).get("limit")
        seen = self.seen.value() or Seen()
        previous = seen.last  # an AttributeError if the object came back as a dict
        seen.see(limit.level)
        self.seen.update(seen)
        yield value["k"], value["id"], seen.n, limit.level.name, previous.name


def _events(batch):
    return [{"id": batch * 100 + i, "k": f"u{i % 3}", "ts": batch * 1000 + i} for i in range(6)]


RULE_BATCHES = [[{"name": "limit", "value": 2, "ts": 0}],
                [{"name": "limit", "value": 5, "ts": 1000}]]


def test_rescale_keeps_the_class_of_stored_objects(spark, tmp_path):
    h = KeyedBroadcastHarness(Tally(), key_selector=lambda v: v["k"],
                              broadcast_descriptors=[LIMITS], output_schema=OUTPUT)
    h.open()
    got: Counter = Counter()
    for run, parallelism in enumerate((2, 3)):
        write_batch_file(tmp_path / f"events{run}", 0, _events(run))
        write_batch_file(tmp_path / f"rules{run}", 0, RULE_BATCHES[run])
        prepared = None
        if run:
            prepared = str(tmp_path / f"ckpt{run}")
            rescale(spark, str(tmp_path / "ckpt0"), prepared, parallelism)
        events = Stream(read_stream(spark, EVENTS, tmp_path / f"events{run}")).key_by("k")
        rules = Stream(read_stream(spark, RULES, tmp_path / f"rules{run}")).broadcast(LIMITS)
        result = events.connect(rules).process(Tally(), OUTPUT, parallelism=parallelism,
                                               event_time="ts", initial_state=prepared)
        query = result.write_stream(str(tmp_path / f"out{run}"), str(tmp_path / f"ckpt{run}"),
                                    trigger={"availableNow": True})
        query.awaitTermination()
        assert query.exception() is None
        out = str(tmp_path / f"out{run}")
        got.update(tuple(r) for r in read_output(spark, out).collect())
        assert read_output(spark, out, "dead_letters").count() == 0
        h.process_micro_batch(_events(run), RULE_BATCHES[run],
                              main_timestamps=[e["ts"] for e in _events(run)],
                              broadcast_timestamps=[r["ts"] for r in RULE_BATCHES[run]])
    assert got == Counter(tuple(v) for v in h.output())
    # the second run read each key's Seen object and its enum back from the rescaled state
    assert ("u0", 100, 3, "HIGH", "LOW") in got
