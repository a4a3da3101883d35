"""Flink's keyed-state semantics, restated: each test names the Flink test it follows
(``StateBackendTestBase``, ``TtlStateTestBase`` with its TTL test contexts) or the doc page, and
runs on both state backends (the harness's and Spark's over in-memory handles).

Differences that remain are listed in docs/porting.md ("Every difference") with their reason.
"""

import pytest

from sparkcast.errors import StateTypeError, UserFunctionError
from tests.core.test_ttl_state import Ops, UpdateType, Visibility, at, stored, ttl


@pytest.fixture
def make(keyed):
    def build(**config):
        return keyed(Ops(ttl(**config)), key_selector=lambda v: v[0], on_error="fail")
    return build


def _raises(h, op, match):
    with pytest.raises((StateTypeError, UserFunctionError)) as info:
        at(h, 0, op)
    error = info.value if isinstance(info.value, StateTypeError) else info.value.__cause__
    assert isinstance(error, StateTypeError) and match in str(error)


# ------------------------------------------------------------------ StateBackendTestBase: lists


def test_list_state_update_null(make):
    """StateBackendTestBase.testListStateUpdateNull: update(null) throws (it does not clear)."""
    h = make()
    at(h, 0, lambda s: s.list.add("a"))
    _raises(h, lambda s: s.list.update(None), "update(None)")
    assert at(h, 0, lambda s: list(s.list.get())) == ["a"]


def test_list_state_update_null_entries(make):
    """StateBackendTestBase.testListStateUpdateNullEntries: a None entry throws, state kept."""
    h = make()
    at(h, 0, lambda s: s.list.add("a"))
    _raises(h, lambda s: s.list.update(["x", None, "y"]), "None")
    assert at(h, 0, lambda s: list(s.list.get())) == ["a"]


def test_list_state_add_all_null_and_null_entries_and_add_null(make):
    """StateBackendTestBase.testListStateAddAllNull, testListStateAddAllNullEntries and
    testListStateAddNull: each throws and adds nothing."""
    h = make()
    _raises(h, lambda s: s.list.add_all(None), "add_all(None)")
    _raises(h, lambda s: s.list.add_all(["x", None]), "None")
    _raises(h, lambda s: s.list.add(None), "None")
    assert at(h, 0, lambda s: list(s.list.get())) == []


def test_list_state_apis(make):
    """StateBackendTestBase.testListStateAPIs / testListStateDefaultValue: an empty list state
    reads as empty (PyFlink gives an empty iterable where Java gives null); update([]) and
    add_all([]) keep it empty; update replaces; clear empties."""
    h = make()
    assert at(h, 0, lambda s: list(s.list.get())) == []
    at(h, 0, lambda s: (s.list.add("17"), s.list.add("11")))
    at(h, 0, lambda s: s.list.update([]))
    assert at(h, 0, lambda s: list(s.list.get())) == []
    assert stored(h, "list") is None  # nothing left stored for the key
    at(h, 0, lambda s: s.list.add_all([]))
    assert stored(h, "list") is None
    at(h, 0, lambda s: (s.list.add_all(["3", "4"]), s.list.add_all([]), s.list.add("5")))
    assert at(h, 0, lambda s: list(s.list)) == ["3", "4", "5"]
    at(h, 0, lambda s: s.list.update(["1", "2"]))
    assert at(h, 0, lambda s: list(s.list.get())) == ["1", "2"]
    at(h, 0, lambda s: s.list.clear())
    assert at(h, 0, lambda s: list(s.list.get())) == []


# ------------------------------------------------------------------- StateBackendTestBase: maps


def test_map_state_default_value_and_is_empty(make):
    """StateBackendTestBase.testMapStateDefaultValue and testMapStateIsEmpty: an empty map has
    no entries; get of a missing key is None; is_empty follows puts and removes; clear empties."""
    h = make()
    assert at(h, 0, lambda s: (list(s.map.items()), s.map.is_empty())) == ([], True)
    assert at(h, 0, lambda s: (s.map.get("missing"), s.map["missing"])) == (None, None)
    at(h, 0, lambda s: (s.map.put("Ciao", 1), s.map.put("Bello", 2)))
    assert at(h, 0, lambda s: (s.map.get("Ciao"), s.map.is_empty())) == (1, False)
    at(h, 0, lambda s: s.map.remove("Ciao"))
    assert at(h, 0, lambda s: s.map.is_empty()) is False
    at(h, 0, lambda s: (s.map.remove("Bello"), s.map.remove("never there")))
    assert at(h, 0, lambda s: s.map.is_empty()) is True
    at(h, 0, lambda s: (s.map.put("a", 1), s.map.clear()))
    assert at(h, 0, lambda s: list(s.map.keys())) == []


def test_map_state_null_values_and_null_map(make):
    """TtlStateTestBase with TtlMapStatePerNullElementTestContext and
    TtlMapStateAllEntriesTestContext: a map entry may hold null, which get returns and contains
    counts as present; putAll(null) puts nothing (TtlMapState.putAll)."""
    h = make()
    at(h, 0, lambda s: (s.map.put("n", None), s.map.put_all(None)))
    assert at(h, 0, lambda s: (s.map.get("n"), s.map.contains("n"), dict(s.map.items()))) == (
        None, True, {"n": None})


def test_map_state_null_key_is_refused(make):
    """docs/porting.md: a None map key is refused (Spark's state store keys cannot be null)."""
    _raises(make(), lambda s: s.map.put(None, 1), "key None")


# --------------------------------------------------------- heap backend: reducing/aggregating


def test_reducing_and_aggregating_add_null_clears(make):
    """Flink's HeapReducingState.add and HeapAggregatingState.add: adding null clears the
    state (the functions never see None)."""
    h = make()
    at(h, 0, lambda s: (s.reducing.add(1), s.reducing.add(2), s.aggregating.add("x")))
    assert at(h, 0, lambda s: (s.reducing.get(), s.aggregating.get())) == (3, 1)
    at(h, 0, lambda s: (s.reducing.add(None), s.aggregating.add(None)))
    assert at(h, 0, lambda s: (s.reducing.get(), s.aggregating.get())) == (None, None)


# --------------------------------------------------------------------------- TtlStateTestBase


def test_value_set_null_with_ttl(make):
    """TtlStateTestBase.testValueSetNull (TtlValueStateTestContext)."""
    h = make(visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: s.value.update(2))
    assert at(h, 10, lambda s: s.value.value()) == 2
    at(h, 10, lambda s: s.value.update(None))
    assert at(h, 10, lambda s: s.value.value()) is None


def test_exact_expiration_on_write_per_list_element(make):
    """TtlStateTestBase.testExactExpirationOnWrite with TtlListStateTestContext (update is
    addAll): elements expire one batch at a time; an all-expired list is cleared on access."""
    h = make()
    at(h, 0, lambda s: s.list.add_all(["a", "b"]))
    assert at(h, 20, lambda s: list(s.list.get())) == ["a", "b"]
    at(h, 50, lambda s: s.list.add_all(["c"]))
    assert at(h, 120, lambda s: list(s.list.get())) == ["c"]
    at(h, 170, lambda s: s.list.add_all(["d"]))
    assert at(h, 220, lambda s: list(s.list.get())) == ["d"]
    assert at(h, 300, lambda s: list(s.list.get())) == []
    assert stored(h, "list") is None  # "Original state should be cleared on access"


def test_exact_expiration_on_read_map_entry_and_contains(make):
    """TtlStateTestBase.testExactExpirationOnRead with TtlMapStatePerElementTestContext, whose
    get also checks contains: with OnReadAndWrite, get(key) and contains(key) are reads that
    refresh the entry's expiry."""
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.map.put("k1", 1))
    assert at(h, 50, lambda s: s.map.contains("k1")) is True  # refreshed to 150
    assert at(h, 120, lambda s: s.map.get("k1")) == 1  # alive thanks to contains; now 220
    assert at(h, 219, lambda s: s.map.contains("k1")) is True
    assert at(h, 400, lambda s: (s.map.get("k1"), s.map.contains("k1"))) == (None, False)


def test_exact_expiration_on_read_map_keys(make):
    """TtlStateTestBase.testExactExpirationOnRead with TtlMapStateAllEntriesTestContext: keys()
    iterates entries (TtlMapState's keys() reads every entry), so it refreshes them."""
    h = make(update=UpdateType.OnReadAndWrite)
    at(h, 0, lambda s: s.map.put_all({"a": 1, "b": 2}))
    assert at(h, 50, lambda s: sorted(s.map.keys())) == ["a", "b"]
    assert at(h, 120, lambda s: dict(s.map.items())) == {"a": 1, "b": 2}


def test_relaxed_expiration_on_write_map_entry(make, state_backend):
    """TtlStateTestBase.testRelaxedExpirationOnWrite with TtlMapStatePerElementTestContext:
    ReturnExpiredIfNotCleanedUp returns the expired entry once (get and contains agree), and
    that access clears it."""
    h = make(visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: (s.map.put("k1", 1), s.map.put("k2", 2)))
    at(h, 10, lambda s: s.map.put("k3", 3))  # keeps the key alive through Spark's sweep
    assert at(h, 105, lambda s: (s.map.get("k1"), s.map.contains("k2"))) == (1, True)
    assert at(h, 105, lambda s: (s.map.get("k1"), s.map.contains("k2"))) == (None, False)
    assert at(h, 105, lambda s: dict(s.map.items())) == {"k3": 3}


def test_relaxed_expiration_on_read_list(make, state_backend):
    """TtlStateTestBase.testRelaxedExpirationOnRead with TtlListStateTestContext: refreshed by
    a read at 50, expired at 170, returned once by that read, then gone."""
    h = make(update=UpdateType.OnReadAndWrite, visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: s.list.add_all(["a", "b"]))
    assert at(h, 50, lambda s: list(s.list.get())) == ["a", "b"]
    swept = state_backend is not None  # Spark's backend sweeps all-expired keys at each flush
    assert at(h, 170, lambda s: list(s.list.get())) == ([] if swept else ["a", "b"])
    assert at(h, 170, lambda s: list(s.list.get())) == []


def test_relaxed_expiration_of_a_mixed_list(make):
    """TtlStateTestBase.testRelaxedExpirationOnWrite, one list with expired and live elements
    (TtlListState's IteratorWithCleanup returns both with ReturnExpiredIfNotCleanedUp)."""
    h = make(visibility=Visibility.ReturnExpiredIfNotCleanedUp)
    at(h, 0, lambda s: s.list.add("old"))
    at(h, 60, lambda s: s.list.add("new"))
    assert at(h, 120, lambda s: list(s.list.get())) == ["old", "new"]
    assert at(h, 120, lambda s: list(s.list.get())) == ["new"]


def test_expiration_timestamp_overflow(make):
    """TtlStateTestBase.testExpirationTimestampOverflow: a TTL of Long.MAX_VALUE never expires."""
    h = make(duration=2**63 - 1)
    at(h, 10, lambda s: (s.value.update(1), s.map.put("a", 1), s.list.add("x")))
    assert at(h, 50, lambda s: (s.value.value(), s.map.get("a"), list(s.list.get()))) == (
        1, 1, ["x"])
