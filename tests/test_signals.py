"""The autoscaler signals of issue 18 (:mod:`advisor.signals`), on hand-chosen numbers: every expected value is
worked out by hand in the test's docstring, never taken from running the advisor."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from advisor.domain import EngineSnapshot, Recommendation, TimedSnapshot
from advisor.evaluate import TargetView
from advisor.rules.base import Evaluation
from advisor.signals import (
    ReplicaHold,
    SloCapacity,
    autoscaler_signals,
    desired_replicas,
    kv_exhaustion,
    theil_sen_slope,
)
from tests.factories import context, evaluation


def _target(usages: Sequence[float | None], step: float = 15.0, start: float = 940.0, url: str = "a") -> TargetView:
    """A target scraped every ``step`` s from ``start`` with these KV usages (the last at 1000 by default)."""
    history = tuple(
        TimedSnapshot(url, start + i * step, EngineSnapshot(engine="vllm", kv_cache_usage_ratio=u))
        for i, u in enumerate(usages)
    )
    return TargetView(url, True, None, None, history)


def _rec(
    alternatives: tuple[dict[str, object], ...] = (), dial: str = "max_num_seqs", suggested: object = 512
) -> Recommendation:
    return Recommendation(
        id="r1",
        deployment="chat-8b",
        rule="kv_saturation",
        dial=dial,
        action="increase",
        current=256,
        suggested=suggested,
        flag="",
        severity="warning",
        confidence=0.9,
        summary="",
        description="",
        runbook="",
        opened_at=900.0,
        predicted_effect={},
        evidence={},
        alternatives=alternatives,
    )


def test_theil_sen_is_the_median_pairwise_slope() -> None:
    """(0, .50), (10, .52), (20, .54), (30, .99): pairwise slopes .002, .002, .49/30, .002, .47/20, .45/10; sorted
    .002 .002 .002 .01633 .0235 .045 → median (.002 + .01633) ÷ 2 = .009167 (least squares would give 7.45/500 =
    .0149)."""
    slope = theil_sen_slope([(0, 0.50), (10, 0.52), (20, 0.54), (30, 0.99)])
    assert slope == pytest.approx((0.002 + 0.49 / 30) / 2, rel=1e-9)
    assert theil_sen_slope([(5, 0.1), (5, 0.2)]) is None  # no pair of distinct times


def test_exhaustion_on_a_linear_ramp() -> None:
    """Usage .40, .46, .52, .58, .64 at 15 s steps: slope .06 ÷ 15 = .004/s; (1 − .64) ÷ .004 = 90 s."""
    got = kv_exhaustion([_target([0.40, 0.46, 0.52, 0.58, 0.64])], now=1000.0, window_seconds=60.0)
    assert got is not None
    assert got[0] == pytest.approx(90.0, rel=1e-9)
    assert got[1] == pytest.approx(0.004, rel=1e-9)


def test_exhaustion_ignores_one_spike() -> None:
    """.40, .46, .99, .58, .64: of the ten pairwise slopes six are .004 (the pairs without the spike), two above and
    two below → median .004; from the newest .64 → 90 s, as without the spike."""
    got = kv_exhaustion([_target([0.40, 0.46, 0.99, 0.58, 0.64])], now=1000.0, window_seconds=60.0)
    assert got is not None and got[0] == pytest.approx(90.0, rel=1e-9)


@pytest.mark.parametrize(
    "usages",
    [
        pytest.param([0.5, 0.5, 0.5, 0.5, 0.5], id="flat"),
        pytest.param([0.7, 0.65, 0.6, 0.55, 0.5], id="declining"),
        pytest.param([0.4, 0.6], id="two-scrapes"),
        pytest.param([None, None, None, None], id="unknown"),
    ],
)
def test_exhaustion_is_unknown_without_growth(usages: list[float | None]) -> None:
    assert kv_exhaustion([_target(usages)], now=1000.0, window_seconds=60.0) is None


def test_exhaustion_is_the_first_pool_to_fill_and_reads_the_window_only() -> None:
    """Target a: 90 s (above). Target b: .80, .81, .82, .83, .84 → .01 ÷ 15 per s; (1 − .84) × 1500 = 240 s. The
    soonest: 90 s. A scrape before the 60 s window (at 925, usage .99) is not read."""
    a = _target([0.99, 0.40, 0.46, 0.52, 0.58, 0.64], start=925.0)
    b = _target([0.80, 0.81, 0.82, 0.83, 0.84], url="b")
    got = kv_exhaustion([a, b], now=1000.0, window_seconds=60.0)
    assert got is not None and got[0] == pytest.approx(90.0, rel=1e-9)
    only_b = kv_exhaustion([b], now=1000.0, window_seconds=60.0)
    assert only_b is not None and only_b[0] == pytest.approx(240.0, rel=1e-9)


def test_desired_replicas_is_the_current_count_when_nothing_is_advised() -> None:
    ev = evaluation(ctx=context(replicas=3), state="fresh")
    assert desired_replicas(ev, []) == 3
    assert desired_replicas(ev, [_rec()]) == 3  # an incident without a replicas turn advises no count


def test_desired_replicas_is_the_advised_count_first_turn_or_alternative() -> None:
    ev = evaluation(ctx=context(replicas=2), state="fresh")
    assert desired_replicas(ev, [_rec(dial="replicas", suggested=5)]) == 5
    assert desired_replicas(ev, [_rec(({"dial": "replicas", "suggested": 4},))]) == 4


@pytest.mark.parametrize("state", ["stale", "unavailable"])
def test_not_fresh_gives_no_signal_at_all(state: str) -> None:
    ev = evaluation(ctx=context(replicas=2), state=state, kv_cache_usage_ratio=0.5)
    assert desired_replicas(ev, [_rec(dial="replicas", suggested=5)]) is None
    sig = autoscaler_signals(ev, [], [_target([0.4, 0.46, 0.52, 0.58, 0.64])], 60.0, 0.5)
    assert (sig.desired_replicas, sig.kv_headroom_ratio, sig.slo_throughput_headroom_ratio) == (None, None, None)
    assert sig.kv_exhaustion_seconds is None


def test_headroom_by_hand_on_the_measured_path() -> None:
    """Two replicas, saturated (KV .95 with 10 waiting), no token counters (so the measured path: μ = completions
    per replica, capacity at the SLO = 0.8 μ, the M/M/c planning utilization). Completions 4/s, in-flight 60 at
    both ends → λ = 4/s; μ = 4 ÷ 2 = 2/s; capacity at the SLO 1.6/s per replica. slo_throughput: 1 − 4 ÷ (2 × 1.6) =
    −0.25 (arrivals exceed it by a quarter). kv_ceiling: 1 − .95 = .05."""
    ev = evaluation(
        ctx=context(replicas=2),
        replicas_up=2,
        requests_running=50.0,
        requests_waiting=10.0,
        requests_running_first=50.0,
        requests_waiting_first=10.0,
        requests_finished_per_second=4.0,
        kv_cache_usage_ratio=0.95,
        samples=10,
        span_seconds=60.0,
    )
    sig = autoscaler_signals(ev, [], [], 60.0, 0.95)
    assert (sig.arrival_rate, sig.capacity_at_slo_per_replica) == pytest.approx((4.0, 1.6), rel=1e-9)
    assert sig.slo_throughput_headroom_ratio == pytest.approx(-0.25, rel=1e-9)
    assert sig.kv_headroom_ratio == pytest.approx(0.05, rel=1e-9)
    assert sig.desired_replicas == 2


def test_throughput_headroom_is_unknown_over_a_short_history() -> None:
    """The same load over a 10 s span (< the 30 s rules.replicas.min_history): the in-flight growth is a momentary
    backlog, not a rate, so no headroom is stated; the KV headroom still is."""
    ev = evaluation(
        ctx=context(replicas=2),
        replicas_up=2,
        requests_running=50.0,
        requests_waiting=10.0,
        requests_running_first=50.0,
        requests_waiting_first=10.0,
        requests_finished_per_second=4.0,
        kv_cache_usage_ratio=0.95,
        samples=10,
        span_seconds=10.0,
    )
    sig = autoscaler_signals(ev, [], [], 60.0, 0.95)
    assert sig.slo_throughput_headroom_ratio is None
    assert sig.kv_headroom_ratio == pytest.approx(0.05)


def _saturated(now: float, done: float) -> Evaluation:
    return evaluation(
        now=now,
        ctx=context(replicas=2),
        replicas_up=2,
        requests_running=50.0,
        requests_waiting=10.0,
        requests_running_first=50.0,
        requests_waiting_first=10.0,
        requests_finished_per_second=done,
        kv_cache_usage_ratio=0.95,
        samples=10,
        span_seconds=60.0,
    )


def test_the_capacity_at_the_slo_is_kept_for_a_window_the_arrival_rate_is_not() -> None:
    """Kept for 300 s: at 1000 s, 4/s complete → capacity 0.8 × 4 ÷ 2 = 1.6/s per replica. At 1150 s 2/s complete
    (λ = 2/s): the kept 1.6 gives 1 − 2 ÷ 3.2 = 0.375. At 1300 s (300 s later) it is derived again: 0.8 × 2 ÷ 2 =
    0.8/s, 1 − 2 ÷ 1.6 = −0.25."""
    kept = SloCapacity(300.0)
    first = autoscaler_signals(_saturated(1000.0, 4.0), [], [], 60.0, 0.95, kept)
    assert first.slo_throughput_headroom_ratio == pytest.approx(-0.25, rel=1e-9)
    within = autoscaler_signals(_saturated(1150.0, 2.0), [], [], 60.0, 0.95, kept)
    assert within.slo_throughput_headroom_ratio == pytest.approx(0.375, rel=1e-9)
    after = autoscaler_signals(_saturated(1300.0, 2.0), [], [], 60.0, 0.95, kept)
    assert after.slo_throughput_headroom_ratio == pytest.approx(-0.25, rel=1e-9)
    with pytest.raises(ValueError, match="refresh_seconds"):
        SloCapacity(-1.0)


def test_the_incident_count_is_held_while_the_incident_stays_open() -> None:
    """Incident r1 advises 5; next cycle r1 is still open but carries no replicas value (its rule cleared while
    another of the problem holds): desired stays 5, not the current 2. Once r1 resolves (no longer open): 2."""
    hold = ReplicaHold()
    ev = evaluation(ctx=context(replicas=2), state="fresh")
    assert desired_replicas(ev, [_rec(dial="replicas", suggested=5)], hold) == 5
    assert desired_replicas(ev, [_rec()], hold) == 5
    assert desired_replicas(ev, [], hold) == 2
    assert desired_replicas(ev, [_rec()], hold) == 2  # forgotten with its incident: a later r1 holds nothing
