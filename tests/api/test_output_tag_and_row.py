"""``OutputTag`` (PyFlink) and ``Row`` (PySpark-like, without pyspark)."""

import copy
import dataclasses
import pickle

import pytest

from sparkcast import OutputTag, Row
from sparkcast.api.row import TupleRow, new_row, row_type


def test_output_tag_equality_and_schema():
    assert OutputTag("review") == OutputTag("review")
    assert OutputTag("review") != OutputTag("block")
    assert OutputTag("r", "id string").schema == "id string"
    assert repr(OutputTag("review", "id string")) == "OutputTag('review')"
    assert len({OutputTag("a"), OutputTag("a")}) == 1


@pytest.mark.parametrize("bad", ["", None, 3])
def test_output_tag_needs_a_name(bad):
    with pytest.raises(ValueError, match="empty"):
        OutputTag(bad)


def test_output_tag_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        OutputTag("a").tag_id = "b"  # type: ignore[misc]


def test_row_access_by_attribute_key_and_index():
    row = Row(color="red", shape="square")
    assert (row.color, row["shape"], row[0], row[-1]) == ("red", "square", "red", "square")
    assert row.asDict() == {"color": "red", "shape": "square"}
    assert row.get("color") == "red" and row.get("size", 0) == 0
    assert "color" in row and "red" not in row
    assert repr(row) == "Row(color='red', shape='square')"
    assert row != ("red", "square")  # PyFlink: a Row equals only a Row


def test_input_rows_of_one_schema_share_a_class_and_count_as_rows():
    assert type(TupleRow(a=1, b=2)) is type(TupleRow(a=3, b=4)) is row_type(("a", "b"))
    assert type(TupleRow(b=1, a=2)) is not type(TupleRow(a=1, b=2))
    row = TupleRow(b=1, a=2)
    assert isinstance(row, Row) and row == (1, 2) and row.b == 1 and row.as_dict() == {
        "b": 1, "a": 2}


def test_a_row_is_pyflinks_mutable_row():
    """As pyflink/common/types.py: named fields sorted by name, set by index, name and
    attribute; equal to a Row of the same names and values only; a class-like Row."""
    row = Row(name="Alice", age=11)
    assert row.__fields__ == ("age", "name") and list(row) == [11, "Alice"]
    row[0] += 1
    row["name"] = "Bob"
    row.age += 1
    assert row == Row(age=13, name="Bob") and row.as_dict() == {"age": 13, "name": "Bob"}
    assert row != Row(13, "Bob") and Row(1, 2) == Row(1, 2) and Row(1, 2) != (1, 2)
    current = Row("k", 0, 0)  # the Flink docs' count-with-timeout, Python form
    current[1] += 1
    current[2] = 60
    assert current == Row("k", 1, 60) and hash(current) == hash(("k", 1, 60))
    person = Row("name", "age")
    assert person("Alice", 11) == new_row(("name", "age"), ["Alice", 11])
    assert person("Alice", 11).name == "Alice"
    with pytest.raises(AttributeError):
        row.weight = 1
    assert row == TupleRow(age=13, name="Bob")


def test_row_errors():
    with pytest.raises(KeyError):
        Row(a=1)["b"]
    with pytest.raises(TypeError, match="either positional or keyword"):
        Row(1, a=2)
    with pytest.raises(TypeError, match="without field names"):
        Row(1, 2).asDict()
    with pytest.raises(ValueError, match="duplicate"):
        row_type(("a", "a"))


def test_positional_row():
    row = Row(1, "x")
    assert row[1] == "x" and 1 in row
    assert repr(row) == "<Row(1, 'x')>"


def test_recursive_as_dict():
    row = Row(inner=Row(x=1), items=[Row(y=2)], mapping={"k": Row(z=3)})
    assert row.asDict(recursive=True) == {
        "inner": {"x": 1}, "items": [{"y": 2}], "mapping": {"k": {"z": 3}},
    }
    assert isinstance(row.asDict()["inner"], Row)


def test_field_names_that_shadow_tuple_methods_stay_reachable_by_key():
    row = Row(count=3, index=1)
    assert row["count"] == 3 and row["index"] == 1


def test_rows_copy_and_pickle_with_their_fields():
    row = Row(a=1, b=[2])
    for clone in (copy.deepcopy(row), pickle.loads(pickle.dumps(row))):
        assert clone == row and clone.b == [2] and clone.__fields__ == ("a", "b")
