"""Cooldown: after a problem's incident resolves, its rules open nothing for ``cooldown_seconds``."""

from __future__ import annotations

import pytest

from advisor.rules.base import Evaluation
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.lifecycle import Lifecycle
from tests.rules.helpers import ev

COOLDOWN = 300.0


def _saturated(now: float) -> Evaluation:
    return ev(now=now, kv_cache_usage_ratio=0.95, requests_running=50, requests_waiting=10, preemptions_increase=2)


def _calm(now: float) -> Evaluation:
    return ev(now=now, kv_cache_usage_ratio=0.5, requests_running=10, requests_waiting=0, preemptions_increase=0)


def _opened_then_resolved(for_seconds: float) -> Lifecycle:
    lc = Lifecycle([KVSaturationRule(for_seconds=for_seconds)], cooldown_seconds=COOLDOWN)
    opened = lc.evaluate(_saturated(0)) + lc.evaluate(_saturated(for_seconds))
    assert any(t.kind == "opened" for t in opened)
    resolved = lc.evaluate(_calm(100))  # resolved at t = 100
    assert resolved and all(t.kind == "resolved" for t in resolved)
    return lc


@pytest.mark.parametrize(
    ("refire_at", "opens"),
    [(101.0, False), (399.0, False), (399.5, False), (400.0, True), (500.0, True)],
    ids=[
        "right after the resolve",
        "one second short of the cooldown",
        "half a second short of the cooldown",
        "exactly when the cooldown ends",
        "well after the cooldown",
    ],
)
def test_a_resolved_rule_does_not_reopen_within_the_cooldown(refire_at: float, opens: bool) -> None:
    lc = _opened_then_resolved(for_seconds=0)
    out = lc.evaluate(_saturated(refire_at))
    assert any(t.kind == "opened" for t in out) is opens
    status = lc.statuses[("chat-8b", "kv_saturation")]
    assert status.state == ("firing" if opens else "cooldown")
    if not opens:
        # 300 − (refire_at − 100) seconds are left
        assert f"{COOLDOWN - (refire_at - 100):.0f}s of cooldown left" in status.reason


def test_the_for_duration_runs_during_the_cooldown_and_the_rule_opens_when_it_ends() -> None:
    lc = _opened_then_resolved(for_seconds=60)
    assert lc.evaluate(_saturated(110)) == []  # pending from 110
    assert lc.evaluate(_saturated(170)) == []  # held 60 s, but 230 s of cooldown left
    assert lc.evaluate(_saturated(399)) == []
    assert any(t.kind == "opened" for t in lc.evaluate(_saturated(400)))


def test_a_for_duration_still_applies_after_the_cooldown() -> None:
    lc = _opened_then_resolved(for_seconds=60)
    assert lc.evaluate(_saturated(380)) == []  # first seen again at 380: pending
    assert lc.evaluate(_saturated(439)) == []  # cooldown over at 400 but held only 59 s
    assert any(t.kind == "opened" for t in lc.evaluate(_saturated(440)))


def test_no_cooldown_reopens_at_once() -> None:
    lc = Lifecycle([KVSaturationRule(for_seconds=0)])
    lc.evaluate(_saturated(0))
    lc.evaluate(_calm(10))
    assert any(t.kind == "opened" for t in lc.evaluate(_saturated(11)))


def test_cooldown_is_per_problem() -> None:
    # the resolve of the saturation incident holds back every rule of that problem, and no other problem
    lc = Lifecycle([KVSaturationRule(for_seconds=0)], cooldown_seconds=COOLDOWN)
    lc.evaluate(_saturated(0))
    lc.evaluate(_calm(10))
    assert lc._cooldown_left("chat-8b", "model_drift", 11) == 0.0
    assert lc._cooldown_left("chat-8b", "saturation", 11) == pytest.approx(299.0)
