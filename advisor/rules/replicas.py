"""One replica number per deployment: sized by one queueing model, stabilized before it reaches the advice.
Pure: the caller passes ``now``.

:func:`size_replicas` is the only place a replica count is computed; every rule that proposes replicas
(``queue_growth``, ``kv_saturation``, ``goodput_below_target``) asks it, so they give the same number, the same
arrival rate and the same utilization on the same data. The count is sized for the arrival rate (completions +
in-flight growth over the window) against what one replica serves while meeting the SLO, plus a drain term when
``rules.replicas.drain_seconds`` is set; never for holding the momentary backlog at once.

The raw number moves with every window; the advice must not. :class:`ReplicaStabilizer` applies the rule of
Kubernetes' HorizontalPodAutoscaler ``behavior`` (``pkg/controller/podautoscaler/horizontal.go``,
``stabilizeRecommendationWithBehaviors``):

* scale up only to the **lowest** raw recommendation of the scale-up window (default 60 s), so one spike
  never sizes the fleet;
* scale down only to the **highest** raw recommendation of the scale-down window (default 300 s, HPA's
  default), so a lull never shrinks it;
* otherwise keep the current count.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from advisor.capacity.operating import mean_decode_context
from advisor.capacity.queueing import (
    SLO,
    ReplicaService,
    Workload,
    max_stable_rate,
    mean_queue_wait_seconds,
    predict_service,
    replicas_needed,
)
from advisor.errors import CapacityError
from advisor.rules.base import Evaluation
from advisor.rules.common import data_parallel_ranks, generated_tokens_per_request, latency_model, rank_concurrency
from advisor.rules.turns import effect
from advisor.telemetry import WindowStats, summarize

DEFAULT_SCALE_UP_WINDOW_SECONDS = 60.0
"""Scale-up stabilization window (HPA's default is 0 s; 60 s keeps a momentary backlog from sizing replicas)."""
DEFAULT_SCALE_DOWN_WINDOW_SECONDS = 300.0
"""Scale-down stabilization window: HPA's default ``scaleDown.stabilizationWindowSeconds``."""


@dataclass
class _Series:
    points: deque[tuple[float, int]] = field(default_factory=deque)


class ReplicaStabilizer:
    """Raw replica recommendations per key (a deployment) → the stabilized count.

    ``observe(key, now, raw)`` records a raw recommendation (replicas, ≥ 1); ``value(key, now, current)`` is
    the count to advise given the deployment's ``current`` replicas. Not thread-safe: one loop owns it.

    ``now`` earlier than a key's newest point means the clock stepped back: the key's points move back by the
    step (the step counts as no time), so the windows keep what they held before it and hold it for their own
    length — not, as points left in the clock's future would be, for the size of the step.

    Raises:
        ValueError: a window is negative or not finite.
    """

    def __init__(
        self,
        scale_up_window_seconds: float = DEFAULT_SCALE_UP_WINDOW_SECONDS,
        scale_down_window_seconds: float = DEFAULT_SCALE_DOWN_WINDOW_SECONDS,
    ) -> None:
        for name, v in (
            ("scale_up_window_seconds", scale_up_window_seconds),
            ("scale_down_window_seconds", scale_down_window_seconds),
        ):
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number ≥ 0, got {v!r}")
        self.up_window = scale_up_window_seconds
        self.down_window = scale_down_window_seconds
        self._series: dict[str, _Series] = {}

    def observe(self, key: str, now: float, raw: int) -> None:
        """Record one raw recommendation (clamped to ≥ 1) at ``now`` (unix s); older points beyond both
        windows are dropped."""
        s = self._series.setdefault(key, _Series())
        _rebase(s, now)
        s.points.append((now, max(1, int(raw))))
        keep = max(self.up_window, self.down_window)
        while s.points and now - s.points[0][0] > keep:
            s.points.popleft()

    def value(self, key: str, now: float, current: int) -> int:
        """The stabilized count for ``key`` at ``now`` against ``current`` replicas; ``current`` when nothing
        was observed.

        Example: raw 13, 15, 13, 3 within 60 s and current 1 → 3 (the lowest of the scale-up window).
        """
        s = self._series.get(key)
        if s is None or not s.points:
            return current
        _rebase(s, now)
        up = [r for t, r in s.points if now - t <= self.up_window] or [s.points[-1][1]]
        down = [r for t, r in s.points if now - t <= self.down_window] or [s.points[-1][1]]
        up_rec, down_rec = min(up), max(down)
        if current < up_rec:
            return up_rec
        if current > down_rec:
            return down_rec
        return current

    def forget(self, key: str) -> None:
        """Drop a key's points (the deployment left the config)."""
        self._series.pop(key, None)


def _rebase(s: _Series, now: float) -> None:
    """After a step back of the clock (``now`` before the newest point), move every point back by the step: the
    newest then sits at ``now``, and their order and spacing are kept."""
    if s.points and s.points[-1][0] > now:
        step = s.points[-1][0] - now
        s.points = deque((t - step, r) for t, r in s.points)


# --- the one queueing model every rule sizes replicas with ---------------------------------------------------

DEFAULT_TARGET_UTILIZATION = 0.8
"""Utilization one replica is sized for when no capacity model is available (measured service rate only):
λ ÷ (c·μ) ≤ 0.8, the usual M/M/c planning figure (Gross & Harris §2.3: the wait grows as 1 ÷ (1 − ρ))."""
SATURATED_WINDOW_SHARE = 0.9
"""The window's mean batch, as a share of the newest one, above which a saturated engine counts as saturated over
the whole window: its completions per second are then its service rate. Below, the batch grew inside the window
(a burst's start) and the rate comes from Little's law on the mean batch instead."""
MAX_CALIBRATION = 1000.0
"""Bound on the engine-vs-model speed ratio (a ratio beyond ×1000 either way is a unit error, not a speed)."""


@dataclass(frozen=True, slots=True)
class ReplicaSizing:
    """The replica count one deployment needs for its measured arrival rate (requests/s, seconds, replicas).

    Attributes:
        arrival_rate: requests/s arriving over the window: completions + growth of the in-flight population
            (running + waiting) per second (flow balance; never completions alone). ≥ 0.
        completions_per_second: the engine's finished-request rate over the window (all replicas up).
        inflight_growth_per_second: (running + waiting at the newest scrape − at the oldest) ÷ the window's span.
        service_rate_per_replica: requests/s one replica completes with its batch full (the most it can do).
        capacity_at_slo_per_replica: requests/s one replica completes while the SLO's goodput target is still met
            (``None``: even an idle replica misses the SLO in the model, so replicas alone cannot meet it).
        replicas: the raw count (≥ 1): the larger of :attr:`slo_replicas` and :attr:`drain_replicas`.
        slo_replicas: ``ceil(arrival_rate ÷ capacity_at_slo_per_replica)`` (or, without a capacity model, the
            fewest M/M/c servers at ≤ 80 % utilization whose mean queue wait is within the TTFT target).
        drain_replicas: the replicas that clear the current backlog within ``drain_seconds`` while the arrivals
            continue, ``ceil((λ + backlog ÷ drain_seconds) ÷ μ)``; ``None`` when no drain time is configured.
        backlog: requests waiting at the newest scrape (all replicas).
        current_replicas: the configured count.
        utilization: λ ÷ (current × μ): above 1 the queue grows.
        utilization_after: λ ÷ (replicas × μ).
        method: ``model`` (the queueing model of :func:`advisor.capacity.queueing.predict_service`, its speed
            calibrated to the engine) or ``measured`` (no GPU or lengths: M/M/c on the measured service rate).
        calibration: engine speed ÷ the published prior's speed: the online-calibrated decode factor (times this
            window's own fixed point when there is none), 1.0 without TPOT observations.
        explanation: one paragraph with the numbers, for descriptions.
        queue_wait_seconds / queue_wait_seconds_after: mean wait before service (seconds) at the current count
            and at :attr:`replicas`; ``None`` when the queue is unstable (grows without bound).
        withheld: why the count must not be proposed (:func:`arrival_history_withheld`: the history is too short
            for an arrival rate), in numbers; ``None`` when it may. Every rule passes it to its proposal.
    """

    arrival_rate: float
    completions_per_second: float
    inflight_growth_per_second: float
    service_rate_per_replica: float
    capacity_at_slo_per_replica: float | None
    replicas: int
    slo_replicas: int
    drain_replicas: int | None
    backlog: float
    current_replicas: int
    utilization: float
    utilization_after: float
    method: str
    calibration: float
    explanation: str
    queue_wait_seconds: float | None = None
    queue_wait_seconds_after: float | None = None
    withheld: str | None = None

    def effects(self) -> dict[str, dict[str, Any]]:
        """Predicted effects of scaling to :attr:`replicas`: utilization and mean queue wait, before → after."""
        return {
            "utilization": effect(self.utilization, self.utilization_after),
            "queue_wait_seconds": effect(self.queue_wait_seconds, self.queue_wait_seconds_after),
        }

    def evidence(self) -> dict[str, Any]:
        """The sizing's figures as evidence (rounded; keys name their units)."""
        return {
            "arrival_rate_per_second": round(self.arrival_rate, 4),
            "completions_per_second": round(self.completions_per_second, 4),
            "inflight_growth_per_second": round(self.inflight_growth_per_second, 4),
            "service_rate_per_replica": round(self.service_rate_per_replica, 4),
            "capacity_at_slo_per_replica": (
                None if self.capacity_at_slo_per_replica is None else round(self.capacity_at_slo_per_replica, 4)
            ),
            "replicas_needed": self.replicas,
            "replicas_for_slo": self.slo_replicas,
            "replicas_for_drain": self.drain_replicas,
            "backlog_requests": self.backlog,
            "utilization": round(self.utilization, 4),
            "sizing_method": self.method,
            "model_calibration": round(self.calibration, 4),
        }


def arrival_rate(stats: WindowStats | None) -> tuple[float, float, float] | None:
    """(arrival, completions, in-flight growth) in requests/s over the window, or ``None`` when unknown.

    Flow balance over the window: every request that arrived either completed or is still in flight, so
    λ = completions/s + (in-flight at the end − at the start) ÷ span, in-flight = running + waiting
    (Little's law's conservation; Kleinrock vol. 1 §2.1). Floored at 0. Completions alone undercount λ
    whenever the queue grows — the momentary backlog is *not* part of the rate.
    """
    s = stats
    if s is None or s.requests_finished_per_second is None or s.requests_waiting is None:
        return None
    if s.requests_waiting_first is None or s.window_seconds <= 0:
        return None
    span = s.covered_seconds
    if span <= 0:
        return None
    first = (s.requests_running_first or 0.0) + s.requests_waiting_first
    last = (s.requests_running or 0.0) + s.requests_waiting
    growth = (last - first) / span
    done = s.requests_finished_per_second
    return max(0.0, done + growth), done, growth


MIN_ARRIVAL_SPAN_SECONDS = 30.0
"""Shortest history (seconds, the window's newest − oldest scrape) over which an arrival rate is measured for a
replica count. The growth term of :func:`arrival_rate` is (in-flight at the end − at the start) ÷ span: over a
span of a few seconds at a burst's start it is the momentary backlog divided by a small number (47 requests
admitted in 2 s read as 23.7 requests/s while 2.47/s complete, and sized 10 replicas where 2 serve the load).
30 s is twice the default 15 s scrape interval and HPA's default 15 s sync period, and holds several mean
request lifetimes of a chat load (a few seconds each), so a burst's admission is averaged with its service."""
MIN_ARRIVAL_SCRAPES = 4
"""Fewest scrapes per target (three intervals) over which an arrival rate is measured: Prometheus' guidance
for ``rate()`` is a range of at least four scrape intervals' worth of samples so one late or early scrape does not
set the rate (Robust Perception, "What range should I use with rate()?": at least 4× the scrape interval);
two scrapes are one difference."""


JITTER_SHARE = 0.25
"""Share of a scrape interval a window's span may fall short of ``rules.replicas.min_history`` by and still count
as that long: scrapes land a little early or late (the stall check allows the same quarter interval). See
:func:`spans_at_least`."""


def spans_at_least(span: float, need: float, interval: float, window: float | None = None) -> bool:
    """Whether scrapes spanning ``span`` seconds, taken every ``interval`` seconds in an evaluation window of
    ``window`` seconds, hold ``need`` seconds of history: ``span ≥ need' − JITTER_SHARE × interval``, where ``need'``
    is ``need`` capped at ``(⌊window ÷ interval⌋ − 1) × interval`` when the window is at least ``need`` long.

    A window of ``W`` seconds holds ``⌊W ÷ interval⌋`` scrapes at most phases and one more only when one lands near
    its first instant: a 30 s window of 2 s scrapes spans 28 s, so a 30 s need read against the span alone came and
    went from one cycle to the next (walkthrough, 2026-12-07: the replica advice, ``advisor_recommended_value{dial=
    "replicas"}`` and the latency model's updates all flickered, "needs ≥ 30 s … sees 28 s"). Such a window holds
    the need at its scrapes' resolution. A span short of that by a whole scrape is a scrape missing, not phase; the
    quarter interval is the scrapes' jitter. A window shorter than the need never holds it (``check-config`` warns).

    >>> spans_at_least(28.0, 30.0, 2.0, window=30.0), spans_at_least(26.0, 30.0, 2.0, window=30.0)
    (True, False)
    >>> spans_at_least(28.0, 30.0, 2.0, window=300.0), spans_at_least(29.6, 30.0, 2.0)
    (False, True)
    """
    interval = max(interval, 0.0)
    if window is not None and window >= need and interval > 0:
        need = min(need, (math.floor(window / interval + 1e-9) - 1) * interval)
    return span >= need - JITTER_SHARE * interval


def arrival_history_withheld(ev: Evaluation, min_span_seconds: float = MIN_ARRIVAL_SPAN_SECONDS) -> str | None:
    """Why the window is too short to size replicas from its arrival rate, in numbers, or ``None``.

    Too short: its span (:attr:`WindowStats.span_seconds`, else the window) is below ``min_span_seconds`` (config
    ``rules.replicas.min_history``, default :data:`MIN_ARRIVAL_SPAN_SECONDS`) by more than a quarter of the window's
    mean scrape interval, from the scrapes that arrived (scrape jitter: 3.999 s of 1 s scrapes against 4 s flipped
    the demo's replica count on and off, its reason reading "needs ≥ 4 s … sees 4 s"), or it holds fewer than
    :data:`MIN_ARRIVAL_SCRAPES` scrapes per answering target (``samples ÷ replicas up``; not judged when the stats
    do not count their samples). ``None`` also when there are no stats (nothing is sized then).

    Example: ``once --interval 2`` sees a 2 s span over 2 scrapes → ``"withheld: the arrival rate needs ≥ 30 s of
    history over ≥ 4 scrapes; this evaluation sees 2 s over 2 scrape(s) …"``.
    """
    s = ev.stats
    if s is None:
        return None
    span = s.span_seconds if s.span_seconds is not None else s.window_seconds
    scrapes = s.samples / max(ev.replicas_up, 1) if s.samples > 0 else None
    # the scrape interval from the scrapes that arrived (Evaluation.samples), not the points kept: the tracker thins
    # a window to a few points, and span ÷ kept points let a 111 s window pass for 120 s (breaker 18)
    arrived = ev.samples / max(ev.replicas_up, 1) if ev.samples > 0 else scrapes
    interval = span / (arrived - 1) if arrived is not None and arrived > 1 else 0.0
    held = spans_at_least(span, min_span_seconds, interval, s.window_seconds)
    if held and (scrapes is None or scrapes >= MIN_ARRIVAL_SCRAPES):
        return None
    shown = f"{span:.0f}" if round(span) < min_span_seconds else f"{math.floor(span * 10) / 10:.1f}"
    seen = f"{shown} s" + ("" if scrapes is None else f" over {scrapes:.0f} scrape(s)")
    return (
        f"withheld: the arrival rate needs ≥ {min_span_seconds:g} s of history over ≥ "
        f"{MIN_ARRIVAL_SCRAPES} scrapes; this evaluation sees {seen}, where the in-flight growth is the momentary "
        "backlog, not a rate (no replica count is proposed from it)"
    )


SATURATED_USAGE = 0.9
"""KV usage (0–1) at which a replica with requests waiting counts as saturated (kv_saturation's default
threshold): its completions are then its service rate."""


def saturated(ev: Evaluation) -> bool:
    """Whether the replicas run at their ceiling, so that completions per replica measure the service rate μ:
    requests wait at the newest scrape while requests run, and either KV usage is at least
    :data:`SATURATED_USAGE` (the pool is the ceiling) or the running requests per data-parallel rank reach 90 %
    of ``max_num_seqs`` (the slots are), or KV usage is unknown (a waiting queue is then the only sign). A queue
    beside a pool and slots with room is a momentary backlog (a burst admitted over a few steps), not a ceiling."""
    s = ev.stats
    if s is None or not s.requests_waiting or not s.requests_running or ev.replicas_up <= 0:
        return False
    if s.kv_cache_usage_ratio is None or s.kv_cache_usage_ratio >= SATURATED_USAGE:
        return True
    per_rank = s.requests_running / ev.replicas_up / data_parallel_ranks(ev)
    return per_rank >= 0.9 * ev.ctx.inputs.max_num_seqs


BUDGET_BOUND_SHARE = 0.5
"""Share of the step's token budget (``max_num_batched_tokens`` less one token per running decode) the prefills must
fill for a queue beside free slots and a free pool to count as prefill-bound (:func:`room_withheld`). vLLM's
scheduler admits waiting requests each step while a slot, KV blocks and budget remain (``Scheduler.schedule``,
``vllm/v1/core/sched/scheduler.py``), so a queue held behind free slots and blocks fills the budget every step;
half of it leaves room for the counters' timing (a prompt's tokens count when its prefill completes)."""


def room_withheld(ev: Evaluation) -> str | None:
    """Why no replica count may be sized from ``ev``'s queue, in numbers, or ``None``: requests wait while every bound
    vLLM admits by has room, so the engine is not short of capacity and another replica would queue the same way.

    Holds (vLLM only, whose admission rule is known) when requests wait at the newest scrape and either

    * the engine splits its queue by reason (``num_requests_waiting_by_reason``, 0.20+) and none waits for
      capacity: each waits for a LoRA adapter slot or a remote KV load (``deferred``), whose dial is not a replica;
    * or, with the pool's fullest usage over the window below :data:`SATURATED_USAGE`, fewer than 90 % of
      ``max_num_seqs`` running per data-parallel rank (the slots have room; :func:`saturated`'s bound), and the
      prefills filling less than :data:`BUDGET_BOUND_SHARE` of the step's token budget: prompt tokens per step =
      prompt tokens/s × running ÷ generated tokens/s (one generated token per running sequence a step), against
      ``max_num_batched_tokens`` (:attr:`~advisor.capacity.inputs.CapacityInputs.profile_tokens`) less the running
      decodes. A queue that fills the budget is prefill-bound: capacity, and sized as before.

    ``None`` whenever a reading it needs is unknown, and while speculative decoding runs (a step then generates
    several tokens a sequence, so the steps are not counted): it cannot tell, so it does not withhold.

    Breaker 30: a queue growing 3/s beside 30 of 256 slots running and a pool 7.5 % used paged "scale replicas
    1 → 3"; an engine running 64 under a stated cap of 256 with a queue and the pool 16 % used paged "1 → 2"; 111
    deferred requests (an adapter slot) paged "1 → 3"."""
    s = ev.stats
    if s is None or ev.ctx.engine != "vllm" or ev.replicas_up <= 0 or not s.requests_waiting:
        return None
    waiting = s.requests_waiting
    if "waiting_capacity" in ev.queues and ev.queues["waiting_capacity"] < 1:
        return (
            f"withheld: none of the {waiting:,.0f} waiting waits for capacity (each is deferred: a LoRA adapter slot "
            "or a remote KV load, vLLM's num_requests_waiting_by_reason): another replica does not admit them — "
            "the adapter slots (--max-loras) or the KV transfer hold them"
        )
    usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
    running = s.requests_running
    prompt, generated = s.prompt_tokens_per_second, s.generation_tokens_per_second
    if usage is None or running is None or prompt is None or not generated or running <= 0 or ev.speculation_runs():
        # speculation generates several tokens a sequence per step: generated tokens ÷ running no longer counts steps
        return None
    ranks = data_parallel_ranks(ev)
    cap = ev.ctx.inputs.max_num_seqs
    per_rank = running / ev.replicas_up / ranks
    if usage >= SATURATED_USAGE or per_rank >= 0.9 * cap:
        return None
    mean = ev.requests_running_mean
    batch = mean if mean is not None and math.isfinite(mean) and mean > 0 else running
    per_step = prompt * batch / generated / ev.replicas_up / ranks  # prompt tokens a rank prefills per step
    budget = ev.ctx.inputs.profile_tokens - per_rank
    if budget <= 0 or per_step >= BUDGET_BOUND_SHARE * budget:
        return None
    held = ""
    first = s.requests_running_first
    if first is not None and abs(first - running) < 0.5 and abs(batch - running) < 0.5:
        held = f"; running held at {per_rank:,.0f} a rank all window, as if a cap of {per_rank:,.0f} were in force"
    return (
        f"withheld: {waiting:,.0f} wait while {per_rank:,.0f} of max_num_seqs {cap} run a rank, the fullest pool is "
        f"{usage:.1%} used and the prefills take ~{per_step:,.0f} of the step's {budget:,.0f}-token budget{held}: "
        "the engine is not admitting work it has room for, so it is not short of capacity and another replica would "
        "queue the same way — check what holds admission (the cap the engine really runs with, LoRA adapter slots, "
        "structured-output grammar compiles, remote KV loads)"
    )


def _slo_rate(workload: Workload, service: ReplicaService, slo: SLO, ceiling: float) -> float | None:
    """The largest λ ≤ ``ceiling`` (requests/s) at which one replica meets the SLO (:meth:`ServicePrediction.meets`);
    ``None`` when even an idle one misses it. Goodput falls as λ rises, so bisection finds it."""
    if not predict_service(dataclasses.replace(workload, arrival_rate=0.0), service, 1, slo).meets(slo):
        return None
    lo, hi = 0.0, ceiling
    for _ in range(40):
        mid = (lo + hi) / 2
        if predict_service(dataclasses.replace(workload, arrival_rate=mid), service, 1, slo).meets(slo):
            lo = mid
        else:
            hi = mid
    return lo


def _clamp_calibration(k: float) -> float:
    return min(MAX_CALIBRATION, max(1.0 / MAX_CALIBRATION, k))


def _model_rates(ev: Evaluation, arrival: float) -> tuple[float, float | None, float, Callable[[int], float]] | None:
    """Per replica: μ (requests/s at a full batch), the capacity at the SLO (requests/s; ``None`` when even an
    idle replica misses the SLO), the latency calibration (engine speed ÷ model speed), and the mean wait before
    service (slot wait + prefill wait, seconds; ``inf`` unstable) at a replica count. ``None`` when the model
    cannot run (no GPU, token counters or completions unknown, a capacity error).

    One replica is ``ranks`` data-parallel engines, each an M/G/c slot queue with a prefill server
    (:func:`advisor.capacity.queueing.predict_service`, a ``ReplicaService`` from the roofline,
    :mod:`advisor.capacity.perf`): prefill of the observed mean prompt (prompt tokens ÷ admissions: completions +
    the running batch's growth), decode steps at the observed mean context (prompt + half the output; the output the
    finished requests' own mean where the engine histograms it, :attr:`Evaluation.window_generation_tokens_per_request`,
    else generated tokens ÷ completions), and a batch
    cap of the running requests per rank when saturated (:func:`saturated`: the engine's own ceiling), else
    ``min(max_num_seqs, pool ÷ tokens per request)``.

    Calibrated to the engine, so the roofline's assumed efficiency factors do not decide the count:

    * latency: the deployment's online-calibrated model (:func:`advisor.rules.common.latency_model`: decode and
      prefill factors fitted window by window on the engine's TPOT and TTFT, :mod:`advisor.online_calibration`),
      ``k = 1``. Without a calibrated decode factor (a lone evaluation, ``once``) the prior's step and prefill times
      are divided by ``k`` so that the model's TPOT at the observed batch (with the prefill share of GPU time,
      ``1 ÷ (1 − ρ_p)``) equals this window's mean TPOT (a few fixed-point rounds; ``k = 1`` without TPOT
      observations). The returned calibration is the speed against the prior: ``k × r_d``;
    * rate: the SLO's share of the saturated throughput, ``f = capacity at the SLO ÷ μ`` in the calibrated model
      (dimensionless), is applied to the measured service rate: completions per replica when saturated; else the
      completions scaled to the cap by the model's throughput ratio ``(cap ÷ S(cap)) ÷ (B ÷ S(B))`` at the observed
      batch ``B`` (Little's law, so the count never rests on the model's clock); with nothing running, or once the
      model is calibrated online (its clock is then the engine's), the model's — never below the completions per
      replica, which a replica cannot exceed (a measured floor on μ, e.g. a backlog drained at a full batch).
      ``B`` is the window's time-averaged batch (``Evaluation.requests_running_mean``; the newest gauge without
      it), the population Little's law pairs with a window's completions; "saturated" needs that mean at
      :data:`SATURATED_WINDOW_SHARE` of the newest.
    """
    s = ev.stats
    gpu = ev.ctx.gpu
    done = s.requests_finished_per_second if s is not None else None
    if s is None or gpu is None or not done or done <= 0 or ev.replicas_up <= 0:
        return None
    if not s.prompt_tokens_per_second or not s.generation_tokens_per_second:
        return None
    # a prompt's tokens are counted when it is prefilled, i.e. admitted to the running batch: per admission
    # (completions + the running batch's growth), not per completion, which at a burst's start divides the burst's
    # prefills by the light phase's completions (the demo: 25,000-token prompts read where 6,000 arrive)
    span = s.covered_seconds
    grown = (s.requests_running or 0.0) - (s.requests_running_first or 0.0)
    admitted = done + (max(0.0, grown) / span if span > 0 and math.isfinite(grown) else 0.0)
    prompt = max(1.0, s.prompt_tokens_per_second / admitted)
    # the finished requests' own lengths where the engine histograms them (the counter ÷ completions counts the
    # running requests' tokens too, and reads long while the batch grows: breaker 25, 538 tokens for 300)
    output = generated_tokens_per_request(ev) or 1.0  # never None here: completions and tokens are known
    # no request outlives max-model-len: tokens generated ÷ completions counts running requests' tokens against the
    # few that finished while generations outlast the window (breaker 23: ~11,663 tokens a request at max-model-len
    # 8,192, a capacity at the SLO of 0.02 requests/s where one replica served 0.6 within it)
    output = min(output, max(1.0, float(ev.ctx.capacity.max_model_len) - prompt))
    ranks = data_parallel_ranks(ev)
    inputs = ev.ctx.inputs
    running_now = (s.requests_running or 0.0) / ev.replicas_up / ranks
    # Little's law (L = λW) holds for the time-averaged population, not one sample of it: the window's completions
    # are set against the window's mean batch. The newest gauge alone, against a whole window of completions, read a
    # lull between two requests as a model-clock replica (capacity off by the engine-vs-model speed) and the last
    # request of a drained burst as ~20× the capacity
    mean = ev.requests_running_mean
    running_rank = mean / ev.replicas_up / ranks if mean is not None and math.isfinite(mean) else running_now
    # saturated over the window, not just at its end: at the start of a burst the window's completions are still
    # the light phase's, and taking them as the saturated service rate sized the burst 2x over
    full = saturated(ev) and running_now >= 1 and running_rank >= SATURATED_WINDOW_SHARE * running_now
    if full:
        cap = max(1, math.floor(running_now))
    else:
        pool = (ev.kv_capacity_tokens or ev.ctx.capacity.kv_cache_tokens) / ranks
        cap = max(1, min(int(inputs.max_num_seqs), math.floor(pool / (prompt + output))))
    lam_rank = arrival / ev.replicas_up / ranks
    done_rank = done / ev.replicas_up / ranks
    tpot = summarize(s.tpot)
    model = latency_model(ev)
    online = model.decode.updates > 0  # calibrated on the engine's windows: no per-window fixed point on top
    try:
        step = model.decode_step_model(inputs, gpu, mean_decode_context(prompt, output))
        t_p = model.prefill_busy_seconds(inputs, gpu, prompt)  # the GPU's part; the per-request overhead is TTFT's
        overhead = model.request_overhead_seconds(gpu)
        slo = SLO(ev.ctx.slo.ttft_seconds, ev.ctx.slo.tpot_seconds, ev.ctx.slo.target_ratio)
        workload = Workload(arrival_rate=lam_rank, prompt_tokens=prompt, output_tokens=output)

        def service(k: float) -> ReplicaService:
            return ReplicaService(
                batch_cap=cap,
                prefill_seconds=t_p / k,
                decode_step=lambda b: step(b) / k,
                request_overhead_seconds=overhead,
            )

        k = 1.0
        if not online and tpot is not None and tpot.mean and tpot.mean > 0 and running_rank > 0:
            for _ in range(4):
                mu_k = max_stable_rate(workload, service(k))
                # the model's arrival rate: the observed load (λ ÷ μ measured) of the model's μ when saturated
                lam_model = lam_rank / done_rank * mu_k if full else lam_rank
                rho = min(0.9, lam_model * t_p / k)
                k = _clamp_calibration(k * step(running_rank) / k / (1 - rho) / tpot.mean)
        calibrated = service(k)
        mu_model = max_stable_rate(workload, calibrated)
        at_slo_model = _slo_rate(workload, calibrated, slo, mu_model)
    except (CapacityError, ValueError):
        return None
    if mu_model <= 0:
        return None
    if full:
        mu = done_rank
    elif online:
        # fitted on the engine's own TPOT and TTFT window by window, the model's clock is the engine's: rescaling it
        # by Little's law again counts the same slowness twice (the 1.5x-rate simulation of issue 17 asked for 8
        # replicas where 6 meet the SLO). But never below what the replicas completed over the window: a replica
        # cannot complete faster than its service rate, so the completions are a measured floor on it. A
        # calibration held at its bound is not the engine's clock (breaker 9: a hot replica draining its backlog
        # after a router fault completed ~42/s at a full batch while the model, decode factor at its 2x bound, said
        # 20.4/s, and goodput_below_target paged "replicas 2 -> 3" for the load 2 replicas had just served)
        mu = max(mu_model, done_rank)
    elif running_rank > 0:
        # Little's law on the measured clock: the replica completes ``done_rank`` at a batch of ``running_rank``;
        # at its cap it completes the model's ratio more (throughput B ÷ S(B), S = prefill + output × TPOT(B))
        def throughput(batch: float) -> float:
            return batch / (t_p / k + output * step(batch) / k)

        mu = max(done_rank, done_rank * mu_model / throughput(running_rank))
    else:
        mu = mu_model
    share = None if at_slo_model is None else at_slo_model / mu_model
    to_model = mu_model / mu  # measured requests/s → the model's requests/s (1 unless saturated)

    def wait(replicas: int) -> float:
        load = dataclasses.replace(workload, arrival_rate=arrival / ranks * to_model)
        p = predict_service(load, calibrated, replicas, slo)
        return p.mean_queue_wait_seconds + p.mean_prefill_wait_seconds if p.stable else math.inf

    return mu * ranks, (None if share is None else share * mu * ranks), k * model.decode.ratio, wait


def served_within_slo(ev: Evaluation, done: float) -> float | None:
    """Requests/s each answering replica completed over the window while the window's goodput met its target (the
    SLO's share of requests within TTFT and TPOT) and nothing waits now, or ``None`` (goodput unknown or below
    target, a queue, nothing completed).

    A measured floor on the capacity at the SLO per replica: the replicas just served that rate within the SLO, so
    no model of them may say they cannot (breaker 23: the model's 0.02 requests/s per replica, from a request length
    read past max-model-len, set ``advisor_desired_replicas`` to 30 while one replica served 0.6/s with every request
    within the SLO) — as the completions floor the service rate μ (:func:`_model_rates`)."""
    ratio = ev.goodput.ratio
    if ratio is None or ratio < ev.ctx.slo.target_ratio or done <= 0 or ev.replicas_up <= 0:
        return None
    if ev.stats is None or ev.stats.requests_waiting != 0:
        # requests queued now have not finished: the window's goodput is the past's, and their TTFT is still to come
        return None
    return done / ev.replicas_up


def size_replicas(
    ev: Evaluation,
    drain_seconds: float | None = None,
    *,
    current: int | None = None,
    min_history_seconds: float = MIN_ARRIVAL_SPAN_SECONDS,
) -> ReplicaSizing | None:
    """The one replica count for ``ev``'s deployment: every rule that proposes replicas asks this.

    1. λ = :func:`arrival_rate` (completions + in-flight growth over the window; never the backlog itself).
    2. Per replica, μ (requests/s at a full batch) and the capacity at the SLO (the most requests/s one replica
       serves with the goodput target met: TTFT from the slot wait, prefill wait and prefill, TPOT from the
       batch, :func:`advisor.capacity.queueing.predict_service`), from the capacity model calibrated to the
       engine (:func:`_model_rates`: its speed to the observed TPOT, the SLO's share of its throughput applied to
       the measured service rate). Random routing splits a Poisson stream into Poisson
       streams, so ``c`` replicas meet the SLO exactly when λ ÷ c ≤ that capacity:
       ``slo_replicas = ceil(λ ÷ capacity at the SLO)``.
       Without a model (no GPU in the catalog, token counters missing): μ = completions per replica when
       saturated (:func:`saturated`), else scaled to the ceiling by Little's law (``× ceiling ÷ running``), and
       :func:`advisor.capacity.queueing.replicas_needed` (M/M/c: utilization ≤ 0.8, mean wait ≤ the TTFT target;
       the capacity at the SLO is then reported as 0.8 μ).
    3. With ``drain_seconds`` (config ``rules.replicas.drain_seconds``), the waiting backlog must also clear in
       that time while arrivals go on: ``drain_replicas = ceil((λ + backlog ÷ drain_seconds) ÷ μ)``.
    4. ``replicas = max(slo_replicas, drain_replicas, 1)``.

    5. Over a history shorter than ``min_history_seconds`` (``rules.replicas.min_history``, default
       :data:`MIN_ARRIVAL_SPAN_SECONDS`; or :data:`MIN_ARRIVAL_SCRAPES` scrapes) the
       sizing carries :attr:`ReplicaSizing.withheld`: its rate is a momentary backlog, not an arrival rate.

    ``current`` (default ``ev.ctx.replicas``) is the count utilizations are stated against. Returns ``None``
    when the arrival or completion rate is unknown or no replica answered.

    Example (measured path): λ = 10/s, μ = 3/s per replica, TTFT 2 s → ``replicas_needed(10, 3, 0.8, 2)`` = 5.

    Raises:
        ValueError: ``drain_seconds`` not a finite number > 0.
    """
    if drain_seconds is not None and (not math.isfinite(drain_seconds) or drain_seconds <= 0):
        raise ValueError(f"drain_seconds must be a finite number > 0, got {drain_seconds!r}")
    rates = arrival_rate(ev.stats)
    s = ev.stats
    if rates is None or s is None or ev.replicas_up <= 0:
        return None
    arrival, done, growth = rates
    cur = ev.ctx.replicas if current is None else current
    backlog = float(s.requests_waiting or 0.0)
    model = _model_rates(ev, arrival)
    k = 1.0
    served = served_within_slo(ev, done)
    if model is not None:
        mu, at_slo, k, wait = model
        method = "model"
        floored = served is not None and (at_slo is None or served > at_slo)
        if served is not None:  # measured beats modelled: the replicas just served this within the SLO
            at_slo = max(at_slo or 0.0, served)
        slo_n = 1 if arrival <= 0 else (math.ceil(arrival / at_slo - 1e-9) if at_slo else 0)
        if at_slo is None:  # even an idle replica misses the SLO: size for stability at the planning utilization
            slo_n = max(1, math.ceil(arrival / (mu * DEFAULT_TARGET_UTILIZATION) - 1e-9))
    else:
        if done <= 0:
            return None
        mu = done / ev.replicas_up
        running = (s.requests_running or 0.0) / ev.replicas_up
        if not saturated(ev) and running > 0:
            ceiling = data_parallel_ranks(ev) * min(float(ev.ctx.inputs.max_num_seqs), rank_concurrency(ev))
            mu *= max(1.0, ceiling / running)
        method = "measured"
        mu_measured = mu

        def wait(replicas: int) -> float:
            return mean_queue_wait_seconds(replicas, arrival, mu_measured)

        try:
            slo_n = replicas_needed(arrival, mu, DEFAULT_TARGET_UTILIZATION, ev.ctx.slo.ttft_seconds)
        except CapacityError:
            return None
        at_slo = mu * DEFAULT_TARGET_UTILIZATION
    slo_n = max(1, slo_n)
    drain_n = None
    if drain_seconds is not None:
        drain_n = max(1, math.ceil((arrival + backlog / drain_seconds) / mu - 1e-9))
    needed = max(slo_n, drain_n or 1)
    util = arrival / (max(cur, 1) * mu)
    util_after = arrival / (needed * mu)
    slo = ev.ctx.slo
    text = (
        f"Requests arrive at ~{arrival:,.2f}/s (completions {done:,.2f}/s {'+' if growth >= 0 else '−'} in-flight "
        f"{'growth' if growth >= 0 else 'shrinkage'} {abs(growth):,.2f}/s over the last {s.covered_seconds:.0f}s). "
        f"One replica completes at most ~{mu:,.2f}/s with its batch full"
    )
    if method == "model" and at_slo is not None:
        text += (
            f", and ~{at_slo:,.2f}/s while {slo.target_ratio:.0%} of requests meet TTFT ≤ {slo.ttft_seconds:g}s and "
            f"TPOT ≤ {slo.tpot_seconds:g}s ("
            + (
                "measured: what each replica served within the SLO over the window, above the queueing model's figure"
                if floored
                else "queueing model" + _calibration_text(ev, k)
            )
            + ")"
        )
    elif method == "model":
        text += "; even one idle replica misses the SLO in the model, so this count only keeps the queue stable"
    else:
        text += (
            f" (measured; sized for ≤ {DEFAULT_TARGET_UTILIZATION:.0%} utilization and a mean wait within the "
            "TTFT target)"
        )
    text += (
        f". {cur} replica(s) run at {util:.0%} of capacity; {needed} run at {util_after:.0%}"
        + (" and meet the SLO" if method == "model" and at_slo is not None and slo_n == needed else "")
        + "."
    )
    if drain_n is not None:
        text += (
            f" Clearing the {backlog:,.0f} waiting within {drain_seconds:g}s while arrivals continue takes {drain_n}."
        )
    return ReplicaSizing(
        arrival_rate=arrival,
        completions_per_second=done,
        inflight_growth_per_second=growth,
        service_rate_per_replica=mu,
        capacity_at_slo_per_replica=at_slo,
        replicas=needed,
        slo_replicas=slo_n,
        drain_replicas=drain_n,
        backlog=backlog,
        current_replicas=cur,
        utilization=util,
        utilization_after=util_after,
        method=method,
        calibration=k,
        explanation=text,
        queue_wait_seconds=_finite(wait(max(cur, 1))),
        queue_wait_seconds_after=_finite(wait(needed)),
        withheld=arrival_history_withheld(ev, min_history_seconds) or room_withheld(ev),
    )


def _calibration_text(ev: Evaluation, k: float) -> str:
    """How the queueing model's speed was calibrated, for the explanation (empty when it is the prior's)."""
    fit = ev.latency
    if fit is not None and fit.model.decode.updates > 0:
        m = fit.model
        return (
            f", its latency model calibrated online over {fit.windows} window(s): decode ×{m.decode.ratio:.2f}, "
            f"prefill ×{m.prefill.ratio:.2f} the published calibration's speed"
        )
    return f", its speed calibrated ×{k:.2f} to the observed TPOT" if abs(k - 1) > 1e-6 else ""


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unstable queue's wait is ``None`` (unbounded)."""
    return None if math.isinf(x) or math.isnan(x) else x
