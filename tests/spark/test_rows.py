"""Output encoding in the workers: bulk Arrow checks, dead letters for rows that do not fit."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from sparkcast import OutputTag, Row
from sparkcast.core.records import DEAD_LETTERS
from sparkcast.spark.execution.encoding import OutputEncoder

SCHEMA = StructType([StructField("s", StringType()), StructField("n", LongType())])
REVIEW = OutputTag("review", "s string, n long")


def encode(records):
    frames = OutputEncoder(SCHEMA, {"review": SCHEMA}).encode(records, subtask=3)
    return pd.concat(frames, ignore_index=True) if frames else None


def test_tuples_dicts_and_rows_become_typed_main_rows():
    frame = encode([(None, ("a", 1), 5, False, None), (None, {"n": 2, "s": "b"}, None, False, None),
                    (None, Row(s="c", n=3), 7, False, None)])
    assert frame[["s", "n"]].to_dict("records") == [
        {"s": "a", "n": 1}, {"s": "b", "n": 2}, {"s": "c", "n": 3}]
    assert frame["_tag"].isna().all()
    assert frame["_ts"].tolist()[0] == 5 and pd.isna(frame["_ts"].tolist()[1])


def test_a_wrong_field_or_type_is_a_dead_letter_and_the_rest_survives():
    frame = encode([(None, ("a", 1), None, False, None),
                    (None, ("b", "not a number"), None, False, "k"),
                    (None, {"s": "c"}, None, False, None), (None, ("d", 4), None, False, None)])
    main = frame[frame["_tag"].isna()]
    assert sorted(main["s"]) == ["a", "d"]
    letters = [json.loads(p) for p in frame.loc[frame["_tag"] == DEAD_LETTERS.tag_id, "_payload"]]
    assert len(letters) == 2 and all(letter["callback"] == "output" for letter in letters)
    assert any("output schema" in letter["error"] for letter in letters)
    assert {letter["subtask"] for letter in letters} == {3}
    assert sorted(str(letter["key"]) for letter in letters) == ['"k"', "None"]


def test_side_outputs_are_json_mapped_onto_the_tag_fields():
    frame = encode([(REVIEW, ("x", 9), 1, False, None)])
    assert frame["_tag"].tolist() == ["review"]
    assert json.loads(frame["_payload"][0]) == {"s": "x", "n": 9}


def test_nan_in_a_string_column_of_a_batch_frame_is_a_null_not_a_dead_letter():
    batch = pd.DataFrame({"s": ["a", None, "c"], "n": [1, 2, 3]})
    batch.loc[batch["n"] == 3, "s"] = np.nan
    frame = encode([(None, batch, None, True, None)])
    assert frame[["s", "n"]].to_dict("records") == [
        {"s": "a", "n": 1}, {"s": None, "n": 2}, {"s": None, "n": 3}]


def test_a_batch_frame_with_a_bad_value_dead_letters_only_that_row():
    batch = pd.DataFrame({"s": ["a", "b"], "n": [1, "x"]})
    frame = encode([(None, batch, None, True, None)])
    assert frame.loc[frame["_tag"].isna(), "s"].tolist() == ["a"]
    assert (frame["_tag"] == DEAD_LETTERS.tag_id).sum() == 1


def test_nothing_to_output_yields_no_frame():
    assert encode([]) is None


def test_dicts_and_rows_with_extra_fields_are_refused_not_trimmed():
    frame = encode([(None, {"s": "a", "n": 1, "typo": 9}, None, False, None),
                    (None, Row(s="b", n=2, extra="x"), None, False, None),
                    (None, {"s": "ok", "n": 3}, None, False, None)])
    assert frame.loc[frame["_tag"].isna(), ["s", "n"]].to_dict("records") == [{"s": "ok", "n": 3}]
    letters = [json.loads(p) for p in frame.loc[frame["_tag"] == DEAD_LETTERS.tag_id, "_payload"]]
    assert [letter["callback"] for letter in letters] == ["output", "output"]
    assert "'typo'" in letters[0]["error"] and "extra" in letters[1]["error"]


def letters_of(frame):
    return [json.loads(p) for p in frame.loc[frame["_tag"] == DEAD_LETTERS.tag_id, "_payload"]]


def test_a_side_output_of_the_wrong_type_or_width_is_a_dead_letter():
    frame = encode([(REVIEW, ("x", 9), 1, False, None), (REVIEW, ("y", "nine"), 2, False, "k2"),
                    (REVIEW, ("z",), 3, False, "k3"),
                    (REVIEW, {"s": "w", "n": 1, "extra": 0}, 4, False, None)])
    assert [json.loads(p) for p in frame.loc[frame["_tag"] == "review", "_payload"]] == [
        {"s": "x", "n": 9}]
    letters = letters_of(frame)
    assert [(x["callback"], x["timestamp"]) for x in letters] == [
        ("output", 3), ("output", 4), ("output", 2)]
    assert "side output 'review'" in letters[2]["error"]
    assert json.loads(letters[2]["value"]) == ["y", "nine"]
    assert [x["key"] for x in letters] == ['"k3"', None, '"k2"']  # the emitting element's key


def test_a_side_output_without_any_schema_is_a_dead_letter_naming_the_fix():
    frame = encode([(OutputTag("audit"), ("x", 1), 1, False, None)])
    [letter] = letters_of(frame)
    assert "side_outputs=[OutputTag('audit'" in letter["error"]
    assert (frame["_tag"] == "audit").sum() == 0


def test_a_tag_carrying_its_schema_is_typed_without_being_declared():
    frame = encode([(OutputTag("late", "id long"), (5,), 1, False, None),
                    (OutputTag("late", "id long"), ("five",), 2, False, None)])
    assert [json.loads(p) for p in frame.loc[frame["_tag"] == "late", "_payload"]] == [{"id": 5}]
    assert len(letters_of(frame)) == 1


def test_nan_and_infinities_stay_numbers_in_side_outputs_and_main_frames():
    schema = StructType([StructField("x", DoubleType())])
    records = [(None, (v,), None, False, None) for v in (float("nan"), float("inf"), -0.0)]
    records.append((OutputTag("f", "x double"), (float("-inf"),), None, False, None))
    frame = pd.concat(OutputEncoder(schema, {}).encode(records, 0), ignore_index=True)
    main = frame.loc[frame["_tag"].isna(), "x"].tolist()
    assert np.isnan(main[0]) and main[1] == float("inf") and np.signbit(main[2])
    assert frame.loc[frame["_tag"] == "f", "_payload"].tolist() == ['{"x": -Infinity}']
    assert not frame.loc[frame["_tag"].isna(), "x"].isna().iloc[1:].any()
