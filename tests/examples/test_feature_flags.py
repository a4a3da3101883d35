"""Feature flags: percentage rollouts with deterministic bucketing by user id, and a kill switch.

Bucketing hashes (flag, user) with SHA-256, not Python's ``hash``, which is salted per process:
every subtask and every restart must put a user in the same bucket.
"""

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkcast import BroadcastProcessFunction, MapStateDescriptor
from sparkcast.testing import BroadcastHarness

FLAGS = MapStateDescriptor("flags", str, dict)
ROOT = Path(__file__).resolve().parents[2]


def bucket(flag, user_id):
    digest = hashlib.sha256(f"{flag}:{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


class EvaluateFlags(BroadcastProcessFunction):
    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(FLAGS).put(value["flag"], value)

    def process_element(self, value, ctx):
        flag = ctx.get_broadcast_state(FLAGS).get(value["flag"])
        enabled = (flag is not None and flag["enabled"]
                   and bucket(value["flag"], value["user"]) < flag["percentage"])
        yield value["user"], enabled


def users(n):
    return [f"user-{i}" for i in range(n)]


def evaluate(flags, user_ids, flag="new-checkout", **options):
    h = BroadcastHarness(EvaluateFlags(), [FLAGS], **options)
    h.open()
    for update in flags:
        h.process_broadcast_element(update)
    for user in user_ids:
        h.process_element({"flag": flag, "user": user})
    return {user for user, enabled in h.output() if enabled}


def rollout(percentage, enabled=True):
    return {"flag": "new-checkout", "percentage": percentage, "enabled": enabled}


def test_percentage_is_respected():
    on = evaluate([rollout(25)], users(2000))
    assert 0.21 < len(on) / 2000 < 0.29
    assert evaluate([rollout(0)], users(200)) == set()
    assert evaluate([rollout(100)], users(200)) == set(users(200))


def test_bucketing_is_deterministic_across_subtasks_and_restarts():
    first = evaluate([rollout(30)], users(500), parallelism=4, subtask_index=0)
    second = evaluate([rollout(30)], users(500), parallelism=4, subtask_index=3)
    assert first == second and 100 < len(first) < 200
    # a restart is a new process, whose string hashes are salted differently
    code = ("from tests.examples.test_feature_flags import evaluate, rollout, users; "
            "print(sorted(evaluate([rollout(30)], users(500))))")
    for seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, check=True, timeout=60,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        assert ast.literal_eval(run.stdout) == sorted(first), seed


def test_raising_the_percentage_only_adds_users():
    at10, at50 = evaluate([rollout(10)], users(1000)), evaluate([rollout(50)], users(1000))
    assert at10 < at50


def test_kill_switch_turns_everyone_off_and_back_on():
    everyone = users(300)
    before = evaluate([rollout(40)], everyone)
    assert before
    assert evaluate([rollout(40), rollout(40, enabled=False)], everyone) == set()
    assert evaluate([rollout(40), rollout(40, enabled=False), rollout(40)], everyone) == before


def test_unknown_flags_are_off():
    assert evaluate([rollout(100)], users(10), flag="other-flag") == set()


@pytest.mark.parametrize("user", ["user-1", "user-2", "user-3"])
def test_buckets_depend_on_the_flag_too(user):
    assert 0 <= bucket("a", user) < 100
    assert [bucket(f"flag-{i}", user) for i in range(20)] != [bucket("flag-0", user)] * 20
