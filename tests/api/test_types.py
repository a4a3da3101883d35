"""PyFlink's ``Types`` factory and the ``accepts`` check state writes go through: every
``Types.*`` is built and declared in state descriptors as PyFlink writes them, nested and with
``PICKLED_BYTE_ARRAY()`` inside; only an output refuses one without a Spark column (issue 38)."""

import datetime
import decimal
import typing

import pytest

from sparkcast import (
    ListStateDescriptor,
    MapStateDescriptor,
    OutputTag,
    Row,
    Types,
    ValueStateDescriptor,
)
from sparkcast.api.declared_types import accepts
from sparkcast.api.pyflink_types import output_ddl, python_type
from sparkcast.core.ddl import parse_ddl
from sparkcast.errors import PipelineError


@pytest.mark.parametrize(
    ("factory", "python_type"),
    [
        (Types.STRING, str), (Types.CHAR, str), (Types.BOOLEAN, bool), (Types.BYTE, int),
        (Types.SHORT, int), (Types.INT, int), (Types.LONG, int), (Types.BIG_INT, int),
        (Types.FLOAT, float), (Types.DOUBLE, float), (Types.BIG_DEC, decimal.Decimal),
        (Types.SQL_TIMESTAMP, datetime.datetime), (Types.SQL_DATE, datetime.date),
        (Types.PRIMITIVE_ARRAY_BYTE, bytes), (Types.PICKLED_BYTE_ARRAY, object),
        (Types.INSTANT, datetime.datetime), (Types.SQL_TIME, datetime.time),
        (Types.LOCAL_DATE, datetime.date), (Types.LOCAL_TIME, datetime.time),
        (Types.LOCAL_DATE_TIME, datetime.datetime),
    ],
)
def test_scalar_factories(factory, python_type):
    assert factory() is python_type


def test_composite_factories_take_pyflink_arguments():
    assert python_type(Types.LIST(Types.INT())) is list
    assert python_type(Types.PRIMITIVE_ARRAY(Types.INT())) is list
    assert python_type(Types.BASIC_ARRAY(Types.STRING())) is list
    assert python_type(Types.MAP(Types.STRING(), Types.INT())) is dict
    assert python_type(Types.TUPLE([Types.INT(), Types.STRING()])) is tuple
    # PyFlink's Row, an input row or a tuple
    assert python_type(Types.ROW([Types.INT()])) == Row | tuple
    assert python_type(Types.ROW_NAMED(["a"], [Types.INT()])) == Row | tuple


def test_a_descriptor_takes_the_python_type_of_a_composite():
    descriptor = MapStateDescriptor("m", Types.STRING(), Types.ROW_NAMED(["a"], [Types.INT()]))
    assert descriptor.value_type_info == Row | tuple and descriptor.key_type_info is str
    assert ListStateDescriptor("l", Types.LIST(Types.INT())).type_info is list


@pytest.mark.parametrize(
    ("declared", "ddl"),
    [
        (Types.ROW_NAMED(["id", "score"], [Types.STRING(), Types.DOUBLE()]),
         "`id` string, `score` double"),
        (Types.ROW([Types.INT(), Types.BOOLEAN()]), "`f0` bigint, `f1` boolean"),
        (Types.TUPLE([Types.STRING(), Types.LONG()]), "`f0` string, `f1` bigint"),
        (Types.ROW_NAMED(["m", "a", "n"], [Types.MAP(Types.STRING(), Types.DOUBLE()),
                                             Types.BASIC_ARRAY(Types.LONG()),
                                             Types.ROW_NAMED(["x"], [Types.SQL_DATE()])]),
         "`m` map<string,double>, `a` array<bigint>, `n` struct<`x`: date>"),
        (Types.STRING(), "value string"),
        (Types.LIST(Types.BIG_DEC()), "value array<decimal(38,18)>"),
    ],
)
def test_pyflink_types_as_output_schemas(declared, ddl):
    assert output_ddl(declared) == (ddl, False)
    parse_ddl(ddl)  # the harness's parser (and Spark's, tests/spark) reads it


def test_pickled_byte_array_is_one_column_of_codec_text_and_other_types_are_refused():
    assert output_ddl(Types.PICKLED_BYTE_ARRAY()) == ("value string", True)
    with pytest.raises(PipelineError, match="no Spark column type"):
        output_ddl(Types.ROW_NAMED(["x"], [set]))


BASICS = [Types.STRING(), Types.BYTE(), Types.BOOLEAN(), Types.SHORT(), Types.INT(),
          Types.LONG(), Types.FLOAT(), Types.DOUBLE(), Types.CHAR(), Types.BIG_INT(),
          Types.BIG_DEC(), Types.INSTANT(), Types.SQL_DATE(), Types.SQL_TIME(),
          Types.SQL_TIMESTAMP(), Types.LOCAL_DATE(), Types.LOCAL_TIME(),
          Types.LOCAL_DATE_TIME(), Types.PICKLED_BYTE_ARRAY()]


def _composites(inner):
    """Every composite ``Types.*`` around ``inner``, nested one more level in each."""
    flat = [Types.LIST(inner), Types.MAP(Types.STRING(), inner), Types.ROW([inner]),
            Types.ROW_NAMED(["x"], [inner]), Types.TUPLE([Types.INT(), inner]),
            Types.BASIC_ARRAY(inner), Types.OBJECT_ARRAY(inner), Types.PRIMITIVE_ARRAY(inner)]
    return flat + [Types.LIST(Types.MAP(Types.STRING(), inner)),
                   Types.MAP(Types.STRING(), Types.ROW_NAMED(["a", "b"],
                                                             [Types.LIST(inner), inner]))]


@pytest.mark.parametrize("inner", BASICS, ids=repr)
def test_every_type_nested_in_every_composite_declares_state(inner):
    for declared in [inner, *_composites(inner)]:
        assert ValueStateDescriptor("v", declared).type_info is python_type(declared)
        assert ListStateDescriptor("l", declared).type_info is python_type(declared)
        mapped = MapStateDescriptor("m", Types.STRING(), declared)  # keyed or broadcast
        assert mapped.value_type_info is python_type(declared)


def test_the_issue_38_declarations_build_and_are_equal_as_pyflinks_are():
    items = MapStateDescriptor("items", Types.STRING(), Types.LIST(Types.PICKLED_BYTE_ARRAY()))
    rules = MapStateDescriptor("rules", Types.STRING(), Types.MAP(Types.STRING(),
                                                                  Types.PICKLED_BYTE_ARRAY()))
    assert items.value_type_info is list and rules.value_type_info is dict
    assert Types.LIST(Types.INT()) == Types.LIST(Types.INT()) != Types.LIST(Types.STRING())
    named = Types.ROW_NAMED(["a", "b"], [Types.STRING(), Types.LIST(Types.DOUBLE())])
    assert named.get_field_names() == ["a", "b"]
    assert named.get_field_types() == [str, Types.LIST(Types.DOUBLE())]
    assert repr(Types.MAP(Types.STRING(), Types.PICKLED_BYTE_ARRAY())) == (
        "Types.MAP(str, Types.PICKLED_BYTE_ARRAY())")


@pytest.mark.parametrize("declared", [
    Types.LIST(Types.PICKLED_BYTE_ARRAY()), Types.MAP(Types.STRING(), Types.PICKLED_BYTE_ARRAY()),
    Types.ROW_NAMED(["id", "items"], [Types.STRING(), Types.LIST(Types.PICKLED_BYTE_ARRAY())]),
    Types.TUPLE([Types.STRING(), Types.SQL_TIME()]), Types.LOCAL_TIME(),
], ids=repr)
def test_a_type_without_a_column_is_refused_only_as_an_output_naming_the_fix(declared):
    ValueStateDescriptor("fine-in-state", declared)
    fix = "isoformat" if "time" in repr(declared) else r"Types.PICKLED_BYTE_ARRAY\(\) for"
    message = rf"OutputTag\('x'\): .*has no Spark column type.*: .*{fix}"
    with pytest.raises(PipelineError, match=message) as refused:
        OutputTag("x", declared)
    assert "\n" not in str(refused.value)
    with pytest.raises(PipelineError, match="output_schema: .*has no Spark column type"):
        output_ddl(declared, "output_schema")


def test_nested_basic_types_become_nested_columns():
    declared = Types.ROW_NAMED(
        ["when", "day", "tags", "by_day"],
        [Types.INSTANT(), Types.LOCAL_DATE(), Types.OBJECT_ARRAY(Types.STRING()),
         Types.MAP(Types.STRING(), Types.LIST(Types.ROW([Types.BIG_DEC(), Types.CHAR()])))])
    ddl, codec = output_ddl(declared)
    assert (ddl, codec) == ("`when` timestamp, `day` date, `tags` array<string>, `by_day` "
                            "map<string,array<struct<`f0`: decimal(38,18), `f1`: string>>>",
                            False)
    parse_ddl(ddl)


@pytest.mark.parametrize(
    ("declared", "value"),
    [
        (None, object()), (object, {1, 2}), (str, None), (int, 3), (float, 3), (float, 2.5),
        (dict, {"a": 1}), (tuple, Row(a=1)), (list[str], [1]), (typing.Any, 1),
        (datetime.date, datetime.datetime(2024, 1, 1)),
    ],
)
def test_accepts(declared, value):
    assert accepts(declared, value)


@pytest.mark.parametrize(
    ("declared", "value"),
    [(str, 1), (int, "1"), (int, 1.0), (float, True), (float, "1.0"), (dict, [("a", 1)]),
     (list, (1,)), (bytes, "x")],
)
def test_rejects(declared, value):
    assert not accepts(declared, value)
