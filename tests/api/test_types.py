"""PyFlink's ``Types`` factory and the ``accepts`` check state writes go through."""

import datetime
import decimal
import typing

import pytest

from sparkcast import ListStateDescriptor, MapStateDescriptor, Row, Types
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
