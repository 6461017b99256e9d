"""over_provisioned frees no GPU while a replica is down or stale, or while requests wait (issue 13).

Found by a new-user walkthrough: one of four targets dead, the other three running 30 requests between them,
and the rule proposed "scale replicas 4 → 1" while its own text said "across 3 replica(s)". The dead replica's
load went to the three (or was refused), so what they run is not the deployment's load, and the window is partial:
no fewer replicas, no lower TP, no smaller GPU then. The status says why.
"""

from __future__ import annotations

from typing import Any

from advisor.rules.lifecycle import Lifecycle
from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good

RULE = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)


def _ev(replicas_up: int, **kw: Any) -> Any:
    stats: dict[str, Any] = {
        "goodput": good(0.95, 1.0),
        "requests_running": 30,
        "requests_waiting": 0,
        "requests_waiting_first": 0,
        "kv_cache_usage_ratio": 0.05,
        "kv_cache_usage_ratio_max": 0.1,
    }
    stats.update(kw)
    return ev(dep=ctx(replicas=4, tensor_parallel_size=2), replicas_up=replicas_up, **stats)


def test_all_four_up_it_proposes_fewer_replicas() -> None:
    # 30 running over 4 replicas of ceiling 256: ⌈30 ÷ (0.5 × 256)⌉ = 1
    assert RULE.fires(_ev(4)).holds is True
    props = RULE.propose(_ev(4))
    assert ("replicas", "decrease", 4, 1) in [(p.dial, p.action, p.current, p.suggested) for p in props]


def test_one_of_four_down_it_does_not_fire_and_says_why() -> None:
    c = RULE.fires(_ev(3))
    assert c.holds is False
    assert "1 of 4 replica(s) are down or stale" in c.reason, c.reason
    assert RULE.propose(_ev(3)) == []


def test_an_open_incident_clears_when_a_replica_goes_down() -> None:
    assert RULE.clears(_ev(4)).holds is False
    assert RULE.clears(_ev(3)).holds is True


def test_no_gpu_freeing_turn_beside_a_queue() -> None:
    assert RULE.propose(_ev(4, requests_waiting=2)) == []
    assert RULE.propose(_ev(4, requests_waiting_first=1)) == []


def test_the_lifecycle_status_is_inactive_with_the_reason() -> None:
    lc = Lifecycle([RULE])
    lc.evaluate(_ev(3), ignore_for=True)
    assert lc.open_recommendations() == []
    st = lc.statuses[("chat-8b", "over_provisioned")]
    assert st.state == "inactive" and "down or stale" in st.reason, st


def test_no_fewer_replicas_while_a_young_replica_sits_beside_old_ones() -> None:
    # kserve/kserve#5496 (field state round 28): mid-rollout a surge pod (started 145 s ago) answers beside pods up
    # a day; the pod count is the controller's, not the fleet's. Replicas started together (a new deployment, the
    # simulator's fleet) are the steady fleet, and an old fleet is judged as before.
    import dataclasses

    base = _ev(4)
    assert RULE.fires(base).holds is True
    rollout = dataclasses.replace(base, replica_ages_seconds=(145.0, 86_400.0))
    held = RULE.fires(rollout)
    assert held.holds is False and "started 145s ago" in held.reason
    assert RULE.propose(rollout) == []
    assert RULE.fires(dataclasses.replace(base, replica_ages_seconds=(145.0, 300.0))).holds is True  # together
    assert RULE.fires(dataclasses.replace(base, replica_ages_seconds=(1_900.0, 86_400.0))).holds is True  # settled
