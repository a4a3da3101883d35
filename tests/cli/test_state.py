"""``sparkcast state`` (cli/state.py): the parser and the summary it prints (the Spark side runs in
tests/spark/test_state_tools.py)."""

from __future__ import annotations

from sparkcast.cli import build_parser
from sparkcast.cli.state import summary_lines
from sparkcast.core.seed import Seed

SEEDS = {
    0: Seed(broadcast={"rules": [("r1", {"x": 1}), ("r2", {"x": 2})]},
            keyed={"count": [("a", 3), ("b", 5)]},
            timers={"EVENT_TIME": [[100, "a"], [90, "b"]]}, held=[[{"id": 1}, 7, "a"]],
            broadcast_version="v9"),
    1: Seed(keyed={"count": [("c", 1)]}),
}


def test_the_summary_counts_entries_keys_bytes_timers_and_held_per_subtask():
    lines = summary_lines(SEEDS)
    assert lines[0] == "subtask 0: broadcast version v9"
    assert "  broadcast rules: 2 entries ['r1', 'r2']" in lines
    assert any(line.startswith("  keyed count: 2 keys, ") for line in lines)
    assert "  timers EVENT_TIME: 2, next at 90" in lines
    assert lines.count("  held elements: 1") == 1 and "subtask 1: broadcast version -" in lines


def test_the_summary_of_one_key_shows_its_values_timers_and_held_elements():
    lines = summary_lines(SEEDS, "a")
    assert "  keyed count['a'] = 3" in lines and not any("'b'" in line for line in lines)
    assert "  timers EVENT_TIME: 1, next at 100" in lines and "  held elements: 1" in lines


def test_the_state_commands_parse():
    args = build_parser().parse_args(["state", "rescale", "old", "new", "--parallelism", "4"])
    assert (args.action, args.checkpoint, args.new_checkpoint, args.parallelism,
            args.state_buckets) == ("rescale", "old", "new", 4, None)
    args = build_parser().parse_args(["state", "show", "ck", "--key", "42"])
    assert (args.action, args.key) == ("show", "42")


def test_every_state_subcommand_and_argument_has_help():
    state = _subparsers(build_parser())["state"]
    actions = _subparsers(state)
    assert sorted(actions) == ["copy", "move", "rescale", "show"]
    for name, parser in actions.items():
        assert parser.description, name
        for action in parser._actions:
            assert action.help, f"state {name} {action.dest}"
    moved = build_parser().parse_args(["state", "move", "old", "new"])
    assert (moved.action, moved.checkpoint, moved.new_checkpoint) == ("move", "old", "new")


def _subparsers(parser):
    import argparse

    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0].choices
