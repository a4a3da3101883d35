"""A failing broadcast element names no key, unless it failed inside ``apply_to_keyed_state``:
then it names the key whose state it was applied to (keyed state differs by subtask, so on
Spark each subtask reports such a failure; the others once, from subtask 0)."""

from sparkcast import KeyedBroadcastProcessFunction, MapStateDescriptor, ValueStateDescriptor
from sparkcast.testing import KeyedBroadcastHarness

RULES = MapStateDescriptor("rules", str, int)
SEEN = ValueStateDescriptor("seen", int)


class Apply(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(SEEN)

    def process_broadcast_element(self, value, ctx):
        if value == "plain":
            raise ValueError("plain failure")
        if value == "caught":
            try:
                ctx.apply_to_keyed_state(SEEN, _fail_on_b)
            except RuntimeError:
                pass
            raise ValueError("after a caught one")
        ctx.apply_to_keyed_state(SEEN, _fail_on_b)

    def process_element(self, value, ctx):
        self.seen.update(1)
        return ()


def _fail_on_b(key, state):
    if key == "b":
        raise RuntimeError(f"no {key}")


def test_only_a_failure_inside_apply_to_keyed_state_names_a_key():
    h = KeyedBroadcastHarness(Apply(), lambda v: v, [RULES], on_error="dead_letter")
    h.open()
    for key in "abc":
        h.process_element(key)
    for value in ("plain", "apply", "caught"):
        h.process_broadcast_element(value)
    h.process_element("d")  # a main element after them names its own key, as always
    assert [(d.error, d.key) for d in h.dead_letters()] == [
        ("ValueError: plain failure", None), ("RuntimeError: no b", "b"),
        ("ValueError: after a caught one", None)]
