"""queue_growth: the waiting queue grows by at least ``min_growth_per_second`` and arrivals outpace completions.

Arrival λ = completions/s + (waiting growth + running growth) ÷ span (flow balance); span = the window (60 s)
unless ``span_seconds`` is given.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.queue_growth import QueueGrowthRule
from tests.rules.helpers import ctx, ev, opens_after

RULE = QueueGrowthRule(min_growth_per_second=0.05, target_utilization=0.8)


def _ev(**kw: Any) -> Any:
    stats: dict[str, Any] = {
        "requests_finished_per_second": 2.0,
        "requests_running": 50,
        "requests_running_first": 50,
        "requests_waiting_first": 10,
        "requests_waiting": 13,
    }
    stats.update(kw)
    return ev(**stats)


@pytest.mark.parametrize(
    ("rule", "stats", "fires"),
    [
        (RULE, {}, True),  # (13 − 10) ÷ 60 = 0.05/s: at the threshold
        (RULE, {"requests_waiting": 12.94}, False),  # 2.94 ÷ 60 = 0.049/s
        (QueueGrowthRule(min_growth_per_second=0.1), {"requests_waiting": 16}, True),  # 6 ÷ 60 = 0.1/s
        (QueueGrowthRule(min_growth_per_second=0.1), {"requests_waiting": 15.9}, False),  # 0.0983/s
        (RULE, {"span_seconds": 30.0, "requests_waiting": 11.5}, True),  # the span, not the window: 1.5 ÷ 30
        # the queue grows 0.05/s but running fell 50 → 40 (−0.167/s): λ = 2 + 0.05 − 0.167 < 2 completions/s
        (RULE, {"requests_running": 40}, False),
        (RULE, {"requests_waiting_first": 0, "requests_waiting": 0}, False),  # no queue
    ],
    ids=[
        "growth at min_growth_per_second fires",
        "growth just under min_growth_per_second does not fire",
        "a higher threshold at it fires",
        "a higher threshold just under it does not fire",
        "growth is measured over the scraped span",
        "a queue growing while the batch shrinks is not arrivals outpacing service",
        "an empty queue does not fire",
    ],
)
def test_fire_table(rule: QueueGrowthRule, stats: dict[str, Any], fires: bool) -> None:
    assert rule.fires(_ev(**stats)).holds is fires


@pytest.mark.parametrize(
    ("stats", "clears"),
    [
        ({}, False),  # growing at 0.05/s: firing, not clear
        ({"requests_waiting": 10.6}, False),  # 0.01/s: below the fire threshold, still growing — the band
        # issue 13: "the queue stopped growing: waiting 105 → 105" while 105 wait is not a resolution
        ({"requests_waiting_first": 105, "requests_waiting": 105}, False),
        ({"requests_waiting": 10}, False),  # flat at 10 waiting: the backlog is still there
        ({"requests_waiting": 5}, False),  # draining, 5 still wait (> 1 per replica)
        ({"requests_waiting": 1}, True),  # drained to ≤ 1 per replica, KV usage unknown
        ({"requests_waiting": 0, "kv_cache_usage_ratio": 0.95}, False),  # queue empty but the pool still full
        ({"requests_waiting": 0, "kv_cache_usage_ratio": 0.79}, True),  # drained and below resolve_below 0.8
        ({"requests_waiting_first": 0, "requests_waiting": 0}, True),  # empty
    ],
    ids=[
        "growing",
        "slow growth stays open (hysteresis)",
        "a flat queue of 105 stays open",
        "flat at 10 stays open",
        "draining but not drained stays open",
        "drained to the threshold clears",
        "drained with the pool still full stays open",
        "drained with usage below resolve_below clears",
        "empty clears",
    ],
)
def test_clear_table(stats: dict[str, Any], clears: bool) -> None:
    assert RULE.clears(_ev(**stats)).holds is clears


@pytest.mark.parametrize(
    "stats",
    [{"requests_waiting": None}, {"requests_waiting_first": None}, {"requests_finished_per_second": None}],
    ids=["waiting unknown", "waiting at the window start unknown", "completion rate unknown"],
)
def test_cannot_tell_without_queue_or_completions(stats: dict[str, Any]) -> None:
    e = _ev(**stats)
    assert RULE.fires(e).holds is None
    # the clear side needs only the queue now (is the backlog gone?): unknown only when the queue is
    assert RULE.clears(e).holds is (None if stats.get("requests_waiting", 0) is None else False)
    assert RULE.propose(e) == []


def test_replicas_from_arrival_and_service_rates() -> None:
    # waiting 10 → 70 over 60 s: +1/s; λ = 2 + 1 = 3/s; μ = 2/s per (saturated) replica.
    # ⌈3 ÷ (2 × 0.8)⌉ = ⌈1.875⌉ = 2 replicas; utilization 3 ÷ 2 = 150 % → 3 ÷ 4 = 75 %.
    # M/M/2 at a = 1.5: Erlang B = 1.125 ÷ 3.625 = 0.310345, C = 2B ÷ (2 − 1.5 (1 − B)) = 9/14 = 0.642857;
    # Wq = C ÷ (2 × 2 − 3) = 0.642857 s. At 1 replica the queue is unstable: null.
    (p,) = RULE.propose(_ev(requests_waiting=70))
    assert (p.dial, p.action, p.current, p.suggested) == ("replicas", "increase", 1, 2)
    assert p.predicted_effect["utilization"] == {"before": 1.5, "after": 0.75}
    assert p.predicted_effect["queue_wait_seconds"] == {"before": None, "after": pytest.approx(0.6429, abs=1e-4)}
    # the total pool scales with replicas: 449,920 tokens per replica
    # anchored on the engine's 432,000 per replica (issue 13); the capacity pass's 449,920 beside it
    assert p.predicted_effect["kv_cache_tokens_total"] == {
        "before": 432_000,
        "after": 864_000,
        "model_before": 449_920,
        "model_after": 899_840,
    }
    assert p.evidence["arrival_rate_per_second"] == 3.0
    assert p.evidence["service_rate_per_replica"] == 2.0
    assert p.severity == "critical"


def test_operator_report_200_arriving_against_2_4_completing() -> None:
    # 2.4 completions/s; waiting 12 → 1,000 over a 5 s span: +197.6/s; λ = 200/s; μ = 2.4/s.
    # ⌈200 ÷ (2.4 × 0.8)⌉ = ⌈104.17⌉ = 105 replicas; 200 ÷ (105 × 2.4) = 79.37 %.
    e = _ev(requests_finished_per_second=2.4, requests_waiting_first=12, requests_waiting=1_000, span_seconds=5.0)
    (p,) = RULE.propose(e)
    assert (p.dial, p.suggested) == ("replicas", 105)
    assert p.predicted_effect["utilization"]["before"] == pytest.approx(200 / 2.4, abs=1e-3)  # 8,333 %
    assert p.predicted_effect["utilization"]["after"] == pytest.approx(0.7937, abs=1e-4)


def test_two_replicas_up_share_the_completions() -> None:
    # 2 replicas complete 4/s together → μ = 2/s each; λ = 4 + 60 ÷ 60 = 5/s → ⌈5 ÷ 1.6⌉ = 4 replicas
    e = _ev(requests_finished_per_second=4.0, requests_waiting=70, replicas_up=2, dep=ctx(replicas=2))
    (p,) = RULE.propose(e)
    assert (p.current, p.suggested) == (2, 4)


def test_one_more_replica_when_arrivals_just_exceed_service() -> None:
    # λ = 2 + 0.05 = 2.05, μ = 2: ⌈2.05 ÷ 1.6⌉ = 2; M/M/2 at a = 1.025 waits ~0.2 s ≤ 2.5 s
    (p,) = RULE.propose(_ev())
    assert p.suggested == 2


def test_never_proposes_more_sequences_or_speculation() -> None:
    props = RULE.propose(_ev(requests_waiting=70))
    assert [p.dial for p in props] == ["replicas"]


def test_no_proposal_without_completions() -> None:
    # μ unknown when nothing completes: no replica count can be computed
    assert RULE.propose(_ev(requests_finished_per_second=0.0, requests_waiting=70)) == []


@pytest.mark.parametrize(("held", "opens"), [(119.5, False), (120.0, True)], ids=["just short of 120 s", "at 120 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = QueueGrowthRule(for_seconds=120)
    assert opens_after(rule, lambda now: _ev(now=now, requests_waiting=70), held) is opens


def test_a_retry_flood_draining_after_a_restart_is_not_a_growing_queue() -> None:
    # breaker 30 (restart-long): vLLM at 5 requests/s restarts; the retries land on the new process as 150 waiting,
    # which it drains at ~7/s, every scrape lower than the one before. The window held the old process's 0 waiting at
    # its start and paged "waiting 0 → 115 (+6.39/s) … scale replicas 1 → 3". The trend starts after the restart:
    # 150 → 115 over the new process's scrapes is a queue draining, whatever the old process held.
    from advisor.telemetry import EngineSnapshot, TimedSnapshot, window_stats

    def at(t: float, start: float, running: float, waiting: float, done: float) -> TimedSnapshot:
        snap = EngineSnapshot(
            engine="vllm",
            process_start_time_seconds=start,
            requests_running=running,
            requests_waiting=waiting,
            kv_cache_usage_ratio=0.5,
            requests_finished_total=done,
            prompt_tokens_total=done * 500,
            generation_tokens_total=done * 200,
        )
        return TimedSnapshot(target="a", timestamp=t, snapshot=snap)

    old = [at(t, 100.0, 20, 0, 5 * t) for t in (1000.0, 1005.0, 1010.0)]  # 5/s, no queue
    new = [at(1015.0 + 5 * i, 1012.0, 60, 150 - 35 * i, 60 * (i + 1)) for i in range(4)]  # 150 → 45 waiting
    stats = window_stats(old + new, now=1030.0, window_seconds=60.0)
    assert stats.counter_resets == 1
    assert (stats.requests_waiting_first, stats.requests_waiting) == (150, 45)
    e = ev(
        **{
            f: getattr(stats, f)
            for f in (
                "requests_running",
                "requests_running_first",
                "requests_waiting",
                "requests_waiting_first",
                "requests_finished_per_second",
                "span_seconds",
            )
        }
    )
    got = RULE.fires(e)
    assert got.holds is False, got.reason
    assert "150 → 45" in got.reason, got.reason
