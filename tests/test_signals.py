"""The autoscaler signals of issue 18 (:mod:`advisor.signals`), on hand-chosen numbers: every expected value is
worked out by hand in the test's docstring, never taken from running the advisor."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.domain import EngineSnapshot, Recommendation, TimedSnapshot
from advisor.evaluate import TargetView
from advisor.rules.base import Evaluation
from advisor.rules.replicas import ReplicaStabilizer
from advisor.signals import (
    ReplicaHold,
    ReplicaLead,
    SloCapacity,
    autoscaler_signals,
    desired_replicas,
    kv_exhaustion,
    mann_kendall_rising,
    poisson_rise_z,
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
    """.16, .22, .28, .34, .99, .46, .52, .58, .64 at 15 s steps: of the 36 pairwise slopes the 28 without the spike
    are .004, four above and four below → median .004; from the newest .64 → 90 s, as without the spike. (Five
    scrapes with one spike are no significant rise: Mann–Kendall S = 6, z = 1.22 < 1.645.)"""
    nine = _target([0.16, 0.22, 0.28, 0.34, 0.99, 0.46, 0.52, 0.58, 0.64], start=880.0)
    got = kv_exhaustion([nine], now=1000.0, window_seconds=120.0)
    assert got is not None and got[0] == pytest.approx(90.0, rel=1e-9)
    assert kv_exhaustion([_target([0.40, 0.46, 0.99, 0.58, 0.64])], now=1000.0, window_seconds=60.0) is None


@pytest.mark.parametrize(
    "usages",
    [
        [0.03, 0.02, 0.05, 0.03, 0.04, 0.03, 0.05, 0.04],  # Theil–Sen slope +0.00125/s at 2 s scrapes
        [0.02, 0.05, 0.03, 0.02, 0.04, 0.05, 0.03, 0.04],  # +0.00092/s
    ],
)
def test_no_exhaustion_from_a_level_pool_whose_noise_slopes_up(usages: list[float]) -> None:
    """Walkthrough, 2026-12-07: a healthy engine at 2–5 % KV usage, level for minutes, exported
    ``advisor_time_to_kv_exhaustion_seconds`` now and then (78,701 s, 6,954 s) and the status page read "KV full in
    1,263 s": a positive median slope of noise. The rise must be significant (Mann–Kendall, one-sided 5 %)."""
    noisy = _target(usages, step=2.0, start=986.0)
    assert kv_exhaustion([noisy], now=1000.0, window_seconds=30.0) is None


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


def _lead() -> ReplicaLead:
    """The demo's windows: scale up to the lowest raw count of 2 s, down to the highest of 10 s; a 5 s horizon (the
    evaluation window)."""
    return ReplicaLead(ReplicaStabilizer(2.0, 10.0), horizon_seconds=5.0)


def _run(
    lead: ReplicaLead, rates: Sequence[float | None], start: int = 0, advised: dict[int, int] | None = None
) -> list[int]:
    """Cycles 1 s apart from t = 1000 + ``start``, 2 replicas running, 1 request/s per replica within the SLO: the
    desired count each cycle, max(advice, lead), the advice 2 (none) unless ``advised`` says otherwise.

    Fed at :data:`SCALE` times the rates and the capacity (the same needs): a 5 s window then holds hundreds of
    arrivals, so that a rise of the hand-chosen rates is also one beyond Poisson noise (:func:`poisson_rise_z`:
    RISING's 1.0 → 1.5 over four cycles is 500 against 750 arrivals in 5 s windows 4 s apart, z = 7.9); the
    flat-noise property test feeds its rates as given."""
    out = []
    for k, rate in enumerate(rates, start=start):
        adv = (advised or {}).get(k, 2)
        led = lead.lead("d", 1000.0 + k, 2, None if rate is None else rate * SCALE, SCALE, adv)
        out.append(max(adv, led or 2))
    return out


SCALE = 100.0
"""The factor :func:`_run` feeds the rates and the capacity at."""

RISING = [1.0 + 0.125 * k for k in range(7)]
"""λ rising 0.125 requests/s each 1 s cycle: 2 replicas serve 2.0 within the SLO, so it breaks past k = 8."""


def test_a_rising_arrival_rate_leads_the_count_before_the_slo_breaks() -> None:
    """λ_k = 1 + 0.125 k; capacity 1/s per replica, 2 running. From k = 2 three collinear points give the Theil–Sen
    slope 0.125 exactly; λ_ahead = λ + 0.125 × 5 s. k = 0: 1.0 (no slope) → need 1; k = 1: 1.125 → 2; k = 2: 1.25 +
    .625 = 1.875 → 2; k = 3: 2.0 → 2; k = 4: 2.125 → 3; k = 5: 2.25 → 3; k = 6: 2.375 → 3. The raw count max(2, need)
    is 3 from k = 4; the scale-up window (2 s: k − 2 … k) holds only 3s at k = 6 → desired 3 at k = 6, where λ =
    1.75 < 2.0: before the SLO breaks, with no replica advice at all."""
    assert _run(_lead(), RISING) == [2, 2, 2, 2, 2, 2, 3]


def _led(rates: Sequence[float | None], capacity: float, lead: ReplicaLead | None = None) -> list[int]:
    """Cycles 1 s apart from t = 1000, 2 replicas running, ``capacity`` requests/s per replica within the SLO, no
    advice: the desired count each cycle (the lead's, else 2), through ``lead`` (default :func:`_lead`)."""
    lead = lead or _lead()
    return [max(2, lead.lead("d", 1000.0 + k, 2, r, capacity, 2) or 2) for k, r in enumerate(rates)]


def test_a_significant_rise_already_past_the_running_count_is_led() -> None:
    """The case two CI runs of ``tests/e2e/test_desired_replicas_ramp.py`` met under load: the cycles before a rising
    λ crossed the running count's capacity withheld their rate (a window one scrape short), so the trend's crossing
    ahead was never seen, and past it ``ceil(λ_ahead) = ceil(λ)``: nothing led until the SLO broke and the advice
    followed, two cycles late (the previous code: 2 throughout).

    λ_k = 175 + 5 k requests/s to k = 19, then 270 held; k = 1 … 5 unknown; capacity 100/s per replica, 2 running,
    5 s horizon and window: λ_ahead = λ + 25 stays below 300 (the next boundary) throughout, so the trend's crossing
    never fires. From k = 6 the load needs 3 (λ > 200). The significant-rise path reads two horizons (10 s) and asks
    (a) a Mann–Kendall rise (four rates or more), (b) the Theil–Sen slope 5/s × 5 s = 25 ≥ 0.1 λ (λ ≤ 250: k ≤ 15),
    (c) the last window significantly above the oldest held and (d) each half (oldest → the newest ≥ 5 s before the
    last → last) carrying a quarter of the rise. k = 8 … 12: the middle is the oldest itself or one cycle after it
    (k = 6, 7 against k = 6): (d) fails. k = 13: oldest k = 6 (205), middle k = 8 (215), last 240: halves 10 and 25 of
    35 (≥ 8.75), z = 35 × 5 ÷ √(445 × 5) = 3.7 → need ceil(240 + 25) = 3; k = 14, 15 likewise (k = 15 at the bound of
    (b), 25 = 0.1 × 250). The scale-up window (2 s) holds only 3s at k = 15 → desired 3 from k = 15 (λ = 250), then
    held by today's need (λ > 200) while the incident is open.

    The same rise at a hundredth of the rate (last window 24 arrivals against 20.5: z = 0.5) is noise: desired stays
    2."""
    rates: list[float | None] = [175.0 + 5.0 * k if k <= 19 else 270.0 for k in range(25)]
    rates[1:6] = [None] * 5
    assert _led(rates, 100.0) == [2] * 15 + [3] * 10
    lead = _lead()
    for k, r in enumerate(rates[:16]):
        lead.lead("d", 1000.0 + k, 2, r, 100.0, 2)
    assert lead.why("d") == (
        "3: led by a significant, sustained rise of the arrival rate, to 250 requests/s when it rose, past the 2 "
        "running replicas' 200 within the SLO (100 each); held until the scale-down window (10 s) sees no need"
    )
    assert _led([None if r is None else r / 100 for r in rates], 1.0) == [2] * 25


def _production(rates: Sequence[float]) -> list[int]:
    """The defaults: cycles 15 s apart, a 5 min window (the horizon), 60 s / 300 s stabilization; 2 replicas of
    1 request/s each at the SLO, no advice: the desired count each cycle."""
    lead = ReplicaLead(ReplicaStabilizer(60.0, 300.0), horizon_seconds=300.0)
    return [max(2, lead.lead("d", 15.0 * k, 2, r, 1.0, 2, None, 300.0) or 2) for k, r in enumerate(rates)]


def test_a_burst_in_the_window_is_not_a_sustained_rise() -> None:
    """1.5 requests/s, plus 6/s for 30 s from t = 1200 (a transient burst), 2 replicas of 1/s each at the SLO, the
    defaults: the 5 min window's λ is 1.5 + 6 × (the burst's seconds in the window) ÷ 300, rising to 2.1 by t = 1230,
    level until 1500, 1.5 again from 1530. While level at 2.1 the load "needs" 3 (the window's memory of 30 s), and
    the last two windows' λ do rise significantly (180 arrivals more than 450, z = 5.5, a Mann–Kendall rise, 0.6 ≥ 0.1
    × 2.1): the first version of the significant-rise path led 3 from t = 1500 to 1815, a replica asked for after the
    burst ended and held through the scale-down window. But the rise sits in one half of the two windows, the other
    level (less than a quarter of it): no sustained rise. The trend's crossing (ahead 2.1 + a Theil–Sen slope of a
    step, under 0.9) never reaches 3. Desired stays 2."""

    def window_rate(now: float) -> float:
        inside = max(0.0, min(now, 1230.0) - max(now - 300.0, 1200.0))
        return 1.5 + 6.0 * inside / 300.0

    assert set(_production([window_rate(15.0 * k) for k in range(160)])) == {2}


def test_a_rise_that_has_stopped_is_not_extrapolated() -> None:
    """λ = 1.0 for k = 0 … 5, then 1.6 held (the window's memory of a burst that entered it, level since), cycles 1 s
    apart, a 12 s horizon (its newest quarter, 3 s, holds four rates), 2 replicas of 1/s each: today's need is 2
    throughout. k = 8: the horizon (k = 0 … 8) has 18 zero pairwise slopes and 18 positive, the smallest 0.6 ÷ 8 →
    Theil–Sen 0.0375, λ_ahead = 1.6 + 0.45 = 2.05 → 3; the newest four (k = 5 … 8: slopes 0.6, 0.3, 0.2 and three
    0 → 0.1 ≥ 0.5 × 0.0375) still rise: raw 3. k = 9: 21 zero pairs and 24 positive → 0.6 ÷ 8 = 0.075, λ_ahead 2.5 →
    3, but the newest four (k = 6 … 9) are level, slope 0: no extrapolation, raw 2; likewise to k = 13, and from
    k = 14 the horizon's slope is 0 itself. One raw 3 (two are needed): desired stays 2. Before, the trend was
    extrapolated whatever its newest rates did: raw 3 at k = 8 … 13, desired 3 from k = 10, held through the
    scale-down window (10 s)."""
    rates = [1.0] * 6 + [1.6] * 14
    assert _led(rates, 1.0, ReplicaLead(ReplicaStabilizer(2.0, 10.0), horizon_seconds=12.0)) == [2] * 20
    # a rise that goes on (0.05/s every cycle): λ_ahead = λ + 0.6 passes 2 at k = 9 (raw 3; the newest four rise as
    # fast), the scale-up window (2 s) holds only 3s at k = 11: desired 3 from there, with λ = 1.55 < 2
    ramp = [1.0 + 0.05 * k for k in range(16)]
    assert _led(ramp, 1.0, ReplicaLead(ReplicaStabilizer(2.0, 10.0), horizon_seconds=12.0)) == [2] * 11 + [3] * 5


def test_a_burst_past_the_window_is_not_led_at_the_defaults() -> None:
    """60 s of +10 requests/s on 1.5 from t = 1200, the defaults (15 s cycles, 5 min window), 2 replicas of 1/s each:
    the window's λ climbs to 3.5 by t = 1260, stays level to 1500 and falls back by 1560. While level its Theil–Sen
    slope over the horizon stays positive (the pairs across the climb outnumber the level pairs), and extrapolated a
    whole horizon it asked for 6 replicas from t = 1365, 105 s after the burst ended, until t = 1830, where 2 serve
    (the code before this test). The newest 75 s of a level λ do not rise: desired stays 2."""

    def window_rate(now: float) -> float:
        inside = max(0.0, min(now, 1260.0) - max(now - 300.0, 1200.0))
        return 1.5 + 10.0 * inside / 300.0

    assert set(_production([window_rate(15.0 * k) for k in range(200)])) == {2}


@pytest.mark.parametrize(
    ("rate", "before", "window", "z"),
    [
        (215.0, 175.0, 5.0, 200 / 1950**0.5),
        (2.15, 1.75, 5.0, 2.0 / 19.5**0.5),
        (2.2, 2.0, 300.0, 60 / 1260**0.5),  # the production default window: 660 against 600 arrivals, z = 1.69
        (1.0, 2.0, 10.0, -10 / 30**0.5),
        (0.0, 0.0, 10.0, 0.0),
    ],
)
def test_poisson_rise_z(rate: float, before: float, window: float, z: float) -> None:
    """Disjoint windows (the default, and any ``apart`` of a window or more): ``(n₁ − n₀) ÷ √(n₁ + n₀)``."""
    assert poisson_rise_z(rate, before, window) == pytest.approx(z, rel=1e-12, abs=1e-12)
    assert poisson_rise_z(rate, before, window, 2 * window) == pytest.approx(z, rel=1e-12, abs=1e-12)


def test_poisson_rise_z_of_windows_that_overlap() -> None:
    """60 s windows 2 s apart at 2.5 and 2.0 requests/s: 150 against 120 arrivals, of which all but the newest and
    oldest 2 s are the same: the difference 30 has variance (2.5 + 2.0) × 2 = 9 → z = 10 (disjoint: 30 ÷ √270 =
    1.83). Windows 4 s apart at 150 and 100 (5 s windows): 250 ÷ √1,000 = 7.9."""
    assert poisson_rise_z(2.5, 2.0, 60.0, 2.0) == pytest.approx(10.0, rel=1e-12)
    assert poisson_rise_z(150.0, 100.0, 5.0, 4.0) == pytest.approx(250 / 1000**0.5, rel=1e-12)
    assert poisson_rise_z(2.5, 2.0, 60.0, 0.0) == 0.0


@given(st.lists(st.floats(-0.025, 0.025), min_size=6, max_size=40))
def test_a_flat_load_above_the_capacity_with_noise_never_leads(noise: list[float]) -> None:
    """λ = 250 × (1 + ε) requests/s, |ε| ≤ 2.5 %, with 2 replicas of 100/s each (the model asks 3 now, no trend),
    cycles 1 s apart, 5 s windows of ~1,250 arrivals, whatever order the noise takes. The significant-rise path needs
    a window at least 5 s older than the last, so its oldest is disjoint from the last: at most 62.5 arrivals apart,
    z ≤ 62.5 ÷ √2,500 = 1.25 < 2.326. The trend's crossing past 300 needs a Theil–Sen slope of 8.75/s where the rates
    span 12.5. The lead states nothing; today's need stays the advice's."""
    lead = _lead()
    got = [lead.lead("d", 1000.0 + k, 2, 250.0 * (1 + e), 100.0, 2) for k, e in enumerate(noise)]
    assert got == [None] * len(noise)


@pytest.mark.parametrize(
    ("ys", "rising"),
    [
        ([1, 2, 3], False),  # S = 3: z = 2 ÷ √(11 ÷ 3) = 1.04
        ([1, 2, 3, 4], True),  # S = 6: z = 5 ÷ √(26 ÷ 3) = 1.70
        ([1, 2, 4, 3], False),  # S = 4: z = 1.02
        ([1, 2, 3, 5, 4], True),  # S = 8: z = 7 ÷ √(50 ÷ 3) = 1.71
        ([1, 3, 2, 5, 4], False),  # S = 6: z = 1.22
        ([2, 1, 3, 5, 4, 6], True),  # S = 11: z = 10 ÷ √(85 ÷ 3) = 1.88
        ([2, 1, 4, 3, 6, 5], False),  # S = 9: z = 1.50
        ([3, 3, 3, 3, 3], False),  # ties: S = 0
        ([5, 4, 3, 2], False),
    ],
)
def test_mann_kendall_rising_at_5_percent(ys: list[int], rising: bool) -> None:
    """Hand-computed S and z (``(S − 1) ÷ √(n(n − 1)(2n + 5) ÷ 18)`` against 1.645), given in x order reversed too:
    the test sorts by x."""
    pts = [(float(x), float(y)) for x, y in enumerate(ys)]
    assert mann_kendall_rising(pts) is rising
    assert mann_kendall_rising(pts[::-1]) is rising


def test_bad_numbers_never_raise_and_never_poison_the_lead() -> None:
    """A capacity so small that λ ÷ capacity overflows (1e-320 requests/s), or NaN, sizes nothing (no exception, no
    lead); a cycle at a NaN time feeds nothing, so RISING fed after one leads as RISING alone (3 at k = 6) — before,
    the NaN stayed first in the rates, never pruned, and the deployment never led again."""
    lead = _lead()
    assert lead.lead("d", 1000.0, 2, 300.0, 1e-320, 2) is None
    assert lead.lead("d", 1001.0, 2, 300.0, float("nan"), 2) is None
    lead = _lead()
    assert lead.lead("d", float("nan"), 2, 100.0, 100.0, 2) is None
    assert _run(lead, RISING) == [2, 2, 2, 2, 2, 2, 3]
    assert lead.lead("d", float("nan"), 2, 100.0, 100.0, 2) == 3  # the count already led, held


def test_a_one_cycle_spike_never_raises_the_count() -> None:
    """λ = 1 every cycle but one, k = 6, at 13/s (a transient queue): its need is ceil(13 ÷ 1) = 13 (Theil–Sen over
    k = 1 … 6: ten zero pairwise slopes and five positive → median 0). At k = 7 the median is 0 again (ten zero
    pairs, four positive, one negative) → need 1. The scale-up window's lowest raw count is 2 at k = 6 and the spike
    is one cycle (two are needed): desired stays 2 throughout."""
    rates = [1.0] * 13
    rates[6] = 13.0
    assert _run(_lead(), rates) == [2] * 13


def test_after_the_need_ends_the_count_is_held_for_the_scale_down_window_then_falls_once() -> None:
    """RISING (desired 3 from k = 6, raw 3 at k = 4, 5, 6), then λ = 1 from k = 7: k = 7's slope is still 0.125
    (ten pairs of the rising five, five negative with the drop → the 8th of 15) → 1.625 → need 2; from k = 8 the
    median is negative or 0 → need 1. Raw 2 from k = 7. The scale-down window (10 s) holds k = 6's 3 through
    k = 16 (16 − 6 = 10); at k = 17 its highest raw count is 2, the current count: desired falls once, to 2."""
    lead = _lead()
    _run(lead, RISING)
    after = _run(lead, [1.0] * 14, start=7)
    assert after == [3] * 10 + [2] * 4


def test_the_advice_folded_into_the_lead_falls_with_it_once() -> None:
    """As above, but an incident advises 4 at k = 8 and 9 and resolves at k = 10: max(advice, lead) would go 3 → 4 →
    3 → 2 (down and up inside one incident's life). The lead folds the higher advice in (4) and holds it until its
    scale-down window is clear (k = 17) and the advice advises nothing: 3, 3, 4 … 4, then 2 once."""
    lead = _lead()
    _run(lead, RISING)
    after = _run(lead, [1.0] * 3, start=7, advised={8: 4, 9: 4})
    assert lead.why("d") == "4: the replica advice's count, folded into the lead's"
    after += _run(lead, [1.0] * 11, start=10)
    assert after == [3] + [4] * 9 + [2] * 4
    assert lead.why("d") is None  # fallen: nothing led


def test_the_lead_never_lowers_the_advice_and_a_scale_down_stays_the_advices() -> None:
    """λ = 0.5 with 2 running (need 1): the lead states nothing, so an over-provisioned advice of 1 stands."""
    lead = _lead()
    assert [lead.lead("d", 1000.0 + k, 2, 0.5, 1.0, 1) for k in range(5)] == [None] * 5
    with pytest.raises(ValueError, match="horizon_seconds"):
        ReplicaLead(ReplicaStabilizer(), float("nan"))


def test_a_flat_load_above_the_capacity_is_the_advices_not_the_leads() -> None:
    """λ = 3 every cycle with 2 replicas of 1/s each: the model says ceil(3 ÷ 1) = 3 now, but no trend raises it (the
    slope is 0): today's need is the advice's to state, gated by measured symptoms; the lead states nothing."""
    lead = _lead()
    assert [lead.lead("d", 1000.0 + k, 2, 3.0, 1.0, 2) for k in range(8)] == [None] * 8


def _rising(now: float, rate: float) -> Evaluation:
    """The saturated deployment of the headroom test (4/s complete, 2 replicas, capacity at the SLO 0.8 × 4 ÷ 2 =
    1.6/s per replica) whose in-flight population falls over the 60 s span so that λ = 4 − (first − 60) ÷ 60 =
    ``rate``."""
    return evaluation(
        now=now,
        ctx=context(replicas=2),
        replicas_up=2,
        requests_running=50.0,
        requests_waiting=10.0,
        requests_running_first=50.0 + 60.0 * (4.0 - rate),
        requests_waiting_first=10.0,
        requests_finished_per_second=4.0,
        kv_cache_usage_ratio=0.95,
        samples=10,
        span_seconds=60.0,
    )


def test_the_lead_through_the_signals_and_stale_data() -> None:
    """λ = 2.0, 2.25, 2.5, 2.75, 3.0 at 1000 … 1004 (2 replicas serve 2 × 1.6 = 3.2 within the SLO; no advice).
    From 1002 the Theil–Sen slope is 0.25 → λ_ahead = λ + 1.25: 3.75, 4.0, 4.25 → ceil(÷ 1.6) = 3, above today's
    ceil(λ ÷ 1.6) = 2 → raw 3 at 1002, 1003, 1004; the scale-up window (2 s) holds only 3s at 1004 → desired 3 there,
    with λ = 3.0 < 3.2. At 1005 stale → ``None`` (never 0). At 1006 fresh again: its rates forgotten, no slope, no
    need (raw 2), but the scale-down window (10 s) still holds the 3s: desired stays 3."""
    lead = _lead()
    kept = SloCapacity(300.0)
    got, why = [], []
    for k, rate in enumerate([2.0, 2.25, 2.5, 2.75, 3.0, None, 3.25]):
        now = 1000.0 + k
        ev = _rising(now, rate) if rate is not None else evaluation(now=now, ctx=context(replicas=2), state="stale")
        sig = autoscaler_signals(ev, [], [], 60.0, 0.95, kept, lead=lead)
        if rate is not None:
            assert (sig.arrival_rate, sig.capacity_at_slo_per_replica) == pytest.approx((rate, 1.6), rel=1e-9)
        got.append(sig.desired_replicas)
        why.append(sig.desired_reason)
    assert got == [2, 2, 2, 2, 3, None, 3]
    # the reason, for the status page: the lead's numbers at its rise (1004), kept while it holds (1006)
    current = "2: the current count, no open incident advises replicas"
    led = (
        "3: led by the arrival rate's trend, 3 requests/s when it rose and 4.25 one evaluation window (5 s) ahead, at "
        "1.6 requests/s per replica within the SLO; held until the scale-down window (10 s) sees no need"
    )
    assert why == [current] * 4 + [led, None, led]


@pytest.mark.parametrize(("age", "led"), [(30.0, False), (55.0, False), (60.0, True), (None, True)])
def test_the_lead_reads_nothing_while_a_replica_fills_its_batch_from_a_start(age: float | None, led: bool) -> None:
    """Breaker 25: three replicas started beside the advisor at 30 requests/s (3 serve) and the lead rose to 9 at
    14 s and held 9 for five minutes: a replica filling its batch from empty reads its in-flight growth as arrivals
    while its completions lag a request's life. While the newest replica is younger than the evaluation window (60 s
    here) the lead reads nothing; the same rising rates from replicas a window old (or whose start is unknown) lead,
    as in the test above."""
    lead = _lead()
    kept = SloCapacity(300.0)
    got = []
    for k, rate in enumerate([2.0, 2.25, 2.5, 2.75, 3.0]):
        ev = _rising(1000.0 + k, rate)
        ev = dataclasses.replace(ev, replica_ages_seconds=None if age is None else (age + k, age + k))
        got.append(autoscaler_signals(ev, [], [], 60.0, 0.95, kept, lead=lead).desired_replicas)
    assert got == ([2, 2, 2, 2, 3] if led else [2, 2, 2, 2, 2]), got  # 55 s: 59 s old at the last cycle


def test_while_the_slo_is_missed_the_throughput_headroom_is_at_most_zero() -> None:
    """The same window as above at 1150 s: the kept capacity gives 1 − 2 ÷ 3.2 = +0.375, but the deployment's goodput
    rule holds (its requests miss the SLO): the headroom is 0, never room beside a missed SLO (the demo's bursty
    kv-saturated deployment read +22 % at goodput 0). A negative headroom stays as it is."""
    kept = SloCapacity(300.0)
    autoscaler_signals(_saturated(1000.0, 4.0), [], [], 60.0, 0.95, kept)
    missed = autoscaler_signals(_saturated(1150.0, 2.0), [], [], 60.0, 0.95, kept, slo_missed=True)
    assert missed.slo_throughput_headroom_ratio == 0.0
    assert (missed.arrival_rate, missed.capacity_at_slo_per_replica) == pytest.approx((2.0, 1.6), rel=1e-9)
    beyond = autoscaler_signals(_saturated(1000.0, 4.0), [], [], 60.0, 0.95, SloCapacity(300.0), slo_missed=True)
    assert beyond.slo_throughput_headroom_ratio == pytest.approx(-0.25, rel=1e-9)


def test_the_capacity_at_the_slo_is_re_derived_once_the_arrival_rate_moves_beyond_a_factor_two() -> None:
    """Kept for 300 s from 1000 s (4/s complete, λ = 4 → 1.6/s per replica). At 1010 s 2/s complete and the in-flight
    population falls from 120 to 60 over the 60 s span: λ = 2 − 1 = 1/s, a quarter of 4 (beyond a factor 2): derived
    again, 0.8 × 2 ÷ 2 = 0.8/s per replica; headroom 1 − 1 ÷ (2 × 0.8) = 0.375 (the kept 1.6 would give 0.6875)."""
    kept = SloCapacity(300.0)
    autoscaler_signals(_saturated(1000.0, 4.0), [], [], 60.0, 0.95, kept)
    ev = evaluation(
        now=1010.0,
        ctx=context(replicas=2),
        replicas_up=2,
        requests_running=50.0,
        requests_waiting=10.0,
        requests_running_first=110.0,
        requests_waiting_first=10.0,
        requests_finished_per_second=2.0,
        kv_cache_usage_ratio=0.95,
        samples=10,
        span_seconds=60.0,
    )
    sig = autoscaler_signals(ev, [], [], 60.0, 0.95, kept)
    assert (sig.arrival_rate, sig.capacity_at_slo_per_replica) == pytest.approx((1.0, 0.8), rel=1e-9)
    assert sig.slo_throughput_headroom_ratio == pytest.approx(0.375, rel=1e-9)


def test_a_load_grown_into_the_led_count_holds_it_until_it_falls() -> None:
    """RISING leads 3 at k = 6 (λ = 1.75, 2 running of 1/s each); λ goes on rising to 2.125 at k = 9 and then stays
    there: within one horizon the trend is flat, so no trend need, but the load needs ceil(2.125 ÷ 1) = 3 now, and no
    advice asks it yet (the SLO has not broken). The lead holds 3 — falling to 2 there and rising again when the
    advice asks 3 is a scale down and up inside one incident (seen under load on the ramp test: 2 → 1 → 2). Then
    λ = 1 from k = 24: the last raw 3 is k = 23's, held through k = 33 (10 s), and desired falls once, to 2."""
    lead = _lead()
    assert _run(lead, RISING)[-1] == 3
    assert _run(lead, [1.875, 2.0, 2.125] + [2.125] * 14, start=7) == [3] * 17
    assert _run(lead, [1.0] * 14, start=24) == [3] * 10 + [2] * 4


def test_a_scale_down_the_operator_made_is_not_led_back_up_to_the_old_fleet() -> None:
    """Breaker 10 (the daemon over time, an operator applying the advice): after a turn 4 → 2 the desired count went
    back to 4 while the load needed 2. The lead's stabilizer had been fed max(current, need), so its scale-down
    window (10 s here) still held the old fleet of 4 as a need. λ = 1.5 requests/s at 1/s per replica within the SLO
    needs ceil(1.5) = 2 throughout (flat: no trend leads); 4 replicas run for 10 cycles, then 2: no lead above 2."""
    lead = _lead()
    for k in range(10):
        assert lead.lead("d", 1000.0 + k, 4, 1.5 * SCALE, SCALE, None) is None
    assert [lead.lead("d", 1010.0 + k, 2, 1.5 * SCALE, SCALE, None) for k in range(8)] == [None] * 8


def test_a_lead_the_operator_applied_is_not_held_over_a_later_scale_down() -> None:
    """Breaker 10 (an operator applying the advice): the lead rose to 3 on a rising λ (RISING, 2 running: 3 at
    k = 6), the operator scaled to 3, the load fell to 1 request/s (need 1) and the fleet went back to 2. The lead had
    kept the fleet's 3 as its count while nothing led (3 = current), and after the scale-down led back up to it: 3
    at 1 request/s for the scale-down window. Nothing leads once the fleet holds the lead's count."""
    lead = _lead()
    out = [lead.lead("d", 1000.0 + k, 2, r * SCALE, SCALE, None) for k, r in enumerate(RISING)]
    out += [lead.lead("d", 1007.0 + k, 3, 2.375 * SCALE, SCALE, None) for k in range(3)]
    out += [lead.lead("d", 1010.0 + k, 2, 1.0 * SCALE, SCALE, None) for k in range(4)]
    assert out == [None] * 6 + [3] + [None] * 7


@pytest.mark.parametrize(
    ("usages", "measured"),
    [
        ([0.3, 0.3, 0.3, 0.3, 0.3], True),  # flat over five readings: "not growing", measured
        ([0.3, 0.3], False),  # two readings: no trend yet
        ([None, None, None, None, None], False),  # KV usage not exposed
    ],
)
def test_a_kv_trend_counts_as_measured_only_from_enough_readings(usages: list[float | None], measured: bool) -> None:
    """Breaker 19: the status page's "KV full in" read "not growing" with KV usage unknown, and "not growing (30%
    used)" two scrapes into a pool filling 4 points a scrape. No exhaustion time is "not growing" only when some
    answering target has ``MIN_TREND_SAMPLES`` KV readings in the window."""
    ev = evaluation(ctx=context(replicas=1), state="fresh", kv_cache_usage_ratio=0.3)
    sig = autoscaler_signals(ev, [], [_target(usages, start=1000.0 - 15.0 * (len(usages) - 1))], 120.0, 0.9)
    assert sig.kv_exhaustion_seconds is None
    assert sig.kv_trend_measured is measured


@pytest.mark.parametrize(
    ("exhaustion", "measured", "cell"),
    [(None, False, "unknown"), (None, True, "not growing (70% used)"), (45.0, True, "45 s")],
)
def test_the_status_page_says_unknown_for_a_kv_trend_not_measured(
    exhaustion: float | None, measured: bool, cell: str
) -> None:
    from types import SimpleNamespace

    from advisor.signals import AutoscalerSignals
    from advisor.status_page import _signals

    sig = AutoscalerSignals(
        desired_replicas=1,
        current_replicas=1,
        kv_headroom_ratio=0.3,
        kv_exhaustion_seconds=exhaustion,
        kv_trend_measured=measured,
    )
    page = _signals(SimpleNamespace(signals=sig))  # type: ignore[arg-type]
    assert page.endswith(f"<td class='n'>{cell}</td></tr></table>"), page
