"""Fraud detection with generic rules, as PyFlink code: ``Rule`` objects (a field, an operator
enum, a threshold) in broadcast state, a per-account ``AccountStats`` object in keyed state, and
a ``ReviewItem`` object per match yielded to a typed review queue (a side output)."""

from enum import Enum

from sparkcast import (
    KeyedBroadcastProcessFunction,
    MapStateDescriptor,
    OutputTag,
    RuntimeContext,
    Types,
    ValueStateDescriptor,
)


class Operator(Enum):
    GREATER = ">"
    LESS = "<"


class Rule:
    def __init__(self, rule_id, field, operator, threshold):
        self.rule_id = rule_id
        self.field = field
        self.operator = operator
        self.threshold = threshold

    def matches(self, stats, amount):
        observed = amount if self.field == "amount" else getattr(stats, self.field)
        if self.operator == Operator.GREATER:
            return observed > self.threshold
        return observed < self.threshold


class AccountStats:
    def __init__(self):
        self.count = 0
        self.total = 0.0

    def add(self, amount):
        self.count += 1
        self.total += amount

    @property
    def average(self):
        return self.total / self.count if self.count else 0.0


class ReviewItem:
    def __init__(self, account, tx_id, rule_id, amount):
        self.account = account
        self.tx_id = tx_id
        self.rule_id = rule_id
        self.amount = amount


review_queue = OutputTag("review", Types.ROW_NAMED(
    ["account", "tx_id", "rule_id", "amount"],
    [Types.STRING(), Types.STRING(), Types.STRING(), Types.DOUBLE()]))

rules_descriptor = MapStateDescriptor("rules", Types.STRING(), Types.PICKLED_BYTE_ARRAY())


class FraudDetector(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.stats = runtime_context.get_state(
            ValueStateDescriptor("stats", Types.PICKLED_BYTE_ARRAY()))

    def process_broadcast_element(self, value, ctx):
        if value.operator is None:  # a deleted rule
            ctx.get_broadcast_state(rules_descriptor).remove(value.rule_id)
            return
        rule = Rule(value.rule_id, value.field, Operator(value.operator), value.threshold)
        ctx.get_broadcast_state(rules_descriptor).put(rule.rule_id, rule)

    def process_element(self, value, ctx):
        stats = self.stats.value()
        if stats is None:
            stats = AccountStats()
        stats.add(value.amount)
        self.stats.update(stats)
        for rule_id, rule in ctx.get_broadcast_state(rules_descriptor).items():
            if rule.matches(stats, value.amount):
                yield value.account, value.tx_id, rule_id
                yield review_queue, ReviewItem(value.account, value.tx_id, rule_id, value.amount)
