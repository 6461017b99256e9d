"""Telemetry math over scraped snapshots: counter increases across resets, histogram deltas and
quantiles, fraction of requests under a latency SLO, goodput, and per-window statistics.

PURE: standard library only, no I/O, no clock. ``now`` and every timestamp are unix seconds passed in by
the caller. ``None`` always means *unknown*, never zero; NaN and ±Inf sample values are treated as unknown
wherever a number is combined with others.

Sources the semantics follow (cited again beside each function):

* Prometheus ``promql/functions.go`` ``extrapolatedRate``: counter resets in ``increase()`` / ``rate()``.
* Prometheus ``promql/quantile.go`` ``bucketQuantile``: ``histogram_quantile()`` on classic buckets.
* Prometheus ``promql/quantile.go`` ``histogramFraction``: the inverse, fraction of observations ≤ a value.
* The Fréchet inequalities (M. Fréchet, 1935/1951) for the joint probability of two events whose marginal
  probabilities alone are known.
* Y. Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large Language
  Model Serving", OSDI 2024: goodput is the request rate served while meeting *both* the TTFT and the TPOT
  SLO; the SLO attainment is the fraction of requests that meet both.

Worked examples (inputs → outputs, each checked by hand in ``tests/test_telemetry.py``)::

    counter_increase([(0, 10), (15, 20), (30, 5), (45, 15)])   → 25.0   (10 + 5 after the reset + 10)
    counter_rate(same)                                          → 25 / 45 s ≈ 0.556 /s

    h = buckets le 0.1: 50, 0.2: 70, 1: 110, +Inf: 120 (cumulative; Prometheus histograms.test)
    histogram_quantile(0.2, h) → 0.048   rank 24 in (0, 0.1]:  0 + 0.1 × 24/50
    histogram_quantile(0.5, h) → 0.15    rank 60 in (0.1, 0.2]: 0.1 + 0.1 × 10/20
    histogram_quantile(0.8, h) → 0.72    rank 96 in (0.2, 1]:  0.2 + 0.8 × 26/40
    histogram_quantile(1.0, h) → 1.0     rank 120 falls in +Inf: the highest finite bound
    fraction_below(0.2, h)     → 70/120 exact (0.2 is a bucket bound)
    fraction_below(0.6, h)     → (70 + 40 × 0.4/0.8)/120 = 0.75, interpolated in (0.2, 1]
    fraction_below(5.0, h)     → 110/120, a lower estimate (5.0 is in the +Inf bucket)

    goodput_ratio(0.9, 0.8)    → ratio 0.72 (independence), bounds [0.7, 0.8] (Fréchet)
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from array import array
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Final

from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot

__all__ = [
    "START_TIME_TOLERANCE_SECONDS",
    "EngineTime",
    "FractionBelow",
    "GoodputEstimate",
    "HistogramSummary",
    "QuantileEstimate",
    "WindowAccumulator",
    "WindowStats",
    "combine_engine_time",
    "combine_targets",
    "counter_increase",
    "counter_rate",
    "counter_resets",
    "engine_time",
    "fraction_below",
    "goodput_from_fractions",
    "goodput_from_histograms",
    "goodput_ratio",
    "histogram_delta",
    "histogram_increase",
    "histogram_mean_floor",
    "histogram_quantile",
    "histogram_quantile_estimate",
    "summarize",
    "window_stats",
]

START_TIME_TOLERANCE_SECONDS = 1.0
"""Two ``process_start_time_seconds`` readings further apart than this mean the process restarted.

A restarted process starts after the previous scrape, so a real restart moves the start time by at least the
time the old process had been up when last scraped; one second absorbs float jitter in the exposition.
"""

# Prometheus correctPrecisionErrors tolerance (promql/quantile.go): adjacent bucket counts this close are
# treated as equal so float noise cannot break monotonicity.
_PRECISION_TOLERANCE = 1e-12


def _known(value: float | None) -> float | None:
    """``value`` when it is a finite number, else ``None`` (NaN and ±Inf samples are unknown)."""
    if value is None or not math.isfinite(value):
        return None
    return value


# --- counters ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _CounterWalk:
    increase: float
    resets: int
    first_t: float
    last_t: float


def _walk_counter(values: Sequence[tuple[float, float | None]], restarts: Sequence[bool] | None) -> _CounterWalk | None:
    """Sum the increases between consecutive known points, Prometheus style.

    Prometheus ``extrapolatedRate`` computes ``last − first`` and adds the pre-drop value at every drop,
    which is the same as adding, step by step, ``v − prev`` normally and ``v`` (the post-reset value) at a
    reset. A reset is a drop, or a step the caller flags in ``restarts`` (Prometheus does the same with
    start timestamps, ``isStartTimestampReset``). A flag on an unknown point carries to the next known one.
    """
    if restarts is not None and len(restarts) != len(values):
        raise ValueError(f"restarts has {len(restarts)} flags for {len(values)} points")
    parts: list[float] = []
    resets = 0
    known_points = 0
    first_t = last_t = math.nan
    prev_v: float | None = None
    prev_t = -math.inf
    pending_restart = False
    for i, (t, raw) in enumerate(values):
        if t < prev_t:
            raise ValueError(f"points out of time order at index {i}: {t} after {prev_t}")
        prev_t = t
        flagged = bool(restarts[i]) if restarts is not None else False
        v = _known(raw)
        if v is None:
            pending_restart = pending_restart or flagged
            continue
        if prev_v is None:
            first_t = t
        elif v < prev_v or flagged or pending_restart:
            parts.append(v)
            resets += 1
        else:
            parts.append(v - prev_v)
        prev_v = v
        last_t = t
        known_points += 1
        pending_restart = False
    if known_points < 2:
        return None
    return _CounterWalk(increase=math.fsum(parts), resets=resets, first_t=first_t, last_t=last_t)


def counter_increase(
    values: Sequence[tuple[float, float | None]], *, restarts: Sequence[bool] | None = None
) -> float | None:
    """Increase of a cumulative counter over ``(timestamp s, value)`` points in time order.

    Resets follow Prometheus ``increase()`` (``promql/functions.go`` ``extrapolatedRate``): when the value
    drops, the counter restarted from zero, so the post-reset value counts as the increase since the reset.
    Unlike Prometheus there is no extrapolation to window edges: the result covers first → last known point.

    ``None`` (and NaN/±Inf) values are skipped. ``restarts[i]`` true marks a known restart between the
    previous point and point ``i`` (e.g. ``process_start_time_seconds`` changed) even if the value did not
    drop. Returns ``None`` with fewer than two known points. Raises ``ValueError`` when timestamps go back.

    Example: values 10, 20, 5, 15 → (20 − 10) + 5 + (15 − 5) = 25.
    """
    walk = _walk_counter(values, restarts)
    return None if walk is None else walk.increase


def counter_rate(
    values: Sequence[tuple[float, float | None]], *, restarts: Sequence[bool] | None = None
) -> float | None:
    """Per-second increase: :func:`counter_increase` ÷ (last known t − first known t), in units/s.

    ``None`` when the increase is unknown or the known points span zero seconds.
    """
    walk = _walk_counter(values, restarts)
    if walk is None:
        return None
    span = walk.last_t - walk.first_t
    if span <= 0:
        return None
    return walk.increase / span


def counter_resets(values: Sequence[tuple[float, float | None]], *, restarts: Sequence[bool] | None = None) -> int:
    """Number of resets between known points (drops plus flagged restarts), as Prometheus ``resets()``."""
    walk = _walk_counter(values, restarts)
    return 0 if walk is None else walk.resets


# --- histogram deltas -----------------------------------------------------------------------------------


def _decreased(older: Histogram, newer: Histogram) -> bool:
    """True when any bucket or the count went down (same bounds assumed): a counter reset."""
    if newer.count < older.count:
        return True
    return any(map(operator.lt, newer.counts(), older.counts()))


def histogram_delta(older: Histogram | None, newer: Histogram | None) -> Histogram | None:
    """Observations made between two scrapes of one cumulative histogram: bucket-wise ``newer − older``.

    * either input ``None`` → ``None``;
    * bounds differ → ``None`` (the engine changed its buckets between scrapes; no delta is defined);
    * any bucket or the count decreased → counter reset: ``newer`` itself (observations since the restart,
      as Prometheus ``histogramRate`` treats a reset).

    The sum is subtracted too (seconds for latency histograms).
    """
    if older is None or newer is None:
        return None
    bounds = older.bounds()
    if bounds is not newer.bounds() and bounds != newer.bounds():
        return None
    if _decreased(older, newer):
        return newer
    return Histogram.from_counts(
        bounds,
        map(operator.sub, newer.counts(), older.counts()),
        count=newer.count - older.count,
        sum=newer.sum - older.sum,
    )


def histogram_increase(
    values: Sequence[Histogram | None], *, restarts: Sequence[bool] | None = None
) -> Histogram | None:
    """Observations across a series of scrapes (time order): the sum of consecutive deltas.

    Walking pair by pair (rather than ``newest − oldest``) keeps observations made before a mid-window
    restart. ``restarts[i]`` true forces a reset between the previous known histogram and ``values[i]``
    (the delta is then ``values[i]`` itself). ``None`` entries are skipped; fewer than two known → ``None``.
    A bucket-layout change inside the series gives ``None``: deltas of different bounds cannot be added.
    """
    if restarts is not None and len(restarts) != len(values):
        raise ValueError(f"restarts has {len(restarts)} flags for {len(values)} histograms")
    deltas: list[Histogram] = []
    prev: Histogram | None = None
    pending_restart = False
    for i, h in enumerate(values):
        flagged = bool(restarts[i]) if restarts is not None else False
        if h is None:
            pending_restart = pending_restart or flagged
            continue
        if prev is not None:
            if flagged or pending_restart:
                deltas.append(h)
            else:
                delta = histogram_delta(prev, h)
                if delta is None:
                    return None
                deltas.append(delta)
        prev = h
        pending_restart = False
    if not deltas:
        return None
    try:
        return Histogram.merge(deltas)
    except ValueError:
        return None


# --- quantiles ----------------------------------------------------------------------------------------


_LAYOUTS: dict[int, tuple[tuple[float, ...], bool]] = {}
"""``id(bounds)`` → ``(bounds, ordered)``: what :func:`_ordered_layout` derived, once per bucket layout (the tuple
is held, so its id cannot be reused while the entry lives; histograms of one layout share one interned tuple)."""
_LAYOUTS_LIMIT: Final = 4096
"""Layouts remembered at most (a target inventing bounds gets them derived on each call past that)."""


def _ordered_layout(bounds: tuple[float, ...]) -> bool:
    """Whether ``bounds`` are at least two, strictly increasing (so no NaN and no repeats) and end in ``+Inf``: the
    layout every engine exposes, whose buckets need no sorting or coalescing. Derived once per layout."""
    entry = _LAYOUTS.get(id(bounds))
    if entry is not None and entry[0] is bounds:
        return entry[1]
    ordered = len(bounds) >= 2 and bounds[-1] == math.inf and all(map(operator.lt, bounds, bounds[1:]))
    if len(_LAYOUTS) < _LAYOUTS_LIMIT:
        _LAYOUTS[id(bounds)] = (bounds, ordered)
    return ordered


_PRECISE_COUNTS: Final = 1e12
"""Below this, two different whole counts differ by more than :data:`_PRECISION_TOLERANCE` relative (1 ÷ 1e12 >
1e-12): Prometheus's precision correction never applies to whole counts under it."""

_Prepared = tuple[Sequence[float], Sequence[float]]
"""Buckets ready for interpolation: the bounds (strictly increasing, ``+Inf`` last) and their cumulative counts."""


def _prepared(h: Histogram | None) -> _Prepared | None:
    """Buckets ready for interpolation, as Prometheus prepares them in ``bucketQuantile``: ``(bounds, counts)``.

    Sorted by bound, equal bounds coalesced, float noise within 1e-12 relative flattened, then forced
    monotonic (the "envelope"). ``None`` when the histogram is missing, has a NaN, lacks a ``+Inf`` last
    bucket, or has fewer than two buckets — the cases where Prometheus returns NaN.

    What engines expose and windows subtract — a layout already ordered (:func:`_ordered_layout`) whose counts are
    whole numbers in [0, 1e12) that never go down — needs none of it: such counts have no NaN, no two differ by
    1e-12 relative or less (:data:`_PRECISE_COUNTS`), and are monotonic already. The histogram's own bounds and
    counts are then returned as they are (checked at C speed), the general path's values exactly.
    """
    if h is None or not h.bounds():
        return None
    bounds, counts = h.bounds(), h.counts()
    coalesced: list[list[float]] = []
    if _ordered_layout(bounds):  # already sorted, distinct, +Inf last: nothing to sort or coalesce
        if (
            len(counts) == len(bounds)
            and min(counts) >= 0.0
            and max(counts) < _PRECISE_COUNTS
            and all(map(float.is_integer, counts))
            and all(map(operator.le, counts, itertools.islice(counts, 1, None)))
        ):
            return bounds, counts
        if any(map(math.isnan, counts)):
            return None
        coalesced = [[b, c] for b, c in zip(bounds, counts, strict=True)]
    else:
        if any(math.isnan(b) or math.isnan(c) for b, c in h.buckets):
            return None
        ordered = sorted(h.buckets, key=lambda bc: bc[0])
        if not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
            return None
        for bound, count in ordered:
            if coalesced and coalesced[-1][0] == bound:
                coalesced[-1][1] += count
            else:
                coalesced.append([bound, count])
    # correctPrecisionErrors
    prev = coalesced[0][1]
    for item in coalesced[1:]:
        curr = item[1]
        delta = abs(curr - prev)
        if delta == 0:
            continue
        if curr != 0 and delta / abs(curr) <= _PRECISION_TOLERANCE:
            item[1] = prev
        else:
            prev = curr
    # ensureMonotonic
    running_max = coalesced[0][1]
    for item in coalesced[1:]:
        if item[1] > running_max:
            running_max = item[1]
        elif item[1] < running_max:
            item[1] = running_max
    if len(coalesced) < 2:
        return None
    return [b for b, _ in coalesced], [c for _, c in coalesced]


@dataclass(frozen=True, slots=True)
class QuantileEstimate:
    """A quantile with the bucket it was interpolated in.

    Attributes:
        value: the estimate, in the histogram's unit (seconds for latency histograms).
        lower_bound / upper_bound: the bucket bounds the true quantile lies between. ``upper_bound`` is
            ``+Inf`` when the quantile fell in the ``+Inf`` bucket (``value`` is then the highest finite
            bound, a lower estimate); ``lower_bound`` is ``-Inf`` when it fell in a lowest bucket whose
            bound is ≤ 0 (no natural lower edge).
    """

    value: float | None
    lower_bound: float
    upper_bound: float


def _check_q(q: float) -> None:
    if not 0.0 <= q <= 1.0:  # also rejects NaN
        raise ValueError(f"quantile must be within [0, 1], got {q!r}")


def histogram_quantile_estimate(q: float, h: Histogram | None) -> QuantileEstimate | None:
    """The φ-quantile of a cumulative histogram with the bounds it lies between.

    Follows Prometheus ``promql/quantile.go`` ``bucketQuantile`` (``histogram_quantile()``):

    * rank = q × (the ``+Inf`` bucket's count); the quantile lies in the first bucket whose cumulative
      count reaches the rank, interpolated linearly inside it;
    * the lowest bucket interpolates from 0 when its bound is > 0; when its bound is ≤ 0 that bound is
      returned;
    * a rank that only the ``+Inf`` bucket reaches returns the highest finite bound.

    Differences from Prometheus, each where Prometheus would return NaN or ±Inf: ``q`` outside [0, 1]
    (NaN included) raises ``ValueError`` instead of returning ∓Inf/NaN; an empty histogram, a missing
    ``+Inf`` bucket or NaN counts give ``None``; an empty lowest bucket at q = 0 gives its lower edge (0)
    where Prometheus computes 0/0 = NaN.
    """
    _check_q(q)
    return _quantile(q, _prepared(h))


def _quantile(q: float, prepared: _Prepared | None) -> QuantileEstimate | None:
    """:func:`histogram_quantile_estimate` of buckets already prepared (:func:`_prepared`; ``q`` checked)."""
    if prepared is None:
        return None
    bounds, counts = prepared
    observations = counts[-1]
    if not observations > 0:
        return None
    rank = q * observations
    last = len(counts) - 1
    b = bisect.bisect_left(counts, rank, 0, last)
    if b == last:
        highest_finite = bounds[-2]
        return QuantileEstimate(value=highest_finite, lower_bound=highest_finite, upper_bound=math.inf)
    end, count = bounds[b], counts[b]
    if b == 0 and end <= 0:
        return QuantileEstimate(value=end, lower_bound=-math.inf, upper_bound=end)
    start = 0.0
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:
        return QuantileEstimate(value=start, lower_bound=start, upper_bound=end)
    # Clamped into the bucket only so float rounding cannot break monotonicity across bucket edges.
    value = min(max(start + (end - start) * (rank / count), start), end)
    return QuantileEstimate(value=value, lower_bound=start, upper_bound=end)


def histogram_quantile(q: float, h: Histogram | None) -> float | None:
    """The φ-quantile value, as :func:`histogram_quantile_estimate` (Prometheus ``bucketQuantile``).

    Unit: that of the histogram (seconds for TTFT/TPOT). ``None`` for a missing or empty histogram;
    ``ValueError`` for ``q`` outside [0, 1] or NaN.
    """
    estimate = histogram_quantile_estimate(q, h)
    return None if estimate is None else estimate.value


# --- fraction below a threshold ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FractionBelow:
    """Fraction of observations ≤ a threshold, read off cumulative buckets.

    Attributes:
        value: the estimate in [0, 1], or ``None`` when it cannot be interpolated (threshold below a
            lowest bucket whose bound is ≤ 0).
        exact: true when the threshold is a bucket bound (``le`` is inclusive, so the bucket count is the
            exact number of observations ≤ threshold).
        lower_bucket: the fraction at the lower edge of the bucket holding the threshold — a sure lower
            bound of the true fraction.
        upper_bucket: the fraction at the upper edge of that bucket — a sure upper bound (1.0 for the
            ``+Inf`` bucket).
        bounds_used: the bucket edges ``(lower, upper)`` the value was interpolated between, in the
            histogram's unit; ``(threshold, threshold)`` when exact.
        sum_bounds: ``(at least, at most)`` narrower than the bucket's fractions, from the histogram's sum
            (:func:`_sum_bounds`); ``None`` when the sum narrows nothing.
    """

    value: float | None
    exact: bool
    lower_bucket: float
    upper_bucket: float
    bounds_used: tuple[float, float]
    sum_bounds: tuple[float, float] | None = None

    @property
    def at_least(self) -> float:
        """A sure lower bound of the fraction: the bucket's lower edge, or higher where the sum shows it."""
        return self.lower_bucket if self.sum_bounds is None else self.sum_bounds[0]

    @property
    def at_most(self) -> float:
        """A sure upper bound of the fraction: the bucket's upper edge, or lower where the sum shows it."""
        return self.upper_bucket if self.sum_bounds is None else self.sum_bounds[1]


def fraction_below(threshold: float, h: Histogram | None) -> FractionBelow | None:
    """Fraction of observations ≤ ``threshold`` (same unit as the histogram, seconds for latencies).

    The inverse of :func:`histogram_quantile`, as Prometheus ``histogramFraction`` (``promql/quantile.go``):

    * threshold equal to a bucket bound → that bucket's cumulative count ÷ total, ``exact``;
    * between two bounds → linear interpolation inside the bucket, reporting the bounds used;
    * inside the lowest bucket (bound > 0) → interpolated from 0; a negative threshold → 0 (the same
      natural lower bound of 0 as ``histogram_quantile``);
    * above the highest finite bound → the ``+Inf`` bucket has no upper edge to interpolate to, so the
      value is count(highest finite) ÷ total, a *lower* estimate, ``exact=False``.

    Total is the ``+Inf`` bucket's count. ``None`` for a missing histogram or zero observations;
    ``ValueError`` for a NaN threshold.

    The histogram's sum narrows where inside its bucket the threshold's share can lie (:func:`_sum_bounds`:
    ``sum_bounds``, ``at_least`` / ``at_most``), and the interpolated value is held inside that narrower range:
    80 requests all in (0.0146, 0.0293] with a mean of 25 ms cannot have more than 46 % within 20 ms (those at most
    20 ms, the rest at most 29.3 ms, must still add up to the sum), where interpolation reads 37 %.

    Example (le 0.1: 50, 0.2: 70, 1: 110, +Inf: 120): threshold 0.6 lies in (0.2, 1] →
    (70 + 40 × (0.6 − 0.2)/(1 − 0.2)) / 120 = 90/120 = 0.75, between 70/120 and 110/120.
    """
    if math.isnan(threshold):
        raise ValueError("threshold must not be NaN")
    prepared = _prepared(h)
    if prepared is None:
        return None
    bounds, counts = prepared
    total = counts[-1]
    if not total > 0:
        return None
    # the first bucket whose bound is at or above the threshold (bounds strictly increase, +Inf last)
    i = bisect.bisect_left(bounds, threshold)
    bound, cum = bounds[i], counts[i]
    if threshold == bound:
        frac = cum / total
        return FractionBelow(frac, True, frac, frac, (threshold, threshold))
    upper = cum / total
    if i == len(bounds) - 1:  # +Inf bucket: no upper edge to interpolate to
        lower = counts[i - 1] / total
        if counts[i] == counts[i - 1]:  # nothing beyond the last finite bound: every observation is within
            return FractionBelow(1.0, False, 1.0, 1.0, (bounds[i - 1], bound))
        # observations beyond the last finite bound may lie either side of the threshold: no estimate, only the
        # sure range (its floor narrowed by the sum). The lower edge read as the share paged a deployment whose
        # every request met a 15 s TTFT target above a layout ending at 10 s (breaker 32)
        floor = _inf_bucket_floor(bounds, counts, threshold, h.sum if h is not None else math.nan)
        return FractionBelow(None, False, lower, 1.0, (bounds[i - 1], bound), None if floor is None else (floor, 1.0))
    if i == 0:
        if bound <= 0:
            return FractionBelow(None, False, 0.0, upper, (-math.inf, bound))
        if threshold <= 0:
            return FractionBelow(0.0, False, 0.0, 0.0, (-math.inf, 0.0))
        return FractionBelow(min(upper * (threshold / bound), upper), False, 0.0, upper, (0.0, bound))
    prev_bound, prev_cum = bounds[i - 1], counts[i - 1]
    lower = prev_cum / total
    inside = (cum - prev_cum) * (threshold - prev_bound) / (bound - prev_bound)
    # Clamped into the bucket's fractions only to absorb float rounding.
    value = min(max((prev_cum + inside) / total, lower), upper)
    narrowed = _sum_bounds(bounds, counts, i, threshold, h.sum if h is not None else math.nan)
    if narrowed is not None:
        value = min(max(value, narrowed[0]), narrowed[1])
    return FractionBelow(value, False, lower, upper, (prev_bound, bound), narrowed)


_SUM_SLACK: Final = 1e-9
"""Relative slack on a histogram's sum in :func:`_sum_bounds`: a window's sum is a float difference of two
cumulative sums, and a bound must never be narrowed past an observation the rounding hides."""


def _inf_bucket_floor(
    bounds: Sequence[float], counts: Sequence[float], threshold: float, total_sum: float
) -> float | None:
    """The least share ≤ ``threshold`` (above the last finite bound ``l``) the sum allows: of the ``n`` observations
    beyond ``l``, ``k`` lie in ``(l, t]`` and the rest above ``t``, so ``S_min + k·l + (n − k)·t ≤ sum`` gives
    ``k ≥ (S_min + n·t − sum) ÷ (t − l)`` (:func:`_sum_bounds`' reasoning, the bucket having no upper edge).
    ``None`` when it narrows nothing or the sum does not fit the buckets. Example: 100 requests beyond 10 s with a
    mean of 12 s and a 15 s target: k ≥ (1500 − 1200) ÷ 5 = 60, so at least 60 % met it."""
    if not bounds[0] > 0 or not math.isfinite(total_sum) or total_sum < 0:
        return None
    last = len(bounds) - 1
    total, low_edge = counts[-1], bounds[last - 1]
    n = counts[last] - counts[last - 1]
    s_min = _bucket_sum_range(bounds, counts, skip=last)[0]
    k_min = (s_min + n * threshold - total_sum * (1 + _SUM_SLACK)) / (threshold - low_edge)
    if k_min <= 0 or k_min > n + 1e-9:
        return None
    return (counts[last - 1] + k_min) / total


def _sum_bounds(
    bounds: Sequence[float], counts: Sequence[float], i: int, threshold: float, total_sum: float
) -> tuple[float, float] | None:
    """What the sum says of the share ≤ ``threshold`` inside bucket ``i`` (``bounds[i-1] < threshold < bounds[i]``,
    ``i ≥ 1``): ``(at least, at most)`` as fractions of the whole, or ``None`` when it narrows neither edge or
    the sum does not fit the buckets (values are taken as ≥ 0 — latencies, lengths — so only for a first bound > 0).

    Each other bucket's observations lie between its edges; of the bucket's ``n`` observations, ``k`` lie in
    ``(l, t]`` and ``n − k`` in ``(t, u]``. The sum is reachable only when ``S_min + k·l + (n − k)·t ≤ sum ≤ S_max +
    k·t + (n − k)·u`` (``S_min``, ``S_max``: the other buckets' least and greatest sums), so
    ``k ≤ (S_max + n·u − sum) ÷ (u − t)`` and ``k ≥ (S_min + n·t − sum) ÷ (t − l)``; an observation in ``+Inf``
    leaves ``S_max`` unbounded. The same reasoning as Prometheus's native-histogram bounds, from the one moment a
    classic histogram keeps.
    """
    if not bounds[0] > 0 or not math.isfinite(total_sum) or total_sum < 0:
        return None
    total = counts[-1]
    low_edge, up_edge = bounds[i - 1], bounds[i]
    n = counts[i] - counts[i - 1]
    if not n > 0 or math.isinf(up_edge):
        return None
    s_min, s_max = _bucket_sum_range(bounds, counts, skip=i)
    at_least, at_most = counts[i - 1] / total, counts[i] / total
    k_min = (s_min + n * threshold - total_sum * (1 + _SUM_SLACK)) / (threshold - low_edge)
    if k_min > n + 1e-9:  # the sum is below what the buckets allow: it says nothing trustworthy
        return None
    if k_min > 0:
        at_least = (counts[i - 1] + k_min) / total
    if math.isfinite(s_max):  # an observation in +Inf leaves the greatest sum unbounded
        k_max = (s_max + n * up_edge - total_sum * (1 - _SUM_SLACK)) / (up_edge - threshold)
        if k_max < -1e-9:  # the sum is above what the buckets allow
            return None
        if k_max < n:
            at_most = (counts[i - 1] + max(k_max, 0.0)) / total
    if at_least <= counts[i - 1] / total and at_most >= counts[i] / total:
        return None
    return at_least, max(at_most, at_least)


# --- goodput ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GoodputEstimate:
    """Fraction of requests meeting both the TTFT and the TPOT SLO (DistServe's SLO attainment).

    Attributes:
        ratio: the estimate in [0, 1] (product under independence); ``None`` when either input is unknown.
        lower / upper: bounds that hold whatever the dependence between TTFT and TPOT (Fréchet).
        ttft_ratio / tpot_ratio: the inputs, fractions of requests meeting each SLO.
    """

    ratio: float | None
    lower: float | None
    upper: float | None
    ttft_ratio: float | None
    tpot_ratio: float | None

    def unmeasured_side(self) -> str | None:
        """``"TTFT"`` or ``"TPOT"``: the side whose attainment is unknown while the other bounds goodput (ratio
        ``None``, upper bound known); ``None`` otherwise."""
        if self.ratio is not None or self.upper is None:
            return None
        return "TTFT" if self.ttft_ratio is None else "TPOT"


def _check_ratio(name: str, value: float | None) -> None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within [0, 1], got {value!r}")


def goodput_ratio(
    ttft_ok: float | None,
    tpot_ok: float | None,
    ttft_at_most: float | None = None,
    *,
    ttft_range: tuple[float, float] | None = None,
    tpot_range: tuple[float, float] | None = None,
) -> GoodputEstimate:
    """Joint SLO attainment from the two marginal attainments (fractions in [0, 1]).

    Engines keep TTFT and TPOT in separate histograms, so the number of requests meeting *both* SLOs —
    what DistServe (Zhong et al., OSDI 2024) counts as goodput — is not observed. With a = P(TTFT ok) and
    b = P(TPOT ok):

    * estimate a × b (independence);
    * Fréchet inequalities: max(0, a + b − 1) ≤ P(both) ≤ min(a, b), for any dependence.

    One input ``None``: that side's attainment is unknown, anywhere in [0, 1], so the Fréchet bounds over that
    range are [0, known] and the ratio itself is ``None`` — unknown, never the known side's figure: a vLLM whose
    TTFT histogram stopped rendering read goodput 100 % from TPOT alone and closed a goodput incident while TTFT
    was 6 s against 2.5 s (breaker 13). Only the upper bound says something then: below the target, the breach
    is certain whatever the other side. Both ``None``: every field ``None``. The ratio is clamped into its
    bounds, and the lower bound into the upper, only to absorb float rounding ((1 − a)(1 − b) ≥ 0 makes
    a × b ≥ a + b − 1; both are ≤ min(a, b)).

    ::

        a     b     ratio  lower  upper
        0.9   0.8   0.72   0.70   0.80
        0.99  0.99  0.980  0.98   0.99
        0.5   0.5   0.25   0.00   0.50
        0.9   None  None   0.00   0.90

    ``ttft_at_most``: with TTFT unknown, a share of requests that at most met the TTFT target — the share whose queue
    time alone was within it (TTFT ≥ queue time; TGI exposes ``tgi_request_queue_duration`` and no TTFT). The unknown
    TTFT side is then anywhere in [0, ``ttft_at_most``], so the upper bound is ``min(ttft_at_most, tpot_ok)`` (or
    ``ttft_at_most`` alone), the lower bound 0, and ratio and ``ttft_ratio`` stay ``None`` (not measured). Without
    it a TGI replica whose requests queued 50 s against a 5 s target had no bound below 100 % from TPOT alone (a
    field state, huggingface/text-generation-inference#1733).

    ``ttft_range`` / ``tpot_range``: where each attainment surely lies, ``(low, high)``, when the figure itself is
    read off a histogram by interpolation inside the bucket holding the target (:class:`FractionBelow`'s
    ``lower_bucket`` / ``upper_bucket``; :func:`goodput_from_fractions`). The bounds then hold wherever the
    observations lie inside that bucket as well as whatever the dependence: lower ``max(0, low_a + low_b − 1)``,
    upper ``min(high_a, high_b)``; the ratio stays the interpolated product. Without them each figure is taken as
    exact (a target on a bucket bound). A 1 s-wide bucket (1, 2.5] holding every request with a 2 s target
    reads TTFT attainment 0.67 by interpolation, anywhere in [0, 1] in truth: the bounds were [0.67, 0.67] before
    (breaker 30: a TTFT layout without the target's bound after an upgrade exported goodput bounds 0.25–0.25 where
    every request met its target) and are [0, 1] now.

    Raises ``ValueError`` for an input outside [0, 1] or NaN, or a range that is not ``low ≤ figure ≤ high``.
    """
    _check_ratio("ttft_ok", ttft_ok)
    _check_ratio("tpot_ok", tpot_ok)
    _check_ratio("ttft_at_most", ttft_at_most)
    ttft_lo, ttft_hi = _checked_range("ttft_range", ttft_ok, ttft_range)
    tpot_lo, tpot_hi = _checked_range("tpot_range", tpot_ok, tpot_range)
    if ttft_ok is None and ttft_at_most is not None:
        bound = ttft_at_most if tpot_ok is None else min(ttft_at_most, tpot_hi)
        return GoodputEstimate(None, 0.0, bound, None, tpot_ok)
    if ttft_ok is None and tpot_ok is None:
        return GoodputEstimate(None, None, None, None, None)
    if ttft_ok is None or tpot_ok is None:
        known = ttft_hi if ttft_ok is not None else tpot_hi
        return GoodputEstimate(None, 0.0, known, ttft_ok, tpot_ok)
    upper = min(ttft_hi, tpot_hi)
    # a + b − 1 ≤ min(a, b) always; the min() only undoes rounding (1.0 + b − 1.0 can exceed b by an ulp).
    lower = min(max(0.0, ttft_lo + tpot_lo - 1.0), upper)
    ratio = min(max(ttft_ok * tpot_ok, lower), upper)
    return GoodputEstimate(ratio, lower, upper, ttft_ok, tpot_ok)


def _checked_range(name: str, value: float | None, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """``bounds`` checked against ``value`` (``(value, value)`` when absent; ``(0, 1)`` for an unknown value)."""
    if value is None:
        return 0.0, 1.0
    if bounds is None:
        return value, value
    low, high = bounds
    _check_ratio(f"{name}[0]", low)
    _check_ratio(f"{name}[1]", high)
    # the interpolated figure is clamped into its bucket's fractions, so it lies inside them up to rounding
    if not low - 1e-12 <= value <= high + 1e-12:
        raise ValueError(f"{name} {bounds!r} does not hold its figure {value!r}")
    return low, high


def goodput_from_fractions(
    ttft: FractionBelow | None, tpot: FractionBelow | None, ttft_at_most: FractionBelow | None = None
) -> GoodputEstimate:
    """:func:`goodput_ratio` of two :func:`fraction_below` readings (each ``None`` or of value ``None``: unknown),
    with each reading's bucket edges as the range its attainment surely lies in. ``ttft_at_most``: the share of
    requests whose queue time alone met the TTFT target (TGI), its bucket's upper edge the bound it sets."""

    def value(f: FractionBelow | None) -> float | None:
        return None if f is None else f.value

    def edges(f: FractionBelow | None) -> tuple[float, float] | None:
        return None if f is None or f.value is None else (f.at_least, f.at_most)

    at_most = None if ttft_at_most is None or ttft_at_most.value is None else ttft_at_most.at_most
    return goodput_ratio(value(ttft), value(tpot), at_most, ttft_range=edges(ttft), tpot_range=edges(tpot))


def goodput_from_histograms(
    ttft: Histogram | None,
    tpot: Histogram | None,
    ttft_slo_seconds: float,
    tpot_slo_seconds: float,
) -> GoodputEstimate:
    """:func:`goodput_from_fractions` of :func:`fraction_below` each SLO (seconds) in the TTFT and TPOT histograms.

    An unknown fraction (missing or empty histogram, or no interpolation possible) enters as ``None``.
    """
    return goodput_from_fractions(fraction_below(ttft_slo_seconds, ttft), fraction_below(tpot_slo_seconds, tpot))


# --- summaries ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistogramSummary:
    """Count, sum, mean and p50/p90/p99 of a histogram (unit of the histogram; seconds for latencies).

    Quantiles and mean are ``None`` when the histogram holds no observations.
    """

    count: float
    sum: float
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None


def histogram_mean(h: Histogram | None) -> float | None:
    """A histogram's sum ÷ count (its unit: seconds for latencies, tokens for lengths); ``None`` when absent, empty, or
    its sum or count is not a finite non-negative number (a page's impossible sum is unknown, never a negative mean),
    or either contradicts the buckets: a ``_count`` other than the ``+Inf`` bucket's, or a sum below the least (or
    above the greatest) the buckets allow (breaker 32: a ``_count`` of 4,500 beside 100 bucketed requests in (1, 2.5]
    gave a 0.053 s mean TTFT, and the mean "showed" the prefill was the delay).

    Example: sum 36.0 over 30 → 1.2; sum −5000 over 60 → None."""
    if h is None or not h.count > 0 or not math.isfinite(h.count) or not math.isfinite(h.sum) or h.sum < 0:
        return None
    prepared = _prepared(h)
    if prepared is not None:
        bounds, counts = prepared
        if abs(counts[-1] - h.count) > 1e-9 * max(1.0, h.count):
            return None
        least, most = _bucket_sum_range(bounds, counts)
        slack = _SUM_SLACK * max(1.0, abs(h.sum))
        if h.sum < least - slack or h.sum > most + slack:
            return None
    return float(h.sum / h.count)


def histogram_mean_floor(h: Histogram | None) -> float | None:
    """The least mean the buckets allow (each observation at its bucket's lower edge, the first bucket's at 0), in
    the histogram's unit; ``None`` when unknown (no buckets, nothing observed, a first bound ≤ 0). What a mean can be
    held to when the page's own sum or count is impossible: 100 requests in (1, 2.5] → at least 1.0 s."""
    prepared = _prepared(h)
    if prepared is None or not prepared[1][-1] > 0 or not prepared[0][0] > 0:
        return None
    bounds, counts = prepared
    return _bucket_sum_range(bounds, counts)[0] / counts[-1]


def _bucket_sum_range(bounds: Sequence[float], counts: Sequence[float], skip: int | None = None) -> tuple[float, float]:
    """The least and greatest sum of the observations the cumulative ``counts`` place in ``bounds``' buckets (values
    ≥ 0 below the first bound; ``inf`` when any lies in ``+Inf``; ``-inf`` least when the first bound is ≤ 0), bucket
    ``skip`` left out (the one whose split :func:`_sum_bounds` and :func:`_inf_bucket_floor` reason about)."""
    least = most = 0.0
    prev_b, prev_c = (0.0 if bounds[0] > 0 else -math.inf), 0.0
    for j, (b, c) in enumerate(zip(bounds, counts, strict=True)):
        n = c - prev_c
        if n > 0 and j != skip:
            least += n * prev_b
            most += n * b
        prev_b, prev_c = b, c
    return least, most


def summarize(h: Histogram | None) -> HistogramSummary | None:
    """Summary of a (delta) histogram; ``None`` in → ``None``. Mean = sum ÷ count, ``None`` where :func:`histogram_mean`
    finds it unknown."""
    if h is None:
        return None
    mean = histogram_mean(h)
    prepared = _prepared(h)  # once for the three quantiles
    p50, p90, p99 = _quantile(0.5, prepared), _quantile(0.9, prepared), _quantile(0.99, prepared)
    return HistogramSummary(
        count=h.count,
        sum=h.sum,
        p50=None if p50 is None else p50.value,
        p90=None if p90 is None else p90.value,
        p99=None if p99 is None else p99.value,
        mean=mean,
    )


# --- windows ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WindowStats:
    """What one target (or, via :func:`combine_targets`, one deployment) did over a window.

    Units: requests (gauges), ratio 0–1 (KV usage), per second (rates), counts (increases), seconds
    (histograms). ``None`` is unknown.

    Attributes:
        window_seconds: the window asked for.
        requests_running / requests_waiting: gauges at the newest snapshot in the window.
        kv_cache_usage_ratio: at the newest snapshot; ``_min`` / ``_max`` over every snapshot in the window.
        requests_running_first / requests_waiting_first: at the oldest snapshot in the window, or the first after
            the window's last engine restart (trend; :func:`_since_restart`).
        preemptions_per_second, prompt_tokens_per_second, generation_tokens_per_second,
            requests_finished_per_second: counter rates over the window, resets handled.
        preemptions_increase: preemptions counted over the window.
        ttft / tpot: observations made inside the window (delta histograms).
        queue_time / e2e: request queue time and end-to-end latency inside the window, where exposed.
        counter_resets: restarts detected between consecutive snapshots in the window (of a deployment's
            replicas together, :func:`combine_targets`).
        counter_resets_max: the most restarts any one engine had in the window; ``None`` on one engine's window,
            where it is :attr:`counter_resets` (:attr:`engine_restarts_max`).
        samples: snapshots in the window.
        span_seconds: newest − oldest snapshot time in the window (``None`` when empty); rates cover this.
    """

    window_seconds: float
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage_ratio: float | None = None
    kv_cache_usage_ratio_min: float | None = None
    kv_cache_usage_ratio_max: float | None = None
    requests_running_first: float | None = None
    requests_waiting_first: float | None = None
    preemptions_per_second: float | None = None
    prompt_tokens_per_second: float | None = None
    generation_tokens_per_second: float | None = None
    requests_finished_per_second: float | None = None
    preemptions_increase: float | None = None
    ttft: Histogram | None = None
    tpot: Histogram | None = None
    queue_time: Histogram | None = None
    e2e: Histogram | None = None
    counter_resets: int = 0
    counter_resets_max: int | None = None
    samples: int = 0
    span_seconds: float | None = None

    @property
    def engine_restarts_max(self) -> int:
        """The most restarts one engine had in the window: :attr:`counter_resets_max` over a deployment's replicas,
        :attr:`counter_resets` on one engine's window. Two replicas restarted once each are one restart per engine,
        not two: a threshold stated per engine (``kv_budget``'s ``max_restarts``) reads this, not the sum."""
        return self.counter_resets if self.counter_resets_max is None else self.counter_resets_max

    @property
    def covered_seconds(self) -> float:
        """Seconds the window's counts, rates and extremes cover: :attr:`span_seconds` (newest − oldest snapshot)
        when positive, else :attr:`window_seconds`. What a reading states as "over the last N s".

        Example: the daemon at 15 s scrapes over a 300 s window holds 20 snapshots 285 s apart; ``once
        --interval 2`` evaluates a window of ~4 s (the time both scrapes took, plus one interval) holding two
        snapshots ~2 s apart. Their preemption counts cover 285 s and 2 s, not 300 s and 4 s. The ``snapshot``'s
        ``window_seconds`` (``once --json``, the API) states this span.
        """
        return self.span_seconds if self.span_seconds else self.window_seconds


_COUNTER_FIELDS = (
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "requests_finished_total",
)


def restart_flags(snapshots: Sequence[EngineSnapshot], also: Sequence[str] = ()) -> list[bool]:
    """``flags[i]``: the engine restarted between the last snapshot that knew a quantity and snapshot i.

    Evidence: ``process_start_time_seconds`` moved by more than :data:`START_TIME_TOLERANCE_SECONDS`; or the
    cumulative counters (the token, request and preemption counters, the snapshot fields named in ``also``, and
    the TTFT/TPOT histogram counts of the same bounds) that went down since their last known value are at least as
    many as those that went up. One restart resets every counter, so the flags are applied to all of them.

    A counter that drops while more of the others count on is that series' own reset, not the engine's: each
    series' walk takes it as Prometheus's ``increase()`` does, per series (breaker 28: one halved
    ``generation_tokens_total`` flagged a restart, and every other counter's lifetime was read as the window's
    increase — 330 requests/s arriving where 10 did). Across a real restart the large counters all drop; only one
    that was near 0 (preemptions) can rise.
    """
    flags: list[bool] = []
    last_start: float | None = None
    last_counter: dict[str, float] = {}
    last_hist: dict[str, Histogram] = {}
    for snap in snapshots:
        restarted = False
        start = _known(snap.process_start_time_seconds)
        if start is not None:
            if last_start is not None and abs(start - last_start) > START_TIME_TOLERANCE_SECONDS:
                restarted = True
            last_start = start
        down = up = 0
        for name in (*_COUNTER_FIELDS, *also):
            value = _known(getattr(snap, name))
            if value is None:
                continue
            if name in last_counter:
                down += value < last_counter[name]
                up += value > last_counter[name]
            last_counter[name] = value
        for name in ("ttft", "tpot"):
            h: Histogram | None = getattr(snap, name)
            if h is None:
                continue
            old = last_hist.get(name)
            if old is not None and old.bounds() == h.bounds():
                down += h.count < old.count
                up += h.count > old.count
            last_hist[name] = h
        flags.append(restarted or (down > 0 and down >= up))
    return flags


_RANK_COUNTERS: Final = ("prompt_tokens_total", "generation_tokens_total", "preemptions_total")
""":class:`~advisor.domain.RankValues` counters read by :func:`population_change` for a rank's own restart."""


def population_change(older: EngineSnapshot, newer: EngineSnapshot) -> str | None:
    """Why ``newer`` — the next snapshot of the same target — does not continue ``older``'s counters and histograms,
    or ``None`` when it does.

    A target's counters are sums over the engines and data-parallel ranks behind it (:attr:`EngineSnapshot.ranks`:
    vLLM's ``engine`` label, Ray Serve's ``ReplicaId``). When that set changes — a replica scaled away or replaced,
    a rank appearing with its history already counted — the sum jumps by a whole engine's lifetime, which the window
    would read either as a restart (a drop: the post-drop sum, every other engine's lifetime included, counted as
    the increase) or as traffic (a rise); so would one rank restarting while the others go on (its counters down,
    theirs up). Prometheus takes each series' increase and sums them, so a series leaving adds nothing and one
    arriving starts from its first sample; with only the sums kept, the window cannot, and restarts instead
    (:meth:`advisor.tracker.Tracker.observe`). Every rank restarting together is a restart of the engine, not a
    change: :func:`restart_flags` counts it — so is a moved ``process_start_time_seconds``, and ranks going down
    beside ranks that did not move (idle ones prove nothing); only a rank down beside one that counted on is a
    rank's own restart.

    Returns the change in words, the ranks as the adapter names them (``"ranks 0, 1 → one"``, ``"ranks
    ReplicaId=a, ReplicaId=b → ReplicaId=a"``, ``"1 restarted (its counters went down) while 0 went on"``)."""
    a = {r.rank: r for r in older.ranks}
    b = {r.rank: r for r in newer.ranks}
    if a.keys() != b.keys():
        return f"ranks {', '.join(sorted(a)) or 'one'} → {', '.join(sorted(b)) or 'one'}"
    if len(a) < 2:
        return None
    start, then = _known(newer.process_start_time_seconds), _known(older.process_start_time_seconds)
    if start is not None and then is not None and abs(start - then) > START_TIME_TOLERANCE_SECONDS:
        return None  # the process restarted: every rank with it, a restart (restart_flags), not a change

    def steps(rank: str) -> list[float]:
        pairs = ((getattr(a[rank], n), getattr(b[rank], n)) for n in _RANK_COUNTERS)
        return [y - x for x, y in pairs if x is not None and y is not None]

    down = sorted(rank for rank in a if any(d < 0 for d in steps(rank)))
    # "went on": counted more and nothing less; an idle rank (nothing moved) says nothing either way, so one rank
    # down beside idle ones is the engine restarting (breaker 21: a crash-looping DP engine with an idle rank
    # counted no restart), not a rank restarting alone
    went_on = sorted(rank for rank in a if rank not in down and any(d > 0 for d in steps(rank)))
    if not down or not went_on:
        return None
    return f"{', '.join(down)} restarted (its counters went down) while {', '.join(went_on)} went on"


def since_population_change(points: Iterable[TimedSnapshot]) -> list[TimedSnapshot]:
    """``points`` (one target's, oldest first) from the last one whose snapshot does not continue the one before
    (:func:`population_change`) on; all of them when each continues the last."""
    kept: list[TimedSnapshot] = []
    for p in points:
        if kept and population_change(kept[-1].snapshot, p.snapshot) is not None:
            kept.clear()
        kept.append(p)
    return kept


def _finite_values(values: Iterable[float | None]) -> list[float]:
    return [v for v in (_known(x) for x in values) if v is not None]


def _gauges(newest: EngineSnapshot, oldest: EngineSnapshot, usage: Sequence[float]) -> dict[str, float | None]:
    """The gauge fields of :class:`WindowStats`, the one place both :func:`window_stats` and
    :meth:`WindowAccumulator.stats` assemble them: running and waiting requests and KV usage at the window's newest
    point, running and waiting at its oldest, and KV usage's min and max over ``usage`` (the window's known
    readings, ratio 0–1); ``None`` for what is unknown."""
    return {
        "requests_running": _known(newest.requests_running),
        "requests_waiting": _known(newest.requests_waiting),
        "kv_cache_usage_ratio": _known(newest.kv_cache_usage_ratio),
        "kv_cache_usage_ratio_min": min(usage) if usage else None,
        "kv_cache_usage_ratio_max": max(usage) if usage else None,
        "requests_running_first": _known(oldest.requests_running),
        "requests_waiting_first": _known(oldest.requests_waiting),
    }


def _since_restart(flags: Sequence[bool]) -> int:
    """Index of the window's oldest point the gauge trend starts from: the first one after its last restart (0 when
    none). Running and waiting before a restart are the old process's requests: a trend from them to the new one's
    reads a retry flood draining after the restart as a queue growing from 0 (breaker 30: "waiting 0 → 115
    (+6.39/s)", "scale replicas 1 → 3", while the new process drained 150 retries at 7/s)."""
    for i in range(len(flags) - 1, 0, -1):
        if flags[i]:
            return i
    return 0


def window_stats(history: Sequence[TimedSnapshot], now: float, window_seconds: float) -> WindowStats:
    """Statistics of one target over ``[now − window_seconds, now]`` (unix s; both ends inclusive).

    ``history`` holds snapshots of a single target (sorted here by timestamp). Counters go through
    :func:`counter_increase` / :func:`counter_rate` (no extrapolation: rates cover the span between the
    oldest and newest snapshot in the window); histograms through :func:`histogram_increase`. A restart —
    ``process_start_time_seconds`` changing, or any counter or histogram count going down — resets every
    counter and histogram at that point (Prometheus does the same with start timestamps,
    ``isStartTimestampReset``). An empty window gives a :class:`WindowStats` of ``None``.

    Raises ``ValueError`` for a window that is not a positive number or snapshots of several targets.
    """
    if not window_seconds > 0:
        raise ValueError(f"window_seconds must be > 0, got {window_seconds!r}")
    targets = sorted({ts.target for ts in history})
    if len(targets) > 1:
        raise ValueError(f"window_stats takes one target's history, got {targets}")
    start = now - window_seconds
    points = sorted((ts for ts in history if start <= ts.timestamp <= now), key=lambda ts: ts.timestamp)
    if not points:
        return WindowStats(window_seconds=window_seconds)
    snaps = [p.snapshot for p in points]
    times = [p.timestamp for p in points]
    flags = restart_flags(snaps)

    def series(name: str) -> list[tuple[float, float | None]]:
        return [(t, getattr(s, name)) for t, s in zip(times, snaps, strict=True)]

    usage = _finite_values(s.kv_cache_usage_ratio for s in snaps)
    newest, oldest = snaps[-1], snaps[_since_restart(flags)]
    return WindowStats(
        window_seconds=window_seconds,
        **_gauges(newest, oldest, usage),
        preemptions_per_second=counter_rate(series("preemptions_total"), restarts=flags),
        prompt_tokens_per_second=counter_rate(series("prompt_tokens_total"), restarts=flags),
        generation_tokens_per_second=counter_rate(series("generation_tokens_total"), restarts=flags),
        requests_finished_per_second=counter_rate(series("requests_finished_total"), restarts=flags),
        preemptions_increase=counter_increase(series("preemptions_total"), restarts=flags),
        ttft=histogram_increase([s.ttft for s in snaps], restarts=flags),
        tpot=histogram_increase([s.tpot for s in snaps], restarts=flags),
        queue_time=histogram_increase([s.queue_time for s in snaps], restarts=flags),
        e2e=histogram_increase([s.e2e for s in snaps], restarts=flags),
        counter_resets=sum(flags),
        counter_resets_max=None,  # one engine: counter_resets
        samples=len(points),
        span_seconds=times[-1] - times[0],
    )


@dataclass(frozen=True, slots=True)
class LifetimePrefill:
    """How requests reached their first token since the engines started, from their cumulative histograms (each
    sum ÷ count, summed over the answering targets).

    Attributes:
        ttft_seconds_mean: mean TTFT, seconds (the TTFT histogram's sum ÷ count).
        queue_seconds_mean: mean time in the engine's queue before the first prefill step, seconds (vLLM
            ``request_queue_time_seconds``); ``None`` where a target does not expose it.
        prompt_tokens_mean: mean prompt tokens of a finished request (vLLM ``request_prompt_tokens``); ``None`` where
            a target does not expose it.
        requests: requests the TTFT histograms counted.
    """

    ttft_seconds_mean: float
    queue_seconds_mean: float | None
    prompt_tokens_mean: float | None
    requests: float


def _lifetime_mean(parts: Sequence[tuple[float, float] | None]) -> float | None:
    """Σ sum ÷ Σ count over ``(sum, count)`` pairs; ``None`` when a part is unknown, not finite or nothing counted."""
    if not parts or any(p is None for p in parts):
        return None
    total = math.fsum(p[1] for p in parts if p is not None)
    value = math.fsum(p[0] for p in parts if p is not None)
    if not (math.isfinite(total) and math.isfinite(value)) or total <= 0 or value < 0:
        return None
    return value / total


def _sum_count(h: Histogram | None) -> tuple[float, float] | None:
    return None if h is None else (h.sum, h.count)


def lifetime_prefill(latest: Sequence[EngineSnapshot], least: float) -> LifetimePrefill | None:
    """The engines' mean TTFT, queue time and prompt length since they started (``latest``: each answering
    target's newest snapshot); ``None`` unless every target has a TTFT histogram and together they count at least
    ``least`` requests.

    Example: two targets, TTFT sums 501 s over 30 and 0 s over 0 requests, queue sums 1.5 s over 30 → TTFT 16.7 s,
    queue 0.05 s over 30 requests.
    """
    ttft = [_sum_count(s.ttft) for s in latest]
    mean = _lifetime_mean(ttft)
    counted = math.fsum(p[1] for p in ttft if p is not None)
    if mean is None or counted < least:
        return None
    prompt = [
        None
        if s.request_prompt_tokens_sum is None or s.request_prompt_tokens_count is None
        else (s.request_prompt_tokens_sum, s.request_prompt_tokens_count)
        for s in latest
    ]
    return LifetimePrefill(
        ttft_seconds_mean=mean,
        queue_seconds_mean=_lifetime_mean([_sum_count(s.queue_time) for s in latest]),
        prompt_tokens_mean=_lifetime_mean(prompt),
        requests=counted,
    )


@dataclass(frozen=True, slots=True)
class EngineTime:
    """What an engine's time counters say over a window (summed over targets): engines without latency histograms
    (llama.cpp) count the seconds their sequences spent generating and the seconds spent on prompts instead.

    Attributes:
        generation_seconds: increase of ``generation_seconds_total`` (seconds summed over sequences, each from its
            first token to its last; :attr:`~advisor.domain.EngineSnapshot.generation_seconds_total`).
        generation_tokens: increase of ``generation_tokens_total`` between the same snapshots (tokens).
        prompt_seconds: increase of ``prompt_seconds_total`` (seconds); ``None`` when not exposed.
        span_seconds: seconds the prompt-time increase covers (newest − oldest snapshot that knew it; summed over
            targets, as the increase is); ``None`` with the prompt time.

    Example: llama.cpp 30 s apart, ``tokens_predicted_seconds_total`` 100 → 159.4, ``tokens_predicted_total``
    10,000 → 40,000, ``prompt_seconds_total`` 2.0 → 2.9: 59.4 s for 30,000 tokens, TPOT 1.98 ms, prefill share 3 %.
    """

    generation_seconds: float
    generation_tokens: float
    prompt_seconds: float | None = None
    span_seconds: float | None = None

    @property
    def tpot_seconds(self) -> float | None:
        """Mean seconds per generated token of one sequence, ``generation_seconds ÷ generation_tokens``; ``None``
        without tokens."""
        if self.generation_tokens <= 0 or self.generation_seconds <= 0:
            return None
        return self.generation_seconds / self.generation_tokens

    @property
    def prefill_share(self) -> float | None:
        """``prompt_seconds ÷ span_seconds``, the share of the engine's time spent on prompts (0–1, clipped);
        ``None`` unknown."""
        if self.prompt_seconds is None or not self.span_seconds or self.span_seconds <= 0:
            return None
        return min(1.0, max(0.0, self.prompt_seconds / self.span_seconds))


def engine_time(history: Sequence[TimedSnapshot], now: float, window_seconds: float) -> EngineTime | None:
    """:class:`EngineTime` of one target over ``[now − window_seconds, now]``, or ``None`` when its snapshots do not
    know the generation time (the engine does not expose it) or hold fewer than two such points.

    The increases are :func:`counter_increase` with the restarts of :func:`window_stats`; the token increase is
    taken over the snapshots that know the generation time too, so both count the same finished requests (the
    counters move together, when a request finishes).
    """
    start = now - window_seconds
    points = sorted((ts for ts in history if start <= ts.timestamp <= now), key=lambda ts: ts.timestamp)
    if len(points) < 2 or all(p.snapshot.generation_seconds_total is None for p in points):
        return None
    snaps = [p.snapshot for p in points]
    flags = restart_flags(snaps)
    both = [
        (p.timestamp, p.snapshot.generation_seconds_total, p.snapshot.generation_tokens_total, f)
        for p, f in zip(points, flags, strict=True)
        if _known(p.snapshot.generation_seconds_total) is not None
        and _known(p.snapshot.generation_tokens_total) is not None
    ]
    seconds = counter_increase([(t, s) for t, s, _, _ in both], restarts=[f for *_, f in both])
    tokens = counter_increase([(t, n) for t, _, n, _ in both], restarts=[f for *_, f in both])
    if seconds is None or tokens is None:
        return None
    prompt_points = [(p.timestamp, p.snapshot.prompt_seconds_total) for p in points]
    prompt = counter_increase(prompt_points, restarts=flags)
    known_t = [t for t, v in prompt_points if _known(v) is not None]
    span = known_t[-1] - known_t[0] if prompt is not None and len(known_t) >= 2 else None
    return EngineTime(seconds, tokens, prompt if span else None, span or None)


def combine_engine_time(readings: Iterable[EngineTime | None]) -> EngineTime | None:
    """The deployment's :class:`EngineTime` from its targets': every increase summed over the targets that know it
    (so TPOT is the token-weighted mean and the prefill share the span-weighted mean); ``None`` when none knows."""
    known = [r for r in readings if r is not None]
    if not known:
        return None
    prompts = [r for r in known if r.prompt_seconds is not None and r.span_seconds]
    return EngineTime(
        generation_seconds=math.fsum(r.generation_seconds for r in known),
        generation_tokens=math.fsum(r.generation_tokens for r in known),
        prompt_seconds=math.fsum(r.prompt_seconds or 0.0 for r in prompts) if prompts else None,
        span_seconds=math.fsum(r.span_seconds or 0.0 for r in prompts) if prompts else None,
    )


@dataclass(frozen=True, slots=True)
class SpeculationWindow:
    """What speculative decoding's counters say over a window (summed over targets).

    Attributes:
        drafts: increase of ``spec_drafts_total``: verification steps of one sequence that carried draft tokens;
            ``None`` when a page lacks the counter (vLLM 0.8.2–0.8.4 count draft and accepted tokens only).
        draft_tokens: increase of ``spec_draft_tokens_total``: draft tokens proposed.
        accepted_tokens: increase of ``spec_accepted_tokens_total``: draft tokens the target model accepted.
        accepted_by_position: increase of the accepted tokens at each draft position (index 0 = the first draft
            token); ``()`` when the engine does not split them, ``None`` for a position it does not know.
        configured: the pages came from an engine that registers these counters only when speculation is
            configured (:func:`advisor.engines.catalog.spec_counters_mean_configured`): speculation runs, drafts or
            not.
        generated_tokens: increase of ``generation_tokens_total`` over the same snapshots, for engines whose token
            counter moves as tokens are decoded (vLLM); ``None`` otherwise (llama.cpp and SGLang count a request's
            tokens when it finishes, which a window's drafts do not line up with).

    Example: vLLM 30 s apart, drafts 1,000 → 1,400, draft tokens 3,000 → 4,200, accepted 1,200 → 1,664: 400 drafts
    of 3 tokens (``draft_length`` 3.0), 464 accepted (``acceptance_ratio`` 0.39), ``mean_acceptance_length``
    1 + 464 ÷ 400 = 2.16 tokens per verification step (vLLM's own "Mean acceptance length",
    ``vllm/v1/spec_decode/metrics.py``).
    """

    drafts: float | None
    draft_tokens: float
    accepted_tokens: float
    accepted_by_position: tuple[float | None, ...] = ()
    configured: bool = False
    generated_tokens: float | None = None

    @property
    def draft_share(self) -> float | None:
        """The share of sequence-steps that carried a draft (0–1]: drafts ÷ (generated − accepted tokens), each
        sequence-step yielding one token plus those it accepted; ``None`` when the generated tokens are not counted
        as they are decoded (:attr:`generated_tokens`) or do not exceed the accepted ones."""
        if self.generated_tokens is None or not self.drafts:
            return None
        steps = self.generated_tokens - self.accepted_tokens
        return None if steps <= 0 else min(1.0, self.drafts / steps)

    @property
    def runs(self) -> bool:
        """Speculation runs: a draft token moved, or the engine registers the counters only when it is configured."""
        return self.configured or self.draft_tokens > 0 or bool(self.drafts)

    @property
    def consistent(self) -> bool:
        """The counters agree with one another: none negative, every draft carries a token or more, no more tokens
        accepted than proposed, no position accepting more than the drafts, and the positions (when all known)
        adding up to the accepted tokens within a token per position (a page's counters are read a moment apart).
        Counters that contradict each other are no measurement."""
        values = (self.drafts or 0.0, self.draft_tokens, self.accepted_tokens)
        if min(values) < 0 or self.accepted_tokens > self.draft_tokens:
            return False
        if self.drafts is not None and self.drafts > self.draft_tokens:
            return False
        known = [p for p in self.accepted_by_position if p is not None]
        if any(p < 0 or (self.drafts is not None and p > self.drafts + 1) for p in known):
            return False
        slack = len(self.accepted_by_position) + 1
        full = known and len(known) == len(self.accepted_by_position)
        return not full or abs(math.fsum(known) - self.accepted_tokens) <= slack

    @property
    def draft_length(self) -> float | None:
        """Mean draft tokens per draft (``num_speculative_tokens`` where every step drafts the full length);
        ``None`` without drafts."""
        return self.draft_tokens / self.drafts if self.drafts else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """Tokens one verification step yields per sequence, the bonus token included: ``1 + accepted ÷ drafts``;
        ``None`` without drafts."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else None

    @property
    def acceptance_ratio(self) -> float | None:
        """Accepted ÷ proposed draft tokens (0–1); ``None`` without draft tokens."""
        return min(1.0, self.accepted_tokens / self.draft_tokens) if self.draft_tokens > 0 else None

    def position_acceptance(self) -> tuple[float | None, ...]:
        """Per draft position, the share of drafts whose token at that position was accepted (0–1; ``None``
        unknown): accepted at position ``i`` ÷ drafts. ``()`` without drafts or positions."""
        if not self.drafts:
            return ()
        return tuple(None if a is None else min(1.0, max(0.0, a / self.drafts)) for a in self.accepted_by_position)


def _spec_point(snap: EngineSnapshot) -> bool:
    return _known(snap.spec_draft_tokens_total) is not None or _known(snap.spec_drafts_total) is not None


def carries_speculation(snap: EngineSnapshot) -> bool:
    """Whether a snapshot holds anything :func:`speculation_window` reads: a speculative-decoding counter, or an
    engine's acceptance-length gauge."""
    return _spec_point(snap) or snap.spec_accept_length is not None


def speculation_window(
    history: Sequence[TimedSnapshot],
    now: float,
    window_seconds: float,
    configured: bool = False,
    generation_advances: bool = False,
) -> SpeculationWindow | None:
    """:class:`SpeculationWindow` of one target over ``[now − window_seconds, now]``, or ``None`` when its snapshots
    carry no speculative-decoding counter (nor an engine's gauges, :func:`_gauge_window`), hold fewer than two such
    points, or lack the accepted tokens.

    The increases are :func:`counter_increase` with the restarts of :func:`window_stats`, each over the snapshots
    that carry the counters (a restart seen at a snapshot without them is carried to the next that has them), so all
    count the same verification steps. Accepted tokens by position: a snapshot that lists none while another in the
    window lists some counts zero at every position (llama.cpp and vLLM write a position once a token there was
    accepted). ``configured``: the target's engine registers the counters only when speculation is configured
    (:attr:`SpeculationWindow.configured`); ``generation_advances``: its generated-token counter moves as tokens are
    decoded, so the window's increase counts the same steps (:attr:`SpeculationWindow.generated_tokens`).
    """
    start = now - window_seconds
    points = sorted((ts for ts in history if start <= ts.timestamp <= now), key=lambda ts: ts.timestamp)
    if len(points) < 2:
        return None
    if not any(_spec_point(p.snapshot) for p in points):
        return _gauge_window(points)
    flags = restart_flags([p.snapshot for p in points])
    kept: list[tuple[TimedSnapshot, bool]] = []
    pending = False
    for p, f in zip(points, flags, strict=True):
        pending = pending or f
        if _spec_point(p.snapshot):
            kept.append((p, pending))
            pending = False
    if len(kept) < 2:
        return None
    restarts = [f for _, f in kept]

    def increase(values: Sequence[float | None]) -> float | None:
        return counter_increase([(p.timestamp, v) for (p, _), v in zip(kept, values, strict=True)], restarts=restarts)

    draft_tokens = increase([p.snapshot.spec_draft_tokens_total for p, _ in kept])
    accepted = increase([p.snapshot.spec_accepted_tokens_total for p, _ in kept])
    if draft_tokens is None or accepted is None:
        return None
    drafts = increase([p.snapshot.spec_drafts_total for p, _ in kept])
    width = max(len(p.snapshot.spec_accepted_tokens_by_position) for p, _ in kept)
    positions = tuple(
        increase([_position(p.snapshot.spec_accepted_tokens_by_position, i) for p, _ in kept]) for i in range(width)
    )
    generated = increase([p.snapshot.generation_tokens_total for p, _ in kept]) if generation_advances else None
    return SpeculationWindow(drafts, draft_tokens, accepted, positions, configured, generated)


def _gauge_window(points: Sequence[TimedSnapshot]) -> SpeculationWindow | None:
    """The window of an engine that keeps gauges, not counters (SGLang): the rounds are the generated tokens ÷ the
    mean acceptance length (each round yields that many tokens per sequence), each scoring ``spec_verify_tokens −
    1`` draft tokens and accepting ``length − 1`` of them. The length is the mean of the window's gauges (each the
    engine's mean over its last logging interval). ``None`` without a positive length (no speculation); a window that
    says speculation runs and measures nothing (``drafts`` unknown) without a verify size, or with no generated
    tokens counted (SGLang counts a request's tokens when it finishes)."""
    lengths = [v for v in (_known(p.snapshot.spec_accept_length) for p in points) if v is not None and v > 0]
    if not lengths:
        return None
    # SGLang writes the gauge at 0 without a speculative algorithm: a positive one says speculation runs, measured
    # or not (an older page without the verify size; no request finished in the window, so no tokens counted)
    unmeasured = SpeculationWindow(None, 0.0, 0.0, (), configured=True)
    verify = [v for v in (_known(p.snapshot.spec_verify_tokens) for p in points) if v is not None and v >= 1]
    flags = restart_flags([p.snapshot for p in points])
    generated = counter_increase([(p.timestamp, p.snapshot.generation_tokens_total) for p in points], restarts=flags)
    length = math.fsum(lengths) / len(lengths)
    if not verify or not generated or length < 1:
        return unmeasured
    drafts = generated / length
    return SpeculationWindow(drafts, drafts * (verify[-1] - 1), drafts * (length - 1), (), configured=True)


def _position(values: tuple[float | None, ...], i: int) -> float | None:
    """The ``i``-th position's count, ``0.0`` past the end of a shorter (or empty) tuple: the page had not written
    that position yet (llama.cpp and vLLM write a position once a token there was accepted)."""
    return values[i] if i < len(values) else 0.0


def combine_speculation(readings: Iterable[SpeculationWindow | None]) -> SpeculationWindow | None:
    """The deployment's :class:`SpeculationWindow` from its targets': each increase summed over the targets (drafts
    unknown when a target does not count them; positions only when every target splits them); ``None`` when none
    counts speculation."""
    known = [r for r in readings if r is not None]
    if not known:
        return None
    width = max(len(r.accepted_by_position) for r in known)
    split = [r for r in known if r.accepted_by_position]
    positions: tuple[float | None, ...] = ()
    if width and len(split) == len(known):
        positions = tuple(_sum_known(_position(r.accepted_by_position, i) for r in split) for i in range(width))
    drafts = [r.drafts for r in known]
    return SpeculationWindow(
        drafts=None if any(d is None for d in drafts) else math.fsum(d for d in drafts if d is not None),
        draft_tokens=math.fsum(r.draft_tokens for r in known),
        accepted_tokens=math.fsum(r.accepted_tokens for r in known),
        accepted_by_position=positions,
        configured=any(r.configured for r in known),
        generated_tokens=_sum_all_known(r.generated_tokens for r in known),
    )


def _sum_all_known(values: Iterable[float | None]) -> float | None:
    """The sum, or ``None`` when any value is unknown."""
    listed = list(values)
    return None if any(v is None for v in listed) else math.fsum(v for v in listed if v is not None)


# --- incremental windows ------------------------------------------------------------------------------

_HIST_FIELDS = ("ttft", "tpot", "queue_time", "e2e")
"""The histograms :func:`window_stats` turns into window deltas (``ttft`` and ``tpot`` are also restart evidence)."""
_N_COUNTERS = len(_COUNTER_FIELDS)
_START, _FIRST_COUNTER, _FIRST_HIST = 0, 1, 1 + _N_COUNTERS
_N_STATE = 1 + _N_COUNTERS + len(_HIST_FIELDS)

_State = list[tuple[Any, ...] | None]
"""Per quantity (start time, each counter, each histogram): ``(seq, value)`` of its last known point, or ``None``;
a histogram's is ``(seq, histogram, whole)`` (``whole``: its counts are whole numbers, :func:`_whole_counts`)."""


_EXACT = float(2**52)
"""Whole numbers in [0, 2**52) and their differences are exact in binary64."""


def _whole(x: float) -> bool:
    """``x`` is a whole number in [0, 2**52) (NaN and ±Inf are not): a count that subtracts exactly."""
    return 0.0 <= x < _EXACT and x == int(x)


def _whole_counts(counts: array[float]) -> bool:
    """Every count is a whole number in [0, 2**52) (checked at C speed: one pass per test)."""
    return not counts or (min(counts) >= 0.0 and max(counts) < _EXACT and all(map(float.is_integer, counts)))


# Facts about each link, counted over any run of links in O(1). Each link's facts are one int holding one 32-bit
# field per fact (a 1 where the fact holds); the accumulator keeps the running sum of these ints over the links
# (``_facts[i]`` = the sum over links ``[0, i)``), so ``_facts[hi] − _facts[lo]`` holds, field by field, how many
# links of ``[lo, hi)`` have each fact. A field counts at most ``len(links)`` < 2**32 links: no field carries into
# the next, and a difference of two sums is never negative in any field.
_FIELD_BITS: Final = 32
_FIELD_MASK: Final = (1 << _FIELD_BITS) - 1
_F_EVIDENCE: Final = 0
"""The link carries restart evidence (``flag_ref >= 0``): it may be flagged in a window holding it."""
_F_COUNTER_UNKNOWN: Final = 1
"""A counter is unknown at the link."""
_F_KV_UNKNOWN: Final = 2
"""The KV-cache usage ratio is unknown at the link."""
_F_HIST_KNOWN: Final = 3
"""Field ``_F_HIST_KNOWN + k``: histogram ``k`` is known at the link."""
_F_HIST_ODD: Final = _F_HIST_KNOWN + len(_HIST_FIELDS)
"""Field ``_F_HIST_ODD + k``: histogram ``k``'s delta from the previous known one was not kept as a float, i.e. it
is not a plain bucket-wise difference of two whole-count histograms of one layout (or there is none)."""


def _fact(field: int) -> int:
    """The link-facts int with a 1 in ``field`` alone."""
    return 1 << (_FIELD_BITS * field)


def _count(facts: int, field: int) -> int:
    """How many links a difference of two running sums of link facts counts in ``field``."""
    return (facts >> (_FIELD_BITS * field)) & _FIELD_MASK


_EVIDENCE_MASK: Final = _FIELD_MASK << (_FIELD_BITS * _F_EVIDENCE)
"""A sum of link facts ``&`` this is non-zero when :data:`_F_EVIDENCE` counts a link (as :func:`_count` ≠ 0)."""
_COUNTER_UNKNOWN_MASK: Final = _FIELD_MASK << (_FIELD_BITS * _F_COUNTER_UNKNOWN)
_KV_UNKNOWN_MASK: Final = _FIELD_MASK << (_FIELD_BITS * _F_KV_UNKNOWN)
_HIST_ODD_MASKS: Final = tuple(_FIELD_MASK << (_FIELD_BITS * (_F_HIST_ODD + k)) for k in range(len(_HIST_FIELDS)))
_HIST_KNOWN_SHIFTS: Final = tuple(_FIELD_BITS * (_F_HIST_KNOWN + k) for k in range(len(_HIST_FIELDS)))
_EVIDENCE_FACT: Final = _fact(_F_EVIDENCE)
_COUNTER_UNKNOWN_FACT: Final = _fact(_F_COUNTER_UNKNOWN)
_KV_UNKNOWN_FACT: Final = _fact(_F_KV_UNKNOWN)
_HIST_KNOWN_FACTS: Final = tuple(_fact(_F_HIST_KNOWN + k) for k in range(len(_HIST_FIELDS)))
_HIST_ODD_FACTS: Final = tuple(_fact(_F_HIST_ODD + k) for k in range(len(_HIST_FIELDS)))
_GET_KV: Final = operator.attrgetter("kv")
_GET_BACK: Final = operator.attrgetter("back")
_GET_POINT: Final = operator.attrgetter("point")
_GET_COUNTERS: Final = operator.attrgetter(*_COUNTER_FIELDS)
_GET_HISTS: Final = operator.attrgetter(*_HIST_FIELDS)
_GET_READ: Final = operator.attrgetter(
    "process_start_time_seconds", *_COUNTER_FIELDS, "kv_cache_usage_ratio", *_HIST_FIELDS[:2]
)
"""What a link reads of a snapshot besides histograms ``k`` ≥ 2 (:meth:`WindowAccumulator._relink`)."""
_GET_HDELTAS: Final = operator.attrgetter("hdeltas")
_GET_CSTEPS: Final = operator.attrgetter("csteps")


class _Difference(Histogram):
    """``newer − older`` bucket by bucket — a window's histogram read as newest − oldest (:meth:`WindowAccumulator.\
_telescoped`) — with its count and sum given, and its bucket counts subtracted only when first read.

    A :class:`~advisor.domain.Histogram` to every reader (the counts are made on first access, then kept). What it
    saves is the making: :func:`combine_targets` merges the replicas' windows from their ends
    (:func:`_merged_differences`) without reading the counts, which no one else reads in a cycle.

    Only for two histograms of one layout whose counts are whole numbers in [0, 2**52) and go down in no bucket
    from ``older`` to ``newer`` (what :meth:`WindowAccumulator._telescoped` is given): each difference is exact.
    """

    __slots__ = ("_made", "_newer", "_older")
    _made: array[float] | None
    _newer: Histogram
    _older: Histogram

    @classmethod
    def of(cls, newer: Histogram, older: Histogram, count: float, sum: float) -> _Difference:
        """The difference of ``newer`` and ``older`` (see the class), of ``newer``'s bounds."""
        h = cls.__new__(cls)
        set_ = object.__setattr__
        set_(h, "_bounds", newer.bounds())
        set_(h, "count", count)
        set_(h, "sum", sum)
        set_(h, "_newer", newer)
        set_(h, "_older", older)
        set_(h, "_made", None)
        return h

    @property  # the base class's slot, made when first read
    def _counts(self) -> array[float]:
        made = self._made
        if made is None:
            made = array("d", map(operator.sub, self._newer.counts(), self._older.counts()))
            object.__setattr__(self, "_made", made)
        return made

    @_counts.setter
    def _counts(self, counts: array[float]) -> None:  # Histogram._init, as dataclasses.replace calls it
        object.__setattr__(self, "_made", counts)


_BOUNDS_OF: Final = operator.methodcaller("bounds")
_GET_COUNT: Final = operator.attrgetter("count")
_GET_SUM: Final = operator.attrgetter("sum")
_EXACT_SUMS: Final = float(2**53)
"""Whole numbers adding up to less than this add up exactly in binary64, in any order."""


def _merged_differences(known: Sequence[_Difference]) -> Histogram | None:
    """:meth:`Histogram.merge` of window differences (:class:`_Difference`, counts not made: a copy through
    ``dataclasses.replace`` holds counts and no ends), from their ends: bucket by bucket, Σ newer − Σ older. ``None``
    (the caller merges them as any histograms) when the bounds differ, or when a bucket's newer counts add up to 2**53
    or more.

    Exact, and so the merge's value: each difference is exact (whole counts in [0, 2**52), nothing going down), so
    the merge's ``math.fsum`` of them is the exact sum Σ (newer − older) when that is representable. The newer counts
    of a bucket are whole and ≥ 0: while their plain sum stays below 2**53 every partial sum is below it and each
    addition is exact (rounding is monotonic, so a computed total below 2**53 means an exact one below it too); the
    older counts are no greater, term by term, so theirs is exact as well, and the difference of the two is the
    exact sum. The count and the sum are ``math.fsum`` of the differences' own, as the merge takes them."""
    bounds = known[0].bounds()
    if not all(map(operator.is_, map(_BOUNDS_OF, known), itertools.repeat(bounds))) and any(
        h.bounds() != bounds for h in known
    ):
        return None
    newer = list(map(sum, zip(*[h._newer.counts() for h in known], strict=True)))
    if newer and max(newer) >= _EXACT_SUMS:
        return None
    older = map(sum, zip(*[h._older.counts() for h in known], strict=True))
    return Histogram.from_counts(
        bounds,
        map(operator.sub, newer, older),
        count=math.fsum(map(_GET_COUNT, known)),
        sum=math.fsum(map(_GET_SUM, known)),
    )


class _Link:
    """One history point as :class:`WindowAccumulator` holds it, computed once when the point enters.

    ``flag_ref``: the highest ``seq`` of an earlier point whose comparison with this one may be restart evidence
    (``process_start_time_seconds`` moved, a counter or the TTFT/TPOT count went down), ``-1`` none: in a window
    whose oldest point is ``seq`` a the point may be flagged only when ``flag_ref >= a`` (evidence against a point
    before the window is not seen by the window), and :meth:`flagged` says whether it is, as :func:`restart_flags`
    flags it over that window: ``start_ref >= a`` (the start time moved against a point in it), or ``votes`` — each
    counter's comparison as (the earlier point's ``seq``, +1 went down / −1 went up), kept only where one went
    down — counting, over the comparisons within the window, at least one down and no more ups than downs.
    ``cvals``: each counter's known value (``None`` unknown). ``hdeltas``: each histogram's
    :func:`histogram_delta` from the previous known one (``None``: no previous, or the bucket layout changed); when
    that delta is a plain difference of whole counts (``plain`` and ``integral`` here and at the previous one) only
    its ``sum`` is kept (a float rather than ~300 bytes): the window's counts are then newest − oldest, and the
    delta itself is rebuilt only for a window that needs the merge. ``back``: the point is older than the one
    before it (the history is out of time order; the accumulator then defers to :func:`window_stats`).
    ``integral``: bit k set when histogram k's counts and count are whole numbers in [0, 2**52) (then they
    subtract and add up exactly); ``plain``: bit k set when its delta is a bucket-wise difference (no reset, the
    same layout). ``csteps``: each counter's step from its previous known value (``v − prev``; 0.0 where the
    counter is unknown or has no previous value), summed by :meth:`WindowAccumulator._counters_stepped`.
    """

    __slots__ = (
        "back",
        "csteps",
        "cvals",
        "flag_ref",
        "hdeltas",
        "integral",
        "kv",
        "plain",
        "point",
        "seq",
        "start_ref",
        "t",
        "votes",
    )

    def __init__(
        self,
        point: TimedSnapshot,
        seq: int,
        flag_ref: int,
        start_ref: int,
        votes: tuple[tuple[int, int], ...] | None,
        cvals: tuple[float | None, ...],
        csteps: tuple[float, ...],
        hdeltas: tuple[Histogram | float | None, ...] | None,
        back: bool,
        integral: int,
        plain: int,
    ) -> None:
        self.point = point
        self.seq = seq
        self.t = point.timestamp
        self.flag_ref = flag_ref
        self.start_ref = start_ref
        self.votes = votes
        self.cvals = cvals
        self.csteps = csteps
        self.hdeltas = hdeltas
        self.kv = _known(point.snapshot.kv_cache_usage_ratio)
        self.back = back
        self.integral = integral
        self.plain = plain

    def flagged(self, a: int) -> bool:
        """Whether :func:`restart_flags` flags this point over a window whose oldest point is ``seq`` ``a``."""
        if self.flag_ref < a:
            return False
        if self.start_ref >= a:
            return True
        votes = self.votes
        if votes is None:
            return False
        down = up = 0
        for ref, vote in votes:
            if ref >= a:
                if vote > 0:
                    down += 1
                else:
                    up += 1
        return down > 0 and down >= up


def _delta_of(d: Histogram | tuple[Histogram, Histogram, float]) -> Histogram:
    """The delta itself, rebuilt (:func:`histogram_delta`) where only its sum was kept."""
    if isinstance(d, Histogram):
        return d
    delta = histogram_delta(d[0], d[1])
    assert delta is not None  # kept as a sum only when it was a plain difference
    return delta


class WindowAccumulator:
    """One target's history with every counter step and histogram delta computed once, when its point enters;
    :meth:`stats` then reads a window off them instead of re-deriving every delta over the history.

    :meth:`stats` equals :func:`window_stats` (the reference) for the same history, now and window: the same
    deltas (:func:`histogram_delta`), the same restart flags, the same sums (``math.fsum`` of the same parts,
    :meth:`Histogram.merge` of the same deltas, in the same order), so the results are identical, not merely
    close. It follows the history it is given by identity (:meth:`sync`): points appended, the middle point
    thinned out, the previous point replaced (:func:`advisor.tracker.record`), old points trimmed, or the whole
    history replaced; only the points that changed are recomputed. A history out of time order or holding
    several targets is handed to :func:`window_stats` whole (which sorts or raises).

    Cost: :meth:`sync` after one new point is O(1) deltas. :meth:`stats` finds the window by bisection and reads
    what it must know about its links (restart evidence, unknown values, deltas that are not plain whole-count
    differences) from running sums of per-link facts in O(1); a window with none of these — a target serving
    steadily — costs O(1) per quantity: per counter one C-level ``math.fsum`` over the steps kept, per histogram
    one bucket-wise subtraction (newest − oldest) and one C-level ``math.fsum`` over the kept delta sums. Other
    windows walk their links, adding precomputed steps, with no histogram subtraction.
    """

    __slots__ = ("_before", "_disorder", "_facts", "_last", "_links", "_seq", "_state", "_targets", "_times")

    def __init__(self) -> None:
        self._links: list[_Link] = []
        self._times: list[float] = []
        self._facts: list[int] = [0]  # running sums of the links' facts: _facts[i] over links [0, i)
        self._last: tuple[tuple[int, int, float], WindowStats] | None = None  # the last fast window read, by key
        self._seq = 0
        self._state: _State = [None] * _N_STATE
        self._targets: dict[str, int] = {}
        self._disorder = 0
        self._before: dict[int, _State] = {}  # seq → the state before that point, for the last few points

    def __len__(self) -> int:
        return len(self._links)

    def points(self) -> list[TimedSnapshot]:
        """The history as last synced, oldest first."""
        return [link.point for link in self._links]

    # -- following the history ------------------------------------------------------------------------------
    def sync(self, history: Iterable[TimedSnapshot]) -> None:
        """Follow ``history`` (oldest first; the target's deque): links whose point is still the same object at
        the same place are kept, points trimmed from the front are dropped, and the rest are recomputed."""
        hist = history if isinstance(history, deque | tuple | list) else list(history)
        links = self._links
        n = len(hist)
        # the links still matching the history by identity, up to the first that does not (C-level passes)
        keep = next(itertools.compress(itertools.count(), map(operator.is_not, map(_GET_POINT, links), hist)), None)
        if keep is None and len(links) == n:
            return  # unchanged (each cycle's read of a target that was synced when its point entered)
        if links and n and links[0].point is not hist[0]:
            first = hist[0]
            self._drop_front(next((i for i, link in enumerate(links) if link.point is first), len(links)))
            keep = None
        elif not n and links:
            self._drop_front(len(links))
        if keep is None:
            keep = next(
                itertools.compress(itertools.count(), map(operator.is_not, map(_GET_POINT, links), hist)),
                min(len(links), n),
            )
        if keep == len(links) == n:
            return
        if keep == len(links) - 1 and keep < n and self._relink(hist[keep]):
            keep += 1  # the newest point replaced by one that dropped a histogram (record's e2e): its link redone
        elif keep < len(links):
            self._truncate(keep)
        for p in itertools.islice(hist, keep, None):
            self._append(p)

    def _relink(self, point: TimedSnapshot) -> bool:
        """Give the newest link ``point`` in place of its point, when ``point`` is that point with histograms ``k`` ≥ 2
        (queue time, end-to-end latency: never restart evidence) dropped and every other value the link read the
        same object (what :func:`advisor.tracker.record` does to the previous newest point: its ``e2e`` dropped).
        Returns ``False``, changing nothing, for any other point (then the link is recomputed).

        The link is what :meth:`_append` would compute for ``point`` from the same state: the start time, counters,
        KV usage and TTFT/TPOT are the same objects (the same steps and restart evidence), and each dropped histogram
        is unknown at the link (no delta, not whole nor plain) and leaves the state after it as it was before it. It
        gets a new ``seq``, as a recomputed link would, and so do the values it is the last to know in the state (a
        later point's restart evidence against it refers to it by that ``seq``)."""
        links = self._links
        old = links[-1]
        was = old.point
        before = self._before.get(old.seq)
        if before is None or point.timestamp is not was.timestamp or point.target != was.target:
            return False
        snap, prev = point.snapshot, was.snapshot
        if not all(map(operator.is_, _GET_READ(snap), _GET_READ(prev))):
            return False
        dropped = [
            k for k, (h, was_h) in enumerate(zip(_GET_HISTS(snap), _GET_HISTS(prev), strict=True)) if h is not was_h
        ]
        if any(k < 2 or getattr(snap, _HIST_FIELDS[k]) is not None for k in dropped):
            return False
        hdeltas = list(old.hdeltas) if old.hdeltas is not None else [None] * len(_HIST_FIELDS)
        facts = 0
        integral, plain = old.integral, old.plain
        state = self._state
        for k in dropped:
            if not isinstance(hdeltas[k], float):  # odd already (no delta, or one kept whole)
                facts -= _HIST_KNOWN_FACTS[k]
            else:
                facts += _HIST_ODD_FACTS[k] - _HIST_KNOWN_FACTS[k]
            hdeltas[k] = None
            integral &= ~(1 << k)
            plain &= ~(1 << k)
            state[_FIRST_HIST + k] = before[_FIRST_HIST + k]
        seq = self._seq
        self._seq += 1
        for i, entry in enumerate(state):  # the values this point was the last to know are known at its new seq
            if entry is not None and entry[0] == old.seq:
                state[i] = (seq, *entry[1:])
        self._before[seq] = self._before.pop(old.seq)
        self._before.pop(seq - 3, None)
        links[-1] = _Link(
            point,
            seq,
            old.flag_ref,
            old.start_ref,
            old.votes,
            old.cvals,
            old.csteps,
            tuple(hdeltas) if hdeltas.count(None) < len(hdeltas) else None,
            old.back,
            integral,
            plain,
        )
        self._facts[-1] += facts
        return True

    def _drop_front(self, k: int) -> None:
        if not k:
            return
        for link in self._links[:k]:
            self._forget_target(link.point.target)
        del self._links[:k]
        del self._times[:k]
        del self._facts[:k]  # the sums left still differ by the facts of the links between them
        self._disorder = sum(map(_GET_BACK, self._links[1:]))

    def _truncate(self, keep: int) -> None:
        saved = self._before.get(self._links[keep].seq)
        for link in self._links[keep:]:
            self._forget_target(link.point.target)
        del self._links[keep:]
        del self._times[keep:]
        del self._facts[keep + 1 :]
        self._disorder = sum(map(_GET_BACK, self._links[1:]))
        if saved is not None:  # the usual case: the newest point or two replaced (record's thinning, e2e dropped)
            self._state = list(saved)
            return
        # the last known value of each quantity among the points kept
        state: _State = [None] * _N_STATE
        missing = set(range(_N_STATE))
        for link in reversed(self._links):
            snap = link.point.snapshot
            for i in list(missing):
                if i == _START:
                    v: object = _known(snap.process_start_time_seconds)
                elif i < _FIRST_HIST:
                    v = link.cvals[i - _FIRST_COUNTER]
                else:
                    v = getattr(snap, _HIST_FIELDS[i - _FIRST_HIST])
                    if v is not None:
                        state[i] = (link.seq, v, bool(link.integral & 1 << (i - _FIRST_HIST)))
                        missing.discard(i)
                    continue
                if v is not None:
                    state[i] = (link.seq, v)
                    missing.discard(i)
            if not missing:
                break
        self._state = state

    def _forget_target(self, target: str) -> None:
        left = self._targets[target] - 1
        if left:
            self._targets[target] = left
        else:
            del self._targets[target]

    def _append(self, point: TimedSnapshot) -> None:
        """Compute ``point``'s link from the state the previous points left (restart evidence as
        :func:`restart_flags`, counter steps as :func:`_walk_counter`, deltas by :func:`histogram_delta`)."""
        state = self._state
        seq = self._seq
        self._seq += 1
        before = self._before
        before[seq] = list(state)
        before.pop(seq - 3, None)  # thinning and the previous point's replacement reach back two points at most
        snap = point.snapshot
        start_ref = -1
        votes: list[tuple[int, int]] = []
        start = _known(snap.process_start_time_seconds)
        if start is not None:
            last = state[_START]
            if last is not None and abs(start - last[1]) > START_TIME_TOLERANCE_SECONDS:
                start_ref = last[0]
            state[_START] = (seq, start)
        cvals: list[float | None] = [v if v is not None and math.isfinite(v) else None for v in _GET_COUNTERS(snap)]
        csteps: list[float] = []
        for k, v in enumerate(cvals):
            if v is None:
                csteps.append(0.0)  # read only where the counter is known at every link of the window
                continue
            last = state[_FIRST_COUNTER + k]
            if last is not None:
                if v != last[1]:
                    votes.append((last[0], 1 if v < last[1] else -1))
                csteps.append(v - last[1])  # _walk_counter's step from the previous known value
            else:
                csteps.append(0.0)  # no previous value: the step is never read (no window reaches before it)
            state[_FIRST_COUNTER + k] = (seq, v)
        facts = _COUNTER_UNKNOWN_FACT if None in cvals else 0
        hdeltas: list[Histogram | float | None] = []
        integral = plain = 0
        h: Histogram | None
        for k, h in enumerate(_GET_HISTS(snap)):
            delta: Histogram | float | None = None
            if h is not None:
                last = state[_FIRST_HIST + k]
                counts, count = h.counts(), h.count
                if last is None:
                    whole = 0.0 <= count < _EXACT and count == int(count) and _whole_counts(counts)  # _whole(count)
                else:
                    old: Histogram = last[1]
                    old_counts, old_count, bounds, old_bounds = old.counts(), old.count, h.bounds(), old.bounds()
                    same = old_bounds is bounds or old_bounds == bounds
                    if k < 2 and same and count != old_count:
                        votes.append((last[0], 1 if count < old_count else -1))
                    if (
                        last[2]
                        and same
                        and len(counts) == len(old_counts)
                        and not (count < old_count or any(map(operator.lt, counts, old_counts)))  # _decreased
                    ):
                        # no count below the previous whole ones, all ≥ 0: whole needs no look at the minimum
                        whole = (
                            0.0 <= count < _EXACT
                            and count == int(count)
                            and (not counts or (max(counts) < _EXACT and all(map(float.is_integer, counts))))
                        )
                    else:
                        whole = False  # not a plain difference, whatever its counts: whole-ness below
                    if whole:
                        # a plain difference of whole counts: only its sum is kept (histogram_delta's sum)
                        delta, is_plain = h.sum - old.sum, True
                    else:
                        whole = _whole(count) and _whole_counts(counts)
                        delta = histogram_delta(old, h)
                        is_plain = delta is not None and delta is not h
                    if is_plain:
                        plain |= 1 << k
                if whole:
                    integral |= 1 << k
                state[_FIRST_HIST + k] = (seq, h, whole)
                facts += _HIST_KNOWN_FACTS[k]
            if not isinstance(delta, float):
                facts += _HIST_ODD_FACTS[k]
            hdeltas.append(delta)
        links = self._links
        back = bool(links) and not links[-1].t <= point.timestamp
        downs = [ref for ref, vote in votes if vote > 0]
        flag_ref = max(start_ref, *downs) if downs else start_ref
        links.append(
            _Link(
                point,
                seq,
                flag_ref,
                start_ref,
                tuple(votes) if downs else None,
                tuple(cvals),
                tuple(csteps),
                tuple(hdeltas) if hdeltas.count(None) < len(hdeltas) else None,
                back,
                integral,
                plain,
            )
        )
        self._times.append(point.timestamp)
        if flag_ref >= 0:  # set by the start time, a counter or a histogram count above
            facts += _EVIDENCE_FACT
        if links[-1].kv is None:
            facts += _KV_UNKNOWN_FACT
        self._facts.append(self._facts[-1] + facts)
        self._disorder += back
        self._targets[point.target] = self._targets.get(point.target, 0) + 1

    # -- reading a window -----------------------------------------------------------------------------------
    def stats(self, history: Iterable[TimedSnapshot], now: float, window_seconds: float) -> WindowStats:
        """:func:`window_stats` of ``history`` over ``[now − window_seconds, now]``, read off the precomputed
        steps (after :meth:`sync` to ``history``). Raises as :func:`window_stats` does.

        The window is found by bisection; what is then needed about its links (restart evidence, unknown or
        non-whole values) is read in O(1) from the running sums of the link facts (:data:`_F_EVIDENCE` …). Where
        nothing in the window can be flagged, counters known and whole at every link, and histograms stored as
        plain differences of whole counts, the window costs O(1) per quantity (:meth:`_counters_stepped`,
        :meth:`_telescoped`) plus one C-level pass over the window's delta sums; elsewhere each quantity walks the
        window's links (:meth:`_counters_walked`, :meth:`_window_histogram`). A window read again with the same
        oldest and newest link (a target that did not answer since) is the same object as last time: a link never
        changes once made (a point replaced gets a new link, with a new ``seq``)."""
        self.sync(history)
        start = now - window_seconds
        if not window_seconds > 0 or self._disorder or len(self._targets) > 1 or not start <= now:
            return window_stats(self.points(), now, window_seconds)
        times = self._times
        lo = bisect.bisect_left(times, start)
        hi = bisect.bisect_right(times, now)
        if lo >= hi:
            return WindowStats(window_seconds=window_seconds)
        links = self._links
        first, last = links[lo], links[hi - 1]
        key = (first.seq, last.seq, window_seconds)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        n = hi - lo
        facts = self._facts
        every = facts[hi] - facts[lo]  # over the window's links
        after_first = facts[hi] - facts[lo + 1]  # over all but the oldest: it is never flagged nor has a delta in it
        win: list[_Link] | None = None
        flags: list[bool] | None = None
        if after_first & _EVIDENCE_MASK:  # some link may be flagged: find which
            win = links[lo:hi]
            a = first.seq
            flags = [link.flagged(a) for link in win]
        if flags is None and not every & _COUNTER_UNKNOWN_MASK:
            rates, preemptions = self._counters_stepped(links, lo, hi)
        else:
            win = win if win is not None else links[lo:hi]
            rates, preemptions = self._counters_walked(win, flags if flags is not None else [False] * n)
        hists: list[Histogram | None] = []
        kept: list[tuple[float, ...]] | None = None  # each histogram's kept delta sums over the links after the first
        for k, name in enumerate(_HIST_FIELDS):
            known = (every >> _HIST_KNOWN_SHIFTS[k]) & _FIELD_MASK
            if known < 2:  # no two known histograms: no delta (whatever is flagged)
                hists.append(None)
            elif flags is None and known == n and not after_first & _HIST_ODD_MASKS[k]:
                if kept is None:  # every link after the first kept histogram k's delta: each has its tuple
                    kept = list(zip(*map(_GET_HDELTAS, links[lo + 1 : hi]), strict=True))
                oldest_h = getattr(first.point.snapshot, name)
                hists.append(self._telescoped(oldest_h, getattr(last.point.snapshot, name), kept[k]))
            else:
                win = win if win is not None else links[lo:hi]
                hists.append(self._window_histogram(win, flags if flags is not None else [False] * n, k))
        kvs = list(map(_GET_KV, links[lo:hi]))
        usage = [v for v in kvs if v is not None] if every & _KV_UNKNOWN_MASK else kvs
        newest = last.point.snapshot
        oldest = first.point.snapshot if flags is None or win is None else win[_since_restart(flags)].point.snapshot
        stats = WindowStats(
            window_seconds=window_seconds,
            **_gauges(newest, oldest, usage),
            preemptions_per_second=rates[0],
            prompt_tokens_per_second=rates[1],
            generation_tokens_per_second=rates[2],
            requests_finished_per_second=rates[3],
            preemptions_increase=preemptions,
            ttft=hists[0],
            tpot=hists[1],
            queue_time=hists[2],
            e2e=hists[3],
            counter_resets=sum(flags) if flags is not None else 0,
            counter_resets_max=None,  # one engine: counter_resets
            samples=n,
            span_seconds=last.t - first.t,
        )
        self._last = (key, stats)
        return stats

    @staticmethod
    def _counters_stepped(links: list[_Link], lo: int, hi: int) -> tuple[list[float | None], float | None]:
        """Each counter's rate (and the preemptions' increase) over ``links[lo:hi]`` where no link is flagged and
        every counter is known at every link: ``math.fsum`` of the steps each link kept (``csteps``), a C-level pass.

        The same as :func:`_walk_counter` by construction: with every value known, each link's previous known value
        is the link before it, a step is ``v − prev`` (a value going down is restart evidence, and no link is
        flagged), the steps are the ones the walk adds, in the same order, and the span is newest − oldest."""
        if hi - lo < 2:
            return [None] * _N_COUNTERS, None
        span = links[hi - 1].t - links[lo].t
        steps = zip(*map(_GET_CSTEPS, links[lo + 1 : hi]), strict=True)  # counter by counter, in link order
        increases = list(map(math.fsum, steps))
        return [inc / span if span > 0 else None for inc in increases], increases[0]

    @staticmethod
    def _counters_walked(win: Sequence[_Link], flags: Sequence[bool]) -> tuple[list[float | None], float | None]:
        """Each counter's rate (and the preemptions' increase) over the window's links, step by step as
        :func:`_walk_counter` (resets at drops and flags, unknown values skipped, ``math.fsum`` of the steps)."""
        rates: list[float | None] = []
        preemptions: float | None = None
        for k in range(_N_COUNTERS):
            parts: list[float] = []
            known = 0
            first_t = last_t = prev_v = 0.0
            pending = False
            for link, flagged in zip(win, flags, strict=True):
                v = link.cvals[k]
                if v is None:
                    pending = pending or flagged
                    continue
                if not known:
                    first_t = link.t
                else:
                    parts.append(v if v < prev_v or flagged or pending else v - prev_v)
                prev_v = v
                known += 1
                last_t = link.t
                pending = False
            if known < 2:
                rates.append(None)
                continue
            increase = math.fsum(parts)
            if k == 0:
                preemptions = increase
            span = last_t - first_t
            rates.append(increase / span if span > 0 else None)
        return rates, preemptions

    @staticmethod
    def _telescoped(oldest: Histogram, newest: Histogram, sums: Sequence[float]) -> Histogram | None:
        """:func:`histogram_increase` of one histogram over a window of two or more links where no link is flagged,
        the histogram is known at every link, and every link after the oldest kept its delta as a float, ``sums`` in
        link order (:data:`_F_HIST_ODD`): a plain bucket-wise difference of two histograms of one layout whose counts
        are whole numbers in [0, 2**52) (:func:`_whole_counts`), no bucket going down.

        Exact: each delta's counts are exact differences, so their ``math.fsum`` (what :meth:`Histogram.merge`
        computes) is exactly newest − oldest, bucket by bucket and for the count: one subtraction each. The sums
        are not whole: their ``math.fsum`` is taken over the same deltas in the same order as the merge does (a
        C-level pass over the window's kept floats); ``math.fsum`` raising ``ValueError`` (``+Inf`` and ``-Inf``
        among them) gives ``None`` as the merge's ``ValueError`` does in :func:`histogram_increase`. Two links
        hold one delta, which :func:`histogram_increase` returns as :func:`histogram_delta` made it, unmerged:
        its count ``newer.count − older.count`` and its sum the kept ``newer.sum − older.sum`` themselves (no
        ``math.fsum``, which would turn a ``-0.0`` sum into ``0.0``)."""
        count: float
        if len(sums) == 1:
            total, count = sums[0], newest.count - oldest.count
        else:
            try:
                total = math.fsum(sums)
            except ValueError:
                return None
            count = float(newest.count - oldest.count)
        return _Difference.of(newest, oldest, count, total)

    @staticmethod
    def _window_histogram(win: Sequence[_Link], flags: Sequence[bool], k: int) -> Histogram | None:
        """:func:`histogram_increase` of histogram ``k`` over the window, from the precomputed deltas.

        When every delta in the window is a plain bucket-wise difference of whole counts in [0, 2**52), each was
        exact, so their sum (what :meth:`Histogram.merge` computes with ``math.fsum``) is exactly newest − oldest:
        one subtraction per bucket, whatever the number of points. Otherwise the deltas are merged."""
        name = _HIST_FIELDS[k]
        bit = 1 << k
        # each delta, or (older, newer, its sum) where only the sum was kept
        deltas: list[Histogram | tuple[Histogram, Histogram, float]] = []
        seen = pending = False
        telescopes = True
        first: Histogram | None = None
        last: Histogram | None = None
        for link, flagged in zip(win, flags, strict=True):
            h: Histogram | None = getattr(link.point.snapshot, name)
            if h is None:
                pending = pending or flagged
                continue
            if not link.integral & bit:
                telescopes = False
            if seen:
                assert last is not None
                if flagged or pending:
                    deltas.append(h)
                    telescopes = False
                else:
                    delta = link.hdeltas[k] if link.hdeltas is not None else None
                    if delta is None:  # the bucket layout changed: no delta is defined
                        return None
                    deltas.append((last, h, delta) if isinstance(delta, float) else delta)
                    if not link.plain & bit:
                        telescopes = False
            else:
                first = h
            last = h
            seen = True
            pending = False
        if not deltas:
            return None
        if telescopes and len(deltas) > 1 and first is not None and last is not None:
            try:
                total = math.fsum(d[2] if isinstance(d, tuple) else d.sum for d in deltas)
            except ValueError:  # +Inf and -Inf among the sums: the merge raises it too, and that gives None
                return None
            return Histogram.from_counts(
                last.bounds(),
                map(operator.sub, last.counts(), first.counts()),
                count=float(last.count - first.count),
                sum=total,
            )
        full = [_delta_of(d) for d in deltas]
        if len(full) == 1:
            return full[0]
        try:
            return Histogram.merge(full)
        except ValueError:
            return None


_GET_WINDOW_FIELDS: Final = operator.attrgetter(*(f.name for f in fields(WindowStats)))
"""Every field of a :class:`WindowStats`, in declaration order (:func:`combine_targets` reads them all)."""


def _sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the known values (``None`` when none is known): for rates and increases, a lower bound of the
    fleet's when a replica's window is too short to say (a preemption counted on one replica is a preemption)."""
    known = [v for v in values if v is not None]
    return math.fsum(known) if known else None


def sum_every(values: Iterable[float | None]) -> float | None:
    """The sum over the answering replicas of a gauge, or ``None`` when any of them does not know its value (``None``
    or NaN): a partial count is no fleet total (breaker 24: three replicas of 38 running each, one page saying NaN,
    exported 76 running and "25.3 per replica" to over_provisioned, which reads it as an upper bound), as the
    histograms' merge is every replica's or none (:func:`_merge_every_or_none`)."""
    values = list(values)
    if not values or any(v is None or math.isnan(v) for v in values):
        return None
    return math.fsum([v for v in values if v is not None])


def _mean_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return math.fsum(known) / len(known) if known else None


def _merge_or_first(histograms: Iterable[Histogram | None]) -> Histogram | None:
    known = [h for h in histograms if h is not None]
    if not known:
        return None
    if len(known) > 1:
        differences = [h for h in known if isinstance(h, _Difference) and h._made is None]  # ends known, counts not
        merged = _merged_differences(differences) if len(differences) == len(known) else None
        if merged is not None:
            return merged
    try:
        return Histogram.merge(known)
    except ValueError:
        return _merged_on_common_bounds(known)


def _merged_on_common_bounds(histograms: Sequence[Histogram]) -> Histogram | None:
    """Replicas whose bucket layouts differ (a rolling upgrade across a layout change), summed on the bounds every
    layout has: each replica's cumulative count at a shared bound is exact, so the sum is too, in coarser buckets.
    ``None`` when they share no finite bound (nothing can be read of them together). Before 2026-12-07 the first
    replica alone stood for the deployment: a replica at 6 s TTFT behind one at 0.3 s read goodput 100 % with
    bounds [1, 1] (breaker 32)."""
    shared = set(histograms[0].bounds())
    for h in histograms[1:]:
        shared &= set(h.bounds())
    bounds = tuple(sorted(shared))
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return None
    cumulative = []
    for h in histograms:
        at = dict(zip(h.bounds(), h.counts(), strict=True))
        cumulative.append([at[b] for b in bounds])
    return Histogram.from_counts(
        bounds,
        map(math.fsum, zip(*cumulative, strict=True)),
        count=math.fsum(h.count for h in histograms),
        sum=math.fsum(h.sum for h in histograms),
    )


def _merge_every_or_none(histograms: Sequence[Histogram | None]) -> Histogram | None:
    """:func:`_merge_or_first` when every replica has the histogram (or none has), else ``None``: the replicas that
    have it do not speak for one that does not (breaker 14: a replica at a 6 s TTFT whose TTFT family stopped
    rendering, beside one at 0.5 s, read goodput 100 % for the deployment and resolved its goodput incident)."""
    if any(h is None for h in histograms) and any(h is not None for h in histograms):
        return None
    return _merge_or_first(histograms)


def combine_targets(stats: Sequence[WindowStats]) -> WindowStats:
    """One deployment from its replicas' :class:`WindowStats` (each computed by :func:`window_stats`).

    * running / waiting (latest and first), rates and increases: summed over the replicas that know them —
      a sum over some ``None`` adds the known ones (it then undercounts; a replica that exposes nothing
      contributes nothing); a sum over all ``None`` is ``None``;
    * ``kv_cache_usage_ratio``: plain mean over the replicas that know it (the pools of one deployment's
      replicas are the same size, so the plain mean is the pooled ratio); ``_min`` is the lowest and
      ``_max`` the highest any replica reached (``_max`` shows the hottest replica);
    * ``ttft`` / ``tpot`` / ``queue_time``: ``Histogram.merge`` of the replicas' when every replica has one and
      their bounds agree, else the first alone; ``None`` when some replica has none (the others' requests do not
      speak for it); ``e2e``: of the known ones;
    * ``counter_resets`` and ``samples`` summed; ``counter_resets_max`` the most one replica had
      (:attr:`WindowStats.engine_restarts_max`); ``window_seconds`` and ``span_seconds`` the largest.

    An empty input gives ``WindowStats(window_seconds=0.0)`` with every value ``None``.
    """
    if not stats:
        return WindowStats(window_seconds=0.0)
    (
        window,
        running,
        waiting,
        usage,
        usage_min,
        usage_max,
        running_first,
        waiting_first,
        preemptions,
        prompt,
        generation,
        finished,
        preemptions_increase,
        ttft,
        tpot,
        queue_time,
        e2e,
        resets,
        _resets_max,
        samples,
        span,
    ) = zip(*map(_GET_WINDOW_FIELDS, stats), strict=True)  # field by field, over the replicas in order
    mins = [v for v in usage_min if v is not None]
    maxes = [v for v in usage_max if v is not None]
    spans = [v for v in span if v is not None]
    return WindowStats(
        window_seconds=max(window),
        requests_running=sum_every(running),
        requests_waiting=sum_every(waiting),
        kv_cache_usage_ratio=_mean_known(usage),
        kv_cache_usage_ratio_min=min(mins) if mins else None,
        kv_cache_usage_ratio_max=max(maxes) if maxes else None,
        requests_running_first=sum_every(running_first),
        requests_waiting_first=sum_every(waiting_first),
        preemptions_per_second=_sum_known(preemptions),
        prompt_tokens_per_second=_sum_known(prompt),
        generation_tokens_per_second=_sum_known(generation),
        requests_finished_per_second=_sum_known(finished),
        preemptions_increase=_sum_known(preemptions_increase),
        ttft=_merge_every_or_none(ttft),
        tpot=_merge_every_or_none(tpot),
        queue_time=_merge_every_or_none(queue_time),
        e2e=_merge_or_first(e2e),
        counter_resets=sum(resets),
        counter_resets_max=max(w.engine_restarts_max for w in stats),
        samples=sum(samples),
        span_seconds=max(spans) if spans else None,
    )
