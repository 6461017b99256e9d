"""The autoscaler signals of one deployment (issue 18): the replica count KEDA or an HPA should hold, the capacity
left at today's load, and the time until the KV pool runs out at the current trend. Pure: the caller passes ``now``.

* **Desired replicas** leads the replica advice, from the same queueing model and the same stabilization:
  ``max(advice, lead)``.

  - The *advice* is the ``replicas`` value an open incident proposes (its suggested turn or an alternative, already
    stabilized by :class:`advisor.rules.replicas.ReplicaStabilizer` and the rules' for-durations, never reversing
    within one incident — :mod:`advisor.rules.lifecycle`), held while that incident stays open
    (:class:`ReplicaHold`), else the current count. It rises once a saturation rule has held for its for-duration:
    after the SLO broke, on a load that rose.
  - The *lead* (:class:`ReplicaLead`) is ``ceil(λ_ahead ÷ capacity at the SLO per replica)``, the advice's sizing
    (:func:`advisor.rules.replicas.size_replicas`) applied to the arrival rate one evaluation window ahead: ``λ_ahead =
    λ + max(0, slope) × window``, λ the window's arrival rate and the slope the Theil–Sen slope
    (:func:`theil_sen_slope`) of the per-cycle λ over the window (the time before the advisor next re-derives), while
    the rise goes on at the newest cycles (:func:`_rise_goes_on`: a burst's window memory is level); counted
    where the trend raises it above ``ceil(λ ÷ capacity)``, or where a significant, sustained rise (Mann–Kendall,
    :func:`mann_kendall_rising` over two windows, at least :data:`RISE_MIN_RATIO` of λ over one, and in both windows
    beyond Poisson noise, :func:`poisson_rise_z`) has already carried ``ceil(λ ÷ capacity)`` above the running count; a
    flat load's need is the advice's, gated by measured symptoms (:class:`ReplicaLead` gives the measured reason). It is
    fed to a :class:`~advisor.rules.replicas.ReplicaStabilizer` of its own with ``rules.replicas``' ``scale_up_window``
    / ``scale_down_window`` — the current count on cycles without a need, so that a need must last the whole scale-up
    window (and two cycles at least) before the count rises: a one-cycle spike never raises it. Only rises come from it,
    and only while the throughput headroom is known (the same guards); a scale-down stays the advice's
    (``over_provisioned`` and its for-duration). Once risen it holds, folding in a higher advice, and falls once, to the
    current count, when its scale-down window holds no need and the advice advises none: it never turns around inside
    one incident. Measured on the demo deployment under a linear ramp 0.3 → 3 requests/s over 200 simulated s
    (``tests/e2e/test_desired_replicas_ramp.py``, demo windows 2 s / 10 s at the 10× clock): with the trend's crossing
    alone, desired rose before the goodput fell below its target in 4 of 6 CI runs and 1–2 cycles after it in 2 (the
    advice's own count came then); with the significant-rise path too, 10–15 cycles before it in 6 of 6 runs beside
    three busy processes (and in 25 of 25 recorded runs replayed through it, by 8–16.5 cycles). A step (the demo's own
    ramp) is not led reliably: no trend announces it.

  It is known exactly while the data is fresh; stale or unavailable data gives ``None`` (exported as absent, never
  0: an autoscaler reading 0 would scale the engine down).
* **Headroom** (ratio, 1 = idle, 0 = at the limit, negative = beyond it):

  - ``kv_ceiling``: ``1 − KV usage``, the capacity-weighted usage of the answering replicas' KV pools at the
    newest scrape (evictable prefix-cache blocks count as free, as the engines report them). Chosen over
    ``1 − running ÷ concurrency ceiling`` because that ceiling counts sequences at ``max-model-len``: real
    requests are far shorter, so running ÷ ceiling passes 1 long before the pool is full and would read as no
    headroom on a half-empty pool;
  - ``slo_throughput``: ``1 − λ ÷ (current replicas × capacity at the SLO per replica)``, λ the window's arrival
    rate and the capacity the most requests/s one replica serves with the SLO's goodput target met, both from
    :func:`advisor.rules.replicas.size_replicas` (the queueing model the replica advice uses). ``None`` when the
    sizing is unknown, withheld (the history is too short for an arrival rate), or even one idle replica misses
    the SLO in the model. The arrival rate is read every cycle (:func:`advisor.rules.replicas.arrival_rate`, flow
    balance over the window); the capacity at the SLO is re-derived at most once per evaluation window
    (:class:`SloCapacity`; sooner when λ moves beyond a factor 2, or to confirm a rise of the lead), the cadence at
    which the online calibration updates the latency model it rests on: its search over the queueing model costs
    ~9 ms per deployment (``timeit``, Llama-3.1-8B on H100, this module's tests), against ~0.07 ms of CPU per target
    for the rest of a cycle (issue 15).
* **Time to KV exhaustion** (seconds): ``(1 − u_now) ÷ b`` per answering target, ``u_now`` its KV usage at its
  newest scrape and ``b`` the Theil–Sen slope (:func:`theil_sen_slope`) of its usage over the evaluation window's
  scrapes; the soonest over the targets (the first pool to fill starts to preempt). ``None`` when no target's
  usage grows significantly (the Mann–Kendall test of the same pairs, :func:`rising_slope`) or none has
  :data:`MIN_TREND_SAMPLES` scrapes in the window.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.evaluate import TargetView
from advisor.rules.base import Evaluation
from advisor.rules.replicas import (
    MIN_ARRIVAL_SPAN_SECONDS,
    ReplicaStabilizer,
    arrival_history_withheld,
    arrival_rate,
    size_replicas,
)

MIN_TREND_SAMPLES = 3
"""Fewest scrapes of one target in the window for a KV usage trend: two give one difference, which any noise
sets; the Theil–Sen median of three pairwise slopes already ignores one outlying scrape (Sen 1968, §1)."""


@dataclass(frozen=True, slots=True)
class AutoscalerSignals:
    """One deployment's autoscaler signals after one cycle (``None``: unknown, exported as absent).

    Attributes:
        desired_replicas: the count to hold (replicas); ``None`` unless the data is fresh.
        current_replicas: the configured (or counted) replica count the advice is stated against.
        kv_headroom_ratio: ``1 − KV usage`` (0–1).
        slo_throughput_headroom_ratio: ``1 − λ ÷ (current × capacity at the SLO per replica)`` (≤ 1; negative when
            arrivals exceed what the replicas serve within the SLO; at most 0 while the window's requests miss the
            SLO, :func:`autoscaler_signals`).
        kv_exhaustion_seconds: seconds until the first KV pool is full at the window's usage trend (≥ 0).
        kv_usage_slope_per_second: that target's Theil–Sen slope of KV usage (ratio per second, > 0).
        arrival_rate: requests/s arriving over the window (the throughput headroom's numerator), when stated.
        capacity_at_slo_per_replica: requests/s one replica serves within the SLO (its denominator), when stated.
        desired_reason: why ``desired_replicas`` is that count, in words (the lead's numbers when the lead set it);
            ``None`` when it is unknown.
        kv_trend_measured: whether the KV usage trend was measured (:func:`kv_trend`): with
            ``kv_exhaustion_seconds`` ``None`` it tells "not growing" from "unknown" (KV usage not exposed, fewer
            than :data:`MIN_TREND_SAMPLES` readings in the window).
    """

    desired_replicas: int | None
    current_replicas: int
    kv_headroom_ratio: float | None = None
    slo_throughput_headroom_ratio: float | None = None
    kv_exhaustion_seconds: float | None = None
    kv_usage_slope_per_second: float | None = None
    arrival_rate: float | None = None
    capacity_at_slo_per_replica: float | None = None
    desired_reason: str | None = None
    kv_trend_measured: bool = False


CAPACITY_RATE_FACTOR = 2.0
"""Factor by which the arrival rate may move from the one a kept capacity at the SLO was derived at before it is
re-derived (:class:`SloCapacity`): a doubling of the load is a new operating point; a rise from 0.3 to 3
requests/s re-derives 3–4 times."""


def _rate(ev: Evaluation) -> float:
    rates = arrival_rate(ev.stats)
    return 0.0 if rates is None else rates[0]


def _within_factor(rate: float, then: float) -> bool:
    """``rate`` within :data:`CAPACITY_RATE_FACTOR` of ``then`` either way (both requests/s ≥ 0)."""
    return then / CAPACITY_RATE_FACTOR <= rate <= then * CAPACITY_RATE_FACTOR


class SloCapacity:
    """Per deployment, the requests/s one replica serves within the SLO
    (:attr:`advisor.rules.replicas.ReplicaSizing.capacity_at_slo_per_replica`), re-derived at most once per
    ``refresh_seconds`` (the daemon: its evaluation window). Not thread-safe: one loop owns it.

    Also re-derived, sooner, once the window's arrival rate has moved by more than :data:`CAPACITY_RATE_FACTOR`
    either way from the rate it was derived at: the capacity rests on the window's load (the batch the model is
    calibrated at, whether the replica is saturated), and a rising load must not be judged against a light one's
    capacity (measured on a linear ramp 0.3 → 3 requests/s of the demo deployment: 38.6 requests/s per replica kept
    from the light phase while 15 were derived at the ramp's top). A sizing that is unknown or withheld (history too
    short) is not kept: the next cycle asks again. A clock that stepped back (``now`` before the kept time)
    re-derives.

    Raises:
        ValueError: ``refresh_seconds`` is negative or not finite.
    """

    def __init__(self, refresh_seconds: float) -> None:
        self.refresh_seconds = refresh_seconds
        self._kept: dict[str, tuple[float, float | None, float]] = {}  # (derived at, capacity, arrival rate then)

    @property
    def refresh_seconds(self) -> float:
        """Seconds a derived capacity is kept."""
        return self._refresh

    @refresh_seconds.setter
    def refresh_seconds(self, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"refresh_seconds must be a finite number ≥ 0, got {value!r}")
        self._refresh = value

    def capacity(self, ev: Evaluation, min_history_seconds: float) -> float | None:
        """The capacity at the SLO per replica for ``ev``'s deployment (requests/s > 0), or ``None`` (unknown, or
        even one idle replica misses the SLO in the model)."""
        kept = self._kept.get(ev.ctx.name)
        if kept is not None and 0 <= ev.now - kept[0] < self._refresh and _within_factor(_rate(ev), kept[2]):
            return kept[1]
        return self.derive(ev, min_history_seconds)

    def derive(self, ev: Evaluation, min_history_seconds: float) -> float | None:
        """As :meth:`capacity`, derived now whatever is kept (and kept from now): :class:`ReplicaLead` confirms a
        rise on it."""
        key = ev.ctx.name
        sizing = size_replicas(ev, min_history_seconds=min_history_seconds)
        if sizing is None or sizing.withheld is not None:
            self._kept.pop(key, None)
            return None
        at = sizing.capacity_at_slo_per_replica
        value = at if at is not None and at > 0 and math.isfinite(at) else None
        self._kept[key] = (ev.now, value, sizing.arrival_rate)
        return value

    def retain(self, deployments: Collection[str]) -> None:
        """Forget every deployment not in ``deployments`` (a reload removed it)."""
        self._kept = {k: v for k, v in self._kept.items() if k in deployments}


def theil_sen_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The Theil–Sen estimator of the slope of ``points`` ``(x, y)``: the median of the slopes
    ``(y_j − y_i) ÷ (x_j − x_i)`` over every pair with ``x_i ≠ x_j`` (Theil 1950, "A rank-invariant method of linear
    and polynomial regression analysis", Indagationes Math. 12; Sen 1968, "Estimates of the regression coefficient
    based on Kendall's tau", JASA 63(324):1379–1389, doi:10.1080/01621459.1968.10480934). Robust: up to ~29 % of the
    points may be outliers before it moves arbitrarily far. O(n²) pairs: a 300 s window at 15 s holds 21 scrapes,
    210 pairs.

    Returns ``None`` with no pair of distinct ``x``.

    Example: (0, 0.50), (10, 0.52), (20, 0.54), (30, 0.99) → slopes 0.002, 0.002, 0.0163, 0.002, 0.0235, 0.045 →
    median 0.00917 (ordinary least squares: 0.0149, pulled by the one outlier).
    """
    slopes = [(yj - yi) / (xj - xi) for i, (xi, yi) in enumerate(points) for xj, yj in points[i + 1 :] if xj != xi]
    return statistics.median(slopes) if slopes else None


RISING_Z = 1.645
"""One-sided 5 % point of the standard normal: the Mann–Kendall statistic's ``z`` at or above it is a significant
rise (:func:`mann_kendall_rising`)."""

RISE_MIN_RATIO = 0.1
"""Least growth of the arrival rate over the lead's horizon, as a share of today's (``slope × horizon ≥ 0.1 λ``),
for a significant rise to count the need already reached (:class:`ReplicaLead`). Measured on the demo ramp (8 runs
beside four busy processes, the slope over two horizons): on the light load with six rates or more it grew λ by at
most +0.4 % per horizon and never passed the Mann–Kendall test; from a start, with fewer rates, by up to 22 %; on
the ramp's rise (λ 8–28 requests/s at the 10× clock) by 16 % at the 10th percentile and 31 % at the median, 88 %
of those cycles a Mann–Kendall rise."""


RISE_LOOKBACK_HORIZONS = 2
"""Horizons of per-cycle arrival rates the significant-rise test reads (:class:`ReplicaLead`). Each cycle's λ is a
flow balance over one evaluation window, so the λ of one horizon overlap and hold about one window's evidence;
two horizons hold two. Measured on the demo ramp under load: one cycle in three withheld its rate (a window one
scrape short of ``min_history``), leaving 3–4 rates in one horizon, too few for the test (:func:`mann_kendall_rising`
passes four only all rising); two horizons held 6–10."""


RISE_Z = 2.326
"""One-sided 1 % point of the standard normal: the least :func:`poisson_rise_z` of the last window over the oldest
held (up to two horizons back) for a rise to count as sustained (:func:`_sustained_rise`). Measured by replaying
Poisson arrivals at the defaults (5 min window, 15 s cycles, 60 s / 300 s stabilization; 30 one-hour runs per
load, 2 replicas of 1 request/s each at the SLO): with this test, the significant-rise path adds no lead on flat
loads of 1.9–2.5 requests/s (at 2.2, above the running count's capacity: 0 of 30 runs, 5 without it) nor on 18
kinds of burst (30–90 s, +2–10 requests/s, 10 runs each: as many runs led as by the trend's crossing alone, where
its first version led 10 of 10 of four kinds, the burst's window memory read as a load past capacity). Gating the
trend's crossing too was measured and dropped: slow ramps (1 → 2 requests/s over an hour) were then never led."""


def poisson_rise_z(rate: float, rate_before: float, window_seconds: float, apart_seconds: float | None = None) -> float:
    """The z statistic of a rise from ``rate_before`` to ``rate`` (requests/s), each the arrival rate of a
    ``window_seconds`` window, the two ``apart_seconds`` apart (default: a window, disjoint). Disjoint windows hold
    ``n = rate × window_seconds`` arrivals each and ``z = (n₁ − n₀) ÷ √(n₁ + n₀)``, the normal approximation of the
    conditional test of two Poisson means (Przyborowski and Wileński 1940, Biometrika 31(3/4):313–323; Krishnamoorthy
    and Thomson 2004, "A more powerful test for comparing two Poisson means", J. Stat. Plan. Inference 119(1):23–35,
    the "C-test"). Windows ``d < window_seconds`` apart share their middle: ``n₁ − n₀`` is the arrivals of the newest
    ``d`` s less those of the oldest ``d`` s, so its variance is ``(rate + rate_before) × d``. A floor on the noise:
    arrivals burstier than Poisson vary more. ``0.0`` when both rates are 0; negative for a fall.

    Example: 5 s disjoint windows at 215 and 175 requests/s → n = 1,075 and 875 → 200 ÷ √1,950 = 4.53; at 2.15 and
    1.75 → n = 10.75 and 8.75 → 0.45 (the same rise, ten arrivals: noise); 60 s windows 2 s apart at 2.5 and 2.0 →
    30 ÷ √(4.5 × 2) = 10.
    """
    a, b = max(rate, 0.0), max(rate_before, 0.0)
    d = window_seconds if apart_seconds is None else min(max(apart_seconds, 0.0), window_seconds)
    return (a - b) * window_seconds / math.sqrt((a + b) * d) if (a + b) * d > 0 else 0.0


def mann_kendall_rising(points: Sequence[tuple[float, float]]) -> bool:
    """Whether ``points`` ``(x, y)`` rise significantly: the Mann–Kendall statistic ``S = Σ_{i<j} sign(y_j − y_i)``
    over the points in ``x`` order, with continuity correction ``z = (S − 1) ÷ √(n(n − 1)(2n + 5) ÷ 18)``, is at
    least :data:`RISING_Z` (one-sided 5 %; Mann 1945, "Nonparametric tests against trend", Econometrica 13(3):245–259;
    Kendall 1975, "Rank Correlation Methods", 4th ed., ch. 4). The test of Kendall's tau that Sen's slope rests on
    (Sen 1968). Ties count 0 and the variance takes no tie correction (conservative: ties lower ``S``).

    Three points never pass (``S ≤ 3``, ``z ≤ 1.05``); four pass only all rising (``z = 1.70``), five with at most one
    pair out of order, six with at most two. Returns ``False`` with fewer than two points.
    """
    pts = sorted(points)
    n = len(pts)
    if n < 2:
        return False
    return _mann_kendall_significant(
        sum((yj > yi) - (yj < yi) for i, (_, yi) in enumerate(pts) for _, yj in pts[i + 1 :]), n
    )


def _mann_kendall_significant(s: int, n: int) -> bool:
    """Whether the Mann–Kendall statistic ``s`` of ``n`` points is a significant rise: ``z = (S − 1) ÷ √(n(n − 1)(2n +
    5) ÷ 18) ≥`` :data:`RISING_Z` (:func:`mann_kendall_rising` gives the sources)."""
    return s > 0 and (s - 1) / math.sqrt(n * (n - 1) * (2 * n + 5) / 18) >= RISING_Z


def rising_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The Theil–Sen slope of ``points`` ``(x, y)`` (:func:`theil_sen_slope`) where they rise significantly by the
    Mann–Kendall test (:func:`mann_kendall_rising`, whose ``S`` is the sum of the same pairwise slopes' signs, so
    both come from one pass over the pairs), else ``None``.

    A positive slope alone is noise half the time on a level series: a pool at 2–5 % usage, level for minutes, read
    "KV full in 1,263 s" on the status page and exported ``advisor_time_to_kv_exhaustion_seconds`` now and then
    (walkthrough, 2026-12-07), where the metric is documented absent when usage does not grow.

    Example: (0, 0.03), (2, 0.05), (4, 0.02), (6, 0.04), (8, 0.03) → slope 0.0 → ``None``; (0, 0.50), (10, 0.52),
    (20, 0.54), (30, 0.99) → S = 6, z = 1.70 → 0.00917.
    """
    pts = sorted(points)
    n = len(pts)
    slopes = [(yj - yi) / (xj - xi) for i, (xi, yi) in enumerate(pts) for xj, yj in pts[i + 1 :] if xj != xi]
    if not slopes:
        return None
    if not _mann_kendall_significant(sum((v > 0) - (v < 0) for v in slopes), n):
        return None
    return statistics.median(slopes)


def _usage_points(t: TargetView, now: float, window_seconds: float) -> list[tuple[float, float]]:
    """``(unix s, KV usage ratio)`` of an answering target's known readings in ``[now − window_seconds, now]``
    (none for a target that is not up)."""
    if not t.up:
        return []
    start = now - window_seconds
    return [
        (h.timestamp, u)
        for h in t.history
        if start <= h.timestamp <= now and (u := h.snapshot.kv_cache_usage_ratio) is not None and math.isfinite(u)
    ]


def kv_trend(
    targets: Sequence[TargetView], now: float, window_seconds: float
) -> tuple[tuple[float, float] | None, bool]:
    """:func:`kv_exhaustion`'s answer and whether a trend was measured at all — some answering target has
    :data:`MIN_TREND_SAMPLES` KV readings in the window, so that no exhaustion time means "not growing" rather than
    "unknown" — in one pass over the targets' histories."""
    best: tuple[float, float] | None = None
    measured = False
    for t in targets:
        points = _usage_points(t, now, window_seconds)
        if len(points) < MIN_TREND_SAMPLES:
            continue
        measured = True
        slope = rising_slope(points)
        if slope is None or slope <= 0:
            continue
        seconds = max(0.0, 1.0 - min(points[-1][1], 1.0)) / slope
        if best is None or seconds < best[0]:
            best = (seconds, slope)
    return best, measured


def kv_exhaustion(targets: Sequence[TargetView], now: float, window_seconds: float) -> tuple[float, float] | None:
    """``(seconds until the first KV pool is full, its usage slope per second)`` at the trend over
    ``[now − window_seconds, now]``, or ``None`` when no answering target's usage grows (module docstring)."""
    return kv_trend(targets, now, window_seconds)[0]


def desired_replicas(
    ev: Evaluation, recommendations: Sequence[Recommendation], hold: ReplicaHold | None = None
) -> int | None:
    """The replica count to hold: the first ``replicas`` value the open incidents propose (suggested turn or
    alternative, as ``advisor_recommended_value{dial="replicas"}``); while the incident that last proposed one stays
    open without proposing one this cycle (its rule stopped firing while another of the problem holds, or the
    window withholds the count), that incident's last count (``hold``); else ``ev.ctx.replicas``. ``None`` unless
    the data is fresh."""
    if ev.state != c.STATE_FRESH:
        return None
    for r in recommendations:
        for dial, v in r.dial_values():
            if dial == c.DIAL_REPLICAS and isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
                if hold is not None:
                    hold.advised(ev.ctx.name, r.id, max(1, int(v)))
                return max(1, int(v))
    if hold is not None:
        held = hold.held(ev.ctx.name, {r.id for r in recommendations})
        if held is not None:
            return held
    return int(ev.ctx.replicas)


class ReplicaHold:
    """Per deployment, the incident that last advised a replica count and that count, so that
    ``advisor_desired_replicas`` does not fall back to the current count for a cycle while the incident is still
    open (the lifecycle drops an incident's replicas turn when the rule that proposed it clears while another rule
    of the problem holds, or when a window withholds it): an autoscaler would scale down and up again inside one
    incident. Not thread-safe: one loop owns it."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, int]] = {}

    def advised(self, deployment: str, incident: str, replicas: int) -> None:
        """``incident`` (a recommendation id) advises ``replicas`` for ``deployment`` this cycle."""
        self._held[deployment] = (incident, replicas)

    def held(self, deployment: str, open_ids: Collection[str]) -> int | None:
        """The count held for ``deployment`` while its incident is among ``open_ids``; forgotten once it is not."""
        kept = self._held.get(deployment)
        if kept is None:
            return None
        if kept[0] not in open_ids:
            del self._held[deployment]
            return None
        return kept[1]

    def retain(self, deployments: Collection[str]) -> None:
        """Forget every deployment not in ``deployments`` (a reload removed it)."""
        self._held = {k: v for k, v in self._held.items() if k in deployments}


RISE_HALF_SHARE = 0.25
"""Least share of the rise over the last two horizons each horizon must carry for it to count as sustained
(:func:`_sustained_rise`): a linear ramp puts half in each, a step all in one."""


def _sustained_rise(rates: Sequence[tuple[float, float]], window: float) -> bool:
    """Whether the per-cycle ``(unix s, λ)`` ``rates`` (oldest first) rose significantly and in both halves: the last
    holds significantly more arrivals than the oldest (:func:`poisson_rise_z` ≥ :data:`RISE_Z`, windows of ``window``
    s), and each half — oldest to middle, middle to last, the middle the newest rate at least ``window`` s before the
    last — carries at least :data:`RISE_HALF_SHARE` of the rise. A burst shorter than a window lifts the window's λ
    once, as it enters, and leaves it level while it stays in the window: one half holds the whole rise. A load that
    goes on rising shares it between both."""
    now, last = rates[-1]
    older = [p for p in rates if now - p[0] >= window]
    if not older:
        return False
    (t0, first), (_, mid) = rates[0], older[-1]
    total = last - first
    return (
        poisson_rise_z(last, first, window, now - t0) >= RISE_Z
        and min(mid - first, last - mid) >= RISE_HALF_SHARE * total
    )


NEWEST_SHARE = 0.25
"""Share of the lead's horizon whose per-cycle λ are its *newest* (:func:`_rise_goes_on`): at the defaults (5 min
horizon, 15 s cycles) the last 75 s, six rates, fifteen pairwise slopes."""

NEWEST_MIN_SAMPLES = 4
"""Fewest newest rates :func:`_rise_goes_on` reads; with fewer the rise counts as going on (the trend extrapolated as
without the test). Four give six pairwise slopes. Three consecutive rates of overlapping windows (the demo's 1 s
cycles in a 5 s horizon) share most of their arrivals, and the slope of their 2 differences is Poisson noise: as the
test's input, the demo's 60 s ramp (8 → 28 requests/s, 2 replicas of 10) went unled in 5 of 14 replays, where
without the test it led 3 cycles ahead in 14 of 14. At the defaults the newest quarter holds six."""


GOING_ON_SHARE = 0.5
"""Least ratio of the newest rates' Theil–Sen slope to the horizon's for the trend to be extrapolated
(:func:`_rise_goes_on`): halfway between a ramp's (1: the same slope at every scale) and a burst's after it entered
the window (0: level)."""


def _rise_goes_on(recent: Sequence[tuple[float, float]], slope: float, horizon: float) -> bool:
    """Whether the rise of the per-cycle ``(unix s, λ)`` ``recent`` (the lead's horizon, ``horizon`` s, oldest first),
    whose Theil–Sen slope is ``slope`` (> 0, requests/s per second), still goes on at its newest rates: their
    Theil–Sen slope (the last :data:`NEWEST_SHARE` of the horizon) is at least :data:`GOING_ON_SHARE` of ``slope``.
    ``True`` when the newest hold fewer than :data:`NEWEST_MIN_SAMPLES` rates (too few to tell).

    Why: each λ is a flow balance over one window, a moving average of the arrivals. A burst shorter than the window
    lifts it while the burst enters and leaves it level for a window after it ended; over the horizon that step reads
    as a rise (Theil–Sen: the pairs across it outnumber the level pairs on either side), and extrapolated a whole
    horizon it asked for replicas long after the burst: 60 s of +10 requests/s on 1.5, at the defaults, led 6
    replicas from 105 s after the burst ended for 8 minutes, where 2 serve (``tests/test_signals.py``). A ramp rises
    at every scale. A step's window λ climbs for a window exactly as a ramp's does, so a step still over-leads
    (1.5 → 3.5 requests/s: 6 where 4 serve, as before). Measured by replaying Poisson arrivals at the defaults
    (``bench/lead_replay.py``, beside the same replay without this test; 2 replicas of 1 request/s each at the SLO):
    of 18 kinds of burst (30–90 s, +2–10 requests/s on 0.5 and 1.5, 10 runs each) 13 runs of 180 led, where 144 did,
    at most 5 replicas where 9; ramps at 2 replicas and more led within 15 s of their median lead without it,
    45–338 s before the window's λ passed the running count's capacity; slow ramps (an hour) 46–53 s later, still
    375–592 s before it, the slowest (0.5 → 1 request/s) unled in 2 of 12 runs, and the lightest (0.2 → 0.6
    requests/s, some 100 arrivals per window) 330 s later, after it: left to the advice, as under-leading is safe."""
    newest = [p for p in recent if recent[-1][0] - p[0] <= NEWEST_SHARE * horizon]
    if len(newest) < NEWEST_MIN_SAMPLES:
        return True  # too few to tell a level from a rise: extrapolated as before
    going = theil_sen_slope(newest)
    return going is not None and going >= GOING_ON_SHARE * slope


LEAD_MIN_CYCLES = 2
"""Fewest consecutive cycles with the headroom known whose need is above the lead's count before it rises: one
cycle is a spike, whatever the scale-up window's length (with ``scale_up_window: 0s``, HPA's "at once", the window
holds that one cycle alone)."""


def _present_need(rate: float | None, capacity_at_slo: float | None) -> int:
    """``ceil(λ ÷ capacity at the SLO per replica)``: the replicas the arrival rate ``rate`` needs (0 when either is
    unknown, or when their ratio is not finite: a capacity of 1e-320 requests/s is no capacity to size on); the
    rounding of :func:`advisor.rules.replicas.size_replicas`'s ``slo_replicas``."""
    if rate is None or capacity_at_slo is None or capacity_at_slo <= 0:
        return 0
    ratio = rate / capacity_at_slo
    return math.ceil(ratio - 1e-9) if math.isfinite(ratio) else 0


@dataclass(frozen=True, slots=True)
class _Need:
    """One cycle's need as :meth:`ReplicaLead._need` sized it: ``replicas`` (0: none), λ_ahead (requests/s), the
    path that counted (``trend``, ``rise``, or ``""`` for none) and the capacity at the SLO per replica it was sized
    on (requests/s)."""

    replicas: int
    ahead: float
    path: str
    capacity: float


class ReplicaLead:
    """Per deployment, the count the load will need by the advisor's next re-derivation, stabilized — the *lead*
    of ``advisor_desired_replicas`` (module docstring). Not thread-safe: one loop owns it.

    Each fresh cycle (:meth:`lead`) with the throughput headroom known (λ and the capacity at the SLO per replica
    stated, as :func:`autoscaler_signals` states them):

    * λ_ahead = λ + max(0, slope) × horizon, the slope the Theil–Sen slope (:func:`theil_sen_slope`, requests/s per
      second) of the per-cycle λ over the last ``horizon_seconds`` (the evaluation window: the time before the
      advisor next re-derives), stated from :data:`MIN_TREND_SAMPLES` cycles (fewer: no extrapolation, λ_ahead =
      λ) and while the rise goes on at the newest of them (:func:`_rise_goes_on`; else λ_ahead = λ); a falling λ
      never lowers it (only rises come from the lead);
    * need = ``ceil(λ_ahead ÷ capacity at the SLO per replica)``, the rounding of
      :func:`advisor.rules.replicas.size_replicas`'s ``slo_replicas`` (the same queueing model), counted when the trend
      raises it above ``ceil(λ ÷ capacity)``, the count the load needs now, or when a *significant rise* has already
      carried that count above ``current``: the per-cycle λ of the last :data:`RISE_LOOKBACK_HORIZONS` horizons rise by
      the Mann–Kendall test (:func:`mann_kendall_rising`, four cycles at least) and their Theil–Sen slope grows λ by
      :data:`RISE_MIN_RATIO` of it or more over the horizon, and the rise is sustained (:func:`_sustained_rise`:
      significant beyond Poisson noise over the two horizons and shared by both, where a burst that entered the window
      puts it all in one). Measured why the second: under load, the cycles in which a 20-cycle ramp's trend crossed the
      running count's capacity withheld their rate or read a noisy slope, and past the crossing ``ceil(λ_ahead) =
      ceil(λ)``: in 2 of 6 CI runs nothing led until the SLO broke. Otherwise today's need is the advice's to state,
      gated by measured symptoms (queue growth, KV saturation, goodput) so that the model alone never scales a load that
      does not rise. Measured reason: after the demo ramp's burst the model's capacity at the SLO fell to 2.2 requests/s
      per replica while one replica served 2.4–3.2 with every request within the SLO (its online calibration still
      carrying the burst's windows), and a lead on ``ceil(λ ÷ capacity)`` held 3 replicas through the whole light phase
      in 2 of 3 runs. A need above the lead's count is confirmed on a capacity derived now (``confirm``) and sized on
      the larger of the kept and the fresh one: a rise must hold on both. The kept one may date from another load; the
      fresh one, at a burst's first windows, rests on mean lengths biased by the requests admitted but not yet finished
      (tokens ÷ completions: the demo ramp's burst read 25,000-token prompts where 6,000 arrive, 1.5 requests/s per
      replica where 20 serve). Under-leading is safe — the symptom-gated advice follows — where over-leading is held for
      a whole scale-down window. The trend is extrapolated only while the rise goes on at the newest rates
      (:func:`_rise_goes_on`): a burst that has entered the window leaves its λ level, not rising. Known limit: on a
      *step* (the demo's burst) the window's λ climbs for one window as on a ramp, and its slope, extrapolated,
      over-leads: 3–5 replicas where the advice's 2 serve, held until the scale-down window;
    * the raw count ``max(current, need)`` — the current count on a cycle without a need; while a lead incident is
      open also ``ceil(λ ÷ capacity)``, so that a load grown into the count the trend announced holds it — is fed
      to ``stabilizer``
      (a :class:`~advisor.rules.replicas.ReplicaStabilizer` of its own, with ``rules.replicas``' windows) and read
      against the lead's count, as HPA's stabilization reads against the count it last set
      (``stabilizeRecommendationWithBehaviors``). Feeding the current count on cycles without a need (not nothing)
      is what makes the scale-up window's minimum demand persistence (the stabilizer states a lone point's raw
      count at once).

    The lead **rises** to the lowest raw count of the scale-up window, once (a) that is above its count, (b) the
    previous cycle with the headroom known also needed more (:data:`LEAD_MIN_CYCLES`), and (c) the cycles with the
    headroom known have covered one scale-up window since a start or data that was not fresh (:meth:`not_fresh`).
    A one-cycle spike never raises it. While above the current count (one *lead incident*) it never turns around,
    as the replica advice within one incident (:mod:`advisor.rules.lifecycle`): it holds, folding in the advice's
    count (``advised``) when that is higher, and **falls once**, to the current count, when the scale-down window
    holds no need above the current count — neither the trend's nor, while the incident is open, today's: a ramp
    that has reached the count the trend announced still needs it, though no trend raises it further (measured:
    under load a 20-cycle ramp's lead fell 2 → 1 for one cycle ten cycles after its rise, one before the SLO broke
    and the advice asked 2 again) — and the advice advises none: ``max(advice, lead)`` then falls in one
    step, never down and up again inside one incident. A fresh cycle with the headroom unknown (a window one scrape
    short withholds its rate: on the demo ramp one cycle in four) feeds nothing and raises nothing — feeding the
    current count then would restart every persisting need — but a lead incident may end on it.

    Raises:
        ValueError: ``horizon_seconds`` is negative or not finite.
    """

    def __init__(self, stabilizer: ReplicaStabilizer, horizon_seconds: float) -> None:
        self.stabilizer = stabilizer
        self.horizon_seconds = horizon_seconds
        self._rates: dict[str, deque[tuple[float, float]]] = {}
        self._since: dict[str, float] = {}
        self._above: dict[str, int] = {}  # consecutive known cycles whose need was above the lead's count
        self._led: dict[str, int] = {}
        self._why: dict[str, str] = {}

    @property
    def horizon_seconds(self) -> float:
        """Seconds of per-cycle arrival rates the slope reads and the slope is extrapolated over."""
        return self._horizon

    @horizon_seconds.setter
    def horizon_seconds(self, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"horizon_seconds must be a finite number ≥ 0, got {value!r}")
        self._horizon = value

    def _need(
        self, rate: float, capacity_at_slo: float, rates: Sequence[tuple[float, float]], current: int, window: float
    ) -> _Need:
        """``ceil(λ_ahead ÷ capacity)`` (replicas) when the trend raises it above ``ceil(λ ÷ capacity)``, or when a
        significant rise has already carried ``ceil(λ ÷ capacity)`` above the ``current`` count; the second only when
        that rise is sustained over windows of ``window`` s (:func:`_sustained_rise`); else 0 — with the λ_ahead, path
        and capacity it was sized on (:class:`_Need`, for the reason). ``rates``: the per-cycle ``(unix s, λ)`` of the
        last :data:`RISE_LOOKBACK_HORIZONS` horizons, the newest last."""
        recent = [p for p in rates if rates[-1][0] - p[0] <= self._horizon]
        slope = theil_sen_slope(recent) if len(recent) >= MIN_TREND_SAMPLES else None
        if slope is not None and slope > 0 and not _rise_goes_on(recent, slope, self._horizon):
            slope = 0.0
        ahead = rate + max(0.0, slope or 0.0) * self._horizon
        need = _present_need(ahead, capacity_at_slo)
        present = _present_need(rate, capacity_at_slo)
        none = _Need(0, ahead, "", capacity_at_slo)
        if need > present:
            return _Need(need, ahead, "trend", capacity_at_slo)
        if present <= current or not mann_kendall_rising(rates):
            return none
        rise = theil_sen_slope(rates)
        if rise is None or rise * self._horizon < RISE_MIN_RATIO * rate:
            return none
        return _Need(need, ahead, "rise", capacity_at_slo) if _sustained_rise(rates, window) else none

    def lead(
        self,
        deployment: str,
        now: float,
        current: int,
        rate: float | None,
        capacity_at_slo: float | None,
        advised: int | None = None,
        confirm: Callable[[], float | None] | None = None,
        window_seconds: float | None = None,
    ) -> int | None:
        """One fresh cycle of ``deployment`` at ``now`` (unix s) with ``current`` replicas, the window's arrival
        rate ``rate`` (requests/s), the kept capacity at the SLO per replica ``capacity_at_slo`` (requests/s), each
        ``None`` when unknown or withheld, and the replica advice's count ``advised`` (replicas; ``None``: none).
        ``confirm`` derives the capacity at the SLO now (requests/s, ``None``: unknown); default: the kept one
        stands. ``window_seconds``: the span ``rate`` was measured over (s; default and when not a positive finite
        number: the horizon, the evaluation window). Returns the lead count (replicas) while it is above
        ``current``, else ``None`` (no lead: the advice alone decides). A ``now`` that is not finite feeds nothing
        and returns the count already led."""
        if not math.isfinite(now):
            held = self._led.get(deployment)
            return held if held is not None and held > current else None
        span = window_seconds if window_seconds is not None and math.isfinite(window_seconds) else self._horizon
        span = span if span > 0 else self._horizon
        rates = self._rates.setdefault(deployment, deque())
        if (rates and rates[-1][0] > now) or self._since.get(deployment, now) > now:  # the clock stepped back
            rates.clear()
            self._since.pop(deployment, None)
        ok = rate is not None and math.isfinite(rate) and rate >= 0
        if ok and rate is not None:
            rates.append((now, rate))
        while rates and now - rates[0][0] > RISE_LOOKBACK_HORIZONS * self._horizon:
            rates.popleft()
        last = max(self._led.get(deployment, current), current)
        sized: _Need | None = None
        if ok and rate is not None and capacity_at_slo is not None and capacity_at_slo > 0:
            sized = self._need(rate, capacity_at_slo, list(rates), current, span)
            if sized.replicas > last and confirm is not None:
                fresh = confirm()
                # the larger of the two: a rise needs both the kept and the fresh capacity to ask for it
                both = max(fresh, capacity_at_slo) if fresh is not None and fresh > 0 else None
                sized = self._need(rate, both, list(rates), current, span) if both is not None else None
        value = last
        if sized is not None:
            need = sized.replicas
            # while a lead incident is open, the count the load needs now holds it too (it only never *raises* it)
            held = _present_need(rate, capacity_at_slo) if last > current else 0
            # the need alone, never the fleet's own size: a count observed as "current" held the scale-down window at
            # the old fleet after the operator scaled down (breaker 10: desired 2 -> 4 right after a turn 4 -> 2)
            self.stabilizer.observe(deployment, now, max(need, held))
            since = self._since.setdefault(deployment, now)
            self._above[deployment] = self._above.get(deployment, 0) + 1 if need > last else 0
            up = self.stabilizer.value(deployment, now, last)
            if up > last and self._above[deployment] >= LEAD_MIN_CYCLES and now - since >= self.stabilizer.up_window:
                value = up
                if rate is not None:
                    self._why[deployment] = self._reason(up, current, rate, sized)
        if value == last and last > current:  # a lead incident holds, folds the advice in, or ends at once
            if advised is not None and advised > last:
                value = advised
                self._why[deployment] = f"{advised}: the replica advice's count, folded into the lead's"
            elif (advised is None or advised <= current) and self.stabilizer.value(deployment, now, last) <= current:
                value = current
        if value > current:
            self._led[deployment] = value
        else:
            # nothing led: the fleet's size is not kept as a lead, or a later scale-down would find the old fleet
            # here and lead back up to it (breaker 10: desired 4 for 90 s at 25 requests/s right after a turn 4 -> 2)
            self._led.pop(deployment, None)
            self._why.pop(deployment, None)
        return value if value > current else None

    def _reason(self, count: int, current: int, rate: float, sized: _Need) -> str:
        """The words for a rise to ``count`` replicas on this cycle's λ ``rate`` (requests/s), with the λ_ahead, path
        and capacity at the SLO its need was ``sized`` on (:meth:`_need`)."""
        ahead, path, capacity_at_slo = sized.ahead, sized.path, sized.capacity
        held = f"held until the scale-down window ({self.stabilizer.down_window:g} s) sees no need"
        if path == "rise":
            return (
                f"{count}: led by a significant, sustained rise of the arrival rate, to {rate:.3g} requests/s when it "
                f"rose, past the {current} running replicas' {current * capacity_at_slo:.3g} within the SLO "
                f"({capacity_at_slo:.3g} each); {held}"
            )
        return (
            f"{count}: led by the arrival rate's trend, {rate:.3g} requests/s when it rose and {ahead:.3g} one "
            f"evaluation window ({self._horizon:g} s) ahead, at {capacity_at_slo:.3g} requests/s per replica within "
            f"the SLO; {held}"
        )

    def why(self, deployment: str) -> str | None:
        """Why the lead holds its count for ``deployment`` (:meth:`lead`'s last answer), in words; ``None`` while
        it leads nothing."""
        return self._why.get(deployment)

    def not_fresh(self, deployment: str) -> None:
        """A cycle of ``deployment`` without fresh data: its arrival rates are forgotten and a rise waits for a
        whole scale-up window of fresh cycles again; a count already led stays held."""
        self._rates.pop(deployment, None)
        self._since.pop(deployment, None)
        self._above.pop(deployment, None)

    def retain(self, deployments: Collection[str]) -> None:
        """Forget every deployment not in ``deployments`` (a reload removed it)."""
        for d in [d for d in self._led.keys() | self._since.keys() if d not in deployments]:
            self.stabilizer.forget(d)
        self._rates = {k: v for k, v in self._rates.items() if k in deployments}
        self._since = {k: v for k, v in self._since.items() if k in deployments}
        self._above = {k: v for k, v in self._above.items() if k in deployments}
        self._led = {k: v for k, v in self._led.items() if k in deployments}
        self._why = {k: v for k, v in self._why.items() if k in deployments}


def autoscaler_signals(
    ev: Evaluation,
    recommendations: Sequence[Recommendation],
    targets: Sequence[TargetView],
    window_seconds: float,
    kv_usage_ratio: float | None,
    slo_capacity: SloCapacity | None = None,
    min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
    hold: ReplicaHold | None = None,
    lead: ReplicaLead | None = None,
    slo_missed: bool = False,
) -> AutoscalerSignals:
    """Every signal of the module docstring for one evaluated deployment; only while the data is fresh, everything
    ``None`` otherwise (stale numbers must not steer an autoscaler).

    ``kv_usage_ratio``: the deployment's KV usage at the newest scrape, capacity-weighted over the answering
    replicas (the snapshot's, exported as ``advisor_kv_cache_usage_ratio``). ``slo_capacity``: the deployment's
    kept capacity at the SLO (default: derived now, :func:`advisor.rules.replicas.size_replicas`).
    ``min_history_seconds``: ``rules.replicas.min_history``, as the replica rules use it. ``hold``: the
    deployment's held incident count (:class:`ReplicaHold`; default none held). ``lead``: the deployments' lead
    (:class:`ReplicaLead`, fed this cycle; default none: desired replicas is the advice's count alone).
    ``slo_missed``: the deployment's ``goodput_below_target`` rule holds (the window's requests miss the SLO); the
    throughput headroom is then at most 0, whatever the model's capacity says: a positive headroom beside a goodput
    of 0 (the demo's bursty ``kv-saturated`` deployment read +22 %, a fresh user took it for room) is contradicted by
    what was measured over the same window.
    """
    current = int(ev.ctx.replicas)
    desired = desired_replicas(ev, recommendations, hold)
    reason = (
        None
        if desired is None
        else f"{desired}: the current count, no open incident advises replicas"
        if desired == current
        else f"{desired}: the replica advice of the open incident"
    )
    if desired is None:
        if lead is not None:
            lead.not_fresh(ev.ctx.name)
        return AutoscalerSignals(None, current)
    usage = kv_usage_ratio
    kv_room = 1.0 - min(max(usage, 0.0), 1.0) if usage is not None and math.isfinite(usage) else None
    rates = arrival_rate(ev.stats)
    lam = at_slo = slo_room = None
    kept = slo_capacity or SloCapacity(0.0)
    if rates is not None and arrival_history_withheld(ev, min_history_seconds) is None and current > 0:
        lam = rates[0]
        at_slo = kept.capacity(ev, min_history_seconds)
        if at_slo is not None:
            slo_room = 1.0 - lam / (current * at_slo)
            if slo_missed:
                slo_room = min(slo_room, 0.0)
    if lead is not None:
        stats = ev.stats
        span = None if stats is None else stats.span_seconds if stats.span_seconds is not None else stats.window_seconds
        # a replica that started within the window is filling its batch from empty: the in-flight growth reads as
        # arrivals and its completions lag by a request's life, so neither λ nor the capacity is the load's yet
        # (breaker 25: three replicas started with the advisor at 30 requests/s, 3 serve, led to 9 at 14 s and held
        # 9 for five minutes); the lead reads nothing then, as on a cycle whose headroom is unknown
        warming = ev.replica_ages_seconds is not None and ev.replica_ages_seconds[0] < window_seconds
        led = lead.lead(
            ev.ctx.name,
            ev.now,
            current,
            None if warming else lam,
            None if warming else at_slo,
            desired,
            lambda: kept.derive(ev, min_history_seconds),
            span,
        )
        if led is not None and led > desired:
            desired, reason = led, lead.why(ev.ctx.name) or f"{led}: the lead's count"
    trend, measured = kv_trend(targets, ev.now, window_seconds)
    return AutoscalerSignals(
        desired_replicas=desired,
        current_replicas=current,
        kv_headroom_ratio=kv_room,
        slo_throughput_headroom_ratio=slo_room,
        kv_exhaustion_seconds=None if trend is None else trend[0],
        kv_usage_slope_per_second=None if trend is None else trend[1],
        kv_trend_measured=measured,
        arrival_rate=lam,
        capacity_at_slo_per_replica=at_slo,
        desired_reason=reason,
    )
