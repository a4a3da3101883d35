"""The harness with ``output_schema=``/``side_outputs=`` checks outputs as Spark does."""

from __future__ import annotations

import pandas as pd
import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, OutputTag
from sparkcast.testing import BroadcastHarness

RULES = MapStateDescriptor("rules", str, str)
AUDIT = OutputTag("audit", "msg string")


class Emit(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        pass

    def process_element(self, value, ctx):
        yield from value["outputs"]


def harness(**options):
    h = BroadcastHarness(Emit(), [RULES], **options)
    h.open()
    return h


def test_outputs_are_unchecked_when_opted_out():
    h = harness(check_outputs=False)
    h.process_element({"outputs": [("a", "b", "c"), (OutputTag("x"), 1)]})
    assert h.output() == [("a", "b", "c")] and h.dead_letters() == []


def test_without_a_schema_the_harness_infers_one_says_so_and_dead_letters_as_spark_would():
    h = harness()
    with pytest.warns(UserWarning, match=r"inferred '`_1` string, `_2` bigint'"):
        h.process_element({"outputs": [("a", None), ("b", 2)]})  # a null field: from the next
    h.process_element({"outputs": [("c", 3, "extra"), ("d", "four"), (OutputTag("x"), 1)]})
    assert h.output_schema == "`_1` string, `_2` bigint"
    assert h.output() == [("a", None), ("b", 2)]
    # the on_error default is Spark's: dead letters, not raises
    letters = sorted(h.dead_letters(), key=lambda d: repr(d.value))
    assert [d.value for d in letters] == [("c", 3, "extra"), ("d", "four"), 1]
    assert "side output 'x' has no schema" in letters[2].error


def test_extra_fields_wrong_types_and_unknown_tags_become_dead_letters():
    h = harness(output_schema="id long, name string", side_outputs=[AUDIT])
    h.process_element({"outputs": [
        (1, "a"), {"id": 2, "name": "b", "extra": 0}, ("three", "c"), {"name": "d", "id": 4},
        (AUDIT, ("ok",)), (AUDIT, (5,)), (OutputTag("x"), 1), (OutputTag("t", "n int"), 7)]},
        timestamp=9)
    assert h.output() == [(1, "a"), {"name": "d", "id": 4}]
    assert h.side_output(AUDIT) == [("ok",)]
    assert h.side_output(OutputTag("t", "n int")) == [7]
    letters = h.dead_letters()
    assert [letter.value for letter in letters] == [
        {"id": 2, "name": "b", "extra": 0}, 1, ("three", "c"), (5,)]
    assert all(letter.callback == "output" and letter.timestamp == 9 for letter in letters)
    assert "side_outputs=[OutputTag('x'" in letters[1].error


class Batch(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        pass

    def process_batch(self, batch, ctx):
        yield batch[["id", "name"]]


def test_a_bad_row_of_a_batch_frame_is_a_dead_letter_and_the_rest_is_kept():
    h = BroadcastHarness(Batch(), [RULES], output_schema="id long, name string")
    h.open()
    h.process_micro_batch(pd.DataFrame({"id": [1, "x", 3], "name": ["a", "b", "c"]}))
    assert [row["id"] for row in h.output()] == [1, 3]
    [letter] = h.dead_letters()
    assert letter.value == ("x", "b") and "output schema" in letter.error
