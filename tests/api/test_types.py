"""PyFlink's ``Types`` factory and the ``accepts`` check state writes go through."""

import datetime
import decimal
import typing

import pytest

from sparkcast import Row, Types
from sparkcast.api.declared_types import accepts


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
    assert Types.LIST(Types.INT()) is list
    assert Types.PRIMITIVE_ARRAY(Types.INT()) is list
    assert Types.BASIC_ARRAY(Types.STRING()) is list
    assert Types.MAP(Types.STRING(), Types.INT()) is dict
    assert Types.TUPLE([Types.INT(), Types.STRING()]) is tuple
    assert Types.ROW([Types.INT()]) == Row | tuple  # PyFlink's Row, an input row or a tuple
    assert Types.ROW_NAMED(["a"], [Types.INT()]) == Row | tuple


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
