"""Queueing: how many replicas an arrival rate needs (M/M/c, Erlang C, Little's law).

Each replica is modelled as one server completing ``service_rate_per_replica`` requests per second at its
operating batch (requests/s = decode tokens/s ÷ mean output tokens, from :mod:`advisor.capacity.perf`).
Arrivals are Poisson at ``arrival_rate`` requests/s. Formulas (Kleinrock, *Queueing Systems* vol. 1, 1975,
§3.5; Gross & Harris, *Fundamentals of Queueing Theory*, M/M/c):

* offered load ``a = λ / μ`` (Erlangs); utilization ``ρ = a / c``; stable only when ``a < c``.
* Erlang B by the stable recursion ``B(0) = 1, B(k) = a·B(k−1) / (k + a·B(k−1))``.
* Erlang C (probability an arrival waits) ``C = c·B / (c − a·(1 − B))``.
* mean wait in queue ``Wq = C / (c·μ − λ)``; by Little's law (Little, Operations Research 1961) the mean
  queue length is ``Lq = λ·Wq``.

Textbook check: c = 2, a = 1 → C = 1/3; c = 1 reduces to M/M/1 (C = ρ, Wq = ρ / (μ − λ)).

The LLM service model (:func:`predict_service`, :func:`replicas_for_slo`) builds on these; see its own
section below the M/M/c helpers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from advisor.errors import CapacityError

__all__ = [
    "SLO",
    "ReplicaService",
    "ServicePrediction",
    "Workload",
    "erlang_b",
    "erlang_c",
    "is_stable",
    "max_stable_rate",
    "mean_queue_length",
    "mean_queue_wait_seconds",
    "predict_service",
    "replicas_for_slo",
    "replicas_needed",
]

_MAX_REPLICAS = 100_000


def erlang_b(servers: int, offered_load: float) -> float:
    """Blocking probability of M/M/c/c (Erlang B), by the numerically stable recursion. Dimensionless.

    Raises:
        CapacityError: ``servers`` < 1 or ``offered_load`` negative/not finite.
    """
    if servers < 1:
        raise CapacityError(f"servers must be ≥ 1, got {servers}")
    if not math.isfinite(offered_load) or offered_load < 0:
        raise CapacityError(f"offered_load must be a finite number ≥ 0, got {offered_load}")
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return b


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c (Erlang C). Dimensionless, in [0, 1].

    ``offered_load`` is λ/μ in Erlangs. Returns 1.0 when ``offered_load ≥ servers`` (the queue grows
    without bound, so every arrival waits). Example: ``erlang_c(2, 1.0) == 1/3``.

    Raises:
        CapacityError: ``servers`` < 1 or ``offered_load`` negative/not finite.
    """
    b = erlang_b(servers, offered_load)
    if offered_load >= servers:
        return 1.0
    return servers * b / (servers - offered_load * (1.0 - b))


def _check_rates(arrival_rate: float, service_rate: float) -> None:
    if not math.isfinite(arrival_rate) or arrival_rate < 0:
        raise CapacityError(f"arrival_rate must be a finite number ≥ 0 (requests/s), got {arrival_rate}")
    if not math.isfinite(service_rate) or service_rate <= 0:
        raise CapacityError(f"service rate must be a finite number > 0 (requests/s), got {service_rate}")


def mean_queue_wait_seconds(servers: int, arrival_rate: float, service_rate_per_server: float) -> float:
    """Mean time an arrival spends queued before service in M/M/c, seconds: ``C / (c·μ − λ)``.

    Rates are requests per second. Returns ``math.inf`` when unstable (λ ≥ c·μ).

    Raises:
        CapacityError: ``servers`` < 1, a negative arrival rate or a non-positive service rate.
    """
    _check_rates(arrival_rate, service_rate_per_server)
    if servers < 1:
        raise CapacityError(f"servers must be ≥ 1, got {servers}")
    capacity = servers * service_rate_per_server
    if arrival_rate >= capacity:
        return math.inf
    c = erlang_c(servers, arrival_rate / service_rate_per_server)
    return c / (capacity - arrival_rate)


def mean_queue_length(servers: int, arrival_rate: float, service_rate_per_server: float) -> float:
    """Mean number of requests waiting (Little's law: ``Lq = λ·Wq``); ``math.inf`` when unstable."""
    wait = mean_queue_wait_seconds(servers, arrival_rate, service_rate_per_server)
    return math.inf if math.isinf(wait) else arrival_rate * wait


def replicas_needed(
    arrival_rate: float,
    service_rate_per_replica: float,
    target_utilization: float = 0.8,
    max_wait_seconds: float | None = None,
) -> int:
    """The fewest replicas (≥ 1) that keep utilization ``λ / (c·μ)`` at or below ``target_utilization``
    and, when ``max_wait_seconds`` is given, the M/M/c mean queue wait at or below it.

    Rates are requests per second. Example: 10 req/s at 3 req/s per replica and 0.8 target → 5 replicas
    (10 / (5 × 3) = 0.67; 4 replicas would run at 0.83).

    Raises:
        CapacityError: non-positive service rate, negative arrival rate, ``target_utilization`` outside
            (0, 1], a negative ``max_wait_seconds``, or no answer below 100,000 replicas.
    """
    _check_rates(arrival_rate, service_rate_per_replica)
    if not 0.0 < target_utilization <= 1.0:
        raise CapacityError(f"target_utilization must be in (0, 1], got {target_utilization}")
    if max_wait_seconds is not None and (math.isnan(max_wait_seconds) or max_wait_seconds < 0):
        raise CapacityError(f"max_wait_seconds must be ≥ 0, got {max_wait_seconds}")
    if max_wait_seconds == 0 and arrival_rate > 0:
        raise CapacityError("max_wait_seconds=0 cannot be met with arrivals: M/M/c always has some wait")
    offered = arrival_rate / service_rate_per_replica
    c = max(1, math.ceil(offered / target_utilization - 1e-12))
    while c <= _MAX_REPLICAS:
        stable = offered < c or arrival_rate == 0
        if stable and (
            max_wait_seconds is None
            or mean_queue_wait_seconds(c, arrival_rate, service_rate_per_replica) <= max_wait_seconds
        ):
            return c
        c += 1
    raise CapacityError(
        f"no replica count up to {_MAX_REPLICAS} meets the targets for {arrival_rate} req/s at "
        f"{service_rate_per_replica} req/s per replica"
    )


# --- the LLM service model --------------------------------------------------------------------------------
#
# A replica running continuous batching (vLLM, SGLang, TGI …) is modelled as c = batch_cap *slots*: a request
# holds a slot from admission until its last token, so the slots form an M/G/c queue in front of the engine,
# and inside it the prompts share the GPU with the decode steps. Per replica, with λ the replica's share of a
# Poisson stream (random splitting keeps it Poisson):
#
#   prefill      T_p = prefill time of a typical prompt alone; ρ_p = λ·T_p is the fraction of GPU time spent on
#                prefill. Prompts queue for the GPU as M/G/1, Pollaczek–Khinchine:
#                W_p = ρ_p·T_p·(1 + c_p²) / (2(1 − ρ_p))            (c_p = prompt-length CV; DistServe, Zhong et
#                al. OSDI 2024 §3, uses the M/D/1 case c_p = 0 for a prefill instance)
#   decode       TPOT(B) = step(B) / (1 − ρ_p): decode gets the GPU time prefill leaves (time sharing);
#   service      S(L) = W_p + T_p + N_out·TPOT(L), the time a request holds its slot;
#   occupancy    L = λ·S(L) busy slots (Little's law), solved by bisection on [0, c]; stable iff
#                λ·S(c) < c and ρ_p < 1 (with every slot busy the replica completes c/S(c) requests/s, and a
#                waiting queue drains only if that beats λ). The offered load is a = λ·S(L) Erlangs.
#   slot wait    Allen–Cunneen M/G/c: W_q ≈ C(c, a)·S/(c − a) · (c_a² + c_s²)/2 with c_a² = 1 (Poisson) and
#                c_s = N_out·TPOT·c_out / S (Allen, *Probability, Statistics and Queueing Theory*, 1990, §6;
#                for c_a² = 1 this is also Lee & Longton 1959's (1 + c_s²)/2 scaling of M/M/c).
#   TTFT         W_q + W_p + T_p + d, d the per-request overhead that holds neither the GPU nor a slot
#                (ReplicaService.request_overhead_seconds; the fitted serving physics of perfpredict.py). Each
#                wait is 0 with probability 1 − P(wait) and otherwise exponential with the matching mean (exact
#                for M/M/c; the usual tail approximation for M/G/c), P(wait) = C(c, a) and ρ_p; the TTFT
#                distribution is their convolution (closed form, below).
#   TPOT         a request sees batch k with the size-biased M/M/c occupancy k·p_k / a (a request is more
#                likely to be in a big batch), p_k = (1 − C)·(a^k/k!) / Σ_{j<c} a^j/j! for k < c and p_c = C;
#                its TPOT is TPOT(k). Treating the instantaneous TPOT as the request's is conservative: a
#                request's mean TPOT averages over the batches it lives through.
#   goodput      ratio = P(TTFT ≤ target) × P(TPOT ≤ target) (independence, as the live telemetry computes
#                it); goodput tokens/s = λ_total × ratio × N_out.
#
# Error: exact for M/M/c (tests check the limit); the M/G/c corrections are approximations within ~10 % of
# simulation for c_s ≤ 1 (Tijms, *A First Course in Stochastic Models*, 2003, §5.6), smaller than the
# roofline's own error. Not modelled: preemption when the KV pool overflows (the batch cap excludes it by
# construction), prefix caching, speculative decoding, routing smarter than random.


@dataclass(frozen=True)
class Workload:
    """Traffic to serve.

    Attributes:
        arrival_rate: requests per second across all replicas (Poisson).
        prompt_tokens: typical (mean) prompt length, tokens.
        output_tokens: typical (mean) output length, tokens.
        max_context_tokens: worst case, prompt + output tokens of the longest request (sizes max-model-len);
            ``None`` → ``prompt_tokens + output_tokens``.
        prompt_cv: coefficient of variation of prompt lengths (assumed 0.5; 0 = all equal).
        output_cv: coefficient of variation of output lengths (assumed 1.0, as for exponentially distributed
            lengths; chat traces such as ShareGPT are of this order).
    """

    arrival_rate: float
    prompt_tokens: float
    output_tokens: float
    max_context_tokens: int | None = None
    prompt_cv: float = 0.5
    output_cv: float = 1.0

    def __post_init__(self) -> None:
        problems: list[str] = []
        for name in ("arrival_rate", "prompt_cv", "output_cv"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                problems.append(f"{name} must be a finite number ≥ 0, got {v}")
        for name in ("prompt_tokens", "output_tokens"):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 1:
                problems.append(f"{name} must be a finite number ≥ 1, got {v}")
        if self.max_context_tokens is not None and self.max_context_tokens < self.prompt_tokens + self.output_tokens:
            problems.append(
                f"max_context_tokens ({self.max_context_tokens}) must be at least prompt + output tokens "
                f"({self.prompt_tokens + self.output_tokens:g})"
            )
        if problems:
            raise CapacityError("; ".join(problems))

    @property
    def worst_context_tokens(self) -> int:
        """``max_context_tokens`` or the typical prompt + output (tokens)."""
        if self.max_context_tokens is not None:
            return self.max_context_tokens
        return math.ceil(self.prompt_tokens + self.output_tokens)


@dataclass(frozen=True)
class SLO:
    """Latency targets: a request is *good* when its TTFT ≤ ``ttft_seconds`` and its TPOT ≤ ``tpot_seconds``;
    the deployment meets the SLO when the good fraction (goodput ratio) ≥ ``target_ratio``."""

    ttft_seconds: float
    tpot_seconds: float
    target_ratio: float = 0.9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.ttft_seconds) and self.ttft_seconds > 0):
            raise CapacityError(f"ttft_seconds must be > 0, got {self.ttft_seconds}")
        if not (math.isfinite(self.tpot_seconds) and self.tpot_seconds > 0):
            raise CapacityError(f"tpot_seconds must be > 0, got {self.tpot_seconds}")
        if not 0 < self.target_ratio < 1:
            raise CapacityError(f"target_ratio must be in (0, 1), got {self.target_ratio}")


@dataclass(frozen=True)
class ReplicaService:
    """What one replica can do, from the capacity pass and the roofline.

    Attributes:
        batch_cap: sequences it runs at once: ``min(max_num_seqs, KV ceiling at the workload's lengths)``.
        prefill_seconds: the GPU's time to prefill a typical prompt alone, seconds (what other requests wait for
            and what stretches their decode: :func:`advisor.capacity.perf.prefill_batch_seconds` of one prompt).
        decode_step: seconds of one decode step at a batch (a function of the batch, e.g.
            :class:`advisor.capacity.perf.DecodeStepModel`), at the workload's mean context.
        request_overhead_seconds: time every request's first token takes beyond its waits and its prefill without
            holding the GPU or a slot (tokenization, admission, the first flush:
            :attr:`advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds`), seconds; added to TTFT only.
    """

    batch_cap: int
    prefill_seconds: float
    decode_step: Callable[[float], float]
    request_overhead_seconds: float = 0.0


@dataclass(frozen=True)
class ServicePrediction:
    """Predicted behaviour of ``replicas`` replicas under a workload (seconds, requests/s, tokens/s).

    ``stable`` False means the queue grows without bound: latencies are ``inf`` and the goodput ratio 0.
    ``reason`` says which resource saturates (prefill or slots).
    """

    replicas: int
    arrival_rate_per_replica: float
    batch_cap: int
    mean_batch: float
    slot_utilization: float
    prefill_utilization: float
    stable: bool
    wait_probability: float
    mean_queue_wait_seconds: float
    mean_prefill_wait_seconds: float
    ttft_p50_seconds: float
    ttft_p90_seconds: float
    ttft_p99_seconds: float
    tpot_mean_seconds: float
    tpot_p50_seconds: float
    tpot_p90_seconds: float
    tpot_p99_seconds: float
    ttft_attainment: float
    tpot_attainment: float
    goodput_ratio: float
    goodput_tokens_per_second: float
    reason: str = ""

    def meets(self, slo: SLO) -> bool:
        """Whether the goodput ratio reaches the SLO's target."""
        return self.stable and self.goodput_ratio >= slo.target_ratio


def _wait_cdf(t: float, p1: float, m1: float, p2: float, m2: float) -> float:
    """P(W1 + W2 ≤ t) for independent Wi = 0 w.p. 1 − pi, else exponential with mean mi (mixture convolution;
    the sum of two exponentials is hypoexponential: 1 − (r2·e^(−r1 t) − r1·e^(−r2 t)) / (r2 − r1))."""
    if t < 0:
        return 0.0

    def exp_cdf(m: float) -> float:
        return 1.0 if m <= 0 else 1.0 - math.exp(-t / m)

    f1, f2 = exp_cdf(m1), exp_cdf(m2)
    if m1 <= 0 or m2 <= 0:
        both = f1 * f2 if (m1 <= 0 and m2 <= 0) else (f2 if m1 <= 0 else f1)
    else:
        r1, r2 = 1.0 / m1, 1.0 / m2
        if abs(r1 - r2) < 1e-12 * max(r1, r2):
            both = 1.0 - math.exp(-r1 * t) * (1.0 + r1 * t)
        else:
            both = 1.0 - (r2 * math.exp(-r1 * t) - r1 * math.exp(-r2 * t)) / (r2 - r1)
    return (1 - p1) * (1 - p2) + p1 * (1 - p2) * f1 + (1 - p1) * p2 * f2 + p1 * p2 * both


def _occupancy(c: int, a: float, wait_probability: float) -> list[tuple[int, float]]:
    """Size-biased M/M/c occupancy [(k, P)], k = busy slots a request finds itself among (k ≥ 1)."""
    # p_k ∝ a^k / k! for k < c (in logs, normalised over the window that matters), p_c = C.
    if a <= 0:
        return [(1, 1.0)]
    spread = 12.0 * math.sqrt(a) + 12.0
    lo = max(0, int(a - spread))
    hi = min(c - 1, int(a + spread) + 1)
    logs = [(k, k * math.log(a) - math.lgamma(k + 1)) for k in range(lo, hi + 1)]
    top = max(v for _, v in logs) if logs else 0.0
    weights = [(k, math.exp(v - top)) for k, v in logs]
    total = sum(w for _, w in weights)
    states = [(k, (1 - wait_probability) * w / total) for k, w in weights] if total > 0 else []
    states.append((c, wait_probability))
    mean = sum(k * p for k, p in states)
    return [(max(k, 1), k * p / mean) for k, p in states if k > 0 and p > 0]


def _unstable(replicas: int, lam: float, cap: int, rho_p: float, reason: str) -> ServicePrediction:
    inf = math.inf
    return ServicePrediction(
        replicas=replicas,
        arrival_rate_per_replica=lam,
        batch_cap=cap,
        mean_batch=float(cap),
        slot_utilization=1.0,
        prefill_utilization=rho_p,
        stable=False,
        wait_probability=1.0,
        mean_queue_wait_seconds=inf,
        mean_prefill_wait_seconds=inf,
        ttft_p50_seconds=inf,
        ttft_p90_seconds=inf,
        ttft_p99_seconds=inf,
        tpot_mean_seconds=inf,
        tpot_p50_seconds=inf,
        tpot_p90_seconds=inf,
        tpot_p99_seconds=inf,
        ttft_attainment=0.0,
        tpot_attainment=0.0,
        goodput_ratio=0.0,
        goodput_tokens_per_second=0.0,
        reason=reason,
    )


@dataclass(frozen=True, slots=True)
class _Head:
    """What decides a replica's stability (:func:`_head`): per-replica arrival rate λ (requests/s), batch cap,
    prefill time T_p (s), prefill utilization ρ_p, the decode share ``1 − ρ_p``, the mean prefill wait W_p (s),
    output tokens; ``unstable``: why the queue grows without bound, ``None`` when stable."""

    lam: float
    cap: int
    t_p: float
    rho_p: float
    share: float
    w_p: float
    n_out: float
    unstable: str | None


def _tpot(service: ReplicaService, h: _Head, batch: float) -> float:
    """TPOT at ``batch`` busy slots: the decode step stretched by the prefill's share of GPU time (s)."""
    return service.decode_step(max(batch, 1.0)) / h.share


def _service_time(service: ReplicaService, h: _Head, busy: float) -> float:
    """A request's time in a slot at ``busy`` busy slots: prefill wait + prefill + output × TPOT (s)."""
    return h.w_p + h.t_p + h.n_out * _tpot(service, h, busy)


def _head(workload: Workload, service: ReplicaService, replicas: int) -> _Head:
    """The stability checks of :func:`predict_service` (prefill saturation ρ_p ≥ 1; slots saturated
    λ · S(cap) ≥ cap), computed once for it and for :func:`is_stable`.

    Raises:
        CapacityError: ``replicas`` < 1, a batch cap < 1 or a negative prefill time.
    """
    if replicas < 1:
        raise CapacityError(f"replicas must be ≥ 1, got {replicas}")
    cap = service.batch_cap
    if cap < 1:
        raise CapacityError(f"batch_cap must be ≥ 1, got {cap}")
    t_p = service.prefill_seconds
    if not math.isfinite(t_p) or t_p < 0:
        raise CapacityError(f"prefill_seconds must be a finite number ≥ 0, got {t_p}")
    lam = workload.arrival_rate / replicas
    rho_p = lam * t_p
    n_out = workload.output_tokens
    if rho_p >= 1:
        why = f"prefill saturates: {lam:.3g} req/s × {t_p:.3g} s ≥ 1"
        return _Head(lam, cap, t_p, rho_p, math.nan, math.nan, n_out, why)
    share = 1.0 - rho_p
    w_p = rho_p * t_p * (1 + workload.prompt_cv**2) / (2 * share)
    h = _Head(lam, cap, t_p, rho_p, share, w_p, n_out, None)
    full = _service_time(service, h, cap)
    if lam * full >= cap:
        why = f"slots saturate: {lam:.3g} req/s × {full:.3g} s ≥ {cap} sequences"
        return dataclasses.replace(h, unstable=why)
    return h


def is_stable(workload: Workload, service: ReplicaService, replicas: int) -> bool:
    """Whether :func:`predict_service` of the same arguments is ``stable`` — the same checks and arithmetic
    (:func:`_head`) without the quantiles, for searches that only need stability (the largest arrival rate a
    full batch still keeps up with: 50 bisection steps, each a full prediction before — 0.3 s per replica sizing).

    Raises:
        CapacityError: as :func:`predict_service`.
    """
    return _head(workload, service, replicas).unstable is None


def share_at_least(mean: float, cv: float, limit: float) -> float:
    """Share (0–1) of lengths at least ``limit`` tokens when lengths are lognormal with ``mean`` tokens and
    coefficient of variation ``cv`` (``cv`` 0: every length is the mean) — the simulator's length model
    (``advisor.sim.traffic``: ``σ² = ln(1 + cv²)``, ``μ = ln(mean) − σ²/2``), so ``P(X ≥ L) = ½ erfc((ln L − μ) ÷
    (σ√2))``. Used for the prompts an engine refuses: vLLM answers 400 to a prompt with no room for one output token
    within ``max_model_len``.

    Example: mean 1,500, cv 1, limit 1,850 → σ = 0.8326, μ = 6.9670, P = ½ erfc((7.5229 − 6.9670) ÷ 1.1775) = 0.2532.
    """
    if limit <= 0:
        return 1.0
    if mean <= 0:
        return 0.0
    if cv <= 0:
        return 1.0 if mean >= limit else 0.0
    sigma2 = math.log1p(cv * cv)
    mu = math.log(mean) - sigma2 / 2
    return 0.5 * math.erfc((math.log(limit) - mu) / math.sqrt(2 * sigma2))


def max_stable_rate(workload: Workload, service: ReplicaService) -> float:
    """Requests/s one replica (one server of :func:`predict_service`) completes with its batch full: the largest
    arrival rate at which :func:`predict_service` is stable (:func:`is_stable`), by bisection between 0 and the
    smaller of the slots' bound ``cap ÷ S(cap)`` and the prefill's ``1 ÷ T_p``. ``workload``'s own arrival rate
    is not read. Used by ``plan`` (a replica's utilization) and the replica sizing of the rules
    (:mod:`advisor.rules.replicas`).

    Raises:
        CapacityError: as :func:`predict_service`.
    """
    full = service.prefill_seconds + workload.output_tokens * service.decode_step(float(service.batch_cap))
    hi = service.batch_cap / full
    if service.prefill_seconds > 0:
        hi = min(hi, 1.0 / service.prefill_seconds)
    lo = 0.0
    for _ in range(50):
        mid = (lo + hi) / 2
        if is_stable(dataclasses.replace(workload, arrival_rate=mid), service, 1):
            lo = mid
        else:
            hi = mid
    return lo


def predict_service(workload: Workload, service: ReplicaService, replicas: int, slo: SLO) -> ServicePrediction:
    """Queue wait, TTFT/TPOT quantiles and goodput of ``replicas`` replicas (formulas: the section comment
    above this function, in ``queueing.py``).

    Worked example: Llama-3.1-8B bf16 on one H100 (T_p = 0.049 s for 2,000 tokens, step(B) = 6.0 ms +
    0.11 ms·B at a 2,250-token mean context), 4 req/s of 2,000 + 500 tokens: ρ_p = 0.195, TPOT(L) = (6.0 +
    0.11·L) / 0.805 ms, S = 0.007 + 0.049 + 500·TPOT(L), L = 4·S → L ≈ 20.8 busy slots, TPOT ≈ 10.3 ms,
    S ≈ 5.2 s; with 256 slots nobody waits for a slot (C ≈ 0), and TTFT = 0.049 s + the prefill wait
    (PK mean 0.195 × 0.049 × 1.25 / (2 × 0.805) = 7.4 ms).

    Raises:
        CapacityError: ``replicas`` < 1, a batch cap < 1 or a negative prefill time.
    """
    h = _head(workload, service, replicas)
    lam, cap, t_p, rho_p, w_p, n_out = h.lam, h.cap, h.t_p, h.rho_p, h.w_p, h.n_out
    first = t_p + service.request_overhead_seconds  # TTFT without waiting
    if h.unstable is not None:
        return _unstable(replicas, lam, cap, rho_p, h.unstable)

    def tpot(batch: float) -> float:
        return _tpot(service, h, batch)

    def service_time(busy: float) -> float:
        return _service_time(service, h, busy)

    lo, hi = 0.0, float(cap)
    for _ in range(60):
        mid = (lo + hi) / 2
        if lam * service_time(mid) > mid:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-6 * cap:
            break
    busy = hi
    s = service_time(busy)
    a = lam * s
    wait_probability = erlang_c(cap, a) if lam > 0 else 0.0
    cs2 = (n_out * tpot(busy) * workload.output_cv / s) ** 2
    w_q = wait_probability * s / (cap - a) * (1 + cs2) / 2 if lam > 0 else 0.0
    p1, m1 = wait_probability, (w_q / wait_probability if wait_probability > 0 else 0.0)
    p2, m2 = rho_p, (w_p / rho_p if rho_p > 0 else 0.0)

    def ttft_cdf(t: float) -> float:
        return _wait_cdf(t - first, p1, m1, p2, m2)

    def ttft_quantile(q: float) -> float:
        lo_t, hi_t = first, first + 1.0
        while ttft_cdf(hi_t) < q:
            hi_t = first + 2 * (hi_t - first)
        for _ in range(60):
            mid = (lo_t + hi_t) / 2
            if ttft_cdf(mid) < q:
                lo_t = mid
            else:
                hi_t = mid
        return hi_t

    occupancy = _occupancy(cap, a, wait_probability)

    def tpot_quantile(q: float) -> float:
        acc = 0.0
        for k, p in occupancy:
            acc += p
            if acc >= q - 1e-12:
                return tpot(k)
        return tpot(occupancy[-1][0])

    ttft_ok = ttft_cdf(slo.ttft_seconds)
    tpot_ok = sum(p for k, p in occupancy if tpot(k) <= slo.tpot_seconds)
    ratio = ttft_ok * min(1.0, tpot_ok)
    return ServicePrediction(
        replicas=replicas,
        arrival_rate_per_replica=lam,
        batch_cap=cap,
        mean_batch=busy,
        slot_utilization=a / cap,
        prefill_utilization=rho_p,
        stable=True,
        wait_probability=wait_probability,
        mean_queue_wait_seconds=w_q,
        mean_prefill_wait_seconds=w_p,
        ttft_p50_seconds=ttft_quantile(0.5),
        ttft_p90_seconds=ttft_quantile(0.9),
        ttft_p99_seconds=ttft_quantile(0.99),
        tpot_mean_seconds=tpot(busy),
        tpot_p50_seconds=tpot_quantile(0.5),
        tpot_p90_seconds=tpot_quantile(0.9),
        tpot_p99_seconds=tpot_quantile(0.99),
        ttft_attainment=ttft_ok,
        tpot_attainment=min(1.0, tpot_ok),
        goodput_ratio=ratio,
        goodput_tokens_per_second=workload.arrival_rate * ratio * n_out,
    )


def replicas_for_slo(
    workload: Workload, service: ReplicaService, slo: SLO, max_replicas: int = 1024
) -> ServicePrediction | None:
    """The fewest replicas whose goodput ratio reaches ``slo.target_ratio``, with their prediction; ``None``
    when even ``max_replicas`` do not (e.g. one idle replica's TPOT or prefill already misses the target).

    Starts from the stability bound ``ceil(λ·S(cap) / cap)`` and doubles, then bisects: the goodput ratio
    rises with the replica count (each replica gets less traffic).
    """
    idle = predict_service(dataclasses.replace(workload, arrival_rate=0.0), service, 1, slo)
    if not idle.meets(slo):
        return None
    lam = workload.arrival_rate
    if lam == 0:
        return predict_service(workload, service, 1, slo)
    full = service.prefill_seconds + workload.output_tokens * service.decode_step(float(service.batch_cap))
    lo = max(1, math.ceil(lam * full / service.batch_cap), math.ceil(lam * service.prefill_seconds))
    lo = min(lo, max_replicas)
    best = predict_service(workload, service, lo, slo)
    if best.meets(slo):
        return best
    hi = lo
    while True:
        if hi >= max_replicas:
            return None
        hi = min(max_replicas, hi * 2)
        best = predict_service(workload, service, hi, slo)
        if best.meets(slo):
            break
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = predict_service(workload, service, mid, slo)
        if p.meets(slo):
            hi, best = mid, p
        else:
            lo = mid
    return best
