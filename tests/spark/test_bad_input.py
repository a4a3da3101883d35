"""Bad input on Spark: malformed JSON lines, wrong types, a function that raises, outputs that do
not fit the schema — each becomes a dead letter with a reason while the rest is processed and the
query runs on; with ``on_error="fail"`` the query stops with an error naming the function."""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.spark import Stream, read_output
from tests.spark.differential import read_stream, write_batch_file

pytestmark = pytest.mark.spark

FACTORS = MapStateDescriptor("factors", str, float)
MAIN = "id long, user string, amount double, _corrupt_record string"
OUTPUT = "id long, scaled double"


class Scale(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FACTORS).put(value["name"], value["factor"])

    def process_element(self, value, ctx):
        if value["amount"] < 0:
            raise ValueError(f"negative amount {value['amount']}")
        if value["id"] == 13:
            yield {"id": value["id"], "wrong": 1.0}
        elif value["id"] == 14:
            yield value["id"], "not a number"
        else:
            yield value["id"], value["amount"] * ctx.get_broadcast_state(FACTORS)["x"]


MALFORMED = '{"id": 3, "user": "u'
WRONG_TYPE = '{"id": 4, "user": "u", "amount": "abc"}'
FIRST = [{"id": 1, "user": "u", "amount": 1.0}, MALFORMED, {"id": 2, "user": "v", "amount": 2.0},
         WRONG_TYPE, {"id": 5, "user": "u", "amount": -1.0},
         {"id": 13, "user": "u", "amount": 1.0}, {"id": 14, "user": "u", "amount": 1.0}]
SECOND = [{"id": 6, "user": "u", "amount": 6.0}, {"id": 7, "user": "w", "amount": 7.0}]


def _start(spark, base, on_error, batches):
    for index, rows in enumerate(batches):
        write_batch_file(base / "events", index, rows)
    write_batch_file(base / "rules", 0, [{"name": "x", "factor": 10.0}])
    events = read_stream(spark, MAIN, base / "events")  # PERMISSIVE: Spark's default mode
    result = Stream(events).connect(Stream(read_stream(
        spark, "name string, factor double", base / "rules")).broadcast(FACTORS)).process(
        Scale(), OUTPUT, parallelism=2, on_error=on_error)
    assert result.explain().engine == "micro_batch"
    return result.write_stream(str(base / "out"), str(base / "checkpoint"),
                               trigger={"availableNow": True})


def test_bad_rows_become_dead_letters_and_the_rest_is_processed(spark, tmp_path):
    query = _start(spark, tmp_path, "dead_letter", [FIRST, SECOND])
    query.awaitTermination()
    assert query.exception() is None
    assert len(query.recentProgress) >= 2  # the query ran on after the bad batch
    # every line read once: the malformed rows are tagged in the same scan as the good ones
    assert sum(p["numInputRows"] for p in query.recentProgress) == len(FIRST + SECOND) + 1
    out = str(tmp_path / "out")
    main = sorted(tuple(r) for r in read_output(spark, out).collect())
    assert main == [(1, 10.0), (2, 20.0), (6, 60.0), (7, 70.0)]
    letters = [r.asDict() for r in read_output(spark, out, "dead_letters").collect()]
    by_callback = {}
    for letter in letters:
        by_callback.setdefault(letter["callback"], []).append(letter)
    assert sorted(by_callback) == ["input", "output", "process_element"]
    malformed = by_callback["input"]
    assert sorted(letter["value"] for letter in malformed) == sorted([MALFORMED, WRONG_TYPE])
    assert all(letter["error"].startswith("malformed input in file:") for letter in malformed)
    assert all("/events/" in letter["error"] for letter in malformed)  # the line's file
    (raised,) = by_callback["process_element"]
    assert raised["error"] == "ValueError: negative amount -1.0" and '"id": 5' in raised["value"]
    outputs = by_callback["output"]
    assert len(outputs) == 2
    assert any("do not match the output schema" in letter["error"] for letter in outputs)
    assert any("not a number" in letter["value"] for letter in outputs)


def test_on_error_fail_stops_the_query_naming_the_function(spark, tmp_path):
    query = _start(spark, tmp_path, "fail", [[{"id": 5, "user": "u", "amount": -1.0}]])
    with pytest.raises(StreamingQueryException, match=r"Scale\.process_element"):
        query.awaitTermination()


def test_a_json_source_without_a_corrupt_record_column_is_warned_about_with_the_fix(
        spark, tmp_path):
    """Without the column Spark turns a malformed line into a row of nulls (6 main rows for 5
    events): the pipeline says so when it is built, with the schema to use."""
    write_batch_file(tmp_path / "events", 0, [{"id": 1, "user": "u", "amount": 1.0}, MALFORMED])
    write_batch_file(tmp_path / "rules", 0, [{"name": "x", "factor": 10.0}])
    events = read_stream(spark, "id long, user string, amount double", tmp_path / "events")
    rules = read_stream(spark, "name string, factor double", tmp_path / "rules")
    with pytest.warns(UserWarning, match="main input reads JSON files without a _corrupt_record"
                      ) as caught:
        Stream(events).connect(Stream(rules).broadcast(FACTORS)).process(Scale(), OUTPUT)
    found = [w for w in caught if "_corrupt_record" in str(w.message)]
    assert [w.filename for w in found] == [__file__, __file__]  # the user's line, not ours
    main, broadcast = [str(w.message) for w in found]
    assert "\n" not in main + broadcast
    assert 'schema("id bigint, user string, amount double, _corrupt_record string")' in main
    assert broadcast.startswith("the broadcast input reads JSON files")
