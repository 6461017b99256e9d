"""Tests for advisor.telemetry.

Every expected value is worked out by hand in the comment beside it, or taken from Prometheus's own
expectations in ``promql/testdata/histograms.test`` (prometheus/prometheus), never from running this code.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.telemetry import (
    FractionBelow,
    GoodputEstimate,
    QuantileEstimate,
    WindowStats,
    combine_targets,
    counter_increase,
    counter_rate,
    counter_resets,
    fraction_below,
    goodput_from_histograms,
    goodput_ratio,
    histogram_delta,
    histogram_increase,
    histogram_quantile,
    histogram_quantile_estimate,
    restart_flags,
    summarize,
    window_stats,
)

INF = math.inf


def hist(*buckets: tuple[float, float], total_sum: float = 0.0) -> Histogram:
    """A histogram from cumulative ``(le, count)`` pairs; count is the +Inf bucket."""
    return Histogram(buckets=tuple(buckets), count=buckets[-1][1], sum=total_sum)


# Prometheus promql/testdata/histograms.test, "testhistogram" evaluated at 50m (10 increments of 5m):
# positive: le 0.1 → 0+5x10 = 50, 0.2 → 70, 1 → 110, +Inf → 120.
PROM_POSITIVE = hist((0.1, 50), (0.2, 70), (1.0, 110), (INF, 120), total_sum=30.0)
# negative: le -0.2 → 10, -0.1 → 20, 0.3 → 20, +Inf → 30.
PROM_NEGATIVE = hist((-0.2, 10), (-0.1, 20), (0.3, 20), (INF, 30))
# request_duration_seconds summed over job and instance, by le: 0.1 → 1+2+3+4 = 10, 0.2 → 3+5+4+7 = 19,
# +Inf → 4+6+6+9 = 25 (per-increment rates; the quantile does not depend on the scale).
PROM_AGGREGATED = hist((0.1, 10), (0.2, 19), (INF, 25))


def assert_estimate(got: QuantileEstimate | None, value: float, lower: float, upper: float) -> None:
    assert got is not None
    assert got.value == pytest.approx(value)
    assert (got.lower_bound, got.upper_bound) == (lower, upper)


def assert_fraction(got: FractionBelow | None, expected: FractionBelow) -> None:
    """Field by field; the interpolated value within float rounding, bounds and flags exactly."""
    assert got is not None
    assert got.value == pytest.approx(expected.value)
    assert (got.exact, got.bounds_used) == (expected.exact, expected.bounds_used)
    assert got.lower_bucket == pytest.approx(expected.lower_bucket)
    assert got.upper_bucket == pytest.approx(expected.upper_bucket)


# --- counters ---------------------------------------------------------------------------------------------


COUNTER_WITH_RESET = [(0.0, 10.0), (15.0, 20.0), (30.0, 5.0), (45.0, 15.0)]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # (20 − 10) + 5 (post-reset value) + (15 − 5) = 25. Prometheus: last − first + pre-drop value
        # = (15 − 10) + 20 = 25.
        pytest.param(COUNTER_WITH_RESET, 25.0, id="a reset counts the post-reset value as the increase"),
        pytest.param([(0.0, 3.0), (10.0, 7.0), (20.0, 12.0)], 9.0, id="a plain counter increases by last-first"),
        pytest.param([(0.0, 10.0), (10.0, None), (20.0, 30.0)], 20.0, id="unknown points are skipped"),
        pytest.param([(0.0, 10.0), (10.0, math.nan), (20.0, 30.0)], 20.0, id="NaN points are skipped"),
        pytest.param([(0.0, 5.0), (10.0, None)], None, id="one known point gives no increase"),
        pytest.param([], None, id="no points give no increase"),
        pytest.param([(0.0, 8.0), (10.0, 0.0)], 0.0, id="a reset to zero adds nothing"),
    ],
)
def test_counter_increase(values: list[tuple[float, float | None]], expected: float | None) -> None:
    assert counter_increase(values) == expected


def test_counter_rate_divides_the_increase_by_the_known_span() -> None:
    # 25 over 45 s.
    assert counter_rate(COUNTER_WITH_RESET) == pytest.approx(25.0 / 45.0)
    # Known points at 0 and 20 s only: (30 − 10) / 20 s = 1.0 /s.
    assert counter_rate([(0.0, 10.0), (10.0, None), (20.0, 30.0), (30.0, None)]) == pytest.approx(1.0)


def test_counter_rate_is_unknown_over_a_zero_span() -> None:
    assert counter_increase([(5.0, 1.0), (5.0, 3.0)]) == 2.0
    assert counter_rate([(5.0, 1.0), (5.0, 3.0)]) is None
    assert counter_rate([(5.0, 1.0)]) is None


def test_counter_resets_counts_drops_and_flagged_restarts() -> None:
    assert counter_resets(COUNTER_WITH_RESET) == 1
    assert counter_resets([(0.0, 9.0), (1.0, 3.0), (2.0, 1.0), (3.0, 4.0)]) == 2
    assert counter_resets([(0.0, 1.0), (1.0, 2.0)], restarts=[False, True]) == 1
    assert counter_resets([(0.0, 1.0)]) == 0


def test_a_flagged_restart_without_a_drop_counts_the_whole_new_value() -> None:
    # 100 → 150 looks like +50, but the process restarted in between: 150 was counted since the restart.
    assert counter_increase([(0.0, 100.0), (10.0, 150.0)], restarts=[False, True]) == 150.0


def test_a_restart_flag_on_an_unknown_point_carries_to_the_next_known_point() -> None:
    values = [(0.0, 100.0), (10.0, None), (20.0, 140.0)]
    assert counter_increase(values) == 40.0
    assert counter_increase(values, restarts=[False, True, False]) == 140.0


def test_counter_points_out_of_time_order_are_rejected() -> None:
    with pytest.raises(ValueError, match="time order"):
        counter_increase([(10.0, 1.0), (5.0, 2.0)])


def test_restart_flags_must_match_the_points() -> None:
    with pytest.raises(ValueError, match="flags"):
        counter_increase([(0.0, 1.0), (1.0, 2.0)], restarts=[False])


# --- histogram deltas -----------------------------------------------------------------------------------

OLDER = hist((0.1, 2), (0.5, 5), (INF, 6), total_sum=1.0)
NEWER = hist((0.1, 4), (0.5, 9), (INF, 12), total_sum=2.5)


def test_histogram_delta_subtracts_bucket_by_bucket() -> None:
    # 4−2, 9−5, 12−6; sum 2.5 − 1.0.
    assert histogram_delta(OLDER, NEWER) == hist((0.1, 2), (0.5, 4), (INF, 6), total_sum=1.5)


def test_histogram_delta_after_a_reset_is_the_newer_histogram() -> None:
    restarted = hist((0.1, 1), (0.5, 2), (INF, 2), total_sum=0.3)
    assert histogram_delta(NEWER, restarted) is restarted


def test_histogram_delta_with_changed_bounds_is_unknown() -> None:
    rebucketed = hist((0.1, 4), (0.25, 7), (INF, 12), total_sum=2.5)
    assert histogram_delta(OLDER, rebucketed) is None


def test_histogram_delta_of_unknown_is_unknown() -> None:
    assert histogram_delta(None, NEWER) is None
    assert histogram_delta(OLDER, None) is None


def test_histogram_increase_keeps_observations_before_a_mid_series_reset() -> None:
    restarted = hist((0.1, 1), (0.5, 2), (INF, 2), total_sum=0.3)
    # (NEWER − OLDER) + restarted: 2+1, 4+2, 6+2; sum 1.5 + 0.3.
    result = histogram_increase([OLDER, None, NEWER, restarted])
    assert result is not None
    assert result.buckets == ((0.1, 3.0), (0.5, 6.0), (INF, 8.0))
    assert result.count == 8.0
    assert result.sum == pytest.approx(1.8)
    assert histogram_increase([OLDER]) is None


# --- quantiles ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "h", "expected"),
    [
        # Expected values as listed in Prometheus promql/testdata/histograms.test.
        pytest.param(0.0, PROM_POSITIVE, 0.0, id="prometheus: q=0 in a positive lowest bucket is 0"),
        pytest.param(0.0, PROM_NEGATIVE, -0.2, id="prometheus: q=0 in a negative lowest bucket is its bound"),
        pytest.param(1.0, PROM_POSITIVE, 1.0, id="prometheus: q=1 is the highest finite bound"),
        pytest.param(1.0, PROM_NEGATIVE, 0.3, id="prometheus: q=1 negative is the highest finite bound"),
        pytest.param(0.2, PROM_POSITIVE, 0.048, id="prometheus: p20 positive is 0.048"),
        pytest.param(0.2, PROM_NEGATIVE, -0.2, id="prometheus: p20 negative is the lowest bound"),
        pytest.param(0.5, PROM_POSITIVE, 0.15, id="prometheus: p50 positive is 0.15"),
        pytest.param(0.5, PROM_NEGATIVE, -0.15, id="prometheus: p50 negative is -0.15"),
        pytest.param(0.8, PROM_POSITIVE, 0.72, id="prometheus: p80 positive is 0.72"),
        pytest.param(0.8, PROM_NEGATIVE, 0.3, id="prometheus: p80 negative falls in +Inf"),
        pytest.param(0.3, PROM_AGGREGATED, 0.075, id="prometheus: aggregated p30 is 0.075"),
        pytest.param(0.5, PROM_AGGREGATED, 0.1277777777777778, id="prometheus: aggregated p50"),
    ],
)
def test_histogram_quantile_matches_prometheus_testdata(q: float, h: Histogram, expected: float) -> None:
    assert histogram_quantile(q, h) == pytest.approx(expected)


# le 0.1: 0, 0.25: 232, 0.5: 311, 1: 350, +Inf: 360.
LATENCY = hist((0.1, 0), (0.25, 232), (0.5, 311), (1.0, 350), (INF, 360))


def test_histogram_quantile_interpolates_inside_the_bucket_holding_the_rank() -> None:
    # p50: rank 180 lies in (0.1, 0.25] holding 232 − 0 = 232: 0.1 + 0.15 × 180/232.
    assert histogram_quantile(0.5, LATENCY) == pytest.approx(0.1 + 0.15 * 180 / 232)
    # p90: rank 324 lies in (0.5, 1] holding 350 − 311 = 39, 13 into it: 0.5 + 0.5 × 13/39 = 0.5 + 1/6.
    assert histogram_quantile(0.9, LATENCY) == pytest.approx(0.5 + 1 / 6)
    assert_estimate(histogram_quantile_estimate(0.9, LATENCY), 0.5 + 1 / 6, 0.5, 1.0)


def test_histogram_quantile_in_the_first_bucket_interpolates_from_zero() -> None:
    h = hist((0.2, 10), (0.4, 20), (INF, 20))
    # rank 0.25 × 20 = 5 in (0, 0.2] holding 10: 0.2 × 5/10 = 0.1.
    assert histogram_quantile(0.25, h) == pytest.approx(0.1)
    assert_estimate(histogram_quantile_estimate(0.25, h), 0.1, 0.0, 0.2)


def test_histogram_quantile_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    # p99: rank 356.4 > 350 (le 1): only +Inf reaches it.
    assert histogram_quantile(0.99, LATENCY) == 1.0
    assert histogram_quantile_estimate(0.99, LATENCY) == QuantileEstimate(1.0, 1.0, INF)


def test_histogram_quantile_in_a_non_positive_lowest_bucket_has_no_lower_edge() -> None:
    assert histogram_quantile_estimate(0.2, PROM_NEGATIVE) == QuantileEstimate(-0.2, -INF, -0.2)


def test_histogram_quantile_zero_with_an_empty_lowest_bucket_is_zero_not_nan() -> None:
    # Prometheus computes 0 + 0.1 × (0/0) = NaN here; the advisor returns the bucket's lower edge.
    assert histogram_quantile(0.0, LATENCY) == 0.0


@pytest.mark.parametrize(
    "h",
    [
        pytest.param(None, id="unknown histogram"),
        pytest.param(hist((0.1, 0), (INF, 0)), id="no observations"),
        pytest.param(Histogram(buckets=((0.1, 2), (0.5, 3)), count=3, sum=0.0), id="no +Inf bucket"),
        pytest.param(hist((INF, 5)), id="only the +Inf bucket"),
        pytest.param(hist((0.1, math.nan), (INF, 5)), id="a NaN count"),
    ],
)
def test_histogram_quantile_is_unknown_without_usable_buckets(h: Histogram | None) -> None:
    assert histogram_quantile(0.5, h) is None
    assert histogram_quantile_estimate(0.5, h) is None


@pytest.mark.parametrize("q", [-0.1, 1.01, math.nan], ids=["below 0", "above 1", "NaN"])
def test_histogram_quantile_rejects_q_outside_zero_to_one(q: float) -> None:
    with pytest.raises(ValueError, match="quantile"):
        histogram_quantile(q, LATENCY)


def test_histogram_quantile_forces_monotonic_buckets() -> None:
    # le 0.5 dips to 3 below le 0.1's 4: the envelope reads it as 4 (Prometheus ensureMonotonic), so
    # rank 0.5 × 8 = 4 is reached at le 0.1: 0.1 × 4/4 = 0.1.
    h = hist((0.1, 4), (0.5, 3), (INF, 8))
    assert histogram_quantile(0.5, h) == pytest.approx(0.1)


# --- fraction below -----------------------------------------------------------------------------------


def test_fraction_below_is_exact_at_a_bucket_bound() -> None:
    assert fraction_below(0.2, PROM_POSITIVE) == FractionBelow(70 / 120, True, 70 / 120, 70 / 120, (0.2, 0.2))


def test_fraction_below_interpolates_between_bounds_and_reports_them() -> None:
    # (70 + 40 × (0.6 − 0.2)/(1 − 0.2)) / 120 = (70 + 20)/120 = 0.75.
    result = fraction_below(0.6, PROM_POSITIVE)
    assert_fraction(result, FractionBelow(0.75, False, 70 / 120, 110 / 120, (0.2, 1.0)))


def test_fraction_below_is_the_inverse_of_the_quantile() -> None:
    # p80 is 0.72 (Prometheus); (70 + 40 × 0.52/0.8)/120 = 96/120 = 0.8.
    result = fraction_below(0.72, PROM_POSITIVE)
    assert result is not None
    assert result.value == pytest.approx(0.8)


def test_fraction_below_in_the_first_bucket_interpolates_from_zero() -> None:
    # 50 × 0.05/0.1 = 25 of 120.
    result = fraction_below(0.05, PROM_POSITIVE)
    assert_fraction(result, FractionBelow(25 / 120, False, 0.0, 50 / 120, (0.0, 0.1)))


def test_fraction_below_above_the_last_finite_bound_is_unknown_within_its_sure_range() -> None:
    """10 of 120 observations lie beyond the last finite bound (1): at a 5 s threshold they may lie either side, so
    there is no estimate (the lower edge read as the share paged a deployment whose every request met its target,
    breaker 32), only the range: ≥ 110/120 by the buckets, and by the sum (30 s; the other 110 at least 0 × 50 +
    0.1 × 20 + 0.2 × 40 = 10 s, so k ≥ (10 + 10 × 5 − 30) ÷ (5 − 1) = 7.5 of the 10 are ≤ 5 s) ≥ 117.5/120."""
    result = fraction_below(5.0, PROM_POSITIVE)
    assert result is not None
    assert (result.value, result.lower_bucket, result.upper_bucket) == (None, 110 / 120, 1.0)
    assert result.at_least == pytest.approx(117.5 / 120) and result.at_most == 1.0
    # nothing beyond the last finite bound: every observation is within any threshold above it
    assert fraction_below(5.0, hist((1.0, 4), (INF, 4), total_sum=2.0)) == FractionBelow(
        1.0, False, 1.0, 1.0, (1.0, INF)
    )


def test_fraction_below_edges() -> None:
    assert fraction_below(INF, PROM_POSITIVE) == FractionBelow(1.0, True, 1.0, 1.0, (INF, INF))
    assert fraction_below(-1.0, PROM_POSITIVE) == FractionBelow(0.0, False, 0.0, 0.0, (-INF, 0.0))
    # Below a lowest bucket bounded at −0.2 there is no edge to interpolate from: value unknown, at most
    # 10 of 30.
    assert fraction_below(-0.5, PROM_NEGATIVE) == FractionBelow(None, False, 0.0, 10 / 30, (-INF, -0.2))
    assert fraction_below(0.5, hist((0.1, 0), (INF, 0))) is None
    assert fraction_below(0.5, None) is None
    with pytest.raises(ValueError, match="NaN"):
        fraction_below(math.nan, PROM_POSITIVE)


# --- goodput ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # 0.9 × 0.8 = 0.72; max(0, 0.9 + 0.8 − 1) = 0.7; min(0.9, 0.8) = 0.8.
        pytest.param(0.9, 0.8, GoodputEstimate(0.72, 0.7, 0.8, 0.9, 0.8), id="product with Frechet bounds"),
        # 0.25; max(0, 0) = 0; 0.5.
        pytest.param(0.5, 0.5, GoodputEstimate(0.25, 0.0, 0.5, 0.5, 0.5), id="halves can be disjoint"),
        pytest.param(1.0, 0.6, GoodputEstimate(0.6, 0.6, 0.6, 1.0, 0.6), id="a perfect SLO pins the bounds"),
        # one side unmeasured: goodput is unknown (breaker 13: a dropped TTFT histogram read 100 % from TPOT alone),
        # bounded by [0, the measured side]
        pytest.param(0.9, None, GoodputEstimate(None, 0.0, 0.9, 0.9, None), id="unknown TPOT bounds by TTFT"),
        pytest.param(None, 0.7, GoodputEstimate(None, 0.0, 0.7, None, 0.7), id="unknown TTFT bounds by TPOT"),
        pytest.param(None, None, GoodputEstimate(None, None, None, None, None), id="both unknown"),
    ],
)
def test_goodput_ratio(a: float | None, b: float | None, expected: GoodputEstimate) -> None:
    result = goodput_ratio(a, b)
    assert result.ratio == pytest.approx(expected.ratio)
    assert result.lower == pytest.approx(expected.lower)
    assert result.upper == pytest.approx(expected.upper)
    assert (result.ttft_ratio, result.tpot_ratio) == (expected.ttft_ratio, expected.tpot_ratio)


@pytest.mark.parametrize(("a", "b"), [(1.2, 0.5), (0.5, -0.1), (math.nan, 0.5)])
def test_goodput_ratio_rejects_fractions_outside_zero_to_one(a: float, b: float) -> None:
    with pytest.raises(ValueError, match="within"):
        goodput_ratio(a, b)


def test_goodput_from_histograms_combines_both_slo_fractions() -> None:
    tpot = hist((0.05, 80), (0.1, 90), (INF, 100))
    # TTFT ≤ 0.2 s: 70/120 = 7/12; TPOT ≤ 0.1 s: 90/100 = 0.9.
    # ratio 7/12 × 0.9 = 0.525; lower 7/12 + 0.9 − 1 = 0.48333…; upper 7/12.
    result = goodput_from_histograms(PROM_POSITIVE, tpot, ttft_slo_seconds=0.2, tpot_slo_seconds=0.1)
    assert result.ratio == pytest.approx(0.525)
    assert result.lower == pytest.approx(7 / 12 - 0.1)
    assert result.upper == pytest.approx(7 / 12)
    assert goodput_from_histograms(None, None, 0.2, 0.1) == GoodputEstimate(None, None, None, None, None)


# --- summaries ----------------------------------------------------------------------------------------


def test_summarize_reports_count_sum_mean_and_quantiles() -> None:
    s = summarize(PROM_POSITIVE)
    assert s is not None
    assert (s.count, s.sum) == (120, 30.0)
    assert s.mean == pytest.approx(0.25)  # 30 / 120
    assert s.p50 == pytest.approx(0.15)  # Prometheus testdata
    assert s.p90 == pytest.approx(0.96)  # rank 108 in (0.2, 1]: 0.2 + 0.8 × 38/40
    assert s.p99 == 1.0  # rank 118.8 > 110: +Inf bucket


def test_summarize_an_empty_histogram_has_no_quantiles() -> None:
    s = summarize(hist((0.1, 0), (INF, 0)))
    assert s is not None
    assert (s.count, s.p50, s.p90, s.p99, s.mean) == (0, None, None, None, None)
    assert summarize(None) is None


# --- windows ------------------------------------------------------------------------------------------


def snap(target: str, t: float, **fields: object) -> TimedSnapshot:
    return TimedSnapshot(target=target, timestamp=t, snapshot=EngineSnapshot(engine="vllm", **fields))  # type: ignore[arg-type]


HA = hist((0.1, 2), (0.5, 5), (INF, 6), total_sum=1.0)
HB = hist((0.1, 4), (0.5, 9), (INF, 12), total_sum=2.5)
# After the restart: higher than HB everywhere, so only process_start_time_seconds reveals the reset.
HC = hist((0.1, 13), (0.5, 14), (INF, 15), total_sum=3.0)

# Every counter and the TTFT histogram rise across the restart at t=1000: only the moved
# process_start_time_seconds (100 → 990) reveals it.
RESTART_HISTORY = [
    # Outside the window (before now − 60): would add 10 preemptions and a restart if it were read.
    snap("a", 900.0, process_start_time_seconds=50.0, preemptions_total=0.0, requests_running=99.0),
    snap(
        "a",
        940.0,
        process_start_time_seconds=100.0,
        requests_running=4.0,
        requests_waiting=2.0,
        kv_cache_usage_ratio=0.5,
        preemptions_total=10.0,
        prompt_tokens_total=1000.0,
        generation_tokens_total=5000.0,
        requests_finished_total=50.0,
        ttft=HA,
    ),
    snap(
        "a",
        970.0,
        process_start_time_seconds=100.0,
        requests_running=6.0,
        requests_waiting=1.0,
        kv_cache_usage_ratio=0.9,
        preemptions_total=14.0,
        prompt_tokens_total=1600.0,
        generation_tokens_total=6000.0,
        requests_finished_total=60.0,
        ttft=HB,
    ),
    snap(
        "a",
        1000.0,
        process_start_time_seconds=990.0,
        requests_running=1.0,
        requests_waiting=0.0,
        kv_cache_usage_ratio=0.2,
        preemptions_total=20.0,
        prompt_tokens_total=1900.0,
        generation_tokens_total=7000.0,
        requests_finished_total=65.0,
        ttft=HC,
    ),
    # After now: ignored.
    snap("a", 1010.0, process_start_time_seconds=990.0, preemptions_total=1000.0),
]


def test_window_stats_over_three_snapshots_with_a_restart() -> None:
    w = window_stats(RESTART_HISTORY, now=1000.0, window_seconds=60.0)
    assert (w.samples, w.span_seconds, w.counter_resets) == (3, 60.0, 1)
    assert (w.requests_running, w.requests_waiting, w.kv_cache_usage_ratio) == (1.0, 0.0, 0.2)
    assert (w.kv_cache_usage_ratio_min, w.kv_cache_usage_ratio_max) == (0.2, 0.9)
    # the trend starts after the restart (the newest point here): the old process's 4 running and 2 waiting are not
    # the new one's (breaker 30)
    assert (w.requests_running_first, w.requests_waiting_first) == (1.0, 0.0)
    # Preemptions: (14 − 10) + 20 after the restart (20 > 14, yet the start time moved) = 24 over 60 s.
    assert w.preemptions_increase == 24.0
    assert w.preemptions_per_second == pytest.approx(0.4)
    # Prompt tokens: (1600 − 1000) + 1900 after the restart = 2500 → 41.67 /s.
    assert w.prompt_tokens_per_second == pytest.approx(2500 / 60)
    # Generation tokens: (6000 − 5000) + 7000 = 8000 → 133.33 /s.
    assert w.generation_tokens_per_second == pytest.approx(8000 / 60)
    # Finished: (60 − 50) + 65 = 75 → 1.25 /s.
    assert w.requests_finished_per_second == pytest.approx(1.25)
    # TTFT: (HB − HA) + HC = (2 + 13, 4 + 14, 6 + 15), sum 1.5 + 3.0.
    assert w.ttft is not None
    assert w.ttft.buckets == ((0.1, 15.0), (0.5, 18.0), (INF, 21.0))
    assert (w.ttft.count, w.ttft.sum) == (21.0, 4.5)
    assert w.tpot is None


def test_window_stats_applies_a_restart_seen_in_one_counter_to_all() -> None:
    history = [
        snap("a", 0.0, prompt_tokens_total=500.0, generation_tokens_total=1000.0),
        # prompt tokens dropped: the engine restarted, so 1200 generation tokens are all new.
        snap("a", 10.0, prompt_tokens_total=100.0, generation_tokens_total=1200.0),
    ]
    w = window_stats(history, now=10.0, window_seconds=30.0)
    assert w.counter_resets == 1
    assert w.generation_tokens_per_second == pytest.approx(120.0)  # 1200 / 10 s
    assert w.prompt_tokens_per_second == pytest.approx(10.0)  # 100 / 10 s


def test_one_counter_dropping_while_more_count_on_is_that_series_reset_not_a_restart() -> None:
    # breaker 28: vllm:generation_tokens_total halved while prompt tokens and finished requests counted on; the
    # restart flag read every counter's lifetime as the window's increase (~259 requests/s where 5 arrived)
    history = [
        snap(
            "a",
            0.0,
            prompt_tokens_total=5_000_000.0,
            generation_tokens_total=2_000_000.0,
            requests_finished_total=10_000.0,
        ),
        snap(
            "a",
            10.0,
            prompt_tokens_total=5_025_000.0,
            generation_tokens_total=1_000_000.0,
            requests_finished_total=10_050.0,
        ),
    ]
    w = window_stats(history, now=10.0, window_seconds=30.0)
    assert w.counter_resets == 0
    assert w.requests_finished_per_second == pytest.approx(5.0)  # 50 / 10 s, not 10,050 / 10 s
    assert w.prompt_tokens_per_second == pytest.approx(2_500.0)
    # the dropped series alone is read as Prometheus's increase() reads a reset: its post-drop value
    assert w.generation_tokens_per_second == pytest.approx(100_000.0)
    assert restart_flags([h.snapshot for h in history]) == [False, False]


def test_window_stats_with_one_snapshot_has_gauges_but_no_rates() -> None:
    w = window_stats(RESTART_HISTORY, now=940.0, window_seconds=30.0)
    assert (w.samples, w.span_seconds, w.requests_running) == (1, 0.0, 4.0)
    assert (w.preemptions_per_second, w.preemptions_increase, w.ttft) == (None, None, None)


def test_window_stats_of_an_empty_window_is_unknown() -> None:
    assert window_stats(RESTART_HISTORY, now=5000.0, window_seconds=60.0) == WindowStats(window_seconds=60.0)
    assert window_stats([], now=0.0, window_seconds=60.0) == WindowStats(window_seconds=60.0)


def test_window_stats_rejects_bad_windows_and_mixed_targets() -> None:
    with pytest.raises(ValueError, match="window_seconds"):
        window_stats(RESTART_HISTORY, now=1000.0, window_seconds=0.0)
    with pytest.raises(ValueError, match="one target"):
        window_stats([snap("a", 1.0), snap("b", 2.0)], now=2.0, window_seconds=10.0)


def test_combine_targets_sums_known_values_and_averages_usage() -> None:
    a = WindowStats(
        window_seconds=60.0,
        requests_running=4.0,
        kv_cache_usage_ratio=0.5,
        kv_cache_usage_ratio_min=0.4,
        kv_cache_usage_ratio_max=0.6,
        preemptions_per_second=0.5,
        ttft=HA,
        counter_resets=1,
        samples=3,
        span_seconds=60.0,
    )
    b = WindowStats(
        window_seconds=60.0,
        requests_running=6.0,
        kv_cache_usage_ratio_min=0.3,
        kv_cache_usage_ratio_max=0.9,
        ttft=HB,
        samples=2,
        span_seconds=30.0,
    )
    c = combine_targets([a, b])
    assert c.requests_running == 10.0  # 4 + 6
    assert c.requests_waiting is None  # unknown everywhere
    assert c.kv_cache_usage_ratio == 0.5  # the only known
    assert (c.kv_cache_usage_ratio_min, c.kv_cache_usage_ratio_max) == (0.3, 0.9)
    assert c.preemptions_per_second == 0.5  # one replica knows it
    # HA + HB: 2 + 4, 5 + 9, 6 + 12; sum 1.0 + 2.5.
    assert c.ttft == hist((0.1, 6), (0.5, 14), (INF, 18), total_sum=3.5)
    assert (c.counter_resets, c.samples, c.span_seconds, c.window_seconds) == (1, 5, 60.0, 60.0)


def test_combine_targets_keeps_the_most_restarts_of_one_engine_beside_the_sum() -> None:
    # two replicas restarted once each: two restarts, one per engine (field state round 27, llm-d-benchmark#1734)
    once_each = combine_targets([WindowStats(60.0, counter_resets=1), WindowStats(60.0, counter_resets=1)])
    assert (once_each.counter_resets, once_each.engine_restarts_max) == (2, 1)
    # one replica restarted twice, the other not at all: that engine crashes again and again
    twice = combine_targets([WindowStats(60.0, counter_resets=2), WindowStats(60.0)])
    assert (twice.counter_resets, twice.engine_restarts_max) == (2, 2)
    # a combined window combined again keeps the per-engine figure, not its sum
    again = combine_targets([once_each, WindowStats(60.0, counter_resets=1)])
    assert (again.counter_resets, again.engine_restarts_max) == (3, 1)
    assert WindowStats(60.0, counter_resets=3).engine_restarts_max == 3  # one engine's window


def test_combine_targets_sums_replicas_of_different_layouts_on_their_shared_bounds() -> None:
    """Breaker 32: a rolling upgrade across a layout change — replica A (le 1, 2.5, 2560) 100 requests at 0.3 s, B
    (le 1, 2.5, 10) 100 at 6 s: the first replica alone stood for both (goodput 100 %, bounds [1, 1]); summed on the
    bounds both have (1, 2.5, +Inf) 100 of 200 are within 2.5 s, exactly."""
    a = hist((1.0, 100), (2.5, 100), (2560.0, 100), (INF, 100), total_sum=30.0)
    b = hist((1.0, 0), (2.5, 0), (10.0, 100), (INF, 100), total_sum=600.0)
    c = combine_targets([WindowStats(60.0, ttft=a), WindowStats(60.0, ttft=b)])
    assert c.ttft is not None
    assert c.ttft.buckets == ((1.0, 100.0), (2.5, 100.0), (INF, 200.0))
    assert (c.ttft.count, c.ttft.sum) == (200.0, 630.0)
    f = fraction_below(2.5, c.ttft)
    assert f is not None and (f.value, f.exact) == (0.5, True)
    # no finite bound in common: nothing can be read of them together
    assert combine_targets([WindowStats(60.0, ttft=hist((0.2, 1), (INF, 2))), WindowStats(60.0, ttft=HA)]).ttft is None


def test_a_replica_without_the_histogram_leaves_the_deployments_unknown() -> None:
    """Breaker 14: replica 0 at a 6 s TTFT whose TTFT family stopped rendering, replica 1 at 0.5 s: the merged TTFT
    was replica 1's alone and goodput read 100 % for both. Some replicas without it: unknown; none: unknown; all: the
    merge."""
    c = combine_targets([WindowStats(60.0, ttft=None, tpot=HA), WindowStats(60.0, ttft=HA, tpot=HA)])
    assert c.ttft is None and c.tpot is not None
    assert combine_targets([WindowStats(60.0, ttft=None), WindowStats(60.0, ttft=None)]).ttft is None


def test_combine_targets_of_nothing_is_unknown() -> None:
    assert combine_targets([]) == WindowStats(window_seconds=0.0)


# --- properties ---------------------------------------------------------------------------------------


@st.composite
def histograms(draw: st.DrawFn) -> Histogram:
    bounds = sorted(draw(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=6, unique=True)))
    increments = draw(st.lists(st.integers(0, 1000), min_size=len(bounds) + 1, max_size=len(bounds) + 1))
    increments[-1] += 1  # at least one observation
    cumulative = 0.0
    buckets = []
    for bound, inc in zip([*bounds, INF], increments, strict=True):
        cumulative += inc
        buckets.append((bound, cumulative))
    return Histogram(buckets=tuple(buckets), count=cumulative, sum=0.0)


unit = st.floats(min_value=0.0, max_value=1.0)


@given(histograms(), unit, unit)
def test_quantile_is_monotone_in_q(h: Histogram, q1: float, q2: float) -> None:
    lo, hi = sorted((q1, q2))
    v_lo, v_hi = histogram_quantile(lo, h), histogram_quantile(hi, h)
    assert v_lo is not None
    assert v_hi is not None
    assert v_lo <= v_hi


@given(histograms(), st.floats(min_value=-10.0, max_value=2e3), st.floats(min_value=-10.0, max_value=2e3))
def test_fraction_below_is_monotone_and_within_zero_to_one(h: Histogram, t1: float, t2: float) -> None:
    lo, hi = sorted((t1, t2))
    f_lo, f_hi = fraction_below(lo, h), fraction_below(hi, h)
    assert f_lo is not None
    assert f_hi is not None
    assert f_lo.at_least <= f_hi.at_least and f_lo.at_most <= f_hi.at_most
    if f_lo.value is not None and f_hi.value is not None:
        assert 0.0 <= f_lo.value <= f_hi.value <= 1.0
    for f in (f_lo, f_hi):
        assert f.lower_bucket <= f.at_least <= f.at_most <= f.upper_bucket
        assert f.value is None or f.at_least <= f.value <= f.at_most


@given(st.one_of(st.none(), unit), st.one_of(st.none(), unit))
def test_goodput_ratio_lies_within_its_bounds(a: float | None, b: float | None) -> None:
    g = goodput_ratio(a, b)
    if a is None or b is None:
        assert g.ratio is None  # unknown, never the measured side's figure
        assert g.upper == (b if a is None else a)
        return
    assert g.ratio is not None
    assert g.lower is not None
    assert g.upper is not None
    assert 0.0 <= g.lower <= g.ratio <= g.upper <= 1.0


@given(st.lists(st.floats(min_value=0.0, max_value=1e9), max_size=20))
def test_counter_increase_is_never_negative(values: list[float]) -> None:
    increase = counter_increase([(float(i), v) for i, v in enumerate(values)])
    assert increase is None or increase >= 0.0


def test_an_unknown_ttft_bounded_by_the_queue_time_bounds_goodput() -> None:
    """TTFT ≥ queue time: when only the queue time is measured (TGI), the share queued within the TTFT target is an
    upper bound of TTFT attainment. 0.3 of requests queued within it, 0.95 met TPOT → goodput at most 0.3; TTFT
    itself stays unmeasured (``None``), and so does the ratio; the lower bound 0. Without TPOT the bound alone."""
    g = goodput_ratio(None, 0.95, ttft_at_most=0.3)
    assert (g.ratio, g.lower, g.upper, g.ttft_ratio, g.tpot_ratio) == (None, 0.0, 0.3, None, 0.95)
    g = goodput_ratio(None, None, ttft_at_most=0.6)
    assert (g.ratio, g.upper) == (None, 0.6)
    assert goodput_ratio(0.9, 0.8, ttft_at_most=0.1).ratio == pytest.approx(0.72)  # a measured TTFT wins
    with pytest.raises(ValueError, match="ttft_at_most"):
        goodput_ratio(None, 0.5, ttft_at_most=1.5)


def test_a_fleet_gauge_is_unknown_when_one_replica_does_not_know_it() -> None:
    """Breaker 24: three replicas running 38 each, one page saying NaN (read as unknown), exported 76 running and
    "25.3 per replica" to over_provisioned, which reads the count as all the load; a page without the waiting
    gauge made the fleet's waiting 0. A gauge summed over replicas is every replica's or unknown; a rate is the
    known replicas' sum (a lower bound: a preemption counted on one replica is a preemption)."""
    from advisor.telemetry import WindowStats, combine_targets

    known = WindowStats(window_seconds=30.0, requests_running=38.0, requests_waiting=0.0, preemptions_per_second=0.5)
    blind = WindowStats(window_seconds=30.0, requests_running=None, requests_waiting=None, preemptions_per_second=None)
    fleet = combine_targets([known, known, blind])
    assert fleet.requests_running is None and fleet.requests_waiting is None
    assert fleet.preemptions_per_second == 1.0
    assert combine_targets([known, known, known]).requests_running == 114.0


def test_the_reported_view_sums_a_gauge_only_when_every_replica_reports_it() -> None:
    """Breaker 24, the exported side: ``advisor_requests_running`` read 76 of the 114 running, the third page's NaN
    dropped, and ``advisor_requests_waiting`` 0 where one page had no waiting gauge at all."""
    from advisor.domain import EngineSnapshot
    from advisor.evaluate import engine_view

    full = EngineSnapshot(engine="vllm", requests_running=38.0, requests_waiting=0.0)
    nan = EngineSnapshot(engine="vllm", requests_running=float("nan"), requests_waiting=0.0)
    no_waiting = EngineSnapshot(engine="vllm", requests_running=38.0)
    view = engine_view([full, nan, no_waiting], None, 3, "ok")
    assert view.requests_running is None and view.requests_waiting is None
    view = engine_view([full, full, full], None, 3, "ok")
    assert (view.requests_running, view.requests_waiting) == (114.0, 0.0)


# --- what the sum says inside the bucket holding a target (breaker 30, item 5) ----------------------------------

# TGI's mean-time-per-token layout around a 20 ms target: every one of 81 requests in (14.6 ms, 29.3 ms].
_WIDE = ((0.0146, 0.0), (0.0293, 81.0), (0.05, 81.0), (INF, 81.0))


def test_a_mean_above_the_target_caps_the_share_within_it() -> None:
    """81 requests averaging 25 ms: k at most 20 ms and the rest at most 29.3 ms must reach the sum 2.025 s, so
    0.02 k + 0.0293 (81 − k) ≥ 2.025 → k ≤ 37.45 of 81 = 0.4624 — a breach of a 90 % target is certain, though the
    bucket alone allows anything from 0 to 1."""
    f = fraction_below(0.02, Histogram(buckets=_WIDE, count=81.0, sum=81 * 0.025))
    assert f is not None
    assert (f.lower_bucket, f.upper_bucket) == (0.0, 1.0)
    assert f.at_least == 0.0
    assert f.at_most == pytest.approx((0.0293 - 0.025) / (0.0293 - 0.02), rel=1e-6)
    assert f.value == pytest.approx((0.02 - 0.0146) / (0.0293 - 0.0146))  # interpolation, inside the cap


def test_a_mean_below_the_target_lifts_the_share_within_it_and_the_estimate_with_it() -> None:
    """81 requests averaging 16 ms: k above 14.6 ms and the rest above 20 ms cannot sum below 0.0146 k + 0.02
    (81 − k) ≤ 1.296 → k ≥ 60 of 81 = 0.7407; interpolation's 0.367 is impossible, the estimate is raised to it."""
    f = fraction_below(0.02, Histogram(buckets=_WIDE, count=81.0, sum=81 * 0.016))
    assert f is not None
    assert f.at_least == pytest.approx(0.004 / 0.0054, rel=1e-6)
    assert f.at_most == 1.0
    assert f.value == pytest.approx(0.004 / 0.0054, rel=1e-6)


def test_goodput_bounds_hold_wherever_the_observations_lie_in_the_targets_bucket() -> None:
    """Breaker 30: after an upgrade the TTFT layout had no 2.5 s bound; 40 requests at 2.0 s each sat in (1, 5].
    Interpolation reads 37.5 % within 2.5 s and the bounds were [0.375, 0.375]; the bucket allows [0, 1], and the
    sum (80 s: k above 1 s, the rest above 2.5 s, 1 k + 2.5 (40 − k) ≤ 80 → k ≥ 13.3) lifts the floor to 1/3."""
    ttft = Histogram(buckets=((1.0, 0.0), (5.0, 40.0), (INF, 40.0)), count=40.0, sum=80.0)
    tpot = Histogram(buckets=((0.05, 40.0), (0.1, 40.0), (INF, 40.0)), count=40.0, sum=1.2)
    g = goodput_from_histograms(ttft, tpot, 2.5, 0.05)
    assert g.ttft_ratio == pytest.approx(0.375)
    assert g.ratio == pytest.approx(0.375)
    assert g.lower == pytest.approx(1 / 3)
    assert g.upper == 1.0


def test_goodput_ratio_refuses_a_range_that_does_not_hold_its_figure() -> None:
    with pytest.raises(ValueError, match="ttft_range"):
        goodput_ratio(0.8, 0.9, ttft_range=(0.85, 1.0))


@st.composite
def observed(draw: st.DrawFn) -> tuple[Histogram, list[float]]:
    """Observations (≥ 0) and their histogram with the exact sum."""
    bounds = sorted(draw(st.lists(st.floats(min_value=1e-3, max_value=1e2), min_size=1, max_size=5, unique=True)))
    values = draw(st.lists(st.floats(min_value=0.0, max_value=2e2), min_size=1, max_size=60))
    buckets = tuple((b, float(sum(1 for v in values if v <= b))) for b in [*bounds, INF])
    return Histogram(buckets=buckets, count=float(len(values)), sum=math.fsum(values)), values


@given(observed(), st.floats(min_value=1e-6, max_value=3e2))  # a target > 0, as every SLO
def test_the_sure_bounds_hold_the_true_share(hv: tuple[Histogram, list[float]], t: float) -> None:
    h, values = hv
    f = fraction_below(t, h)
    assert f is not None
    true = sum(1 for v in values if v <= t) / len(values)
    assert f.at_least - 1e-9 <= true <= f.at_most + 1e-9
    assert f.lower_bucket <= f.at_least <= f.at_most <= f.upper_bucket
    assert f.value is None or f.at_least <= f.value <= f.at_most
