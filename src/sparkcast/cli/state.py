"""``sparkcast state``: inspect, rescale, move and copy a job's state from its checkpoint
(docs/state.md).

::

    sparkcast state show CHECKPOINT [--key K] [--batch-id N]
    sparkcast state rescale CHECKPOINT NEW_CHECKPOINT --parallelism P [--state-buckets B]
    sparkcast state rescale CHECKPOINT --partitions N      (in place, Spark's repartition)
    sparkcast state move CHECKPOINT NEW_CHECKPOINT          (no Spark: files only)
    sparkcast state copy CHECKPOINT NEW_CHECKPOINT
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from sparkcast.core import codec
from sparkcast.core.seed import Seed

COMMANDS = ("state",)


def add_commands(commands: Any) -> None:
    """The ``state`` command and its subcommands, under the main parser's ``commands``."""
    state = commands.add_parser(
        "state", help="inspect, rescale, move or copy a job's state (its checkpoint)",
        description="Read the state a sparkcast query keeps in its checkpoint: broadcast state "
                    "per subtask, keyed state, held elements and timers; write it, "
                    "redistributed, as a new checkpoint at another parallelism; or move or "
                    "copy the checkpoint to another folder or bucket. Stop the job first.")
    actions = state.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show", help="a summary per subtask",
        description="Print, per subtask, the broadcast state's version and entries, the keyed "
                    "state's keys and bytes, timers and held elements (--key: that key's "
                    "values).")
    show.add_argument("checkpoint", help=_CHECKPOINT)
    show.add_argument("--key", help="only this key's state (JSON, or text)")
    show.add_argument("--batch-id", type=int, help="as of this batch (default: the last)")
    rescale = actions.add_parser(
        "rescale", help="write the state at a new parallelism",
        description="Redistribute the keyed state to a new parallelism in a new checkpoint "
                    "(start the job from it with initial_state=NEW_CHECKPOINT and a new "
                    "output folder), or change the Spark partitions of the same checkpoint "
                    "in place with --partitions.")
    rescale.add_argument("checkpoint", help=_CHECKPOINT)
    rescale.add_argument("new_checkpoint", nargs="?",
                         help="a new checkpoint (with --parallelism); leave out with --partitions")
    rescale.add_argument("--parallelism", type=int, help="new virtual subtasks (new checkpoint)")
    rescale.add_argument("--partitions", type=int,
                         help="new Spark partitions of the same checkpoint (Spark's repartition)")
    rescale.add_argument("--state-buckets", type=int,
                         help="new buckets per subtask's stored state (new checkpoint)")
    for action, text in _RELOCATE.items():
        relocate = actions.add_parser(action, help=text[0], description=text[1])
        relocate.add_argument("checkpoint", help=_CHECKPOINT)
        relocate.add_argument("new_checkpoint",
                              help="the new folder or URI (missing or empty)")


_CHECKPOINT = "the job's checkpoint folder or URI (its checkpoint_location)"
_RELOCATE = {
    "move": ("move a checkpoint to another folder or bucket",
             "Copy the checkpoint to NEW_CHECKPOINT, rewriting the absolute locations Spark "
             "keeps in it, then delete the old folder. The job restarts from NEW_CHECKPOINT as "
             "if it had never moved: same outputs, same sinks' ledgers."),
    "copy": ("copy a checkpoint as a new job's",
             "Copy the checkpoint to NEW_CHECKPOINT, rewriting the absolute locations Spark "
             "keeps in it; the old folder is untouched. The copy is a job of its own (new "
             "query id): start it with its own output folder."),
}


def run(args: argparse.Namespace) -> int:
    if args.action in _RELOCATE:
        return _relocate(args)
    from sparkcast.spark import session

    spark = session("local[2]", "sparkcast-state")
    if args.action == "rescale" and args.partitions is not None:
        return _rescale_in_place(spark, args)
    if args.action == "rescale":
        from sparkcast.spark.tools.rescale import rescale

        if args.new_checkpoint is None or args.parallelism is None:
            raise SystemExit("state rescale: give NEW_CHECKPOINT --parallelism P, or "
                             "--partitions N to rescale in place")

        summary = rescale(spark, args.checkpoint, args.new_checkpoint, args.parallelism,
                          args.state_buckets)
        print(json.dumps(summary, indent=1, default=str))
        print(f"start the job with process(..., parallelism={args.parallelism}, "
              f"initial_state={args.new_checkpoint!r}) over the input after these offsets")
        return 0
    from sparkcast.spark.tools.state_reader import read_subtasks

    _, seeds = read_subtasks(spark, args.checkpoint, args.batch_id)
    key = None if args.key is None else _parse_key(args.key)
    print("\n".join(summary_lines(seeds, key)))
    return 0


def _relocate(args: argparse.Namespace) -> int:
    from sparkcast.spark.tools.relocate import relocate

    summary = relocate(args.checkpoint, args.new_checkpoint, keep_old=args.action == "copy")
    print(json.dumps(summary, indent=1))
    print(f"restart the job with checkpoint_location={args.new_checkpoint!r}"
          + (" and an output folder of its own" if args.action == "copy" else ""))
    return 0


def _rescale_in_place(spark: Any, args: argparse.Namespace) -> int:
    from sparkcast.spark.tools.rescale import rescale_in_place

    if args.new_checkpoint is not None or args.parallelism is not None:
        raise SystemExit("state rescale --partitions works in place: no NEW_CHECKPOINT, "
                         "no --parallelism")
    summary = rescale_in_place(spark, args.checkpoint, args.partitions)
    print(json.dumps(summary, indent=1, default=str))
    print("restart the job unchanged on the same checkpoint and input")
    return 0


def _parse_key(text: str) -> Any:
    try:
        return codec.hashable(json.loads(text))
    except ValueError:
        return text


def summary_lines(seeds: dict[int, Seed], key: Any = None) -> list[str]:
    """Per subtask: broadcast version and entries; keyed keys and bytes per state; held
    elements; timers (with ``key``: that key's values, timers and held elements only)."""
    lines = []
    for subtask, seed in sorted(seeds.items()):
        lines.append(f"subtask {subtask}: broadcast version {seed.broadcast_version or '-'}")
        for name, entries in sorted(seed.broadcast.items()):
            lines.append(f"  broadcast {name}: {len(entries)} entries "
                         f"{_short([k for k, _ in entries])}")
        for name, records in sorted(seed.keyed.items()):
            if key is None:
                size = sum(len(codec.encode(r)) for _, r in records)
                lines.append(f"  keyed {name}: {len(records)} keys, {size} bytes")
            else:
                lines.extend(f"  keyed {name}[{k!r}] = {r!r}" for k, r in records if k == key)
        for domain, timers in sorted(seed.timers.items()):
            mine = [t for t in timers if key is None or codec.hashable(t[1]) == key]
            nxt = f", next at {min(t[0] for t in mine)}" if mine else ""
            lines.append(f"  timers {domain}: {len(mine)}{nxt}")
        held = [h for h in seed.held if key is None or (len(h) > 2 and
                                                        codec.hashable(h[2]) == key)]
        lines.append(f"  held elements: {len(held)}")
    return lines


def _short(items: list[Any], shown: int = 5) -> str:
    more = f", ... ({len(items) - shown} more)" if len(items) > shown else ""
    return "[" + ", ".join(repr(i) for i in items[:shown]) + more + "]"
