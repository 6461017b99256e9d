"""kv_budget: preemptions under a budget below ``raise_to`` → raise it; ``max_restarts`` restarts → lower it by
``lower_by`` (never below 0.5)."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.kv_budget import KVBudgetRule
from tests.rules.helpers import ctx, ev, opens_after

RULE = KVBudgetRule(raise_to=0.9, max_restarts=2, lower_by=0.05)


def _ev(util: float = 0.85, **kw: Any) -> Any:
    stats: dict[str, Any] = {"preemptions_increase": 3, "counter_resets": 0}
    stats.update(kw)
    return ev(dep=ctx(gpu_memory_utilization=util), **stats)


@pytest.mark.parametrize(
    ("rule", "util", "stats", "fires"),
    [
        (RULE, 0.85, {}, True),  # preemptions at 0.85 < 0.9: raise
        (RULE, 0.9, {}, False),  # at raise_to: nothing to raise
        (RULE, 0.89, {}, True),  # just under raise_to
        (RULE, 0.85, {"preemptions_increase": 0}, False),  # no preemptions
        (KVBudgetRule(raise_to=0.95), 0.9, {}, True),  # a higher raise_to
        (RULE, 0.9, {"counter_resets": 2}, True),  # 2 restarts = max_restarts: lower
        (RULE, 0.9, {"counter_resets": 1}, False),  # 1 restart, budget at raise_to
        (KVBudgetRule(max_restarts=3), 0.9, {"counter_resets": 3}, True),
        (KVBudgetRule(max_restarts=3), 0.9, {"counter_resets": 2}, False),
        (RULE, 0.55, {"counter_resets": 2, "preemptions_increase": 0}, True),  # 0.55 − 0.05 = 0.5: the floor
        (RULE, 0.54, {"counter_resets": 2, "preemptions_increase": 0}, False),  # 0.49 would be under the floor
    ],
    ids=[
        "preemptions under raise_to fire",
        "preemptions at raise_to do not fire",
        "preemptions just under raise_to fire",
        "no preemptions do not fire",
        "a higher raise_to fires at 0.9",
        "restarts at max_restarts fire",
        "restarts under max_restarts do not fire",
        "a higher max_restarts at it fires",
        "a higher max_restarts one short does not fire",
        "lowering to exactly the 0.5 floor fires",
        "lowering below the 0.5 floor does not fire",
    ],
)
def test_fire_table(rule: KVBudgetRule, util: float, stats: dict[str, Any], fires: bool) -> None:
    e = _ev(util, **stats)
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (not fires)


def test_cannot_tell_without_the_preemption_counter() -> None:
    e = _ev(preemptions_increase=None)
    assert RULE.fires(e).holds is None
    assert RULE.propose(e) == []


def test_restarts_are_known_even_without_the_preemption_counter() -> None:
    assert RULE.fires(_ev(0.9, preemptions_increase=None, counter_resets=2)).holds is True


def test_raise_goes_to_raise_to() -> None:
    (p,) = RULE.propose(_ev(0.8))
    assert (p.dial, p.action, p.current, p.suggested) == ("gpu_memory_utilization", "increase", 0.8, 0.9)
    assert p.flag == "--gpu-memory-utilization 0.9"
    # at 0.8: ⌊(67,989,332,296 − 16,094,076,928 − 1,420,094,341) ÷ 2,097,152⌋ = 24,068 blocks = 385,088 tokens;
    # at 0.9: 28,120 blocks = 449,920 tokens
    # anchored on the engine's 432,000 (issue 13): 432,000 × 449,920 ÷ 385,088 = 504,729.93
    assert p.predicted_effect["kv_cache_tokens"] == {
        "before": 432_000,
        "after": 504_729.9319,
        "model_before": 385_088,
        "model_after": 449_920,
    }


def test_lower_steps_down_by_lower_by() -> None:
    (p,) = RULE.propose(_ev(0.9, counter_resets=3))
    assert (p.action, p.current, p.suggested, p.severity) == ("decrease", 0.9, 0.85, "critical")
    (q,) = KVBudgetRule(lower_by=0.1).propose(_ev(0.9, counter_resets=3))
    assert q.suggested == 0.8


def test_restarts_take_precedence_over_preemptions() -> None:
    (p,) = RULE.propose(_ev(0.8, counter_resets=2, preemptions_increase=50))
    assert p.action == "decrease"


def test_repeated_restarts_never_raise_the_budget() -> None:
    props = RULE.propose(_ev(0.52, counter_resets=3, preemptions_increase=5))
    assert all(p.action != "increase" for p in props)


def test_never_raises_above_raise_to_nor_lowers_on_preemptions() -> None:
    for util in (0.5, 0.7, 0.85, 0.9, 0.95):
        for p in RULE.propose(_ev(util)):
            assert p.action == "increase" and p.suggested <= 0.9


@pytest.mark.parametrize(("held", "opens"), [(119.5, False), (120.0, True)], ids=["just short of 120 s", "at 120 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = KVBudgetRule(for_seconds=120)
    assert opens_after(rule, lambda now: ev(now=now, dep=ctx(gpu_memory_utilization=0.8), preemptions_increase=3),
                       held) is opens  # fmt: skip


def test_a_raise_with_the_demand_unknown_says_so_and_prints_no_infinite_factor() -> None:
    """Breaker, 2026-12-04: with no running requests reported the demand factor is unknown, and the description
    read "holding the current demand needs ×inf"."""
    (p,) = RULE.propose(_ev(0.8, requests_running=None, requests_waiting=None))
    assert "inf" not in p.description
    assert "Whether that holds the current demand is unknown" in p.description
    assert "pool_factor_needed" not in p.evidence
    (known,) = RULE.propose(_ev(0.8, requests_running=4, requests_waiting=4, kv_cache_usage_ratio=1.0))
    assert "Alone it is not enough: holding the current demand needs ×2.00." in known.description
    assert known.evidence["pool_factor_needed"] == 2.0  # (4 running + 4 waiting) ÷ 4 running, for the console line


def test_the_raise_says_over_what_time_the_preemptions_came() -> None:
    """The walkthrough: "why: 47 preemptions with a budget of 0.5" gave no time, so a reader could not tell a burst
    from a storm. The window's covered seconds are in the reason."""
    reason = RULE.fires(_ev(preemptions_increase=47, window_seconds=60.0, span_seconds=55.0)).reason
    assert reason.startswith("47 preemptions in ") and "s with a budget of 0.85" in reason, reason


@pytest.mark.parametrize(
    ("preemptions", "waiting", "fires"),
    [(1, 0, False), (2, 0, False), (3, 0, True), (1, 4, True), (1, None, True)],
    ids=["one, no queue", "two, no queue", "three", "one beside a queue", "one, queue unknown"],
)
def test_a_preemption_or_two_with_nothing_waiting_is_a_peak_not_a_short_budget(
    preemptions: int, waiting: int | None, fires: bool
) -> None:
    """Breaker 23: one preemption at 30 % KV, nothing waiting, opened "gpu_memory_utilization 0.5 → 0.9" and resolved
    15 s later, three times in four minutes on a bursty load. Fewer than three with an empty queue do not hold; a
    queue beside them, or three, do (and an unknown queue is not taken as empty)."""
    e = _ev(0.5, preemptions_increase=preemptions, requests_waiting=waiting)
    assert RULE.fires(e).holds is fires
    if not fires:
        assert "nothing waiting" in RULE.fires(e).reason


def test_counters_going_down_faster_than_an_engine_restarts_are_not_read_as_crashes() -> None:
    """Breaker 26: a target whose counters alternate between two engines' series (a Service VIP) went "down" on
    every scrape — 15 times in 29 s — and paged a critical gpu_memory_utilization cut. An engine cannot restart,
    reload its weights and serve again every 2 s: unknown, not an out-of-memory crash loop. Two restarts over a
    five-minute window still lower the budget."""
    vip = _ev(0.9, counter_resets=15, preemptions_increase=0, window_seconds=30.0, span_seconds=29.0)
    assert RULE.fires(vip).holds is None
    assert "faster than an engine restarts" in RULE.fires(vip).reason
    assert RULE.propose(vip) == []
    crash_loop = _ev(0.9, counter_resets=2, preemptions_increase=0, window_seconds=300.0, span_seconds=285.0)
    assert RULE.fires(crash_loop).holds is True
