"""Outputs are written without loss or not at all, objects map to columns by field name, and
PyFlink's types type the outputs (issue 32); the same checks run on Spark
(tests/spark/test_strict_outputs.py)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor, OutputTag, Row, Types
from sparkcast.core.output_codec import decode_output, encode_output
from sparkcast.errors import OutputTypeError
from sparkcast.testing import BroadcastHarness

RULES = MapStateDescriptor("rules", str, str)


class Emit(BroadcastProcessFunction):
    """Yields what each element lists: the outputs under test."""

    def process_element(self, value, ctx):
        yield from value

    def process_broadcast_element(self, value, ctx):
        pass


def harness(output_schema, side_outputs=(), on_error="dead_letter"):
    h = BroadcastHarness(Emit(), [RULES], output_schema=output_schema,
                         side_outputs=side_outputs, on_error=on_error)
    h.open()
    return h


@dataclasses.dataclass
class Inner:
    x: int


@dataclasses.dataclass
class UserEvent:
    user: str
    amount: float
    inner: Inner


class Pair(typing.NamedTuple):
    amount: float  # in another order than the columns: mapped by name
    user: str


class Slotted:
    __slots__ = ("user",)

    def __init__(self, user):
        self.user = user


def test_a_lossy_value_is_a_dead_letter_naming_the_output_field_and_types():
    h = harness("user string, amount long")
    h.process_element([("a", 120.5), ("b", 120.0), ("c", "12"), ("d", 2**70), ("e", 7)])
    assert h.output() == [("b", 120), ("e", 7)]
    assert type(h.output()[0][1]) is int  # 120.0 reads back 120, as Spark writes it
    reasons = [d.error for d in h.dead_letters()]
    assert [d.value for d in h.dead_letters()] == [("a", 120.5), ("c", "12"), ("d", 2**70)]
    assert "output 'main'" in reasons[0] and "field 'amount' expects bigint, got float 120.5" \
        in reasons[0]
    assert "field 'amount' expects bigint, got str '12'" in reasons[1]
    assert "field 'amount' expects bigint, got int" in reasons[2]


def test_a_too_long_decimal_and_a_nested_fraction_are_dead_letters():
    import decimal

    side = OutputTag("s", "price decimal(5,2), parts array<struct<n: int>>")
    h = harness("v string", [side])
    h.process_element([(side, (decimal.Decimal("1.234"), [])),
                       (side, (decimal.Decimal("1.23"), [{"n": 1.5}])),
                       (side, (decimal.Decimal("1.20"), [{"n": 2.0}]))])
    assert h.side_output(side) == [(decimal.Decimal("1.20"), [{"n": 2.0}])]
    first, second = (d.error for d in h.dead_letters())
    assert "output 's'" in first and "field 'price' expects decimal(5,2)" in first
    assert "field 'parts' expects array<struct<n:int>>" in second and "1.5" in second


def test_on_error_fail_stops_on_an_output_that_does_not_fit():
    h = harness("user string, amount long", on_error="fail")
    with pytest.raises(OutputTypeError, match="field 'amount' expects bigint, got float 120.5"):
        h.process_element([("a", 120.5)])


def test_objects_map_to_columns_by_field_name_nested_structs_included():
    side = OutputTag("unprocessed", "user string, amount double, inner struct<x: long>")
    h = harness("user string, amount double", [side])
    h.process_element([UserEvent("u", 1.5, Inner(2)), Pair(2.0, "v"),
                       (side, UserEvent("w", 3.0, Inner(4)))])
    assert h.output() == [UserEvent("u", 1.5, Inner(2)), Pair(2.0, "v")]
    assert h.side_output(side) == [UserEvent("w", 3.0, Inner(4))]
    assert h.dead_letters() == []


def test_a_namedtuple_of_other_field_names_fits_by_position_as_a_tuple():
    h = harness("a double, b string")
    h.process_element([Pair(1.0, "u")])
    assert h.output() == [(1.0, "u")] and h.dead_letters() == []


def test_an_object_missing_a_field_is_a_dead_letter_naming_it():
    side = OutputTag("unprocessed", "user string, amount double, inner struct<x: long>")
    h = harness("user string, amount double", [side])
    h.process_element([Slotted("p"), (side, Pair(1.0, "z")), (side, UserEvent("w", 1.0, 7))])
    reasons = [d.error for d in h.dead_letters()]
    assert "Slotted has no field 'amount'" in reasons[0] and "output 'main'" in reasons[0]
    assert "Pair has no field 'inner'" in reasons[1] and "output 'unprocessed'" in reasons[1]
    assert "field 'inner' expects struct<x:bigint>, got int 7" in reasons[2]
    assert h.output() == [] and h.side_output(side) == []


def test_pyflink_types_type_the_main_and_side_outputs():
    review = OutputTag("review", Types.ROW_NAMED(["user", "n"], [Types.STRING(), Types.INT()]))
    h = harness(Types.ROW_NAMED(["user", "score"], [Types.STRING(), Types.DOUBLE()]), [review])
    assert h.output_schema == "`user` string, `score` double"
    h.process_element([("a", 1), (review, UserEvent("u", 3.0, None)), (review, ("v", 2.5))])
    assert h.output() == [("a", 1.0)]
    assert h.side_output(review) == []  # UserEvent has no n; 2.5 is no int
    assert len(h.dead_letters()) == 2
    h.process_element([(review, {"user": "w", "n": 3})])
    assert h.side_output(review) == [{"user": "w", "n": 3}]


def test_pyflink_rows_inside_nested_struct_columns_map_by_name_or_position():
    pair = Types.ROW_NAMED(["first", "second"], [Types.INT(), Types.INT()])
    h = harness(Types.ROW_NAMED(["pairs", "top"], [Types.LIST(pair), Types.ROW([Types.STRING()])]))
    h.process_element([Row(pairs=[Row(second=2, first=1)], top=Row("x")),
                       Row(pairs=[Row(first=1.5, second=2)], top=Row("y"))])
    assert [(o.pairs[0].first, o.pairs[0].second, o.top[0]) for o in h.output()] == [(1, 2, "x")]
    [letter] = h.dead_letters()  # 1.5 is no int, inside the nested Row too
    assert "field 'pairs' expects array<struct<first:bigint,second:bigint>>" in letter.error


def test_pickled_byte_array_outputs_are_codec_text_that_reads_back_as_objects():
    anything = OutputTag("anything", Types.PICKLED_BYTE_ARRAY())
    assert anything.schema == "value string" and anything.codec
    h = harness("v string", [anything])
    event = UserEvent("u", 1.0, Inner(1))
    h.process_element([(anything, event), (anything, {1, 2})])
    assert h.side_output(anything) == [event, {1, 2}]
    text = encode_output(event)
    assert decode_output(text, UserEvent, Inner) == event
    assert decode_output(text)["inner"]["x"] == 1  # without the classes: plain fields


def test_without_an_output_schema_the_harness_infers_one_from_an_objects_fields():
    h = BroadcastHarness(Emit(), [RULES])
    h.open()
    with pytest.warns(UserWarning, match="inferred '`amount` double, `user` string'"):
        h.process_element([Pair(1.0, "u")])
    assert h.output() == [Pair(1.0, "u")] and h.dead_letters() == []
