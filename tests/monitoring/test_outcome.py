"""A run's outcome, said at its end (monitoring/outcome.py): all or mostly dead letters is a
warning naming the first reason; none written at all is a failed run for ``sparkcast run``."""

from sparkcast.monitoring.outcome import RunOutcome


def record(main, side, letters, first=None, name="sparkcast"):
    return {"operators": {name: {"main_rows": main, "side_output_rows": side,
                                 "dead_letters": letters, "first_dead_letter": first}}}


def test_a_run_of_dead_letters_only_failed_and_names_the_first_reason():
    outcome = RunOutcome()
    outcome.add(record(0, 0, 0))
    outcome.add(record(0, 0, 3, "output 'main' does not match: field 'amount'"))
    outcome.add(record(0, 0, 2, "a later reason"))
    assert outcome.all_failed and outcome.batches == 3
    line = outcome.warning("job")
    assert line is not None and "its main output all dead letters" in line
    assert "5 dead letter(s) against 0 main row(s)" in line and "field 'amount'" in line
    assert "a later reason" not in line


def test_a_main_output_of_mostly_dead_letters_warns_without_failing_the_run():
    mostly = RunOutcome()
    mostly.add(record(1, 0, 2, "first"))
    assert not mostly.all_failed and "main output mostly dead letters" in (
        mostly.warning("job") or "")
    side_only = RunOutcome()  # the main output all dead letters, side outputs written
    side_only.add(record(0, 4, 2, "first"))
    assert not side_only.all_failed and "main output all dead letters" in (
        side_only.warning("job") or "")


def test_a_good_run_says_nothing():
    good = RunOutcome()
    good.add(record(5, 2, 1, "one bad row"))
    assert not good.all_failed and good.warning("job") is None
    assert RunOutcome().warning("job") is None and not RunOutcome().all_failed
