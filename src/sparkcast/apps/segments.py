"""User segmentation: segments computed offline, refreshed in bulk, read by every event.

A refresh is a set of rows ``{refresh_id, user_id, segment}`` (VIP, REGULAR, NEW, CHURNING). The
first row of a newer ``refresh_id`` clears the previous refresh, so a user missing from the new
one falls back to the default, NEW. Rows of an older refresh, or with an unknown segment, go to
``rejected_segments``. Each event is tagged with its user's segment and the offer that segment
gets; the lookup is one ``Series.map`` per micro-batch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.apps.base import BROADCAST, EVENTS, App, Drop

SEGMENTS = MapStateDescriptor("segments", str, str)
REFRESH = MapStateDescriptor("segment_refresh", str, int)
REJECTED = OutputTag("rejected_segments", "refresh_id long, user_id string, segment string, "
                                          "reason string")

DEFAULT_SEGMENT = "NEW"
DISCOUNTS = {"VIP": 15.0, "REGULAR": 0.0, "NEW": 10.0, "CHURNING": 20.0}
EVENTS_SCHEMA = "event_id string, user_id string, amount double, ts long"
BROADCAST_SCHEMA = "seq long, refresh_id long, user_id string, segment string"
OUTPUT_SCHEMA = ("event_id string, user_id string, segment string, discount_pct double, "
                 "refresh_id long, subtask int")


def segment_of(users: pd.Series, segments: dict[str, str]) -> pd.Series:
    """Each user's segment; users the refresh did not name are NEW."""
    return users.map(segments).fillna(DEFAULT_SEGMENT).astype(object)


class UserSegments(BroadcastProcessFunction):
    """Flink: a ``BroadcastProcessFunction`` over a bulk-loaded dimension; vectorized."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self._lookup: tuple[tuple[int, int], dict[str, str]] | None = None

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        refresh = ctx.get_broadcast_state(REFRESH)
        current = refresh.get("refresh_id") or 0
        incoming = value["refresh_id"]
        if value["segment"] not in DISCOUNTS or incoming is None or incoming < current:
            if self.subtask != 0:  # every subtask rejects it; one reports it
                return
            reason = ("unknown segment" if value["segment"] not in DISCOUNTS
                      else f"refresh {incoming} is older than {current}")
            yield REJECTED, {"refresh_id": incoming, "user_id": value["user_id"],
                             "segment": value["segment"], "reason": reason}
            return
        segments = ctx.get_broadcast_state(SEGMENTS)
        if incoming > current:  # a new bulk refresh replaces the previous one entirely
            segments.clear()
            refresh.put("refresh_id", incoming)
        segments.put(value["user_id"], value["segment"])
        refresh.put("rows", (refresh.get("rows") or 0) + 1)

    def process_batch(self, batch: pd.DataFrame, ctx: Any) -> Iterator[Any]:
        refresh = ctx.get_broadcast_state(REFRESH)
        mark = (refresh.get("refresh_id") or 0, refresh.get("rows") or 0)
        if self._lookup is None or self._lookup[0] != mark:
            self._lookup = (mark, dict(ctx.get_broadcast_state(SEGMENTS).items()))
        segment = segment_of(batch["user_id"], self._lookup[1])
        yield pd.DataFrame({"event_id": batch["event_id"], "user_id": batch["user_id"],
                            "segment": segment, "discount_pct": segment.map(DISCOUNTS),
                            "refresh_id": mark[0], "subtask": self.subtask})


# ---------------------------------------------------------------------------------- data

def refresh_rows(refresh_id: int, seq: int, assignment: dict[str, str]) -> tuple[dict, ...]:
    return tuple({"seq": seq + i, "refresh_id": refresh_id, "user_id": user, "segment": segment}
                 for i, (user, segment) in enumerate(sorted(assignment.items())))


def generate(seed: int = 7, files: int = 6, per_file: int = 100, users: int = 120
             ) -> list[Drop]:
    """Refresh 1 at step 0 (90 of the users), refresh 2 mid-run (segments move, some users
    drop out and fall back to NEW, one bad row)."""
    rng = random.Random(seed)
    choices = ["VIP", "REGULAR", "REGULAR", "REGULAR", "CHURNING"]
    first = {f"user{u:03d}": rng.choice(choices) for u in range(90)}
    second = {f"user{u:03d}": rng.choice(choices) for u in range(30, users)}
    bad = {"seq": 99_999, "refresh_id": 2, "user_id": "user999", "segment": "PLATINUM"}
    drops = [Drop(0, BROADCAST, "segments-000.json", refresh_rows(1, 0, first)),
             Drop(files // 2, BROADCAST, "segments-001.json",
                  refresh_rows(2, 10_000, second) + (bad,))]
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"visits-{f:03d}.json", tuple(
            {"event_id": f"vis{f * per_file + i:06d}", "user_id": f"user{rng.randrange(users):03d}",
             "amount": round(rng.uniform(5, 300), 2), "ts": 1_700_000_000_000 + f * per_file + i}
            for i in range(per_file))))
    return drops


APP = App(
    name="segments",
    title="User segmentation (bulk refreshes, default NEW)",
    make_function=UserSegments,
    descriptors=(SEGMENTS, REFRESH),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=100 * scale),
    side_outputs=(REJECTED,),
    hold_until_ready=((REFRESH, "refresh_id"),),
    version_column="refresh_id",
    show_columns=("event_id", "user_id", "segment", "discount_pct", "refresh_id", "subtask"),
    update_note="segments-001.json: refresh 2 replaces refresh 1 (one row rejected)",
)
