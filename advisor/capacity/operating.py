"""The capacity pass past the concurrency ceiling, for one configuration: its operating point under traffic.

The lesson's pass ends (``../shared/reference/operating-an-engine.txt``, "A capacity-planning pass"): "KV pool ÷
per-request cache = concurrency ceiling … the hard cap on the batch, and therefore on throughput per replica";
then "Meets throughput and latency targets? Estimate tokens/s at that concurrency, then check the queueing math
against arrival rate." This module is that last step, built from the same parts the dial search
(:mod:`advisor.capacity.search`) and the rules' replica sizing (:mod:`advisor.rules.replicas`) use:

* :func:`replica_service` — one engine's batch cap (``min(max-num-seqs, KV ceiling at the typical context)``),
  its decode step (:func:`advisor.capacity.perf.decode_step_model` at :func:`mean_decode_context`) and its prefill
  (the GPU's part, :func:`advisor.capacity.perf.prefill_batch_roofline` of one prompt; the fitted per-request
  overhead, which holds no GPU, only adds to TTFT); the search builds every candidate replica with it;
* :func:`advisor.capacity.queueing.predict_service`, :func:`~advisor.capacity.queueing.replicas_for_slo` and
  :func:`~advisor.capacity.queueing.max_stable_rate` — the queue, TTFT/TPOT quantiles, goodput and replicas;
* :func:`operating_point` — ``plan``'s answer: the batch actually run, the step, TPOT and tokens/s at that batch
  and at the ceiling, TTFT with the queue wait, utilization, replicas needed, goodput, the verdict and the
  binding constraint (:func:`binding_constraint`, whose docstring defines it).

Two ways to load a configuration: an open arrival stream (``--arrival-rate``, Poisson, as production traffic and
the queueing model see it) or a fixed concurrency (``--concurrency B``: B users, each sending its next request
when the last one finishes — a closed loop, as a fixed-concurrency load test such as vLLM's
``benchmarks/benchmark_serving.py --max-concurrency`` or ``guidellm --rate-type concurrent`` measures it).

One engine = one data-parallel rank (``--dp`` ranks make one replica, each with its own pool and max-num-seqs:
``vllm/config/scheduler.py`` applies the dials per engine). Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from advisor.capacity.hardware import GPUSpec
from advisor.capacity.inputs import CapacityInputs, CapacityResult
from advisor.capacity.perf import (
    DEFAULT_ASSUMPTIONS,
    DecodeStepModel,
    PerfAssumptions,
    PrefillRoofline,
    decode_step_model,
    prefill_batch_roofline,
    prefill_occupancy_seconds,
)
from advisor.capacity.queueing import (
    SLO,
    ReplicaService,
    Workload,
    max_stable_rate,
    predict_service,
    replicas_for_slo,
    share_at_least,
)
from advisor.errors import CapacityError

__all__ = [
    "BINDING_CONSTRAINTS",
    "Binding",
    "OperatingPoint",
    "Quantiles",
    "binding_constraint",
    "idle_latencies",
    "idle_latency_miss",
    "kv_ceiling",
    "mean_decode_context",
    "operating_point",
    "replica_service",
    "slo_unreachable_reason",
]

BINDING_CONSTRAINTS: Final = ("kv_ceiling", "compute", "bandwidth", "queue")
"""The values of :attr:`OperatingPoint.binding_constraint` (``plan --json``'s ``binding_constraint``)."""

Binding = Literal["kv_ceiling", "compute", "bandwidth", "queue"]


def mean_decode_context(prompt_tokens: float, output_tokens: float) -> float:
    """Mean context a decode step reads per sequence, tokens: ``prompt + output ÷ 2`` (a sequence's context grows
    from ``prompt`` to ``prompt + output`` over its decode, linearly). The search, ``plan`` and the rules' replica
    sizing all evaluate the step here."""
    return prompt_tokens + output_tokens / 2


def kv_ceiling(result: CapacityResult, context_tokens: float) -> int:
    """Sequences one engine's KV pool holds at ``context_tokens`` tokens each, whole blocks
    (:meth:`~advisor.capacity.inputs.CapacityResult.concurrency_at` ÷ the data-parallel ranks, floored): the
    lesson's "concurrency ceiling" at the typical context. A sequence holds its whole context by its last token,
    so a batch up to this never preempts.

    Raises:
        CapacityError: a negative or non-finite context.
    """
    ranks = max(1, result.data_parallel_size)
    return math.floor(result.concurrency_at(context_tokens) / ranks + 1e-9)


def replica_service(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    result: CapacityResult,
    workload: Workload,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> ReplicaService:
    """One engine of ``inputs`` as the service model sees it: batch cap ``min(max_num_seqs, KV ceiling at prompt +
    output tokens)`` (:func:`kv_ceiling`), the decode step at :func:`mean_decode_context` and the prefill time of
    a typical prompt (roofline, :mod:`advisor.capacity.perf`, with ``assumptions``).

    Raises:
        CapacityError: the pool cannot hold one typical request; the GPU lacks a bandwidth or FLOP/s figure.
    """
    return _engine(inputs, gpu, result, workload, assumptions)[0]


def _engine(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    result: CapacityResult,
    workload: Workload,
    assumptions: PerfAssumptions,
) -> tuple[ReplicaService, DecodeStepModel, PrefillRoofline, int]:
    """:func:`replica_service` with the parts it is made of: (service, step model, prefill terms, KV ceiling)."""
    typical = workload.prompt_tokens + workload.output_tokens
    ceiling = kv_ceiling(result, typical)
    if ceiling < 1:
        raise CapacityError(
            f"the KV pool ({result.kv_cache_tokens:,} tokens) cannot hold one request of {typical:,.0f} tokens "
            "(prompt + output)"
        )
    step = decode_step_model(
        inputs, gpu, mean_decode_context(workload.prompt_tokens, workload.output_tokens), assumptions
    )
    # the GPU's part of a prefill (one prompt's step, its step overhead); the per-request overhead is TTFT's only
    prefill = prefill_batch_roofline(inputs, gpu, workload.prompt_tokens, 1.0, assumptions)
    cap = min(int(inputs.max_num_seqs), ceiling)
    service = ReplicaService(
        batch_cap=cap,
        prefill_seconds=prefill.seconds,
        decode_step=step,
        request_overhead_seconds=assumptions.prefill_overhead_seconds,
    )
    return service, step, prefill, ceiling


def idle_latencies(service: ReplicaService) -> tuple[float, float]:
    """The best one replica can do, seconds: (TTFT of a lone request = its prefill + the per-request overhead,
    TPOT at batch 1). No replica count beats them: more replicas only shorten the queue."""
    return service.prefill_seconds + service.request_overhead_seconds, service.decode_step(1.0)


def idle_latency_miss(service: ReplicaService, slo: SLO) -> float:
    """By how much the idle latencies (:func:`idle_latencies`) miss the SLO's targets: the larger of TTFT ÷ its
    target and TPOT ÷ its target (≤ 1: both met at batch 1, the goodput ratio is what fails)."""
    first, tpot1 = idle_latencies(service)
    return max(first / slo.ttft_seconds, tpot1 / slo.tpot_seconds)


def slo_unreachable_reason(service: ReplicaService, workload: Workload, slo: SLO, max_replicas: int) -> str:
    """Why no replica count up to ``max_replicas`` meets ``slo`` (when
    :func:`~advisor.capacity.queueing.replicas_for_slo` returns ``None``): the prefill alone exceeds the TTFT
    target, the batch-1 step the TPOT target, or the goodput ratio stays below the target."""
    first, tpot1 = idle_latencies(service)
    if first > slo.ttft_seconds:
        return f"prefill of a {workload.prompt_tokens:g}-token prompt takes {first:.2f} s > TTFT target"
    if tpot1 > slo.tpot_seconds:
        return f"TPOT at batch 1 is {tpot1 * 1e3:.1f} ms > the {slo.tpot_seconds * 1e3:g} ms target"
    return (
        f"the goodput ratio stays below {slo.target_ratio:g} up to {max_replicas} replicas "
        f"(batch cap {service.batch_cap}, TPOT at the cap {service.decode_step(float(service.batch_cap)) * 1e3:.1f} ms)"
    )


@dataclass(frozen=True, slots=True)
class Quantiles:
    """A latency's mean and quantiles, seconds; ``math.inf`` when unbounded (the queue grows without end)."""

    mean: float
    p50: float
    p90: float
    p99: float

    def as_dict(self) -> dict[str, float | None]:
        """``{mean, p50, p90, p99}`` in seconds; ``None`` for unbounded (JSON has no infinity)."""
        return {k: _finite(getattr(self, k)) for k in ("mean", "p50", "p90", "p99")}


@dataclass(frozen=True)
class OperatingPoint:
    """A configuration under a load: what ``plan`` prints past the concurrency ceiling. Per engine (one
    data-parallel rank) unless the name says replica or total; seconds, requests/s, tokens/s.

    Attributes:
        mode: ``arrival_rate`` (an open Poisson stream) or ``concurrency`` (a closed loop of ``concurrency``
            users).
        replicas: replicas the load is spread over; ``data_parallel_size`` engines each.
        max_num_seqs / kv_ceiling / batch_cap: the slot dial, the sequences the pool holds at the typical context
            (:func:`kv_ceiling`), and the smaller of the two (the most an engine runs at once).
        batch: sequences an engine runs on average (the batch the traffic produces, ≤ ``batch_cap``).
        step: the decode step model; ``prefill``: one typical prompt's roofline terms on the GPU (its TTFT adds the
            per-request overhead, ``ReplicaService.request_overhead_seconds``).
        prefill_share: fraction of GPU time spent on prefill at this load (``λ·T_p``), which stretches TPOT.
        step_seconds / tpot_seconds_at_batch / decode_tokens_per_second: at ``batch``; ``*_at_ceiling``: at
            ``batch_cap`` with the engine saturated (its prefill share at :attr:`max_requests_per_second`).
            Decode tokens/s = batch ÷ step (decode alone).
        ttft / tpot: quantiles at this load (the closed loop is deterministic: every quantile is the mean).
        slot_wait_seconds / prefill_wait_seconds: mean wait for a slot and for the GPU's prefill (``inf``:
            unbounded).
        requests_per_second: completions per engine at this load; ``max_requests_per_second``: with the batch
            full (:func:`~advisor.capacity.queueing.max_stable_rate`).
        utilization: ``requests_per_second`` demanded ÷ ``max_requests_per_second`` (> 1: the queue grows).
        output_tokens_per_second_per_replica / _total: output tokens per second produced (never above capacity).
        stable: False when the arrival rate exceeds capacity (the queue grows without bound).
        saturated: what is full: ``slots`` (every slot busy and requests wait for one), ``prefill`` (prefill
            takes all of the GPU's time, open loop only) or ``""``.
        replicas_needed: the fewest replicas meeting the SLO (``None`` without an SLO or an arrival rate, or when
            no count does: :attr:`unreachable`).
        goodput_ratio / meets_slo / breached: the SLO verdict (``None``/``[]`` without an SLO).
        binding_constraint / binding_reason: :func:`binding_constraint`'s answer and its numbers.
        request_overhead_seconds: the per-request time in every TTFT that holds no GPU (tokenization, admission,
            the first flush; :attr:`~advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds`), seconds.
        refused_ratio: share (0–1) of requests the engine refuses at admission, their prompt at least
            ``max_model_len`` under the workload's prompt CV (:func:`~advisor.capacity.queueing.share_at_least`; a
            closed loop, priced at the typical lengths, refuses all or none); a refused request is not good, so
            ``goodput_ratio`` is scaled by ``1 − refused_ratio``.
    """

    mode: Literal["arrival_rate", "concurrency"]
    workload: Workload
    slo: SLO | None
    replicas: int
    data_parallel_size: int
    concurrency: int | None
    max_num_seqs: int
    kv_ceiling: int
    batch_cap: int
    batch: float
    step: DecodeStepModel
    prefill: PrefillRoofline
    prefill_share: float
    step_seconds: float
    tpot_seconds_at_batch: float
    decode_tokens_per_second: float
    step_seconds_at_ceiling: float
    tpot_seconds_at_ceiling: float
    decode_tokens_per_second_at_ceiling: float
    ttft: Quantiles
    tpot: Quantiles
    slot_wait_seconds: float
    prefill_wait_seconds: float
    requests_per_second: float
    max_requests_per_second: float
    utilization: float
    output_tokens_per_second_per_replica: float
    output_tokens_per_second_total: float
    stable: bool
    saturated: Literal["", "slots", "prefill"]
    replicas_needed: int | None
    unreachable: str
    goodput_ratio: float | None
    meets_slo: bool | None
    breached: tuple[str, ...]
    binding_constraint: Binding
    binding_reason: str
    request_overhead_seconds: float = 0.0
    refused_ratio: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """``plan --json``'s keys for the pass past the ceiling (seconds, tokens/s; ``None`` for unbounded)."""
        w = self.workload
        return {
            "mode": self.mode,
            "workload": {
                "arrival_rate": w.arrival_rate if self.mode == "arrival_rate" else None,
                "concurrency": self.concurrency,
                "prompt_tokens": w.prompt_tokens,
                "output_tokens": w.output_tokens,
                "prompt_cv": w.prompt_cv,
                "output_cv": w.output_cv,
            },
            "slo": None
            if self.slo is None
            else {
                "ttft_seconds": self.slo.ttft_seconds,
                "tpot_seconds": self.slo.tpot_seconds,
                "target_ratio": self.slo.target_ratio,
            },
            "replicas": self.replicas,
            "batch": round(self.batch, 3),
            "batch_cap": self.batch_cap,
            "kv_ceiling_sequences": self.kv_ceiling,
            "decode": {
                "at_batch": {
                    "batch": round(self.batch, 3),
                    "step_seconds": self.step_seconds,
                    "tpot_seconds": _finite(self.tpot_seconds_at_batch),
                    "decode_tokens_per_second": self.decode_tokens_per_second,
                },
                "at_ceiling": {
                    "batch": self.batch_cap,
                    "step_seconds": self.step_seconds_at_ceiling,
                    "tpot_seconds": _finite(self.tpot_seconds_at_ceiling),
                    "decode_tokens_per_second": self.decode_tokens_per_second_at_ceiling,
                },
            },
            "prefill_seconds": self.prefill.seconds,
            "prefill_compute_bound": self.prefill.compute_bound,
            "prefill_share": _finite(self.prefill_share),
            "slot_wait_seconds": _finite(self.slot_wait_seconds),
            "prefill_wait_seconds": _finite(self.prefill_wait_seconds),
            "request_overhead_seconds": self.request_overhead_seconds,
            "ttft_seconds": self.ttft.as_dict(),
            "tpot_seconds": self.tpot.as_dict(),
            "requests_per_second_per_replica": self.requests_per_second * self.data_parallel_size,
            "max_requests_per_second_per_replica": self.max_requests_per_second * self.data_parallel_size,
            "utilization": self.utilization,
            "stable": self.stable,
            "output_tokens_per_second": {
                "per_replica": self.output_tokens_per_second_per_replica,
                "total": self.output_tokens_per_second_total,
            },
            "replicas_needed": self.replicas_needed,
            "goodput_ratio": self.goodput_ratio,
            "refused_ratio": self.refused_ratio,
            "meets_slo": self.meets_slo,
            "breached": list(self.breached),
            "binding_constraint": self.binding_constraint,
            "binding_reason": self.binding_reason,
        }


def _finite(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else x


def _closed_loop(
    batch: float, step: float, t_p: float, n_out: float, overhead: float = 0.0, busy: float | None = None
) -> tuple[float, float]:
    """(prefill's share ``u`` of GPU time, mean prefill wait ``W_p`` in seconds) for ``batch`` sequences in
    service in a closed loop (the next request is admitted as one leaves). ``busy``: the replica time a prefill takes
    from the others' work where it is below its latency ``t_p`` (pipeline stages,
    :func:`~advisor.capacity.perf.prefill_occupancy_seconds`; ``None`` = ``t_p``): it sets ``u = X·busy`` and the
    wait, ``t_p`` stays in each sequence's cycle.

    Each sequence cycles through a prefill wait, its prefill and ``N`` decode steps stretched by the other
    sequences' prefills (``TPOT = step ÷ (1 − u·(B − 1)/B)``: one user's decode never shares the GPU with a
    prefill): throughput ``X = B ÷ (d + W_p + T_p + N·TPOT)`` and ``u = X·T_p``, ``d`` = ``overhead``, the
    per-request time that holds no GPU (:attr:`~advisor.capacity.queueing.ReplicaService.request_overhead_seconds`).
    The prefill wait is the M/D/1 Pollaczek–Khinchine mean ``u·T_p ÷ (2(1 − u))`` (a load test's prompts are of one
    length; the open loop's formula in ``queueing.py`` with ``c_p = 0``), bounded by the finite population: at most
    the other ``B − 1`` sequences' prefills are ahead (so one user never waits). ``u − X(u)·T_p`` rises with ``u``
    from below 0 at 0 to 1 at 1, so bisection finds the one root. without the wait it is the smaller root of ``u² −
    (1 + a + B)·u + B = 0``, ``a = N·step ÷ T_p``.
    """

    held = t_p if busy is None else min(busy, t_p)

    def wait(u: float) -> float:
        return min(u * held / (2 * (1 - u)), max(0.0, batch - 1) * held)

    others = (batch - 1) / batch  # a decoding sequence is stretched by the other sequences' prefills only
    lo, hi = 0.0, 1.0
    for _ in range(100):
        u = (lo + hi) / 2
        if u - held * batch / (overhead + wait(u) + t_p + n_out * step / (1 - u * others)) < 0:
            lo = u
        else:
            hi = u
    return hi, wait(hi)


def _closed_tpot(step: float, share: float, batch: float) -> float:
    """A closed loop's TPOT, seconds: the step stretched by the other sequences' prefills (:func:`_closed_loop`)."""
    return step / (1 - share * (batch - 1) / batch)


def binding_constraint(
    *,
    stable: bool,
    slots_saturate: bool,
    slot_wait: float,
    prefill_wait: float,
    prefill: PrefillRoofline,
    step: DecodeStepModel,
    batch: float,
    output_tokens: float,
    kv_capped: bool,
) -> tuple[Binding, float]:
    """The binding constraint of an operating point, and the share (0–1) of the deciding quantity it holds.

    The rule, in order:

    1. **The slot queue decides** when the load is unstable (an arrival rate above what the replicas complete
       with their batch full: the queue grows without bound) or when requests wait for a *slot* at least as long
       as their prefill takes (the mean slot wait ≥ ``T_p``: half or more of the mean TTFT before the prefill
       wait is spent queued for admission, so no faster kernel fixes it). It is named by what caps the slots:

       * ``kv_ceiling`` — the slots are full and capped by the KV pool: the ceiling at the typical context
         (prompt + output tokens) is below max-num-seqs. The lesson: "KV pool ÷ per-request cache = concurrency
         ceiling … the hard cap on the batch, and therefore on throughput per replica"; the dials are the pool's
         (quantized weights or KV cache, a higher TP, a bigger GPU, a shorter context) — or more replicas.
       * ``queue`` — otherwise: the replicas run the batch they are allowed (max-num-seqs), or the prompts alone
         saturate the GPU (``λ·T_p ≥ 1``), and the traffic still outruns them: more replicas.

    2. **Otherwise the roofline decides** (Williams, Waterman & Patterson, "Roofline", CACM 2009): a request's
       GPU time is its prefill ``T_p`` plus its share of the decode steps, ``N_out × step(B) ÷ B`` at the batch
       ``B`` actually run. Each part counts as compute-bound when its FLOP time is at least its memory time
       (:attr:`PrefillRoofline.compute_bound`, :meth:`DecodeStepModel.compute_bound`):

       * ``compute`` — the compute-bound parts hold at least half of it: a prefill-heavy load (prompts waiting
         for the GPU's prefill wait on its FLOPs, so the prefill wait belongs here, not to the queue), or decode
         at a batch past the ridge point; a faster tensor rate, FP8 or TP helps;
       * ``bandwidth`` — the memory-bound parts hold more: streaming the weights (and KV) every step dominates,
         as for a large model at a small batch; quantized weights, TP or speculative decoding help (the lesson:
         speculative decoding is "a latency lever for low-batch regimes").

    The constraint is named whether or not the SLO is met: it is what limits this configuration at this load.
    The verdict is separate (:attr:`OperatingPoint.breached`, ``ttft``/``tpot``) and the two read together: a
    TTFT breach under ``queue``/``kv_ceiling`` is the wait for a slot, under ``compute`` the prefill and the
    prompts queued behind it; a TPOT breach under ``bandwidth`` is the weight streaming at this batch, under
    ``compute`` the batch's FLOPs or prefill's share of GPU time, under ``kv_ceiling``/``queue`` the full batch a
    saturated replica runs.

    Returns:
        (constraint, share): for 1 the share of the slot wait in the mean TTFT (1.0 unstable), for 2 the
        compute-bound (``compute``) or memory-bound (``bandwidth``) share of a request's GPU time.
    """
    if not stable or slot_wait >= prefill.seconds:
        share = 1.0 if not stable else slot_wait / (slot_wait + prefill_wait + prefill.seconds)
        return ("kv_ceiling" if slots_saturate and kv_capped else "queue"), share
    b = max(batch, 1.0)
    decode = output_tokens * step(b) / b
    compute = (prefill.seconds if prefill.compute_bound else 0.0) + (decode if step.compute_bound(b) else 0.0)
    total = prefill.seconds + decode
    if compute >= total / 2:
        return "compute", compute / total
    return "bandwidth", (total - compute) / total


def _breached(slo: SLO, ttft_ok: float, tpot_ok: float, meets: bool) -> tuple[str, ...]:
    """The targets missed: each whose own attainment is below the target ratio; when the SLO is missed only
    jointly (goodput = P(TTFT ok) × P(TPOT ok) < target while each alone reaches it), every target not met by
    all requests."""
    if meets:
        return ()
    out = tuple(n for n, ok in (("ttft", ttft_ok), ("tpot", tpot_ok)) if ok < slo.target_ratio)
    return out or tuple(n for n, ok in (("ttft", ttft_ok), ("tpot", tpot_ok)) if ok < 1.0)


def operating_point(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    result: CapacityResult,
    workload: Workload,
    slo: SLO | None = None,
    *,
    replicas: int = 1,
    concurrency: int | None = None,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
    max_replicas: int = 1024,
) -> OperatingPoint:
    """``plan``'s pass past the ceiling for ``replicas`` replicas of ``inputs`` on ``gpu`` (capacity ``result``).

    Open loop (``concurrency`` None): ``workload.arrival_rate`` requests/s split evenly over ``replicas ×
    data_parallel_size`` engines, each :func:`replica_service`, through
    :func:`~advisor.capacity.queueing.predict_service` (Erlang C slot wait, Pollaczek–Khinchine prefill wait,
    size-biased batch; formulas in ``queueing.py``); replicas needed by
    :func:`~advisor.capacity.queueing.replicas_for_slo` — the same calls ``plan --search`` makes per candidate.
    Unstable: TTFT is unbounded; the engine runs its full batch, so TPOT is the step at the ceiling.

    Closed loop (``concurrency = B`` users per replica, no arrival rate): an engine runs ``b = min(B ÷ DP,
    batch_cap)`` (with fewer users than DP ranks, ``B`` engines run one sequence each and the rest idle: never a
    batch below 1); the rest wait for a slot. Prefill takes ``u`` of GPU time and prompts wait ``W_p`` for it
    (:func:`_closed_loop`), TPOT = step(b) ÷ (1 − u), throughput ``X = b ÷ (W_p + T_p + N·TPOT)``, and by
    Little's law each user's cycle is ``B ÷ X``, so the slot wait is ``(B − b) ÷ X`` and TTFT = slot wait + W_p
    + T_p. Deterministic: every quantile is the mean, the goodput ratio 1 or 0.

    Example (``tests/capacity/test_plan_pass.py`` has the four constraints with their arithmetic): Llama-3.1-70B
    bf16, TP 2 on H100-SXM, one user of 1,000 + 500 tokens: each step streams 70.6 GB ÷ 2 per GPU, ≥ 10.5 ms at
    the 3.35 TB/s peak, ×500 ≫ the prefill's ≥ 71 ms at the 989 TFLOP/s peak → ``bandwidth``.

    Raises:
        CapacityError: ``replicas`` or ``concurrency`` < 1; the pool cannot hold one typical request; the GPU
            lacks a bandwidth or FLOP/s figure.
    """
    if replicas < 1:
        raise CapacityError(f"replicas must be ≥ 1, got {replicas}")
    if concurrency is not None and concurrency < 1:
        raise CapacityError(f"concurrency must be ≥ 1, got {concurrency}")
    ranks = max(1, inputs.data_parallel_size)
    engines = replicas * ranks
    service, step, prefill, ceiling = _engine(inputs, gpu, result, workload, assumptions)
    t_p, cap, n_out = prefill.seconds, service.batch_cap, workload.output_tokens
    d = service.request_overhead_seconds  # in TTFT, not in the GPU's time

    def held(sequences: float) -> float:
        # a closed loop's prompts overlap in the pipeline's micro-batches (every user cycles through a prefill); an
        # open loop's prompts arrive one at a time at a modest rate, and a lone prompt's batch holds every batch
        # behind it at each stage (vLLM V1 step_with_batch_queue blocks on the oldest batch): the open loop keeps
        # the whole latency in the prefill's share
        return prefill_occupancy_seconds(inputs, gpu, workload.prompt_tokens, sequences, assumptions)

    if concurrency is None:
        mu = max_stable_rate(workload, service)
        share_full = mu * t_p
    else:  # the closed loop's own ceiling: every slot busy, the next user admitted as one leaves
        share_full, wait_full = _closed_loop(float(cap), step(float(cap)), t_p, n_out, d, held(float(cap)))
        mu = cap / (d + wait_full + t_p + n_out * _closed_tpot(step(float(cap)), share_full, float(cap)))
    tpot_cap = (
        (step(float(cap)) / (1 - share_full) if share_full < 1 else math.inf)
        if concurrency is None
        else _closed_tpot(step(float(cap)), share_full, float(cap))
    )
    slo_for_model = slo or SLO(ttft_seconds=3600.0, tpot_seconds=60.0)
    if concurrency is None:
        p = predict_service(workload, service, engines, slo_for_model)
        stable = p.stable
        lam = workload.arrival_rate / engines
        batch = p.mean_batch
        if stable:
            share = p.prefill_utilization
            ttft = Quantiles(
                d + t_p + p.mean_queue_wait_seconds + p.mean_prefill_wait_seconds,
                p.ttft_p50_seconds,
                p.ttft_p90_seconds,
                p.ttft_p99_seconds,
            )
            tpot = Quantiles(p.tpot_mean_seconds, p.tpot_p50_seconds, p.tpot_p90_seconds, p.tpot_p99_seconds)
            slot_wait, prefill_wait = p.mean_queue_wait_seconds, p.mean_prefill_wait_seconds
        else:
            share = share_full
            ttft = Quantiles(math.inf, math.inf, math.inf, math.inf)
            tpot = Quantiles(tpot_cap, tpot_cap, tpot_cap, tpot_cap)
            slot_wait = prefill_wait = math.inf
        done = min(lam, mu)
        ttft_ok, tpot_ok = p.ttft_attainment, (1.0 if tpot_cap <= slo_for_model.tpot_seconds else 0.0)
        if stable:
            tpot_ok = p.tpot_attainment
        goodput = p.goodput_ratio
        meets = p.meets(slo_for_model)
        saturated: Literal["", "slots", "prefill"] = (
            "" if stable else ("prefill" if p.prefill_utilization >= 1 else "slots")
        )
        needed: int | None = None
        unreachable = ""
        if slo is not None:
            best = replicas_for_slo(workload, service, slo, max_replicas)
            if best is None:
                unreachable = slo_unreachable_reason(service, workload, slo, max_replicas)
            else:
                needed = math.ceil(best.replicas / ranks)
        demanded = lam
    else:
        # fewer users than ranks: each user's engine runs its one sequence, the others idle (never a batch < 1)
        busy = min(ranks, concurrency)
        users = concurrency / busy
        b = min(users, float(cap))
        share, prefill_wait = _closed_loop(b, step(b), t_p, n_out, d, held(b))
        tpot_b = _closed_tpot(step(b), share, b)
        done_busy = b / (d + prefill_wait + t_p + n_out * tpot_b)
        slot_wait = (users - b) / done_busy
        done = done_busy * busy / ranks  # per engine, idle ones included
        ttft = Quantiles(*(slot_wait + prefill_wait + t_p + d,) * 4)
        tpot = Quantiles(*(tpot_b,) * 4)
        batch, stable, demanded = b, True, done
        ttft_ok = 1.0 if ttft.mean <= slo_for_model.ttft_seconds else 0.0
        tpot_ok = 1.0 if tpot_b <= slo_for_model.tpot_seconds else 0.0
        goodput = ttft_ok * tpot_ok
        meets = goodput >= 1.0
        saturated = "slots" if users > cap else ""
        needed, unreachable = None, ""
        p = None
    # prompts the engine refuses (no room for one output token within max_model_len) are not good requests, and no
    # replica count serves them (breaker 26: 25 % of the prompts over max-model-len read "MEETS: goodput 100 %")
    # a closed loop is priced at the typical lengths (every quantile the mean), so its prompts are refused all or none
    cv = workload.prompt_cv if concurrency is None else 0.0
    refused = share_at_least(workload.prompt_tokens, cv, inputs.effective_max_model_len)
    targets_met = meets  # the latency targets alone: what `breached` names (a refusal breaches neither)
    if refused > 0:
        goodput *= 1.0 - refused
        meets = goodput >= (slo_for_model.target_ratio if concurrency is None else 1.0)
        if slo is not None and concurrency is None and 1.0 - refused < slo.target_ratio:
            needed = None
            unreachable = (
                f"{refused:.1%} of the prompts are at least max-model-len {inputs.effective_max_model_len:,} tokens "
                "(the prompt CV's lognormal tail) and are refused, more than the SLO's target ratio allows: raise "
                "max-model-len, or no replica count serves them"
            )
    binding, share_of = binding_constraint(
        stable=stable,
        slots_saturate=saturated == "slots" or (stable and slot_wait >= prefill.seconds),
        slot_wait=slot_wait,
        prefill_wait=prefill_wait,
        prefill=prefill,
        step=step,
        batch=batch,
        output_tokens=n_out,
        kv_capped=ceiling < inputs.max_num_seqs,
    )
    per_replica = done * n_out * ranks
    tpot_batch = tpot.mean if concurrency is not None or not stable else step(max(batch, 1.0)) / (1 - share)
    point = OperatingPoint(
        mode="arrival_rate" if concurrency is None else "concurrency",
        workload=workload,
        slo=slo,
        replicas=replicas,
        data_parallel_size=ranks,
        concurrency=concurrency,
        max_num_seqs=int(inputs.max_num_seqs),
        kv_ceiling=ceiling,
        batch_cap=cap,
        batch=batch,
        step=step,
        prefill=prefill,
        prefill_share=share,
        step_seconds=step(max(batch, 1.0)),
        tpot_seconds_at_batch=tpot_batch,
        decode_tokens_per_second=max(batch, 1.0) / step(max(batch, 1.0)),
        step_seconds_at_ceiling=step(float(cap)),
        tpot_seconds_at_ceiling=tpot_cap,
        decode_tokens_per_second_at_ceiling=cap / step(float(cap)),
        ttft=ttft,
        tpot=tpot,
        slot_wait_seconds=slot_wait,
        prefill_wait_seconds=prefill_wait,
        requests_per_second=done,
        max_requests_per_second=mu,
        utilization=demanded / mu if mu > 0 else math.inf,
        output_tokens_per_second_per_replica=per_replica,
        output_tokens_per_second_total=per_replica * replicas,
        stable=stable,
        saturated=saturated,
        replicas_needed=needed,
        unreachable=unreachable,
        goodput_ratio=None if slo is None else goodput,
        meets_slo=None if slo is None else meets,
        breached=() if slo is None else _breached(slo, ttft_ok, tpot_ok, targets_met),
        binding_constraint=binding,
        binding_reason="",
        request_overhead_seconds=d,
        refused_ratio=refused,
    )
    return dataclasses.replace(point, binding_reason=_binding_reason(point, share_of))


def _ms(seconds: float) -> str:
    if math.isinf(seconds):
        return "unbounded"
    return f"{seconds * 1e3:,.1f} ms" if seconds < 1 else f"{seconds:,.2f} s"


def _binding_reason(op: OperatingPoint, share: float) -> str:
    """One sentence with the numbers behind :attr:`OperatingPoint.binding_constraint`."""
    w = op.workload
    typical = w.prompt_tokens + w.output_tokens
    if op.binding_constraint in ("kv_ceiling", "queue"):
        if not op.stable:
            head = (
                f"the load asks {op.utilization:.0%} of what one engine completes with its batch full "
                f"({op.max_requests_per_second:.3g} req/s): the queue grows without bound"
            )
        else:
            head = (
                f"requests wait {_ms(op.slot_wait_seconds + op.prefill_wait_seconds)} on average before their "
                f"prefill ({_ms(op.prefill.seconds)}): {share:.0%} of the mean TTFT is waiting"
            )
        if op.binding_constraint == "kv_ceiling":
            return (
                f"{head}; the slots are capped by the KV pool, which holds {op.kv_ceiling} sequences of "
                f"{typical:,.0f} tokens, below max-num-seqs {op.max_num_seqs}"
            )
        if op.saturated != "prefill" and op.max_num_seqs < op.kv_ceiling:
            # the operator's own cap binds below what the pool holds: raising it costs no GPU, and is named before
            # replicas (breaker 13: max-num-seqs 2 beside a ceiling of 376 read "more replicas", 8 of them)
            return (
                f"{head}; the batch cap is max-num-seqs {op.max_num_seqs}, below the {op.kv_ceiling} sequences the KV "
                "pool holds: raise max-num-seqs (no GPU added; `plan --search` prices it), or more replicas"
            )
        why = (
            f"prefill alone would take {op.utilization * op.max_requests_per_second * op.prefill.seconds:.0%} "
            "of the GPU's time"
            if op.saturated == "prefill"
            else f"the batch cap is {op.batch_cap} (max-num-seqs {op.max_num_seqs}, KV ceiling {op.kv_ceiling})"
        )
        return f"{head}; {why}: more replicas"
    b = max(op.batch, 1.0)
    decode = w.output_tokens * op.step(b) / b
    if op.binding_constraint == "compute":
        return (
            f"{share:.0%} of a request's GPU time is compute-bound (prefill {_ms(op.prefill.seconds)}"
            f"{'' if op.prefill.compute_bound else ' memory-bound'}, decode {_ms(decode)} at batch {b:.1f}"
            f"{' compute-bound' if op.step.compute_bound(b) else ' memory-bound'})"
        )
    return (
        f"{share:.0%} of a request's GPU time streams weights and KV from memory (decode {_ms(decode)} at batch "
        f"{b:.1f}, step {_ms(op.step(b))}; prefill {_ms(op.prefill.seconds)})"
    )
