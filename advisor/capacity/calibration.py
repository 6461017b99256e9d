"""Online calibration of the roofline's decode and prefill speed, per deployment. Pure: no clock, no I/O.

The roofline (:mod:`advisor.capacity.perf`) predicts a decode step and a prefill from assumed efficiency factors
(:func:`advisor.capacity.perf.assumptions_for`, fitted on published measurements: the *prior*). A running
deployment measures both every evaluation window: its engine's TPOT (or inter-token latency) histogram at the
running batch, and its TTFT (less the queue time, where the engine exports it) at the mean prompt. This module
turns those windows into two dimensionless factors per deployment:

* ``decode`` — the *decode efficiency ratio* ``r_d``: the prior model's decode step ÷ the engine's. The
  calibrated step is ``step_prior(B) ÷ r_d``. Where the step is bandwidth-bound (every decode of a model of a
  billion parameters or more at the batches serving runs) this is exactly calibrated ``memory_bandwidth_efficiency``
  ÷ the prior's; it also absorbs what the roofline leaves out (per-step scheduler/CPU time, kernel launch gaps),
  which a bandwidth factor alone could not where the step is compute-bound (a bandwidth factor has no effect
  there: it would not be identifiable from TPOT, a step factor always is).
* ``prefill`` — the *prefill efficiency ratio* ``r_p``: the prior model's prefill time ÷ the engine's
  (``compute_efficiency`` ÷ the prior's where the prefill is compute-bound).

**The estimator.** Each factor is the state ``x = ln r`` of a scalar Kalman filter (Kalman 1960) with a random
walk, whose one measurement per window is ``z = ln(model time ÷ observed time)``:

* *prior*: ``x₀ = 0`` (the published calibration) with standard deviation :data:`PRIOR_LOG_SD_DECODE` /
  :data:`PRIOR_LOG_SD_PREFILL` — the spread of the published calibration's own error (issue 17's targets: decode
  within 15 % at the median and 35 % at p90, so σ ≈ 0.3 in logs; prefill is ±30–40 % uncalibrated).
* *predict*: ``P ← P + q²`` with :data:`DRIFT_LOG_SD_PER_WINDOW` (an engine upgrade, a changed traffic mix move
  the factor slowly; without process noise the filter would stop listening, Kalman's "divergence").
* *update*: innovation ``ν = z − x``, its variance ``S = P + R`` with ``R`` = :data:`MEASUREMENT_FLOOR_LOG_SD`² +
  :data:`REQUEST_LOG_SD`² ÷ n (the mean of n requests' latencies; a floor for what the model leaves out at any n).
  The update is robust: the normalized innovation ``u = ν ÷ √S`` is clipped by Huber's ψ at ±:data:`HUBER_K`
  (Huber, "Robust estimation of a location parameter", Ann. Math. Stat. 1964; k = 1.345 gives 95 % efficiency
  under normal noise), ``x ← x + (P ÷ √S)·ψ(u)``, and ``P ← P − P²÷S`` only when ``u`` was not clipped (ψ' = 0
  outside ±k): this is Masreliez & Martin's robust Kalman filter ("Robust Bayesian estimation for the linear model
  and robustifying the Kalman filter", IEEE TAC 22(3), 1977) for a scalar state. A window of a burst, a restart or
  a half-filled batch moves the factor by at most ``k·P÷√S`` and does not shrink its variance; a lasting change
  keeps arriving, the variance grows by ``q²`` each window, and the gate opens.
* *a prior that is wrong*: before any window has been taken unclipped, a second clipped innovation on the same side
  as the first is the prior's error, not an outlier (two windows in a row, both beyond ``k`` σ, both one way: the
  filter's divergence, which covariance inflation answers — Mehra, "Approaches to adaptive filtering", IEEE TAC
  17(5), 1972; Xia, Rao, Ying & Shen, "Adaptive fading Kalman filter with an application", Automatica 30(8), 1994).
  ``P`` is then raised to the variance at which that innovation is ``k`` σ (``ν²÷k² − R``), so the window is taken
  almost whole and the gate closes on the engine's value. A prior 5× off (the CPU vLLM of issue 17 acceptance 4 on
  a host slower than the catalog's: 0.7 ms predicted, 3.7 ms a step) converges at the 2nd window instead of the 5th
  or 6th (×1.47 a window at σ 0.3). Once a window has been taken unclipped the estimate is *settled* and the rule
  is off: a lasting change after that opens the gate slowly, as above.
* *bounds*: ``r`` stays within [:data:`RATIO_MIN`, :data:`RATIO_MAX`]; beyond them the model is wrong in kind
  (another GPU, another model), which the exported error shows and no efficiency should hide.

Why this estimator: the factor is one scalar per window, multiplicative (so logs make the noise additive and the
model linear, ``H = 1``: the Kalman filter is then the exact Bayesian update for Gaussian noise, and the
minimum-variance linear one otherwise); it starts from the published calibration and weighs it against each window
by their variances, so a deployment with little traffic keeps the prior and a busy one converges within a window or
two; the random walk keeps it tracking; the Huber clip bounds what one bad window can do. Recursive least squares
with a forgetting factor is the same filter with ``q²`` tied to ``P`` (Ljung & Söderström 1983, §5), without the
prior's weight or the outlier gate.

**Work and overhead.** The prior's time is the roofline's work plus fixed CPU time: the per-step overhead (fixed and
per running sequence) in a decode step, the per-step and per-request overheads in a prefill
(``PerfAssumptions.step_overhead_seconds``, ``step_overhead_per_seq_seconds``, ``prefill_overhead_seconds``, fitted
on published GPU serving). One multiplicative factor on the whole time is right
where the roofline dominates, and wrong in kind where the overhead does: a tiny model on a CPU vLLM (issue 17
acceptance 4) decodes in 0.8–1.5 ms where the prior says 0.5 ms of weight streaming + 1.1 ms of overhead, and
prefills 16 tokens in 2–8 ms where the prior says 0.5 ms + 17 ms of overheads — a factor of 2–7, beyond
:data:`RATIO_MAX`, on work the engine barely does. So each factor carries a second state, the ratio of the engine's
overhead to the prior's (``ln``-normal prior with σ :data:`OVERHEAD_PRIOR_LOG_SD`), and a window's miss is shared
between them by the iterated extended Kalman filter (:func:`robust_split_update`) in proportion to each term's share
of the time and its prior variance. One batch cannot tell the two apart (the split is the priors'); windows at
different batches or prompts can, as the two terms scale differently. With no overhead in the prior it is the
scalar filter above, unchanged.

**Measurement models** (what one window says, at the observed mean batch and lengths, per data-parallel rank),
consistent with :func:`advisor.capacity.queueing.predict_service`, which sizes replicas with this model:

* decode: ``TPOT = step(B) ÷ (1 − ρ_p)`` with ``ρ_p = λ·T_p`` the prefill's share of GPU time (λ completions/s,
  ``T_p`` the GPU's part of the calibrated prefill of the mean prompt: the fitted per-request overhead holds no
  GPU) — so ``z_d = ln(step_prior(B) ÷ ((1 − ρ_p)·TPOT))``. An engine that measures its prompt time itself
  (llama.cpp ``prompt_seconds_total``) gives ``ρ_p`` directly (:attr:`WindowObservation.prefill_share`); llama.cpp
  puts the decoding slots' tokens into its prompt batches, so its TPOT lies between ``step(B)`` and this figure,
  equal where prompt batches are short (the difference is ``ρ_p`` at most: a few % at tens of output tokens per
  prompt);
* prefill: the engine's time from scheduling to the first token, ``TTFT − queue time`` where the engine exports
  its queue time (vLLM), else ``TTFT − W_p`` with ``W_p`` the Pollaczek–Khinchine prefill wait of the calibrated
  model and only when nothing waits — so ``z_p = ln(T_p,prior ÷ observed prefill)``.

The one-step-ahead errors, ``predicted ÷ observed − 1`` with the model before the window's update, are what the
daemon exports (``advisor_model_tpot_error_ratio``, ``advisor_model_ttft_error_ratio``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Final

from advisor.capacity.hardware import GPUSpec
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.perf import (
    DecodeStepModel,
    PerfAssumptions,
    assumptions_for,
    decode_step_model,
)
from advisor.capacity.perf import prefill_seconds as _prefill_seconds
from advisor.errors import CapacityError

__all__ = [
    "DRIFT_LOG_SD_PER_WINDOW",
    "HUBER_K",
    "MEASUREMENT_FLOOR_LOG_SD",
    "MODEL_ERROR_BOUND",
    "OVERHEAD_PRIOR_LOG_SD",
    "OVERHEAD_RATIO_MAX",
    "OVERHEAD_RATIO_MIN",
    "PRIOR_LOG_SD_DECODE",
    "PRIOR_LOG_SD_PREFILL",
    "RATIO_MAX",
    "RATIO_MIN",
    "REQUEST_LOG_SD",
    "CalibrationStep",
    "FactorEstimate",
    "LatencyFit",
    "LatencyModel",
    "WindowObservation",
    "calibrate",
    "robust_split_update",
    "robust_update",
]

PRIOR_LOG_SD_DECODE: Final = 0.30
"""Prior standard deviation of ``ln r_d``: the published calibration's decode error (issue 17 acceptance 2 asks
15 % at the median and 35 % at p90 of held-out TPOT; a log-normal with σ = 0.3 has p90 |error| ≈ 0.39)."""
PRIOR_LOG_SD_PREFILL: Final = 0.40
"""Prior standard deviation of ``ln r_p``: prefill is the less calibrated half (``perf``'s docstring: ±30 % before
the fit; TTFT's held-out target is 25 % at the median, σ ≈ 0.37)."""
DRIFT_LOG_SD_PER_WINDOW: Final = 0.05
"""Random-walk step of ``ln r`` per evaluation window: an efficiency moves by a few percent between windows at most
(traffic mix, an engine upgrade shows up over several windows)."""
MEASUREMENT_FLOOR_LOG_SD: Final = 0.05
"""Noise of one window's measurement however many requests it holds: what the roofline leaves out varies with the
batch's mix (prefill chunks, context spread) by about 5 %."""
REQUEST_LOG_SD: Final = 0.5
"""Spread of one request's ``ln`` latency around the window's mean (request lengths vary; chat traces have output
CVs near 1); the mean of n requests has ``REQUEST_LOG_SD ÷ √n``."""
HUBER_K: Final = 1.345
"""Huber's clip of the normalized innovation (Huber 1964; 1.345 σ keeps 95 % efficiency under Gaussian noise)."""
RATIO_MIN: Final = 0.1
"""Smallest factor: a tenth of the prior's speed (vLLM on a CPU, per-step Python overhead on a tiny model). Slower
means the model is wrong in kind; the error ratio, not the factor, then says so."""
RATIO_MAX: Final = 2.0
"""Largest factor: twice the prior's speed. Efficiency is ``achieved ÷ peak`` ≤ 1, so a prior of 0.5–0.8 leaves
1.25–2×; faster than that means the model counts work the engine does not do (wrong model, prefix caching)."""
MODEL_ERROR_BOUND: Final = 0.25
"""``|predicted ÷ observed − 1|`` of TPOT or TTFT beyond which a deployment's predicted effects lose confidence:
the issue's own bar for a model you can bet a replica count on (acceptance 4: within 25 % on a real engine; a
quarter is also the TTFT target at the median of acceptance 2)."""
OVERHEAD_PRIOR_LOG_SD: Final = 1.5
"""Prior standard deviation of ``ln`` (overhead ÷ the prior's overhead), for the per-step and per-request overheads
(:attr:`~advisor.capacity.perf.PerfAssumptions.step_overhead_seconds`, ``prefill_overhead_seconds``). They are the
least constrained terms of the published fit: a C++ engine with CUDA graphs has almost none, a Python front end
tens of milliseconds, and the fit's own bounds (``advisor/data/perf_calibration.json``: 0–20 ms per step, 0–100 ms
per request, around fitted 1.1 and 15.8 ms) lie about ×20 either way, ±2σ of 1.5 in logs."""
OVERHEAD_RATIO_MIN: Final = 0.02
"""Smallest overhead ratio (a fiftieth of the prior's: 1.1 ms → 22 µs per step, the floor of a C++ loop)."""
OVERHEAD_RATIO_MAX: Final = 50.0
"""Largest overhead ratio (50× the prior's: 1.1 ms → 55 ms per step, a Python engine on a busy CPU)."""
PREFILL_SHARE_MAX: Final = 0.9
"""Prefill share of GPU time ``ρ_p`` above which a window says nothing about decode (TPOT is then mostly prefill
stalls; the same cap the replica sizing uses)."""


@dataclass(frozen=True, slots=True)
class FactorEstimate:
    """One factor's posterior: ``ln r`` (mean) and its variance; ``updates`` windows taken.

    ``ratio = exp(log_ratio)`` is the factor (calibrated speed ÷ the prior model's, dimensionless).
    """

    log_ratio: float
    variance: float
    updates: int = 0
    settled: bool = False
    """Whether a window has been taken unclipped since the prior (the estimate has met the engine once)."""
    last_clip: int = 0
    """The sign of the last window's clipped innovation (+1, −1), 0 when it was not clipped."""

    @property
    def ratio(self) -> float:
        """The factor, ``exp(log_ratio)``."""
        return math.exp(self.log_ratio)


def robust_update(
    est: FactorEstimate, measured_log_ratio: float, measurement_variance: float, drift_variance: float
) -> tuple[FactorEstimate, bool]:
    """One window of the scalar robust Kalman filter (module docstring): predict with ``drift_variance``, update with
    the measurement ``z = measured_log_ratio`` of variance ``measurement_variance`` (both in ``ln`` units), clip at
    :data:`HUBER_K`, bound to [:data:`RATIO_MIN`, :data:`RATIO_MAX`]; a second clipped window on the same side before
    the estimate settled inflates ``P`` first (module docstring, "a prior that is wrong"; then not clipped). Returns
    ``(estimate, clipped)``.

    Example: prior ``x = 0, P = 0.09``, ``z = ln(0.55 ÷ 0.8) = −0.375``, ``R = 0.0025 + 0.25 ÷ 100 = 0.005``,
    ``q² = 0.0025``: ``P = 0.0925, S = 0.0975, u = −1.20`` (not clipped), ``x = −0.356`` (r = 0.70), ``P = 0.0047``.

    Raises:
        ValueError: a variance negative or not finite, or ``z`` not finite.
    """
    if not math.isfinite(measured_log_ratio):
        raise ValueError(f"measured_log_ratio must be finite, got {measured_log_ratio!r}")
    for name, v in (("measurement_variance", measurement_variance), ("drift_variance", drift_variance)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number ≥ 0, got {v!r}")
    p = est.variance + drift_variance
    s = p + measurement_variance
    if s <= 0:
        return dataclasses.replace(est, updates=est.updates + 1), False
    nu = measured_log_ratio - est.log_ratio
    u = nu / math.sqrt(s)
    inflated = _prior_wrong(est, u)
    if inflated:  # the variance at which this innovation is HUBER_K σ: the Kalman step takes it almost whole
        p = max(p, nu * nu / HUBER_K**2 - measurement_variance)
        s = p + measurement_variance
        u = math.copysign(min(abs(nu) / math.sqrt(s), HUBER_K), nu)
    root = math.sqrt(s)
    clipped = abs(u) > HUBER_K
    psi = max(-HUBER_K, min(HUBER_K, u))
    x = est.log_ratio + p / root * psi
    x = max(math.log(RATIO_MIN), min(math.log(RATIO_MAX), x))
    if not clipped:
        p -= p * p / s
    return _after(est, x, p, clipped, u), clipped


def _prior_wrong(est: FactorEstimate, u: float) -> bool:
    """Whether this window's innovation (normalized, ``u``) is the second clipped one in a row, on the same side,
    before any window was taken unclipped: the prior, not the windows, is wrong (see :func:`robust_update`)."""
    return not est.settled and abs(u) > HUBER_K and est.last_clip == (1 if u > 0 else -1)


def _after(est: FactorEstimate, x: float, p: float, clipped: bool, u: float) -> FactorEstimate:
    """``est`` after one window: mean ``x``, variance ``p``, one more update, settled once a window is unclipped, and
    the side of this window's clip."""
    return FactorEstimate(x, p, est.updates + 1, est.settled or not clipped, (1 if u > 0 else -1) if clipped else 0)


def robust_split_update(
    work: FactorEstimate,
    overhead: FactorEstimate,
    work_seconds: float,
    overhead_seconds: float,
    observed_seconds: float,
    measurement_variance: float,
    drift_variance: float,
) -> tuple[FactorEstimate, FactorEstimate, bool]:
    """One window of the two-term filter (module docstring, "Work and overhead"): the prior's time is
    ``work_seconds`` (the roofline) + ``overhead_seconds`` (the fixed CPU time); the model's is
    ``W·e^(−x) + O·e^(y)`` with ``x = work.log_ratio`` (the efficiency factor) and ``y = overhead.log_ratio``; the
    window measured ``observed_seconds``. Returns ``(work, overhead, clipped)``.

    The measurement ``z = ln observed`` is nonlinear in ``(x, y)``; its Jacobian is ``(−w, o)``, the work's and the
    overhead's shares of the model's time. The update is the iterated extended Kalman filter (Gauss–Newton on the
    posterior mode; Bell & Cathey, "The iterated Kalman filter update as a Gauss-Newton method", IEEE TAC 38(2),
    1993) with the two states' covariance kept diagonal (the decoupled EKF, Puskorius & Feldkamp 1991), the same
    Huber clip as :func:`robust_update`, ``x`` bounded to [:data:`RATIO_MIN`, :data:`RATIO_MAX`] and ``y`` to
    [:data:`OVERHEAD_RATIO_MIN`, :data:`OVERHEAD_RATIO_MAX`]. A miss goes to the term that makes up the time and
    is the less certain: to the efficiency where the roofline dominates (a 70B decode: the overhead is a few % of
    the step), to the overhead where the roofline is a sliver (a tiny model on a CPU). With ``overhead_seconds = 0``
    it is :func:`robust_update` of ``z = ln(work_seconds ÷ observed_seconds)`` exactly.

    Example: prior W = 0.5 ms, O = 1.1 ms (1.6 ms), observed 1.1 ms, n = 1000 (R = 0.00275), q² = 0.0025, priors
    σ_x = 0.3, σ_y = 1.5: the innovation ln(1.1 ÷ 1.6) = −0.37 goes almost all to the overhead (at the prior,
    o²P_y ≈ 1.07 against w²P_x ≈ 0.009): after the iterations x = +0.019 (r 1.02), y = −0.588 (overhead 0.61 ms),
    model 0.49 + 0.61 = 1.10 ms.

    Raises:
        ValueError: a time negative or not finite, ``observed_seconds`` ≤ 0, a variance negative or not finite.
    """
    for name, v in (("work_seconds", work_seconds), ("overhead_seconds", overhead_seconds)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number ≥ 0, got {v!r}")
    if not math.isfinite(observed_seconds) or observed_seconds <= 0:
        raise ValueError(f"observed_seconds must be a finite number > 0, got {observed_seconds!r}")
    if overhead_seconds <= 0:
        est, clipped = robust_update(
            work, math.log(work_seconds / observed_seconds), measurement_variance, drift_variance
        )
        return est, overhead, clipped
    if work_seconds <= 0:
        est, clipped = robust_update(
            overhead, math.log(observed_seconds / overhead_seconds), measurement_variance, drift_variance
        )
        return work, est, clipped
    for name, v in (("measurement_variance", measurement_variance), ("drift_variance", drift_variance)):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number ≥ 0, got {v!r}")
    px, py = work.variance + drift_variance, overhead.variance + drift_variance
    x0, y0 = work.log_ratio, overhead.log_ratio
    z = math.log(observed_seconds)
    lo_x, hi_x = math.log(RATIO_MIN), math.log(RATIO_MAX)
    lo_y, hi_y = math.log(OVERHEAD_RATIO_MIN), math.log(OVERHEAD_RATIO_MAX)
    x, y = x0, y0
    tw0, to0 = work_seconds * math.exp(-x0), overhead_seconds * math.exp(y0)
    w0, o0 = tw0 / (tw0 + to0), to0 / (tw0 + to0)
    nu0 = z - math.log(tw0 + to0)
    spread0 = w0 * w0 * px + o0 * o0 * py
    s0 = spread0 + measurement_variance
    # the work factor's side is robust_update's (z = ln(model ÷ observed)): the opposite of this innovation's
    inflated = s0 > 0 and spread0 > 0 and _prior_wrong(work, -nu0 / math.sqrt(s0))
    if inflated:  # as robust_update: both variances scaled so that this innovation is HUBER_K σ at the prior's split
        scale = max(1.0, (nu0 * nu0 / HUBER_K**2 - measurement_variance) / spread0)
        px, py = px * scale, py * scale
    w = o = s = u = 0.0
    for _ in range(20):
        tw, to = work_seconds * math.exp(-x), overhead_seconds * math.exp(y)
        t = tw + to
        w, o = tw / t, to / t
        s = w * w * px + o * o * py + measurement_variance
        if s <= 0:
            break
        root = math.sqrt(s)
        u = (z - math.log(t) + w * (x0 - x) - o * (y0 - y)) / root  # the innovation linearized at (x, y)
        psi = max(-HUBER_K, min(HUBER_K, u))
        nx = max(lo_x, min(hi_x, x0 - px * w / root * psi))
        ny = max(lo_y, min(hi_y, y0 + py * o / root * psi))
        done = abs(nx - x) < 1e-10 and abs(ny - y) < 1e-10
        x, y = nx, ny
        if done:
            break
    clipped = abs(u) > HUBER_K and not inflated
    if not clipped and s > 0:
        px -= (w * px) ** 2 / s
        py -= (o * py) ** 2 / s
    # each term keeps its side in its own scalar filter's sign (the work's ln(model ÷ observed), the overhead's
    # ln(observed ÷ model)), so a term updated alone (the other at 0 s) reads the same history
    return _after(work, x, px, clipped, -u), _after(overhead, y, py, clipped, u), clipped


@dataclass(frozen=True, slots=True)
class WindowObservation:
    """What one evaluation window measured, per data-parallel rank (seconds, tokens, requests/s).

    Attributes:
        batch: mean running sequences over the window (≥ 0).
        context_tokens: mean context of a running sequence, tokens (prompt + half the output).
        prompt_tokens: mean prompt per finished request, tokens (≥ 1); ``None`` unknown (an engine that counts no
            requests, llama.cpp: then no prefill figure is predicted).
        requests_per_second: completions per second (λ of the measurement models); ``None`` unknown (llama.cpp).
        tpot_seconds: mean TPOT (or inter-token latency) of the window's requests; ``None`` unknown.
        tpot_count: requests (or tokens) behind ``tpot_seconds``.
        prefill_seconds: mean time from scheduling to the first token (TTFT − queue time); ``None`` unknown.
        ttft_seconds: mean TTFT, used when ``prefill_seconds`` is unknown and nothing waited; ``None`` unknown.
        ttft_count: requests behind the TTFT figure.
        prompt_cv: coefficient of variation of prompt lengths for the prefill wait (Workload's assumed 0.5).
        prefill_share: the prefill's share of the engine's time as the engine measured it (0–1; llama.cpp's
            ``prompt_seconds_total`` rate); when known, the decode measurement model's ``ρ_p`` is this rather than
            ``λ·T_p`` of the model. ``None`` unknown. A TPOT needs it or ``requests_per_second`` and
            ``prompt_tokens``.
    """

    batch: float
    context_tokens: float
    prompt_tokens: float | None
    requests_per_second: float | None
    tpot_seconds: float | None = None
    tpot_count: float = 0.0
    prefill_seconds: float | None = None
    ttft_seconds: float | None = None
    ttft_count: float = 0.0
    prompt_cv: float = 0.5
    prefill_share: float | None = None


def _prior(sd: float) -> FactorEstimate:
    return FactorEstimate(0.0, sd * sd)


def _prefill_split(seconds: float, a: PerfAssumptions) -> tuple[float, float]:
    """``(work, overhead)`` of the prior's prefill time: its fixed overheads (per step, per sequence for its one
    prompt, and per request, as :func:`advisor.capacity.perf.prefill_roofline` adds them) and the roofline rest."""
    overhead = min(seconds, a.step_overhead_seconds + a.step_overhead_per_seq_seconds + a.prefill_overhead_seconds)
    return seconds - overhead, overhead


def _share(model: LatencyModel, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
    """:meth:`LatencyModel.prefill_share` (module level, so the method's name does not shadow it)."""
    if obs.prefill_share is not None:
        return min(PREFILL_SHARE_MAX, max(0.0, obs.prefill_share))
    if obs.requests_per_second is None or obs.prompt_tokens is None:
        raise ValueError("the prefill share needs the measured share, or the completions/s and the mean prompt")
    t_p = model.prefill_busy_seconds(inputs, gpu, max(1.0, obs.prompt_tokens))
    return min(PREFILL_SHARE_MAX, max(0.0, obs.requests_per_second * t_p))


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """The roofline of :mod:`advisor.capacity.perf` with a deployment's calibrated factors: the prior's efficiency
    factors (:func:`advisor.capacity.perf.assumptions_for` of ``engine`` and the GPU asked about) and the decode and
    prefill ratios (:class:`FactorEstimate`). Same signatures as the ``perf`` functions, without ``assumptions``;
    the rules compute every latency and throughput through one of these.

    ``LatencyModel.prior(engine)`` is the published calibration alone (ratios 1). ``prior_assumptions`` pins the
    prior's factors instead (a deployment whose context states them, :attr:`DeploymentContext.perf_assumptions
    <advisor.rules.base.DeploymentContext.perf_assumptions>`; ``None``: :func:`assumptions_for` of ``engine`` and
    the GPU asked about).

    ``decode_overhead`` and ``prefill_overhead`` scale the prior's fixed CPU times (the per-step overhead in a decode
    step; the per-step and per-request overheads in a prefill) as ``decode``/``prefill`` scale its roofline work
    (:func:`robust_split_update`): the calibrated step is ``work ÷ r_d + overhead × o_d``.
    """

    engine: str
    decode: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(PRIOR_LOG_SD_DECODE))
    prefill: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(PRIOR_LOG_SD_PREFILL))
    prior_assumptions: PerfAssumptions | None = None
    decode_overhead: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(OVERHEAD_PRIOR_LOG_SD))
    prefill_overhead: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(OVERHEAD_PRIOR_LOG_SD))

    @classmethod
    def prior(cls, engine: str, assumptions: PerfAssumptions | None = None) -> LatencyModel:
        """The published calibration for ``engine`` (factors 1, prior variances); with ``assumptions``, those
        factors as the prior on every GPU."""
        return cls(engine, prior_assumptions=assumptions)

    @property
    def calibrated(self) -> bool:
        """Whether any window updated either factor (else the model is the prior)."""
        return self.decode.updates > 0 or self.prefill.updates > 0

    @property
    def label(self) -> str:
        """``calibrated`` or ``prior``: what the rules' evidence names as the model behind their effects."""
        return "calibrated" if self.calibrated else "prior"

    def assumptions(self, gpu: GPUSpec) -> PerfAssumptions:
        """The prior's efficiency factors on ``gpu``: :attr:`prior_assumptions` when set, else the one source,
        :func:`assumptions_for`."""
        if self.prior_assumptions is not None:
            return self.prior_assumptions
        return assumptions_for(self.engine, gpu)

    def effective_assumptions(self, gpu: GPUSpec) -> PerfAssumptions:
        """The prior's factors with bandwidth (weights, experts and KV reads) × ``r_d`` and compute × ``r_p``: the
        efficiencies the ratios amount to where decode is bandwidth-bound and prefill compute-bound (for display;
        predictions use the ratios)."""
        a = self.assumptions(gpu)
        r_d = self.decode.ratio
        return dataclasses.replace(
            a,
            memory_bandwidth_efficiency=a.memory_bandwidth_efficiency * r_d,
            kv_bandwidth_efficiency=None if a.kv_bandwidth_efficiency is None else a.kv_bandwidth_efficiency * r_d,
            expert_bandwidth_efficiency=(
                None if a.expert_bandwidth_efficiency is None else a.expert_bandwidth_efficiency * r_d
            ),
            compute_efficiency=a.compute_efficiency * self.prefill.ratio,
        )

    def decode_step_model(self, inputs: CapacityInputs, gpu: GPUSpec, mean_context_tokens: float) -> DecodeStepModel:
        """:func:`advisor.capacity.perf.decode_step_model` with its work ÷ ``r_d`` (every roofline time
        coefficient, the serial attention kernel's and the MoE experts' stream; the experts' escape probability is
        not a time) and its per-step and per-sequence overheads × the overhead ratio ``o_d`` (``decode_overhead``).

        Raises:
            CapacityError: as ``perf.decode_step_model``.
        """
        m = decode_step_model(inputs, gpu, mean_context_tokens, self.assumptions(gpu))
        r, o = self.decode.ratio, self.decode_overhead.ratio
        if r == 1.0 and o == 1.0:
            return m
        return dataclasses.replace(
            m,
            memory_fixed=m.memory_fixed / r,
            memory_per_seq=m.memory_per_seq / r,
            compute_per_seq=m.compute_per_seq / r,
            comm_fixed=m.comm_fixed / r,
            comm_per_seq=m.comm_per_seq / r,
            overhead=m.overhead * o,
            expert_memory=m.expert_memory / r,
            attention_memory_per_seq=m.attention_memory_per_seq / r,
            attention_compute_per_seq=m.attention_compute_per_seq / r,
            overhead_per_seq=m.overhead_per_seq * o,
        )

    def tpot_seconds(self, inputs: CapacityInputs, gpu: GPUSpec, batch: float, mean_context_tokens: float) -> float:
        """Seconds per output token at ``batch`` (one decode step, calibrated).

        Raises:
            CapacityError: batch < 1, a negative context; the GPU lacks a bandwidth or FLOP/s figure.
        """
        if not math.isfinite(batch) or batch < 1:
            raise CapacityError(f"batch must be a finite number ≥ 1, got {batch}")
        return self.decode_step_model(inputs, gpu, mean_context_tokens)(batch)

    def decode_tokens_per_second(
        self, inputs: CapacityInputs, gpu: GPUSpec, batch: float, mean_context_tokens: float
    ) -> float:
        """Output tokens per second of one replica at ``batch``: ``batch ÷ TPOT``."""
        return batch / self.tpot_seconds(inputs, gpu, batch, mean_context_tokens)

    def prefill_seconds(self, inputs: CapacityInputs, gpu: GPUSpec, prompt_tokens: float) -> float:
        """:func:`advisor.capacity.perf.prefill_seconds` with its roofline work ÷ ``r_p`` and its overheads (per step
        and per request) × ``o_p`` (``prefill_overhead``).

        Raises:
            CapacityError: as ``perf.prefill_seconds``.
        """
        a = self.assumptions(gpu)
        work, overhead = _prefill_split(_prefill_seconds(inputs, gpu, prompt_tokens, a), a)
        return work / self.prefill.ratio + overhead * self.prefill_overhead.ratio

    def prefill_busy_seconds(self, inputs: CapacityInputs, gpu: GPUSpec, prompt_tokens: float) -> float:
        """The GPU's part of :meth:`prefill_seconds`: it less the per-request overhead
        (:meth:`request_overhead_seconds`), which holds no GPU: ``work ÷ r_p + per-step overhead × o_p``.

        Raises:
            CapacityError: as ``perf.prefill_seconds``.
        """
        return self.prefill_seconds(inputs, gpu, prompt_tokens) - self.request_overhead_seconds(gpu)

    def request_overhead_seconds(self, gpu: GPUSpec) -> float:
        """The per-request part of :meth:`prefill_seconds` (the prior's ``prefill_overhead_seconds`` × ``o_p``): time
        in every TTFT that holds neither the GPU nor a slot (tokenizing and admission beside the engine core,
        :class:`advisor.capacity.queueing.ReplicaService`)."""
        return self.assumptions(gpu).prefill_overhead_seconds * self.prefill_overhead.ratio

    # -- the measurement models -------------------------------------------------------------------------------
    def prefill_share(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """``ρ_p``: the prefill's share of GPU time at the observation (capped at :data:`PREFILL_SHARE_MAX`): the
        engine's own figure where it measures one (:attr:`WindowObservation.prefill_share`), else ``λ·T_p`` with
        ``T_p`` the GPU's part (:meth:`prefill_busy_seconds`).

        Raises:
            ValueError: neither the measured share nor λ and the prompt are known.
        """
        return _share(self, inputs, gpu, obs)

    def predicted_tpot(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """Mean TPOT at the observed batch: ``step(B) ÷ (1 − ρ_p)`` (seconds)."""
        step = self.decode_step_model(inputs, gpu, obs.context_tokens)(max(1.0, obs.batch))
        return step / (1.0 - self.prefill_share(inputs, gpu, obs))

    def prefill_wait(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """Mean wait for the prefill server (Pollaczek–Khinchine, as ``predict_service``):
        ``ρ_p·T_p·(1 + cv²) ÷ (2(1 − ρ_p))`` seconds (``T_p``: the GPU's part).

        Raises:
            ValueError: the observation's prompt is unknown.
        """
        if obs.prompt_tokens is None:
            raise ValueError("the prefill wait needs the observation's mean prompt")
        t_p = self.prefill_busy_seconds(inputs, gpu, max(1.0, obs.prompt_tokens))
        rho = self.prefill_share(inputs, gpu, obs)
        return rho * t_p * (1 + obs.prompt_cv**2) / (2 * (1 - rho))

    def predicted_prefill(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float | None:
        """What the model predicts for the observation's prefill figure (seconds): ``T_p`` against a measured
        ``TTFT − queue time``; ``T_p + W_p`` against a TTFT of a window without a queue; ``None`` without either
        (or without the mean prompt)."""
        if obs.prompt_tokens is None:
            return None
        t_p = self.prefill_seconds(inputs, gpu, max(1.0, obs.prompt_tokens))
        if obs.prefill_seconds is not None:
            return t_p
        if obs.ttft_seconds is not None:
            return t_p + self.prefill_wait(inputs, gpu, obs)
        return None


@dataclass(frozen=True, slots=True)
class CalibrationStep:
    """One window's calibration: the model after it, and the one-step-ahead errors of the model before it.

    Attributes:
        model: the updated :class:`LatencyModel`.
        tpot_error_ratio: predicted ÷ observed mean TPOT − 1 at the observed batch (model before the update);
            ``None`` when the window had no TPOT measurement.
        ttft_error_ratio: predicted ÷ observed prefill figure − 1 (``TTFT − queue time``, or TTFT without a queue);
            ``None`` when the window had none.
        decode_clipped / prefill_clipped: the window's innovation was clipped (an outlier for the filter).
    """

    model: LatencyModel
    tpot_error_ratio: float | None
    ttft_error_ratio: float | None
    decode_clipped: bool = False
    prefill_clipped: bool = False


def _variance(count: float) -> float:
    return MEASUREMENT_FLOOR_LOG_SD**2 + REQUEST_LOG_SD**2 / max(count, 1.0)


def calibrate(
    model: LatencyModel,
    inputs: CapacityInputs,
    gpu: GPUSpec,
    obs: WindowObservation,
    *,
    decode: bool = True,
    drift_variance: float = DRIFT_LOG_SD_PER_WINDOW**2,
) -> CalibrationStep:
    """Update ``model`` with one window (module docstring): errors first (the model before), then prefill, then
    decode with the updated prefill share. ``decode=False`` leaves the decode factor as it is (speculative decoding:
    TPOT then counts accepted draft tokens, which the roofline does not model).

    The prior's step at the observed batch and its prefill of the mean prompt are computed once and split into
    roofline work and fixed overhead; every model's figure is ``work ÷ factor + overhead × overhead ratio`` (the
    measurement models of :class:`LatencyModel`, in closed form), and each update is :func:`robust_split_update`.

    Where the observation carries the engine's measured prefill share (llama.cpp, without a request count or
    histograms: :attr:`WindowObservation.prefill_share`), the decode measurement uses it as ``ρ_p`` and the prefill
    is left as it is unless a prefill figure and the mean prompt are given too.

    Example: Llama-3.1-8B bf16 on one H100-SXM, engine at 0.55 bandwidth efficiency against the prior's 0.80,
    batch 20, 1,150-token context: prior step 6.0 + 20 × 0.056 ms = 7.1 ms, engine's 10.4 ms → TPOT error −32 %;
    after one window of 100 requests ``r_d ≈ 0.70`` (with the plain roofline prior, no overheads).

    Raises:
        CapacityError: the GPU lacks a bandwidth or FLOP/s figure.
        ValueError: neither the measured prefill share nor the completions/s and the mean prompt are known.
    """
    a = model.assumptions(gpu)
    measured = obs.prefill_share
    prompt = obs.prompt_tokens
    if measured is None and (obs.requests_per_second is None or prompt is None):
        raise ValueError("calibrate needs the measured prefill share, or the completions/s and the mean prompt")
    # the prior's prefill of the mean prompt, as (roofline work, fixed overhead); of the overhead, the per-request
    # part (tokenizing and admission beside the engine core) is TTFT's but not GPU time. Unknown prompt (an engine
    # that counts no requests): no prefill figure, and ρ_p is the engine's measured share
    w_p0 = o_p0 = 0.0
    if prompt is not None:
        w_p0, o_p0 = _prefill_split(_prefill_seconds(inputs, gpu, max(1.0, prompt), a), a)
    o_req0 = min(o_p0, a.prefill_overhead_seconds)
    lam = max(0.0, obs.requests_per_second or 0.0)

    def share(prefill: FactorEstimate, overhead: FactorEstimate) -> tuple[float, float, float]:
        """(T_p, its GPU part, ρ_p) of a prefill factor and overhead ratio (ρ_p the measured share when known)."""
        t_p = w_p0 / prefill.ratio + o_p0 * overhead.ratio
        busy = w_p0 / prefill.ratio + (o_p0 - o_req0) * overhead.ratio
        rho = lam * busy if measured is None else max(0.0, measured)
        return t_p, busy, min(PREFILL_SHARE_MAX, rho)

    t_p, busy, rho = share(model.prefill, model.prefill_overhead)
    wait = rho * busy * (1 + obs.prompt_cv**2) / (2 * (1 - rho))
    tpot_err: float | None = None
    ttft_err: float | None = None
    new_prefill, new_p_over, p_clip = model.prefill, model.prefill_overhead, False
    observed_p, predicted_p, figure = None, None, None
    if prompt is None:
        pass  # no prefill of a known prompt to hold a TTFT against
    elif obs.prefill_seconds is not None:
        observed_p = figure = obs.prefill_seconds
        predicted_p = t_p
    elif obs.ttft_seconds is not None:
        figure = obs.ttft_seconds
        observed_p = obs.ttft_seconds - wait
        predicted_p = t_p + wait
    if predicted_p is not None and figure is not None and figure > 0:
        ttft_err = predicted_p / figure - 1
    if observed_p is not None and observed_p > 0:
        new_prefill, new_p_over, p_clip = robust_split_update(
            model.prefill, model.prefill_overhead, w_p0, o_p0, observed_p, _variance(obs.ttft_count), drift_variance
        )
    new_decode, new_d_over, d_clip = model.decode, model.decode_overhead, False
    if obs.tpot_seconds is not None and obs.tpot_seconds > 0 and obs.batch > 0:
        prior_step = decode_step_model(inputs, gpu, obs.context_tokens, a)
        step0 = prior_step(max(1.0, obs.batch))
        o_d0 = min(step0, prior_step.overhead_at(max(1.0, obs.batch)))
        w_d0 = step0 - o_d0
        step = w_d0 / model.decode.ratio + o_d0 * model.decode_overhead.ratio
        tpot_err = step / (1 - rho) / obs.tpot_seconds - 1
        if decode:
            _, _, rho_after = share(new_prefill, new_p_over)
            new_decode, new_d_over, d_clip = robust_split_update(
                model.decode,
                model.decode_overhead,
                w_d0,
                o_d0,
                (1 - rho_after) * obs.tpot_seconds,
                _variance(obs.tpot_count),
                drift_variance,
            )
    return CalibrationStep(
        model=LatencyModel(model.engine, new_decode, new_prefill, model.prior_assumptions, new_d_over, new_p_over),
        tpot_error_ratio=tpot_err,
        ttft_error_ratio=ttft_err,
        decode_clipped=d_clip,
        prefill_clipped=p_clip,
    )


@dataclass(frozen=True, slots=True)
class LatencyFit:
    """A deployment's latency model as the rules, the exporter and the status page read it.

    Attributes:
        model: the calibrated :class:`LatencyModel` (the prior until a window updates it).
        tpot_error_ratio / ttft_error_ratio: the last update's one-step-ahead errors (:class:`CalibrationStep`);
            ``None`` until a window measured them.
        windows: windows that updated the model.
        updated_at: unix seconds of the last update (``None``: never).
        bound: :data:`MODEL_ERROR_BOUND` unless the caller sets another.
        never_because: why no window can update the model with the settings it runs under (the evaluation window
            shorter than an update needs), said where the prior stands; ``None`` when windows can.
    """

    model: LatencyModel
    tpot_error_ratio: float | None = None
    ttft_error_ratio: float | None = None
    windows: int = 0
    updated_at: float | None = None
    bound: float = MODEL_ERROR_BOUND
    never_because: str | None = None

    def beyond_bound(self) -> str | None:
        """Why the model cannot be trusted, in numbers, or ``None``: a one-step-ahead error beyond :attr:`bound`.

        Example: TPOT error −0.31 → ``"the latency model missed the observed mean TPOT by -31% (bound ±25%) …"``.
        """
        parts = [
            f"{name} by {err:+.0%}"
            for name, err in (("mean TPOT", self.tpot_error_ratio), ("TTFT", self.ttft_error_ratio))
            if err is not None and abs(err) > self.bound
        ]
        if not parts:
            return None
        return (
            f"the latency model missed the observed {' and '.join(parts)} (bound ±{self.bound:.0%}) in the last "
            "evaluation window before calibrating on it: predicted latencies, throughputs and replica counts may be "
            "off by as much"
        )

    def evidence(self) -> dict[str, float | str | None]:
        """The fit as recommendation evidence: ``latency_model`` (``calibrated``/``prior``), the factors and the
        errors (rounded; ``None`` for a factor no window measured, as its exported series is absent)."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        def measured(f: FactorEstimate) -> float | None:
            return round(f.ratio, 4) if f.updates else None

        return {
            "latency_model": self.model.label,
            "model_decode_efficiency_ratio": measured(self.model.decode),
            "model_prefill_efficiency_ratio": measured(self.model.prefill),
            "model_tpot_error_ratio": r(self.tpot_error_ratio),
            "model_ttft_error_ratio": r(self.ttft_error_ratio),
        }
