"""Refuse a restart that the checkpoint cannot serve, before any batch runs.

What a checkpoint holds only makes sense under the layout that wrote it: state is split into
``parallelism`` virtual subtasks (a key's subtask is ``hash(key) mod P``) and ``state_buckets``
buckets, keyed state is stored per descriptor name and kind, and the output files have the output
schema. Change one of those and Spark restarts without a word: about half the keys land on a
subtask that never saw them (their counters restart at 1), and old output files no longer read
back. So the first start records the layout (:func:`layout_of`) and every restart compares
(:func:`differences`), raising :class:`IncompatibleCheckpointError` with the old and the new
value and what to do instead.

Two guards use the same comparison:

* ``write_stream`` knows the checkpoint: it checks on the driver against
  ``<checkpoint>/sparkcast/layout.json`` (:func:`check_checkpoint`), before the query starts,
  wherever the checkpoint lies (a path or any URI ``storage.py`` opens). This is the guarantee.
* Queries started by the user (``result.main.writeStream...``), whose checkpoint sparkcast never
  sees, are checked on the workers: each subtask keeps the layout in its ``meta`` state
  (:func:`guard_subtask`) and fails the batch, before it runs, when it differs. A subtask
  without state (a new one after a parallelism change) has nothing to compare, so this guard
  can miss a change that only adds subtasks (docs/operations.md).

The record also keeps ``sparkcast_version``, the release that last wrote the checkpoint (never
compared: a release reads every checkpoint of its layout version), so a refused
``layout_version`` names the release to run instead. A checkpoint with committed batches and no
record (sparkcast 0.1.0 recorded none, and wrote layout 1) is refused too (docs/operations.md,
"Upgrades").

Safe changes pass: the function's code (same class), a new side output, options that state does
not depend on (``on_error``, ``time_alignment``, ``hold_until_ready``, trigger, log levels), and
a state descriptor's declared type evolving in a way old state still reads as: the record keeps
``describe_type`` records and asks ``compatible_change`` (``api/declared_types.py``, the same
rule the state layer applies when it decodes), so a dataclass may gain a field with a default or
lose one.
"""

from __future__ import annotations

import json
from typing import Any

from sparkcast.api.declared_types import compatible_change, describe_type, record_label
from sparkcast.core.backend import StateBackend
from sparkcast.errors import IncompatibleCheckpointError
from sparkcast.spark.plan import Engine, RuntimePlan, recorded_engine
from sparkcast.spark.state import checkpoint_files
from sparkcast.spark.state.backend import LAYOUT_VERSION
from sparkcast.version import __version__

_META_KEY = "layout"
_CHECKED: set[tuple[str, int]] = set()  # (pipeline id, subtask) already checked in this worker

# what to do instead, per item of the layout
_ADVICE = {
    "layout_version": "this checkpoint was written by {writer}, under another layout: start a "
                      "new checkpoint, or run {writer} (docs/operations.md, 'Upgrades', lists "
                      "the releases that read each layout)",
    "path": "the plan changed engines (micro_batch or operator; result.explain() says why "
            "a plan takes one), whose checkpoints hold different state: start a new "
            "checkpoint, or keep the engine with process(..., engine={old})",
    "function": "the function's class changed; code changes inside the same class are safe: "
                "start a new checkpoint, or keep the class {old}",
    "keyed": "a keyed function cannot take over a non-keyed one's state: start a new checkpoint",
    "key_columns": "keys are assigned to subtasks by their columns and types: start a new "
                   "checkpoint, or keep key_by over {old}",
    "parallelism": "keys are assigned to subtasks by hash mod parallelism: start a new "
                   "checkpoint, or keep parallelism={old}",
    "subtask_groups": "the subtasks' grouping keys depend on spark.sql.shuffle.partitions, which "
                      "Spark fixes for a checkpoint: keep the first run's "
                      "spark.sql.shuffle.partitions, or start a new checkpoint",
    "state_buckets": "stored state is split into state_buckets buckets: start a new checkpoint, "
                     "or keep state_buckets={old}",
    "broadcast_state": "broadcast state is stored per descriptor name: start a new checkpoint, "
                       "or keep the descriptors {old}",
    "keyed_state": "keyed state is stored per descriptor name, kind and TTL (TTL changes how "
                   "values are stored): start a new checkpoint, or keep {old}",
    "time_mode": "Spark keeps the time mode of a checkpoint's timers: start a new checkpoint, or "
                 "keep {old}",
    "event_time": "timers and timestamps in state follow the event-time column: start a new "
                  "checkpoint, or keep event_time={old}",
    "output_schema": "files already written have the old schema, and read_output reads them "
                     "with the new one: write to a new path with a new checkpoint, or keep "
                     "output_schema={old}",
    "side_outputs": "a side output's written rows have its old schema: write to a new path with "
                    "a new checkpoint, keep the old schema, or emit under a new OutputTag (a "
                    "new side output is a safe change)",
}


def layout_of(plan: RuntimePlan) -> dict[str, Any]:
    """What state and outputs of ``plan`` depend on, as JSON values."""
    return {
        "layout_version": LAYOUT_VERSION,
        "sparkcast_version": __version__,  # the latest release that wrote; never compared
        "path": plan.engine,
        "function": f"{type(plan.function).__module__}.{type(plan.function).__qualname__}",
        "keyed": plan.keyed,
        "key_columns": [f"{plan.main_fields[p]} {t}"
                        for p, t in zip(plan.key_positions, plan.key_types, strict=True)],
        "parallelism": plan.parallelism,
        "subtask_groups": sorted(plan.subtask_of_group, key=plan.subtask_of_group.__getitem__),
        "state_buckets": plan.state_buckets,
        "broadcast_state": {d.name: descriptor_record(d) for d in plan.broadcast_descriptors},
        "keyed_state": {d.name: descriptor_record(d) for d in plan.keyed_descriptors},
        "time_mode": plan.time_mode,
        "event_time": plan.event_time,
        "output_schema": plan.output_schema.simpleString(),
        "side_outputs": {tag: (None if s is None else s.simpleString())
                         for tag, s in sorted(plan.side_schemas.items())},
    }


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """One line per incompatible change from ``old`` to ``new``; empty when the restart is safe.
    A side output that is new (or was dropped) is safe; one whose schema changed is not."""
    lines = []
    for item, advice in _ADVICE.items():
        if item == "subtask_groups" and (
                old.get("parallelism") != new.get("parallelism")  # already named
                or recorded_engine(new.get("path")) is Engine.MICRO_BATCH):
            continue  # the micro-batch engine keys state by subtask; groups only place rows
        before, after = old.get(item), new.get(item)
        if item == "path":  # 0.3 recorded the micro-batch engine's shapes by name
            before, after = recorded_engine(before), recorded_engine(after)
        if item == "side_outputs":
            before, after = _changed_tags(before or {}, after or {})
        if item in ("broadcast_state", "keyed_state"):
            evolved = _type_changes(item, before, after)
            if evolved is not None:
                lines.extend(evolved)
                continue
            before, after = _shown_state(before), _shown_state(after)
        if before != after:
            shown = json.dumps(before)
            lines.append(f"{item}: the checkpoint has {shown}, this pipeline {json.dumps(after)}"
                         f" ({advice.format(old=shown, writer=writer_of(old))})")
    return lines


def writer_of(layout: dict[str, Any]) -> str:
    """The release that last wrote a checkpoint, as its layout record names it (recorded since
    0.3.0; 0.2.0 wrote layout 2 without its version)."""
    version = layout.get("sparkcast_version")
    return (f"sparkcast {version}" if version else
            "a sparkcast release before 0.3.0 (which did not record its version)")


def _type_changes(item: str, old: Any, new: Any) -> list[str] | None:
    """The refused type changes of descriptors that kept their name, kind and TTL; None when
    the descriptors themselves changed (named by the caller, with the advice for that)."""
    if not isinstance(old, dict) or not isinstance(new, dict) or set(old) != set(new):
        return None
    if any(_shape(old[n]) != _shape(new[n]) for n in new):
        return None
    lines = []
    for name in sorted(new):
        for part in ("key", "value"):
            if part not in new[name]:
                continue
            reason = compatible_change(old[name][part], new[name][part], f"the {part}")
            if reason:
                lines.append(f"{item}: descriptor {name!r}: {reason} ({_EVOLUTION})")
    return lines


def layout_to_keep(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The layout to record after a compatible restart: side outputs of both runs."""
    return {**new, "side_outputs": {**old.get("side_outputs", {}), **new["side_outputs"]}}


def refuse(lines: list[str], where: str) -> IncompatibleCheckpointError:
    """One sentence with the fix first (what differs, nothing was run), then a line per
    difference with both values and its own advice."""
    items = list(dict.fromkeys(line.split(":")[0] for line in lines))
    differ = "differs" if len(items) == 1 else "differ"
    return IncompatibleCheckpointError(
        f"this pipeline cannot restart from {where}, whose {', '.join(items)} {differ} "
        "(another job's?): "
        "give it a new checkpoint or undo the change; nothing was run.\n"
        + "".join(f"  {line}\n" for line in lines)
        + "See docs/operations.md, 'What may change between restarts'.")


# ------------------------------------------------------------------------- the driver's guard

def check_checkpoint(plan: RuntimePlan, checkpoint_location: str) -> None:
    """Compare ``plan`` with the layout recorded in the checkpoint; record it when the
    checkpoint has no committed batch yet (a failed first start may be retried with changes)."""
    new = layout_of(plan)
    if checkpoint_files.committed_batches(checkpoint_location):
        old = read_layout(checkpoint_location)
        if old is None:
            raise refuse([_UNRECORDED], f"checkpoint {checkpoint_location}")
        lines = differences(old, new)
        if lines:
            raise refuse(lines, f"checkpoint {checkpoint_location}")
        new = layout_to_keep(old, new)
        if new == old:
            return
    checkpoint_files.write_json(checkpoint_location, checkpoint_files.LAYOUT_FILE, new)


_UNRECORDED = ("layout: the checkpoint has committed batches but no layout record "
               "(sparkcast/layout.json), so it was written by sparkcast 0.1.0, whose keyed "
               "state (layout 1) this release does not read, or by a query that sparkcast did "
               "not start: start a new checkpoint")


def read_layout(checkpoint_location: str) -> dict[str, Any] | None:
    """The layout record of a checkpoint; None for one from before layouts were recorded."""
    try:
        layout: dict[str, Any] | None = checkpoint_files.read_json(checkpoint_location,
                                                            checkpoint_files.LAYOUT_FILE)
    except ValueError as exc:
        raise IncompatibleCheckpointError(
            f"the layout record of checkpoint {checkpoint_location} is unreadable ({exc}); "
            "restore it, or start a new checkpoint") from exc
    return layout


# ------------------------------------------------------------------------ the workers' guard

def guard_subtask(backend: StateBackend, pipeline_id: str, subtask: int, layout_json: str
                  ) -> None:
    """Compare the layout kept in this subtask's state with the plan's (once per worker and
    subtask), record it when the subtask has none; raise before the batch runs when they
    differ. The record is written with the batch's state, so it commits with the batch."""
    if (pipeline_id, subtask) in _CHECKED:
        return
    stored = backend.load(_META_KEY, None)
    if stored != layout_json:
        new = json.loads(layout_json)
        if stored is not None:
            old = json.loads(stored)
            lines = differences(old, new)
            if lines:
                raise refuse(lines, f"the state of subtask {subtask}")
            new = layout_to_keep(old, new)
        backend.store(_META_KEY, json.dumps(new, sort_keys=True))
    _CHECKED.add((pipeline_id, subtask))


def layout_json(plan: RuntimePlan) -> str:
    return json.dumps(layout_of(plan), sort_keys=True)


_EVOLUTION = ("state written under the old type must read as the new one: a type may gain "
              "fields that have defaults, lose fields and gain enum members; give the new field "
              "a default, keep the old type, or start a new checkpoint")


def descriptor_record(descriptor: Any) -> dict[str, Any]:
    """A descriptor as the record keeps it: kind, TTL and ``describe_type`` records."""
    if descriptor.kind == "map":
        types = {"key": describe_type(descriptor.key_type_info),
                 "value": describe_type(descriptor.value_type_info)}
    else:
        types = {"value": describe_type(descriptor.type_info)}
    return {"kind": descriptor.kind, **types, "ttl": descriptor.ttl_config is not None}


def _shape(entry: Any) -> Any:
    """What of a descriptor no type evolution may change."""
    if not isinstance(entry, dict):
        return entry
    return entry.get("kind"), entry.get("ttl"), "key" in entry


def _shown_state(descriptors: Any) -> Any:
    """Descriptors as messages show them: ``{"rules": "map<str, Rule>"}``."""
    if not isinstance(descriptors, dict):
        return descriptors
    return {name: _label(entry) for name, entry in descriptors.items()}


def _label(entry: Any) -> Any:
    if not isinstance(entry, dict):
        return entry  # a record from before types were records
    types = ", ".join(record_label(entry[p]) for p in ("key", "value") if p in entry)
    return f"{entry['kind']}<{types}>" + (" with TTL" if entry.get("ttl") else "")


def _changed_tags(old: dict[str, Any], new: dict[str, Any]) -> tuple[dict, dict]:
    both = sorted(set(old) & set(new))
    return {t: old[t] for t in both}, {t: new[t] for t in both}
