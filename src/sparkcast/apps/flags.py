"""Feature flags and configuration: percentage rollouts, kill switches, an ``AppConfig``.

Broadcast rows are either a flag (``kind="flag"``: ``name``, ``enabled``, ``rollout`` in
percent, ``killed``) or the configuration (``kind="config"``: ``config`` as a JSON object). For
every request the function answers which flags are on for that user, which experiment variant
the user is in, and the configuration in force (max recommendations, score threshold).

A user's bucket for a flag is a hash of ``flag:user`` (never Python's salted ``hash``), so the
same user gets the same answer on every subtask, every run, and raising a rollout from 10 % to
50 % only adds users. A kill switch turns a flag off for everyone at once, whatever its
rollout. An invalid configuration goes to ``rejected_config`` and the previous one stays.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.apps.base import BROADCAST, EVENTS, App, Drop, next_version, stable_bucket
from sparkcast.errors import ConfigError

FLAGS = MapStateDescriptor("flags", str, dict)
CONFIG = MapStateDescriptor("app_config", str, dict)  # "current" → AppConfig fields
CONFIG_VERSION = MapStateDescriptor("app_config_version", str, int)
REJECTED_CONFIG = OutputTag("rejected_config", "seq long, error string")

EVENTS_SCHEMA = "request_id string, user_id string, candidates long, ts long"
BROADCAST_SCHEMA = ("seq long, kind string, name string, enabled boolean, rollout double, "
                    "killed boolean, config string")
OUTPUT_SCHEMA = ("request_id string, user_id string, flags string, variant string, "
                 "recommendations long, score_threshold double, config_version long, "
                 "subtask int")


@dataclass(frozen=True)
class AppConfig:
    """Settings every subtask reads; replaced as a whole, validated before it is accepted."""

    max_recommendations: int = 10
    score_threshold: float = 0.5
    experiment: str = "ranker"
    variants: tuple[str, ...] = ("control", "treatment")

    def __post_init__(self) -> None:
        count = self.max_recommendations
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100:
            raise ConfigError("max_recommendations must be an integer from 1 to 100")
        if not isinstance(self.score_threshold, (int, float)) or not 0 <= self.score_threshold <= 1:
            raise ConfigError("score_threshold must be a number from 0 to 1")
        if not self.experiment or not self.variants:
            raise ConfigError("an experiment needs a name and at least one variant")

    @classmethod
    def from_json(cls, text: str) -> AppConfig:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ConfigError("the config is a JSON object")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"unknown config keys {unknown}")
        if "variants" in data:
            data["variants"] = tuple(data["variants"])
        return cls(**data)

    def to_state(self) -> dict[str, Any]:
        return {**asdict(self), "variants": list(self.variants)}

    @classmethod
    def from_state(cls, state: Any) -> AppConfig:
        return cls(**{**state, "variants": tuple(state["variants"])})

    def variant_of(self, user_id: str) -> str:
        return self.variants[stable_bucket(self.experiment, user_id) * len(self.variants)
                             // 10_000]


def is_on(flag: Any, user_id: str) -> bool:
    """A flag is on for a user when enabled, not killed, and the user's bucket is under the
    rollout percentage."""
    if not flag["enabled"] or flag["killed"]:
        return False
    return stable_bucket(flag["name"], user_id) < round(float(flag["rollout"]) * 100)


class FeatureFlags(BroadcastProcessFunction):
    """Flink: a ``BroadcastProcessFunction`` with flags and config as broadcast state."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        if value["kind"] == "flag":
            ctx.get_broadcast_state(FLAGS).put(value["name"], {
                "name": value["name"], "enabled": bool(value["enabled"]),
                "rollout": float(value["rollout"] or 0.0), "killed": bool(value["killed"])})
            return
        try:
            config = AppConfig.from_json(value["config"] or "")
        except (ValueError, TypeError) as exc:
            if self.subtask != 0:  # every subtask rejects it; one reports it
                return
            yield REJECTED_CONFIG, {"seq": value["seq"], "error": f"{type(exc).__name__}: {exc}"}
            return
        ctx.get_broadcast_state(CONFIG).put("current", config.to_state())
        next_version(ctx.get_broadcast_state(CONFIG_VERSION))

    def process_element(self, request: Any, ctx: Any) -> Iterator[Any]:
        current = ctx.get_broadcast_state(CONFIG).get("current")
        config = AppConfig() if current is None else AppConfig.from_state(current)
        user = request["user_id"]
        flags = sorted(name for name, flag in ctx.get_broadcast_state(FLAGS).items()
                       if is_on(flag, user))
        yield (request["request_id"], user, ",".join(flags), config.variant_of(user),
               min(int(request["candidates"]), config.max_recommendations),
               float(config.score_threshold),
               int(ctx.get_broadcast_state(CONFIG_VERSION).get("version") or 0), self.subtask)


# ---------------------------------------------------------------------------------- data

def flag_row(seq: int, name: str, rollout: float, *, enabled: bool = True, killed: bool = False
             ) -> dict[str, Any]:
    return {"seq": seq, "kind": "flag", "name": name, "enabled": enabled, "rollout": rollout,
            "killed": killed, "config": None}


def config_row(seq: int, config: dict[str, Any] | str) -> dict[str, Any]:
    text = config if isinstance(config, str) else json.dumps(config)
    return {"seq": seq, "kind": "config", "name": None, "enabled": None, "rollout": None,
            "killed": None, "config": text}


def generate(seed: int = 7, files: int = 6, per_file: int = 100) -> list[Drop]:
    """Flags and config v1 at step 0; mid-run a rollout raised to 50 %, a kill switch, config
    v2 (and an invalid config, rejected)."""
    rng = random.Random(seed)
    drops = [Drop(0, BROADCAST, "flags-000.json", (
        flag_row(0, "new-ranker", 10.0), flag_row(1, "dark-mode", 100.0),
        flag_row(2, "one-click-buy", 30.0),
        config_row(3, {"max_recommendations": 5, "score_threshold": 0.4, "experiment": "ranker",
                       "variants": ["control", "treatment"]})))]
    drops.append(Drop(files // 2, BROADCAST, "flags-001.json", (
        flag_row(10, "new-ranker", 50.0), flag_row(11, "one-click-buy", 30.0, killed=True),
        config_row(12, {"max_recommendations": 8, "score_threshold": 0.6, "experiment": "ranker-2",
                        "variants": ["control", "treat-a", "treat-b"]}),
        config_row(13, '{"max_recommendations": 0}'))))
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"requests-{f:03d}.json", tuple(
            {"request_id": f"req{f * per_file + i:06d}", "user_id": f"user{rng.randrange(500):03d}",
             "candidates": rng.randrange(3, 20), "ts": 1_700_000_000_000 + (f * per_file + i)}
            for i in range(per_file))))
    return drops


APP = App(
    name="flags",
    title="Feature flags and configuration (rollouts, kill switch, AppConfig)",
    make_function=FeatureFlags,
    descriptors=(FLAGS, CONFIG, CONFIG_VERSION),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=100 * scale),
    side_outputs=(REJECTED_CONFIG,),
    hold_until_ready=((CONFIG_VERSION, "version"),),
    version_column="config_version",
    show_columns=("request_id", "user_id", "flags", "variant", "recommendations",
                  "config_version", "subtask"),
    update_note="flags-001.json: new-ranker 10% → 50%, one-click-buy killed, config v2 (and an "
                "invalid config, rejected)",
)
