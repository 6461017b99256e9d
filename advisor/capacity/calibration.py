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
* *bounds*: ``r`` stays within [:data:`RATIO_MIN`, :data:`RATIO_MAX`]; beyond them the model is wrong in kind
  (another GPU, another model), which the exported error shows and no efficiency should hide.

Why this estimator: the factor is one scalar per window, multiplicative (so logs make the noise additive and the
model linear, ``H = 1``: the Kalman filter is then the exact Bayesian update for Gaussian noise, and the
minimum-variance linear one otherwise); it starts from the published calibration and weighs it against each window
by their variances, so a deployment with little traffic keeps the prior and a busy one converges within a window or
two; the random walk keeps it tracking; the Huber clip bounds what one bad window can do. Recursive least squares
with a forgetting factor is the same filter with ``q²`` tied to ``P`` (Ljung & Söderström 1983, §5), without the
prior's weight or the outlier gate.

**Measurement models** (what one window says, at the observed mean batch and lengths, per data-parallel rank),
consistent with :func:`advisor.capacity.queueing.predict_service`, which sizes replicas with this model:

* decode: ``TPOT = step(B) ÷ (1 − ρ_p)`` with ``ρ_p = λ·T_p,gpu`` the prefill's share of GPU time (λ
  completions/s, ``T_p,gpu`` the calibrated prefill of the mean prompt less its per-request
  ``prefill_overhead_seconds`` ÷ ``r_p``: tokenization and admission run in vLLM V1's API server beside the engine
  core and stretch TTFT, not the decode steps; :meth:`LatencyModel.prefill_gpu_seconds`) — so
  ``z_d = ln(step_prior(B) ÷ ((1 − ρ_p)·TPOT))``. Counting the overhead as GPU time made ``r_d`` absorb interference
  that is not there: against a simulated engine at 0.35 of peak bandwidth (prior 0.64), ``r_d`` = 0.70 instead of
  0.56 and the simulator run with it 28 % short of the engine's TPOT (``tests/sim/test_simulate_latency_error.py``);
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
from advisor.capacity.perf import DecodeStepModel, PerfAssumptions, assumptions_for, decode_step_model
from advisor.capacity.perf import prefill_seconds as _prefill_seconds
from advisor.errors import CapacityError

__all__ = [
    "DRIFT_LOG_SD_PER_WINDOW",
    "HUBER_K",
    "MEASUREMENT_FLOOR_LOG_SD",
    "MODEL_ERROR_BOUND",
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

    @property
    def ratio(self) -> float:
        """The factor, ``exp(log_ratio)``."""
        return math.exp(self.log_ratio)


def robust_update(
    est: FactorEstimate, measured_log_ratio: float, measurement_variance: float, drift_variance: float
) -> tuple[FactorEstimate, bool]:
    """One window of the scalar robust Kalman filter (module docstring): predict with ``drift_variance``, update with
    the measurement ``z = measured_log_ratio`` of variance ``measurement_variance`` (both in ``ln`` units), clip at
    :data:`HUBER_K`, bound to [:data:`RATIO_MIN`, :data:`RATIO_MAX`]. Returns ``(estimate, clipped)``.

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
    root = math.sqrt(s)
    u = (measured_log_ratio - est.log_ratio) / root
    clipped = abs(u) > HUBER_K
    psi = max(-HUBER_K, min(HUBER_K, u))
    x = est.log_ratio + p / root * psi
    x = max(math.log(RATIO_MIN), min(math.log(RATIO_MAX), x))
    if not clipped:
        p -= p * p / s
    return FactorEstimate(x, p, est.updates + 1), clipped


@dataclass(frozen=True, slots=True)
class WindowObservation:
    """What one evaluation window measured, per data-parallel rank (seconds, tokens, requests/s).

    Attributes:
        batch: mean running sequences over the window (≥ 0).
        context_tokens: mean context of a running sequence, tokens (prompt + half the output).
        prompt_tokens: mean prompt per finished request, tokens (≥ 1).
        requests_per_second: completions per second (λ of the measurement models).
        tpot_seconds: mean TPOT (or inter-token latency) of the window's requests; ``None`` unknown.
        tpot_count: requests (or tokens) behind ``tpot_seconds``.
        prefill_seconds: mean time from scheduling to the first token (TTFT − queue time); ``None`` unknown.
        ttft_seconds: mean TTFT, used when ``prefill_seconds`` is unknown and nothing waited; ``None`` unknown.
        ttft_count: requests behind the TTFT figure.
        prompt_cv: coefficient of variation of prompt lengths for the prefill wait (Workload's assumed 0.5).
    """

    batch: float
    context_tokens: float
    prompt_tokens: float
    requests_per_second: float
    tpot_seconds: float | None = None
    tpot_count: float = 0.0
    prefill_seconds: float | None = None
    ttft_seconds: float | None = None
    ttft_count: float = 0.0
    prompt_cv: float = 0.5


def _prior(sd: float) -> FactorEstimate:
    return FactorEstimate(0.0, sd * sd)


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """The roofline of :mod:`advisor.capacity.perf` with a deployment's calibrated factors: the prior's efficiency
    factors (:func:`advisor.capacity.perf.assumptions_for` of ``engine`` and the GPU asked about) and the decode and
    prefill ratios (:class:`FactorEstimate`). Same signatures as the ``perf`` functions, without ``assumptions``;
    the rules compute every latency and throughput through one of these.

    ``LatencyModel.prior(engine)`` is the published calibration alone (ratios 1).
    """

    engine: str
    decode: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(PRIOR_LOG_SD_DECODE))
    prefill: FactorEstimate = dataclasses.field(default_factory=lambda: _prior(PRIOR_LOG_SD_PREFILL))

    @classmethod
    def prior(cls, engine: str) -> LatencyModel:
        """The published calibration for ``engine`` (factors 1, prior variances)."""
        return cls(engine)

    @property
    def calibrated(self) -> bool:
        """Whether any window updated either factor (else the model is the prior)."""
        return self.decode.updates > 0 or self.prefill.updates > 0

    @property
    def label(self) -> str:
        """``calibrated`` or ``prior``: what the rules' evidence names as the model behind their effects."""
        return "calibrated" if self.calibrated else "prior"

    def assumptions(self, gpu: GPUSpec) -> PerfAssumptions:
        """The prior's efficiency factors on ``gpu`` (the one source: :func:`assumptions_for`)."""
        return assumptions_for(self.engine, gpu)

    def effective_assumptions(self, gpu: GPUSpec) -> PerfAssumptions:
        """The prior's factors with bandwidth × ``r_d`` and compute × ``r_p``: the efficiencies the ratios amount
        to where decode is bandwidth-bound and prefill compute-bound (for display; predictions use the ratios)."""
        a = self.assumptions(gpu)
        return dataclasses.replace(
            a,
            memory_bandwidth_efficiency=a.memory_bandwidth_efficiency * self.decode.ratio,
            compute_efficiency=a.compute_efficiency * self.prefill.ratio,
        )

    def decode_step_model(self, inputs: CapacityInputs, gpu: GPUSpec, mean_context_tokens: float) -> DecodeStepModel:
        """:func:`advisor.capacity.perf.decode_step_model` ÷ ``r_d`` (every coefficient).

        Raises:
            CapacityError: as ``perf.decode_step_model``.
        """
        m = decode_step_model(inputs, gpu, mean_context_tokens, self.assumptions(gpu))
        r = self.decode.ratio
        if r == 1.0:
            return m
        return DecodeStepModel(
            memory_fixed=m.memory_fixed / r,
            memory_per_seq=m.memory_per_seq / r,
            compute_per_seq=m.compute_per_seq / r,
            comm_fixed=m.comm_fixed / r,
            comm_per_seq=m.comm_per_seq / r,
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
        """:func:`advisor.capacity.perf.prefill_seconds` ÷ ``r_p``.

        Raises:
            CapacityError: as ``perf.prefill_seconds``.
        """
        return _prefill_seconds(inputs, gpu, prompt_tokens, self.assumptions(gpu)) / self.prefill.ratio

    # -- the measurement models -------------------------------------------------------------------------------
    def prefill_gpu_seconds(self, inputs: CapacityInputs, gpu: GPUSpec, prompt_tokens: float) -> float:
        """The part of :meth:`prefill_seconds` the engine spends on the GPU: less the per-request
        :attr:`~advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds` ÷ ``r_p`` (tokenization and
        admission, which vLLM V1's API server does beside the engine core: it adds to TTFT, not to GPU time).

        Raises:
            CapacityError: as ``perf.prefill_seconds``.
        """
        a = self.assumptions(gpu)
        whole = _prefill_seconds(inputs, gpu, prompt_tokens, a)
        return max(0.0, whole - a.prefill_overhead_seconds) / self.prefill.ratio

    def prefill_share(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """``ρ_p = λ·T_p,gpu``: the prefill's share of GPU time at the observation (:meth:`prefill_gpu_seconds`;
        capped at :data:`PREFILL_SHARE_MAX`)."""
        t_p = self.prefill_gpu_seconds(inputs, gpu, max(1.0, obs.prompt_tokens))
        return min(PREFILL_SHARE_MAX, max(0.0, obs.requests_per_second * t_p))

    def predicted_tpot(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """Mean TPOT at the observed batch: ``step(B) ÷ (1 − ρ_p)`` (seconds)."""
        step = self.decode_step_model(inputs, gpu, obs.context_tokens)(max(1.0, obs.batch))
        return step / (1.0 - self.prefill_share(inputs, gpu, obs))

    def prefill_wait(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float:
        """Mean wait for the prefill server (Pollaczek–Khinchine, as ``predict_service``):
        ``ρ_p·T_p,gpu·(1 + cv²) ÷ (2(1 − ρ_p))`` seconds (the GPU is the server)."""
        t_p = self.prefill_gpu_seconds(inputs, gpu, max(1.0, obs.prompt_tokens))
        rho = self.prefill_share(inputs, gpu, obs)
        return rho * t_p * (1 + obs.prompt_cv**2) / (2 * (1 - rho))

    def predicted_prefill(self, inputs: CapacityInputs, gpu: GPUSpec, obs: WindowObservation) -> float | None:
        """What the model predicts for the observation's prefill figure (seconds): ``T_p`` against a measured
        ``TTFT − queue time``; ``T_p + W_p`` against a TTFT of a window without a queue; ``None`` without either."""
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

    The prior's step at the observed batch and its prefill of the mean prompt are computed once; every model's
    figure is that ÷ its factor (the measurement models of :class:`LatencyModel`, in closed form).

    Example: Llama-3.1-8B bf16 on one H100-SXM, engine at 0.55 bandwidth efficiency against the prior's 0.80,
    batch 20, 1,150-token context: prior step 6.0 + 20 × 0.056 ms = 7.1 ms, engine's 10.4 ms → TPOT error −32 %;
    after one window of 100 requests ``r_d ≈ 0.70``.

    Raises:
        CapacityError: the GPU lacks a bandwidth or FLOP/s figure.
    """
    a = model.assumptions(gpu)
    t_p0 = _prefill_seconds(inputs, gpu, max(1.0, obs.prompt_tokens), a)  # the prior's prefill of the mean prompt
    gpu0 = max(0.0, t_p0 - a.prefill_overhead_seconds)  # its GPU part (LatencyModel.prefill_gpu_seconds)
    lam = max(0.0, obs.requests_per_second)

    def share(prefill: FactorEstimate) -> tuple[float, float]:
        """(T_p, ρ_p) of a prefill factor (ρ_p of the GPU part)."""
        return t_p0 / prefill.ratio, min(PREFILL_SHARE_MAX, lam * gpu0 / prefill.ratio)

    t_p, rho = share(model.prefill)
    wait = rho * gpu0 / model.prefill.ratio * (1 + obs.prompt_cv**2) / (2 * (1 - rho))
    tpot_err: float | None = None
    ttft_err: float | None = None
    new_prefill, p_clip = model.prefill, False
    observed_p, predicted_p, figure = None, None, None
    if obs.prefill_seconds is not None:
        observed_p = figure = obs.prefill_seconds
        predicted_p = t_p
    elif obs.ttft_seconds is not None:
        figure = obs.ttft_seconds
        observed_p = obs.ttft_seconds - wait
        predicted_p = t_p + wait
    if predicted_p is not None and figure is not None and figure > 0:
        ttft_err = predicted_p / figure - 1
    if observed_p is not None and observed_p > 0:
        z = math.log(t_p0 / observed_p)
        new_prefill, p_clip = robust_update(model.prefill, z, _variance(obs.ttft_count), drift_variance)
    new_decode, d_clip = model.decode, False
    if obs.tpot_seconds is not None and obs.tpot_seconds > 0 and obs.batch > 0:
        step0 = decode_step_model(inputs, gpu, obs.context_tokens, a)(max(1.0, obs.batch))
        tpot_err = step0 / model.decode.ratio / (1 - rho) / obs.tpot_seconds - 1
        if decode:
            _, rho_after = share(new_prefill)
            z = math.log(step0 / ((1 - rho_after) * obs.tpot_seconds))
            new_decode, d_clip = robust_update(model.decode, z, _variance(obs.tpot_count), drift_variance)
    return CalibrationStep(
        model=LatencyModel(model.engine, new_decode, new_prefill),
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
    """

    model: LatencyModel
    tpot_error_ratio: float | None = None
    ttft_error_ratio: float | None = None
    windows: int = 0
    updated_at: float | None = None
    bound: float = MODEL_ERROR_BOUND

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
        errors (rounded)."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "latency_model": self.model.label,
            "model_decode_efficiency_ratio": round(self.model.decode.ratio, 4),
            "model_prefill_efficiency_ratio": round(self.model.prefill.ratio, 4),
            "model_tpot_error_ratio": r(self.tpot_error_ratio),
            "model_ttft_error_ratio": r(self.ttft_error_ratio),
        }
