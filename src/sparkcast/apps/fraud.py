"""Fraud rules: text conditions broadcast at run time, evaluated on whole micro-batches.

Rules arrive on the broadcast stream as ``{"op": "upsert", "rule_id": "big-foreign",
"condition": "amount > 5000 AND ip_country != card_country", "action": "BLOCK"}`` (or
``{"op": "delete", "rule_id": ...}``). Each subtask parses a rule once (the language is in
:mod:`sparkcast.apps.rules`; nothing is ever passed to ``eval``), then every micro-batch of
transactions is decided with pandas, rule by rule, in a few vectorized steps.

Decision per transaction: a matching ALLOW rule wins (allow-lists), then BLOCK, then REVIEW;
no match is ALLOW with no rule. BLOCK and ALLOW decisions go to the main output, REVIEW to the
``review`` side output, so main + review hold exactly one row per transaction. A rule that does
not parse or type-check (too deep, an integer literal beyond int64, ...) goes to
``invalid_rules`` with the error, and the rule set (and its version) stays as it was. A rule
whose integer arithmetic overflows on a transaction cannot decide it: that transaction becomes a
dead letter naming the rule (never a decision computed from a wrapped number).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sparkcast.api.descriptors import MapStateDescriptor
from sparkcast.api.functions import BroadcastProcessFunction
from sparkcast.api.output_tag import OutputTag
from sparkcast.apps.base import BROADCAST, EVENTS, App, Drop, next_version
from sparkcast.apps.rules import CompiledRule, Kind, RuleError, compile_rule

RULES = MapStateDescriptor("fraud_rules", str, dict)
RULESET = MapStateDescriptor("fraud_ruleset", str, int)
REVIEW = OutputTag("review", "tx_id string, card_id string, amount double, rule_id string, "
                             "rules_version long, subtask int")
INVALID_RULES = OutputTag("invalid_rules", "rule_id string, condition string, action string, "
                                           "error string, seq long")

ACTIONS = ("ALLOW", "BLOCK", "REVIEW")  # also the precedence, strongest first
TRANSACTION_FIELDS: dict[str, Kind] = {
    "amount": "num", "hour": "num", "card_country": "str", "ip_country": "str",
    "merchant": "str", "mcc": "num", "card_id": "str", "tx_id": "str",
}
EVENTS_SCHEMA = ("tx_id string, card_id string, amount double, merchant string, mcc long, "
                 "card_country string, ip_country string, hour long, ts long")
BROADCAST_SCHEMA = "seq long, op string, rule_id string, condition string, action string"
OUTPUT_SCHEMA = ("tx_id string, card_id string, amount double, action string, rule_id string, "
                 "rules_version long, subtask int")


def validate_rule(value: Any) -> tuple[str, str, str]:
    """``(rule_id, condition, action)`` of an upsert; raises RuleError when it is unusable."""
    try:
        rule_id, condition, action = value["rule_id"], value["condition"], value["action"]
    except (KeyError, TypeError) as exc:
        raise RuleError(f"a rule needs rule_id, condition and action ({exc})", repr(value)) from exc
    if not rule_id:
        raise RuleError("a rule needs a rule_id", str(condition))
    if action not in ACTIONS:
        raise RuleError(f"action must be one of {', '.join(ACTIONS)}, not {action!r}",
                        str(condition))
    try:
        compile_rule(condition, TRANSACTION_FIELDS)
    except RecursionError as exc:  # the parser bounds nesting; this is the last line of defence
        raise RuleError("rule is nested too deeply", str(condition)[:80]) from exc
    return rule_id, condition, action


def decide(batch: pd.DataFrame, rules: list[tuple[str, dict[str, Any]]],
           compiled: dict[str, CompiledRule]) -> tuple[pd.Series, pd.Series]:
    """The action and the deciding rule of every row. Rules are applied by precedence
    (ALLOW, BLOCK, REVIEW), and by rule id within one action, so the result is deterministic."""
    action = pd.Series("ALLOW", index=batch.index, dtype=object)
    rule_id = pd.Series(None, index=batch.index, dtype=object)
    decided = pd.Series(False, index=batch.index, dtype=bool)
    for wanted in ACTIONS:
        for name, rule in rules:
            if rule["action"] != wanted:
                continue
            hit = compiled[rule["condition"]].evaluate(batch) & ~decided
            action[hit] = wanted
            rule_id[hit] = name
            decided |= hit
    return action, rule_id.astype(object).where(decided, None)


class FraudRules(BroadcastProcessFunction):
    """Flink: a ``BroadcastProcessFunction`` whose rules are broadcast state; here vectorized
    with ``process_batch``."""

    def open(self, runtime_context: Any) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self._compiled: dict[str, CompiledRule] = {}

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        rules = ctx.get_broadcast_state(RULES)
        if value["op"] == "delete":
            if rules.contains(value["rule_id"]):
                rules.remove(value["rule_id"])
                next_version(ctx.get_broadcast_state(RULESET))
            return
        try:
            rule_id, condition, action = validate_rule(value)
        except RuleError as exc:
            if self.subtask != 0:  # every subtask rejects it; one reports it
                return
            yield INVALID_RULES, {"rule_id": value.get("rule_id"),
                                  "condition": value.get("condition"),
                                  "action": value.get("action"), "error": str(exc),
                                  "seq": value.get("seq")}
            return
        rules.put(rule_id, {"condition": condition, "action": action})
        next_version(ctx.get_broadcast_state(RULESET))

    def process_batch(self, batch: pd.DataFrame, ctx: Any) -> Iterator[Any]:
        rules = sorted(ctx.get_broadcast_state(RULES).items())
        version = ctx.get_broadcast_state(RULESET).get("version") or 0
        for _, rule in rules:
            if rule["condition"] not in self._compiled:
                self._compiled[rule["condition"]] = compile_rule(rule["condition"],
                                                                 TRANSACTION_FIELDS)
        action, rule_id = decide(batch, rules, self._compiled)
        out = pd.DataFrame({"tx_id": batch["tx_id"], "card_id": batch["card_id"],
                            "amount": batch["amount"].astype(float), "action": action,
                            "rule_id": rule_id})
        out["rules_version"] = version
        out["subtask"] = self.subtask
        review = out["action"] == "REVIEW"
        if (~review).any():
            yield out[~review].reset_index(drop=True)
        if review.any():
            yield REVIEW, out[review].drop(columns="action").reset_index(drop=True)


# ---------------------------------------------------------------------------------- data

INITIAL_RULES = [
    ("big-foreign", "amount > 5000 AND ip_country != card_country", "BLOCK"),
    ("mid-risky-country", "amount BETWEEN 1000 AND 5000 AND ip_country IN ('NG', 'RU', 'KP')",
     "REVIEW"),
    ("trusted-grocery", "merchant IN ('acme-grocery', 'corner-shop') AND amount < 200", "ALLOW"),
]
UPDATED_RULES = [
    # tightened: a night-time foreign card or a big one, scaled with a fee
    ("big-foreign", "amount * 1.1 > 3000 AND (ip_country != card_country OR hour < 6)", "BLOCK"),
    ("night-gambling", "mcc = 7995 AND NOT (hour BETWEEN 8 AND 22)", "REVIEW"),
    ("broken", "amount >> 5 AND", "BLOCK"),  # rejected, the rest of the update still applies
]
REMOVED_RULE = "trusted-grocery"  #: deleted by the update
COUNTRIES = ["DE", "FR", "NL", "US", "GB", "NG", "RU", "KP"]
MERCHANTS = [("acme-grocery", 5411), ("corner-shop", 5411), ("lucky-casino", 7995),
             ("jet-travel", 4511), ("mega-electronics", 5732)]


def transactions(rng: random.Random, start: int, count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(start, start + count):
        merchant, mcc = rng.choice(MERCHANTS)
        card_country = rng.choice(COUNTRIES[:5])
        foreign = rng.random() < 0.25
        rows.append({
            "tx_id": f"tx{i:06d}", "card_id": f"card{rng.randrange(200):03d}",
            "amount": round(rng.lognormvariate(5.5, 1.4), 2), "merchant": merchant, "mcc": mcc,
            "card_country": card_country,
            "ip_country": rng.choice(COUNTRIES) if foreign else card_country,
            "hour": rng.randrange(24), "ts": 1_700_000_000_000 + i * 1000,
        })
    return rows


def rule_rows(rules: list[tuple[str, str, str]], seq: int) -> list[dict[str, Any]]:
    return [{"seq": seq + i, "op": "upsert", "rule_id": r, "condition": c, "action": a}
            for i, (r, c, a) in enumerate(rules)]


def generate(seed: int = 7, files: int = 8, per_file: int = 200) -> list[Drop]:
    """Transactions in ``files`` files; the rules at step 0; a rule update (one tightened, one
    added, one invalid, one removed) at the middle step."""
    rng = random.Random(seed)
    drops = [Drop(0, BROADCAST, "rules-000.json", tuple(rule_rows(INITIAL_RULES, 0)))]
    for f in range(files):
        drops.append(Drop(f, EVENTS, f"tx-{f:03d}.json",
                          tuple(transactions(rng, f * per_file, per_file))))
    update = rule_rows(UPDATED_RULES, 100) + [{"seq": 110, "op": "delete",
                                                "rule_id": REMOVED_RULE, "condition": None,
                                                "action": None}]
    drops.append(Drop(files // 2, BROADCAST, "rules-001.json", tuple(update)))
    return drops


APP = App(
    name="fraud",
    title="Fraud rules (text conditions, BLOCK / REVIEW / ALLOW)",
    make_function=FraudRules,
    descriptors=(RULES, RULESET),
    events_schema=EVENTS_SCHEMA,
    broadcast_schema=BROADCAST_SCHEMA,
    output_schema=OUTPUT_SCHEMA,
    generate=lambda seed, scale, files: generate(seed, files, per_file=100 * scale),
    files=8,
    side_outputs=(REVIEW, INVALID_RULES),
    hold_until_ready=((RULESET, "version"),),
    version_column="rules_version",
    per_event_outputs=("main", "review"),
    show_columns=("tx_id", "amount", "action", "rule_id", "rules_version", "subtask"),
    update_note="rules-001.json: 'big-foreign' tightened, 'night-gambling' added, 'broken' "
                "rejected, 'trusted-grocery' removed",
)
