"""process_batch: main-side rows as pandas DataFrames, one call per micro-batch."""

import pandas as pd
import pytest

from sparkcast import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    ValueStateDescriptor,
)
from sparkcast.errors import (
    ContextError,
    KeyedStateError,
    OutputTypeError,
    ReadOnlyStateError,
    TimerError,
    UserFunctionError,
)

RATES = MapStateDescriptor("rates", str, float)
SMALL = OutputTag("small")


class Convert(BroadcastProcessFunction):
    """Converts amounts with the broadcast rate; rows with currency "XXX" make it raise."""

    def __init__(self):
        self.batch_sizes = []

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RATES).put(value["currency"], value["rate"])

    def process_element(self, value, ctx):
        raise AssertionError("a vectorized function is never called per element")

    def process_batch(self, batch, ctx):
        self.batch_sizes.append(len(batch))
        if (batch["currency"] == "XXX").any():
            raise ValueError("unknown currency XXX")
        rates = dict(ctx.get_broadcast_state(RATES).items())
        out = batch.assign(eur=batch["amount"] * batch["currency"].map(rates))
        yield out[out["eur"] >= 10]
        yield SMALL, out[out["eur"] < 10][["id"]]


def rows(*specs):
    return [{"id": i, "currency": c, "amount": a} for i, (c, a) in enumerate(specs)]


@pytest.fixture
def h(non_keyed):
    harness = non_keyed(Convert(), descriptors=[RATES])
    harness.process_broadcast_element({"currency": "USD", "rate": 0.5})
    harness.process_broadcast_element({"currency": "EUR", "rate": 1.0})
    return harness


def test_one_call_per_micro_batch_and_rows_as_dicts(h):
    h.process_micro_batch(main=rows(("USD", 40), ("EUR", 5), ("EUR", 12), ("USD", 2)))
    assert h.engine.function.batch_sizes == [4]
    assert h.output() == [
        {"id": 0, "currency": "USD", "amount": 40, "eur": 20.0},
        {"id": 2, "currency": "EUR", "amount": 12, "eur": 12.0},
    ]
    assert h.side_output(SMALL) == [{"id": 1}, {"id": 3}]
    assert h.output_records()[0][1] is None  # batch outputs carry no timestamp


def test_a_single_process_element_call_is_a_one_row_batch(h):
    h.process_element({"id": 7, "currency": "EUR", "amount": 50})
    assert h.engine.function.batch_sizes == [1]
    assert h.output() == [{"id": 7, "currency": "EUR", "amount": 50, "eur": 50.0}]


def test_a_failing_row_is_isolated_into_dead_letters(non_keyed):
    h = non_keyed(Convert(), descriptors=[RATES], on_error="dead_letter")
    h.process_broadcast_element({"currency": "EUR", "rate": 1.0})
    batch = rows(*[("EUR", 100 + i) for i in range(8)])
    batch[5]["currency"] = "XXX"
    h.process_micro_batch(main=batch)
    assert [row["id"] for row in h.output()] == [0, 1, 2, 3, 4, 6, 7]
    (letter,) = h.dead_letters()
    assert letter.callback == "process_batch" and letter.key is None
    assert letter.error == "ValueError: unknown currency XXX"
    assert letter.value.asDict() == {"id": 5, "currency": "XXX", "amount": 105}
    # halving, depth first: 8 fails; 0-3 ok; 4-7 fails; 4-5 fails; 4 ok; 5 dead; 6-7 ok
    assert h.engine.function.batch_sizes == [8, 4, 4, 2, 1, 1, 2]


def test_failing_batch_with_on_error_fail_raises(h):
    with pytest.raises(UserFunctionError, match=r"Convert.process_batch raised ValueError") as info:
        h.process_micro_batch(main=rows(("EUR", 1), ("XXX", 2)))
    assert isinstance(info.value.__cause__, ValueError)
    assert h.output() == [] and h.side_output(SMALL) == []


def test_empty_batches_are_not_processed(h):
    h.process_micro_batch(main=[])
    assert h.engine.function.batch_sizes == []


class Returns(BroadcastProcessFunction):
    def __init__(self, result):
        self.result = result

    def process_broadcast_element(self, value, ctx):
        pass

    def process_batch(self, batch, ctx):
        return self.result(batch)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (lambda b: b[["a"]], [{"a": 1}, {"a": 2}]),
        (lambda b: None, []),
        (lambda b: [b.head(1), b.tail(1)], [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]),
        (lambda b: iter([]), []),
    ],
)
def test_return_forms(non_keyed, result, expected):
    h = non_keyed(Returns(result))
    h.process_micro_batch(main=[{"a": 1, "b": "x"}, {"a": 2, "b": "y"}])
    assert h.output() == expected


@pytest.mark.parametrize("bad", [lambda b: [b.to_dict("records")], lambda b: [{"a": 1}]])
def test_yielding_something_else_raises_output_type_error(non_keyed, bad):
    h = non_keyed(Returns(bad))
    with pytest.raises(OutputTypeError, match="must return or yield DataFrames"):
        h.process_micro_batch(main=[{"a": 1}])


class KeyedBatch(KeyedBroadcastProcessFunction):
    def __init__(self, action):
        self.action = action

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", int))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RATES).put(value, 1.0)

    def process_batch(self, batch, ctx):
        return self.action(self, batch, ctx)


def _side_list(self, batch, ctx):
    ctx.output(SMALL, pd.DataFrame({"n": [len(batch)]}))
    return [batch.assign(ts=[ctx.timestamp()] * len(batch),
                         rates=[len(ctx.get_broadcast_state(RATES))] * len(batch))]


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        (lambda self, b, ctx: ctx.get_current_key(), KeyedStateError, "group the batch"),
        (lambda self, b, ctx: ctx.timer_service(), TimerError, "use process_element"),
        (lambda self, b, ctx: self.count.value(), KeyedStateError, "no current key"),
        (lambda self, b, ctx: ctx.get_broadcast_state(RATES).put("x", 1.0), ReadOnlyStateError,
         "read-only"),
    ],
)
def test_what_process_batch_cannot_do(keyed, action, error, message):
    h = keyed(KeyedBatch(action), key_selector=lambda v: v["user"], descriptors=[RATES])
    with pytest.raises(error, match=message):
        h.process_micro_batch(main=[{"user": "u1"}])


def test_batch_context_reads_broadcast_state_and_emits_side_outputs(keyed):
    h = keyed(KeyedBatch(_side_list), key_selector=lambda v: v["user"], descriptors=[RATES])
    h.process_broadcast_element("USD")
    h.process_micro_batch(main=[{"user": "u1"}, {"user": "u2"}], main_timestamps=[1, 2])
    assert h.output() == [{"user": "u1", "ts": None, "rates": 1},
                          {"user": "u2", "ts": None, "rates": 1}]
    assert h.side_output(SMALL) == [{"n": 2}]


def test_batch_context_dies_after_the_call(non_keyed):
    kept = []

    class Keeps(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_batch(self, batch, ctx):
            kept.append(ctx)

    h = non_keyed(Keeps())
    h.process_micro_batch(main=[{"a": 1}])
    with pytest.raises(ContextError):
        kept[0].get_broadcast_state(RATES)


def test_held_rows_are_released_as_one_batch(non_keyed):
    function = Convert()
    h = non_keyed(function, descriptors=[RATES], hold_until_ready=[RATES])
    h.process_micro_batch(main=rows(("EUR", 20), ("EUR", 30)))
    h.process_element({"id": 9, "currency": "EUR", "amount": 40})
    assert len(h.held()) == 3 and function.batch_sizes == []
    h.process_broadcast_element({"currency": "EUR", "rate": 2.0})
    assert function.batch_sizes == [3]
    assert [row["eur"] for row in h.output()] == [40.0, 60.0, 80.0]
