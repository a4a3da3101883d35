"""The state codec: tagged JSON that round-trips every supported type and never pickles."""

import datetime
import decimal
import json
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

from sparkcast import Row
from sparkcast.core import codec
from sparkcast.core.frozen import FrozenDict, FrozenList, freeze
from sparkcast.errors import StateSerializationError

ROUND_TRIPS = [
    None, True, False, 0, -7, 2**70, 1.5, -0.0, "", "héllo ✓",
    [], [1, "a", None], {}, {"a": 1, "b": [2, 3]},
    (), (1, "a"), ((1, 2), [3]),
    b"", b"\x00\xffbytes",
    {1: "int key", 2: "x"}, {(1, "a"): 5}, {None: 1, True: 2}, {"$dollar": 1}, {"": 0},
    {1, 2, 3}, set(), {(1, 2), (3, 4)},
    datetime.datetime(2024, 5, 1, 12, 30, 15, 123456),
    datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
    datetime.date(2024, 2, 29),
    datetime.time(23, 59, 1, 5), datetime.time(8, 0, tzinfo=datetime.UTC),
    decimal.Decimal("12.3400"), decimal.Decimal("-1E+5"),
    Row(color="red", size=3), Row(1, 2), [Row(a=Row(b=1))],
    {"nested": {"deeper": [{"x": (1, b"2")}]}},
]


@pytest.mark.parametrize("value", ROUND_TRIPS, ids=repr)
def test_round_trip(value):
    decoded = codec.decode(codec.encode(value))
    assert decoded == value
    assert type(decoded) is type(value) or isinstance(value, Row)


@pytest.mark.parametrize(
    "value",
    [{frozenset({1, 2}): "a"}, {(1, frozenset({"x"})): "b"}, {frozenset({(1, 2)})},
     {frozenset({1})}],
    ids=repr,
)
def test_hashable_containers_as_keys_and_members_round_trip(value):
    decoded = codec.decode(codec.encode(value))
    assert decoded == value


def test_rows_keep_their_field_names():
    decoded = codec.decode(codec.encode(Row(color="red", size=3)))
    assert decoded.color == "red" and decoded.__fields__ == ("color", "size")


@pytest.mark.parametrize("special", [math.inf, -math.inf])
def test_infinities(special):
    assert codec.decode(codec.encode(special)) == special


def test_nan():
    assert math.isnan(codec.decode(codec.encode(math.nan)))


def test_frozen_containers_encode_as_plain_ones():
    frozen = freeze({"a": [1, {"b": 2}], "s": {1}})
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    assert codec.decode(codec.encode(frozen)) == {"a": [1, {"b": 2}], "s": {1}}
    assert codec.fingerprint(frozen) == codec.fingerprint({"a": [1, {"b": 2}], "s": {1}})


def test_bytearray_and_memoryview_decode_as_bytes():
    assert codec.decode(codec.encode(bytearray(b"ab"))) == b"ab"
    assert codec.decode(codec.encode(memoryview(b"cd"))) == b"cd"


@pytest.mark.parametrize(
    "array",
    [np.arange(6, dtype=np.int64).reshape(2, 3), np.array([1.5, -2.0], dtype=np.float32),
     np.array([], dtype=np.float64), np.array([True, False])],
)
def test_numpy_arrays(array):
    decoded = codec.decode(codec.encode(array))
    assert decoded.dtype == array.dtype and decoded.shape == array.shape
    assert np.array_equal(decoded, array)
    assert decoded.flags.writeable  # a copy, not a read-only view of the decoded bytes


def test_numpy_object_arrays_and_scalars():
    decoded = codec.decode(codec.encode(np.array(["a", 1], dtype=object)))
    assert decoded.dtype == object and list(decoded) == ["a", 1]
    assert codec.decode(codec.encode(np.int64(5))) == 5
    assert codec.decode(codec.encode([np.float64(0.5)])) == [0.5]


def test_frozen_decode_gives_read_only_containers():
    value = codec.frozen_decode(codec.encode({"a": [1]}))
    assert isinstance(value, FrozenDict) and isinstance(value["a"], FrozenList)


def test_encoding_is_utf8_json():
    data = codec.encode({"name": "ü", "t": (1,)})
    assert json.loads(data.decode("utf-8")) == {"name": "ü", "t": {"$t": [1]}}
    assert codec.decode(data.decode("utf-8")) == {"name": "ü", "t": (1,)}


def test_fingerprint_ignores_dict_order():
    a = {"x": 1, "y": {"p": [1, 2], "q": None}, 3: "int key", 1: "one"}
    b = {1: "one", 3: "int key", "y": {"q": None, "p": [1, 2]}, "x": 1}
    assert list(a) != list(b)
    assert codec.canonical(a) == codec.canonical(b)
    assert codec.fingerprint(a) == codec.fingerprint(b)


def test_fingerprint_tells_values_apart():
    values = [1, "1", 1.0, True, [1], (1,), {1}, {"a": 1}, {"a": 2}, None, b"1"]
    assert len({codec.fingerprint(v) for v in values}) == len(values)


def test_fingerprint_is_stable_across_processes():
    # A constant, so a change of the canonical form (which reorders broadcast elements on
    # restart) cannot go unnoticed.
    assert codec.fingerprint({"b": 1, "a": [1, "x"]}) == codec.fingerprint({"a": [1, "x"], "b": 1})
    assert len(codec.fingerprint("x")) == 24
    assert codec.canonical({"b": 1, "a": (2,)}) == b'{"a":{"$t":[2]},"b":1}'
    # and the same in processes whose string hashes, so their sets' orders, differ
    value = {"b": 1, "a": [1, "x"], "s": {"p", "q", "r", "s", "t"}}
    code = f"from sparkcast.core import codec; print(codec.fingerprint({value!r}))"
    printed = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=60,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
               for seed in ("1", "2", "3")}
    assert printed == {codec.fingerprint(value)}


def test_set_encoding_is_order_independent():
    assert codec.encode({3, 1, 2}) == codec.encode({2, 3, 1})


class Custom:
    def __init__(self) -> None:
        self.code = lambda: 1  # code is not state: an object holding it cannot be stored


@pytest.mark.parametrize("value", [Custom(), object(), {"k": Custom()}, [lambda: 1],
                                   {Custom(): 1}, complex(1, 2)])
def test_unknown_objects_are_rejected(value):
    with pytest.raises(StateSerializationError, match="cannot store a"):
        codec.encode(value)
    with pytest.raises(StateSerializationError):
        codec.fingerprint(value)


def test_never_uses_pickle(monkeypatch):
    def forbidden(*_args, **_kwargs):
        raise AssertionError("pickle was used")

    for name in ("dumps", "loads", "dump", "load"):
        monkeypatch.setattr(pickle, name, forbidden)
    for value in ROUND_TRIPS:
        assert codec.decode(codec.encode(value)) == value
    assert "pickle" not in vars(codec)


def test_pickled_bytes_are_not_executed():
    payload = pickle.dumps({"a": 1})
    with pytest.raises(StateSerializationError, match="corrupt"):
        codec.decode(payload)


@pytest.mark.parametrize("data", [b"{not json", b"", '{"a": '])
def test_corrupt_data(data):
    with pytest.raises(StateSerializationError, match="corrupt"):
        codec.decode(data)


def test_unknown_tag_names_its_cause():
    with pytest.raises(StateSerializationError, match="unknown codec tag"):
        codec.decode(b'{"$zz": 1}')


def test_keep_names_decodes_without_the_classes_and_encodes_back_as_stored():
    """The state tools rewrite state without the job (``rescale``): what they decode with
    ``KEEP_NAMES`` encodes back with every class name, so the job's registry rebuilds the
    same objects; a generic decode would turn an enum into its value."""
    import enum as _enum
    from typing import NamedTuple

    from sparkcast.api.functions import BroadcastProcessFunction
    from sparkcast.core.type_registry import job_types

    class Tier(_enum.Enum):
        GOLD = "gold"

    class Point(NamedTuple):
        x: int
        y: int

    class Holder:
        def __init__(self) -> None:
            self.tier = Tier.GOLD
            self.points = [Point(1, 2)]

    registry = job_types(BroadcastProcessFunction(), [], [Tier, Point, Holder])
    stored = codec.encode({"h": Holder(), Tier.GOLD: Point(3, 4)})
    rewritten = codec.encode(codec.decode(stored, codec.KEEP_NAMES))
    back = codec.decode(rewritten, registry)
    assert back[Tier.GOLD] == Point(3, 4) and type(back[Tier.GOLD]) is Point
    assert back["h"].tier is Tier.GOLD and back["h"].points == [Point(1, 2)]
    assert codec.decode(codec.encode(codec.decode(stored)), registry)["h"].tier == "gold"
