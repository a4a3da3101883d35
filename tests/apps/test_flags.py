"""Feature flags and AppConfig through the harness."""

import pytest

from sparkcast.apps import get_app
from sparkcast.apps.base import stable_bucket
from sparkcast.apps.flags import REJECTED_CONFIG, AppConfig, config_row, flag_row, generate, is_on

APP = get_app("flags")
USERS = [f"user{i:04d}" for i in range(2000)]


def flag(name, rollout, enabled=True, killed=False):
    return {"name": name, "enabled": enabled, "rollout": rollout, "killed": killed}


def test_bucketing_is_deterministic_and_rollouts_only_add_users():
    assert stable_bucket("f", "u1") == stable_bucket("f", "u1")
    at10 = {u for u in USERS if is_on(flag("f", 10.0), u)}
    at50 = {u for u in USERS if is_on(flag("f", 50.0), u)}
    assert at10 < at50
    assert 150 < len(at10) < 250 and 900 < len(at50) < 1100
    assert {u for u in USERS if is_on(flag("g", 10.0), u)} != at10  # buckets differ per flag
    assert not any(is_on(flag("f", 100.0, killed=True), u) for u in USERS)
    assert not any(is_on(flag("f", 100.0, enabled=False), u) for u in USERS)
    assert all(is_on(flag("f", 100.0), u) for u in USERS)


def test_app_config_validates_and_assigns_variants():
    config = AppConfig.from_json('{"max_recommendations": 3, "variants": ["a", "b", "c"]}')
    assert config.max_recommendations == 3 and config.score_threshold == 0.5
    assert {config.variant_of(u) for u in USERS} == {"a", "b", "c"}
    assert config.variant_of("u1") == config.variant_of("u1")
    for bad in ('{"max_recommendations": 0}', '{"score_threshold": 2}', '{"colour": 1}', "[1]",
                "not json", '{"variants": []}'):
        with pytest.raises((ValueError, TypeError)):
            AppConfig.from_json(bad)


def request(rid, user, candidates=12):
    return {"request_id": rid, "user_id": user, "candidates": candidates, "ts": 0}


def test_flags_and_config_apply_to_requests_and_update_at_runtime(run_app):
    from .conftest import harness_for

    h = harness_for(APP)
    h.process_micro_batch(broadcast=[flag_row(0, "dark", 100.0), flag_row(1, "beta", 0.0),
                                     config_row(2, {"max_recommendations": 5})],
                          main=[request("r1", "u1")])
    assert h.output() == [("r1", "u1", "dark", AppConfig().variant_of("u1"), 5, 0.5, 1, 0)]
    h.process_micro_batch(broadcast=[flag_row(3, "dark", 100.0, killed=True),
                                     flag_row(4, "beta", 100.0),
                                     config_row(5, {"max_recommendations": 20,
                                                    "score_threshold": 0.7}),
                                     config_row(6, '{"max_recommendations": -1}')],
                          main=[request("r2", "u1", candidates=8)])
    assert h.output()[-1][:3] == ("r2", "u1", "beta")
    assert h.output()[-1][4:7] == (8, 0.7, 2)
    (rejected,) = h.side_output(REJECTED_CONFIG)
    assert rejected["seq"] == 6 and "max_recommendations" in rejected["error"]


def test_requests_wait_for_the_first_config(run_app):
    h = run_app(APP, generate(7, files=4, per_file=25))
    out = h.output()
    assert len(out) == 100 and len({r[0] for r in out}) == 100
    assert {r[6] for r in out} == {1, 2}  # config version 1, then 2
    assert any("new-ranker" in r[2] for r in out)
    late = [r for r in out if r[6] == 2]
    assert not any("one-click-buy" in r[2] for r in late)  # killed
    assert {r[3] for r in late} <= {"control", "treat-a", "treat-b"}
