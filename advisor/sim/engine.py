"""One replica of a continuous-batching engine, one engine step at a time (pure: no I/O, no clock).

The replica follows vLLM's V1 scheduler (``vllm/v1/core/sched/scheduler.py`` ``Scheduler.schedule``, FCFS
policy; KV accounting ``vllm/v1/core/kv_cache_manager.py`` and ``vllm/v1/core/block_pool.py``), step by step:

1. **Running requests first**, oldest first. Each asks for ``num_tokens − num_computed_tokens`` new tokens
   (a prefill chunk, or 1 for a decode step, or ``1 + k`` with ``k`` speculative tokens), capped by what is
   left of the step's token budget ``max_num_batched_tokens`` (chunked prefill) and by ``max_model_len``.
   Its new KV blocks are allocated (``allocate_slots``); when the pool is out of blocks the **newest running
   request is preempted** (``self.running.pop()``), its blocks freed and its computed tokens reset to zero
   (preemption by *recompute*: V1 has no swap), and it goes back to the **front** of the waiting queue
   (``waiting.prepend_request``). If the request being scheduled is itself the newest, it is the one
   preempted and the loop stops.
2. **Waiting requests next, only if nothing was preempted in this step** (``if not preempted_reqs``), in
   queue order, while the token budget lasts and fewer than ``max_num_seqs`` run. A request whose blocks do
   not fit stays at the head of the queue and admission stops (head-of-line, as vLLM does). With prefix
   caching its cached prefix is counted as computed first (``get_computed_blocks``).
3. **The step runs**: its duration comes from :class:`StepCost` — the roofline of
   :mod:`advisor.capacity.perf` applied to the tokens of this step (prefill chunks and decode tokens), the
   weights read once, and the KV bytes every scheduled sequence reads and writes. Every request whose
   computed tokens reach its length samples a token at the end of the step (a prefill's last chunk emits
   the first token); with speculative decoding a decode emits ``1 + accepted`` tokens.

KV blocks: the pool is ``capacity_pass(inputs).kv_cache_blocks`` blocks of ``block_size`` tokens (exactly
the capacity pass's; acceptance test 1). As in vLLM's ``BlockPool``, one block is the reserved null block,
so ``kv_cache_blocks − 1`` are allocatable and usage is ``1 − free ÷ (kv_cache_blocks − 1)``. A request holds
``ceil((computed + new + lookahead) ÷ block_size)`` blocks minus the shared-prefix blocks it references.

Prefix caching (optional, :class:`PrefixCaching`): every prompt begins with a prefix shared by all requests
(a system prompt, few-shot examples); ``hit_rate`` of each prompt's tokens (whole blocks, never the last
token, which vLLM always recomputes) are found in the cache. Those blocks are stored once, referenced by
every running request that uses them, and freed (evictable, counted as free as vLLM counts them) when none
does. The cache is taken to be warm.

Speculative decoding (optional, :class:`Speculative`; Leviathan, Kalman & Matias, "Fast Inference from
Transformers via Speculative Decoding", ICML 2023): a draft proposes ``k`` tokens per running sequence, the
target verifies ``k + 1`` tokens in one forward pass; each draft token is accepted with probability ``α``
until the first rejection, and one more token (the correction or the bonus) is always emitted, so a step
emits ``1 + accepted`` tokens, ``E = (1 − α^{k+1}) / (1 − α)`` on average (Leviathan et al. eq. 1). The
draft costs ``k × draft_cost_ratio`` target decode steps. It is switched off for a step when more than
``disable_by_batch_size`` sequences run (vLLM ``SpeculativeConfig.disable_by_batch_size``,
``vllm/config/speculative.py``). At batch 1 the verify step costs about one decode step (memory-bound:
the weights are read once), so TPOT falls by ≈ E ÷ (1 + k·ratio); at large batches of short contexts the
verify step is compute-bound, ``k + 1`` tokens per sequence cost their FLOPs, and the gain disappears (Llama-3.1-8B
on an H100, 256 sequences of ≈ 200 tokens: no gain) — or speculation is disabled by batch size. With long
contexts the roofline keeps a gain at large batches (the KV is read once for ``k + 1`` tokens), as MagicDec
(Chen et al., 2024) reports.

Two implementations of these rules (issue 15): :class:`ReferenceReplica` is the original loop that touches every
running request on every step, kept unchanged as the oracle; :class:`Replica` (the default everywhere) holds the
requests that are simply decoding as an aggregate *decode cohort* and runs the reference's own ``step`` whenever a
step needs a budget cap, a preemption or speculation. ``tests/sim/test_sim_fast_equals_reference.py`` requires
both to give the same requests, counters, observer calls and ``/metrics`` within 1e-9 relative.

Time is in seconds from the replica's start (``float``); tokens are ``int``.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from advisor.capacity.calibration import LatencyModel
from advisor.capacity.hardware import GPUSpec
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.perf import (
    DEFAULT_ASSUMPTIONS,
    PerfAssumptions,
    decode_step_model,
    pipeline_fill,
    roofline,
)

__all__ = [
    "EngineConfig",
    "PrefixCaching",
    "ReferenceReplica",
    "Replica",
    "ReplicaObserver",
    "SimRequest",
    "Speculative",
    "StepCost",
    "engine_config",
]


@dataclass(frozen=True)
class StepCost:
    """Seconds of one engine step as a function of what it processes (coefficients in seconds)::

        memory  = weights_seconds + kv_seconds_per_token × (context tokens read + new tokens written)
                  + kv_seconds_per_seq × sequences sampled
                  − expert_seconds × expert_untouched_base ^ tokens
        compute = matmul_seconds_per_token × tokens + lm_head_seconds_per_sample × sequences sampled
                  + attention_seconds_per_pair × (query token × context token) pairs
                  + attention_seconds_per_seq × sequences sampled
        serial  = max(serial_kv_seconds_per_token × context tokens read + serial_kv_seconds_per_seq × sampled,
                      serial_attention_seconds_per_pair × pairs + serial_attention_seconds_per_seq × sampled)
        step    = roofline(memory, compute) + comm_fixed_seconds + comm_seconds_per_token × tokens + serial
                  + overhead_seconds + overhead_seconds_per_seq × sequences sampled

    ``roofline`` is :func:`advisor.capacity.perf.roofline` with ``roofline_exponent``
    (:attr:`~advisor.capacity.perf.PerfAssumptions.roofline_exponent`: 0 = the max, 1 = the sum).
    ``overhead_seconds`` is :attr:`~advisor.capacity.perf.PerfAssumptions.step_overhead_seconds` (the engine's CPU
    time per step, 0 in the plain roofline), ``overhead_seconds_per_seq``
    :attr:`~advisor.capacity.perf.PerfAssumptions.step_overhead_per_seq_seconds` (its CPU time per sequence per
    step). ``serial_*`` is the share of attention run as its own kernel after the GEMMs
    (:attr:`~advisor.capacity.perf.PerfAssumptions.attention_serial_fraction`; the ``kv_seconds_per_token`` and
    ``attention_seconds_per_pair`` terms hold the rest), as ``DecodeStepModel.attention_*_per_seq``.

    The ``*_per_seq`` terms are what a sequence reads and attends whatever its length: its windowed layers' window
    and its recurrent layers' state (:func:`advisor.capacity.kvlayout.attended_kv_bytes_per_gpu`); the per-token
    terms are its full-attention layers'. Built by :meth:`from_capacity` from
    :func:`advisor.capacity.perf.decode_step_model` evaluated at ``W`` and ``W + 1`` tokens of context (``W`` the
    model's window, 0 without one) — the advisor's own step model, with its per-step overhead
    (:attr:`~advisor.capacity.perf.PerfAssumptions.step_overhead_seconds`) and, for a MoE model, the routed experts
    no token of the step selects left unread (:func:`~advisor.capacity.perf.untouched_expert_fraction` of the
    step's tokens, as :func:`~advisor.capacity.perf.mixed_step_seconds`) — so a decode-only step of ``B``
    sequences with ``S`` context tokens in all equals ``decode_step_seconds(inputs, gpu, B, S ÷ B)`` exactly when
    ``S ÷ B ≥ W`` (below the window the windowed layers are billed their whole window), and a whole prompt alone in
    one step equals ``prefill_batch_seconds`` up to its extra LM-head row (and, on a windowed model, the windowed
    layers' prefill attention, which the pair term prices at the full layers' rate only). Llama-3.1-8B bf16
    on one H100-SXM with the plain roofline's factors: weights 6.00 ms, KV 48.9 ns per context token, matmul 23.5 µs
    per token (compute-bound above ≈ 255 tokens per step).
    """

    weights_seconds: float
    kv_seconds_per_token: float
    matmul_seconds_per_token: float
    lm_head_seconds_per_sample: float
    attention_seconds_per_pair: float
    comm_fixed_seconds: float
    comm_seconds_per_token: float
    overhead_seconds: float = 0.0
    expert_seconds: float = 0.0
    expert_untouched_base: float = 0.0
    serial_kv_seconds_per_token: float = 0.0
    serial_attention_seconds_per_pair: float = 0.0
    overhead_seconds_per_seq: float = 0.0
    kv_seconds_per_seq: float = 0.0
    attention_seconds_per_seq: float = 0.0
    serial_kv_seconds_per_seq: float = 0.0
    serial_attention_seconds_per_seq: float = 0.0
    roofline_exponent: float = 0.0
    pipeline_stages: int = 1

    @classmethod
    def from_capacity(
        cls, inputs: CapacityInputs, gpu: GPUSpec, assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS
    ) -> StepCost:
        """Coefficients for ``inputs`` on ``gpu``.

        Raises:
            CapacityError: the GPU lacks a bandwidth or FLOP/s figure.
        """
        m = inputs.model
        window = float(m.sliding_window if m.sliding_window_layers else 0)
        m0 = decode_step_model(inputs, gpu, 0.0, assumptions)
        mw = decode_step_model(inputs, gpu, window, assumptions)
        m1 = decode_step_model(inputs, gpu, window + 1.0, assumptions)
        kv = m1.memory_per_seq - mw.memory_per_seq
        pair = m1.compute_per_seq - mw.compute_per_seq
        serial_kv = m1.attention_memory_per_seq - mw.attention_memory_per_seq
        serial_pair = m1.attention_compute_per_seq - mw.attention_compute_per_seq
        # a MoE token multiplies its experts' share only (as perf's decode FLOPs): the LM head's share of that
        total = m.active_parameters() if m.is_moe else m.num_parameters
        body = total - m.norm_parameters() - m.embedding_parameters()
        lm_head = m.vocab_size * m.hidden_size
        lm_share = lm_head / (body + lm_head) if body + lm_head > 0 else 0.0
        return cls(
            weights_seconds=m0.memory_fixed,
            kv_seconds_per_token=kv,
            matmul_seconds_per_token=m0.compute_per_seq * (1.0 - lm_share),
            lm_head_seconds_per_sample=m0.compute_per_seq * lm_share,
            attention_seconds_per_pair=pair,
            comm_fixed_seconds=m0.comm_fixed,
            comm_seconds_per_token=m0.comm_per_seq,
            overhead_seconds=m0.overhead,
            expert_seconds=m0.expert_memory,
            expert_untouched_base=m0.expert_untouched_base,
            serial_kv_seconds_per_token=serial_kv,
            serial_attention_seconds_per_pair=serial_pair,
            overhead_seconds_per_seq=m0.overhead_per_seq,
            kv_seconds_per_seq=max(0.0, mw.memory_per_seq - kv * window),
            attention_seconds_per_seq=max(0.0, mw.compute_per_seq - m0.compute_per_seq - pair * window),
            serial_kv_seconds_per_seq=max(0.0, mw.attention_memory_per_seq - serial_kv * window),
            serial_attention_seconds_per_seq=max(0.0, mw.attention_compute_per_seq - serial_pair * window),
            roofline_exponent=m0.roofline_exponent,
            pipeline_stages=m0.pipeline_stages,
        )

    def scaled(self, decode_ratio: float, prefill_ratio: float, decode_overhead_ratio: float = 1.0) -> StepCost:
        """These coefficients with a deployment's calibrated factors
        (:class:`advisor.capacity.calibration.LatencyModel`): the memory terms (weights, KV, the MoE experts' stream)
        and the all-reduces ÷ ``decode_ratio`` (``r_d``, calibrated decode speed ÷ the prior's), the step overheads
        (fixed and per sequence) × ``decode_overhead_ratio`` (``o_d``), the compute terms (matmul, LM head,
        attention) ÷ ``prefill_ratio``
        (``r_p``). A decode step that is bandwidth-bound (every decode of a model of a billion parameters or more at
        serving batches) then takes exactly ``LatencyModel.decode_step_model(B)``, and a compute-bound prefill's GPU
        time is the calibrated prefill's (calibration.py's reading of the factors: calibrated bandwidth and compute
        efficiency ÷ the prior's, and the fixed CPU time's own ratio).

        Raises:
            ValueError: a ratio not finite and > 0.
        """
        for name, r in (
            ("decode_ratio", decode_ratio),
            ("prefill_ratio", prefill_ratio),
            ("decode_overhead_ratio", decode_overhead_ratio),
        ):
            if not (math.isfinite(r) and r > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {r!r}")
        return StepCost(
            weights_seconds=self.weights_seconds / decode_ratio,
            kv_seconds_per_token=self.kv_seconds_per_token / decode_ratio,
            matmul_seconds_per_token=self.matmul_seconds_per_token / prefill_ratio,
            lm_head_seconds_per_sample=self.lm_head_seconds_per_sample / prefill_ratio,
            attention_seconds_per_pair=self.attention_seconds_per_pair / prefill_ratio,
            comm_fixed_seconds=self.comm_fixed_seconds / decode_ratio,
            comm_seconds_per_token=self.comm_seconds_per_token / decode_ratio,
            overhead_seconds=self.overhead_seconds * decode_overhead_ratio,
            expert_seconds=self.expert_seconds / decode_ratio,
            expert_untouched_base=self.expert_untouched_base,
            serial_kv_seconds_per_token=self.serial_kv_seconds_per_token / decode_ratio,
            serial_attention_seconds_per_pair=self.serial_attention_seconds_per_pair / prefill_ratio,
            overhead_seconds_per_seq=self.overhead_seconds_per_seq * decode_overhead_ratio,
            kv_seconds_per_seq=self.kv_seconds_per_seq / decode_ratio,
            attention_seconds_per_seq=self.attention_seconds_per_seq / prefill_ratio,
            serial_kv_seconds_per_seq=self.serial_kv_seconds_per_seq / decode_ratio,
            serial_attention_seconds_per_seq=self.serial_attention_seconds_per_seq / prefill_ratio,
            roofline_exponent=self.roofline_exponent,
            pipeline_stages=self.pipeline_stages,
        )

    def seconds(self, tokens: int, samples: int, kv_tokens: int, pairs: float) -> float:
        """One step processing ``tokens`` tokens, sampling ``samples`` sequences, touching ``kv_tokens`` KV
        entries and computing ``pairs`` attention (query, key) pairs. At ``pipeline_stages`` PP stages the work that
        grows with the step's sequences is paid ``PP ÷ min(PP, samples)`` times
        (:func:`advisor.capacity.perf.pipeline_fill`): fewer sequences than stages leave stages idle."""
        fill = pipeline_fill(self.pipeline_stages, samples)
        memory = self.weights_seconds + fill * (
            self.kv_seconds_per_token * kv_tokens + self.kv_seconds_per_seq * samples
        )
        if self.expert_seconds:
            memory -= self.expert_seconds * self.expert_untouched_base ** (tokens * fill)
        compute = fill * (
            self.matmul_seconds_per_token * tokens
            + self.lm_head_seconds_per_sample * samples
            + self.attention_seconds_per_pair * pairs
            + self.attention_seconds_per_seq * samples
        )
        serial_kv = fill * (self.serial_kv_seconds_per_token * kv_tokens + self.serial_kv_seconds_per_seq * samples)
        serial_attention = fill * (
            self.serial_attention_seconds_per_pair * pairs + self.serial_attention_seconds_per_seq * samples
        )
        return (
            roofline(memory, compute, self.roofline_exponent)
            + self.comm_fixed_seconds
            + fill * self.comm_seconds_per_token * tokens
            + (serial_kv if serial_kv > serial_attention else serial_attention)
            + self.overhead_seconds
            + self.overhead_seconds_per_seq * samples
        )


@dataclass(frozen=True)
class PrefixCaching:
    """Prefix caching with a shared prefix: ``hit_rate`` (0–1) of each prompt's tokens are cache hits."""

    hit_rate: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.hit_rate <= 1.0:
            raise ValueError(f"prefix caching hit_rate must be in [0, 1], got {self.hit_rate!r}")


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: ``num_speculative_tokens`` (k) drafts per step, each accepted with probability
    ``acceptance_rate`` (α) until the first rejection; the draft costs ``draft_cost_ratio`` of a target decode
    step per drafted token; off for a step when more than ``disable_by_batch_size`` sequences run
    (``None``: never off)."""

    num_speculative_tokens: int = 3
    acceptance_rate: float = 0.7
    draft_cost_ratio: float = 0.05
    disable_by_batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.num_speculative_tokens < 1:
            raise ValueError(f"num_speculative_tokens must be ≥ 1, got {self.num_speculative_tokens}")
        if not 0.0 <= self.acceptance_rate < 1.0:
            raise ValueError(f"acceptance_rate must be in [0, 1), got {self.acceptance_rate!r}")
        if not (math.isfinite(self.draft_cost_ratio) and self.draft_cost_ratio >= 0):
            raise ValueError(f"draft_cost_ratio must be a finite number ≥ 0, got {self.draft_cost_ratio!r}")
        if self.disable_by_batch_size is not None and self.disable_by_batch_size < 1:
            raise ValueError(f"disable_by_batch_size must be ≥ 1, got {self.disable_by_batch_size}")

    @property
    def expected_tokens_per_step(self) -> float:
        """``(1 − α^{k+1}) / (1 − α)`` (Leviathan et al. 2023, eq. 1)."""
        a, k = self.acceptance_rate, self.num_speculative_tokens
        return (1 - a ** (k + 1)) / (1 - a)


@dataclass(frozen=True)
class EngineConfig:
    """What one replica runs with (tokens, blocks, sequences; see the module docstring for the rules).

    Attributes:
        kv_cache_blocks: the pool, blocks (``capacity_pass(inputs).kv_cache_blocks``).
        block_size: tokens per block.
        max_num_seqs: running sequences at most [``--max-num-seqs``].
        max_num_batched_tokens: tokens per step at most [``--max-num-batched-tokens``].
        max_model_len: prompt + output tokens at most [``--max-model-len``]; longer prompts are rejected,
            outputs truncated (finish reason ``length``).
        cost: step time model.
        request_overhead_seconds: time between a request's arrival and the scheduler seeing it, seconds
            (:attr:`~advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds`: tokenization, admission, the
            first flush — the fitted serving physics puts it in TTFT and not in the GPU's time,
            :mod:`advisor.capacity.perfpredict`). The fleet hands each request to a replica that long after it
            arrives (:attr:`SimRequest.ready`); TTFT counts it, the queue time does not.
        chunked_prefill: split prompts across steps (vLLM V1 default); off: a prompt is scheduled whole or
            waits.
        prefix_caching, speculative: optional features.
        model_name: the served model (``--served-model-name``).
        gpu_memory_utilization, cache_dtype: echoed in the engine's config metrics.
        request_overhead_seconds: seconds from a request's arrival to the engine's waiting queue
            (:attr:`~advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds`: tokenization and admission
            off the GPU, as vLLM's API server does it before the engine core queues the request). It adds to TTFT
            and e2e latency, not to the queue time (vLLM measures that from the engine core's queueing) nor to any
            step; the :class:`~advisor.sim.fleet.Fleet` applies it. 0 = none (the plain roofline).
    """

    kv_cache_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    cost: StepCost
    chunked_prefill: bool = True
    prefix_caching: PrefixCaching | None = None
    speculative: Speculative | None = None
    model_name: str = "model"
    gpu_memory_utilization: float = 0.9
    cache_dtype: str = "auto"
    request_overhead_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.request_overhead_seconds) and self.request_overhead_seconds >= 0):
            raise ValueError(
                f"request_overhead_seconds must be a finite number ≥ 0, got {self.request_overhead_seconds}"
            )
        for name in ("kv_cache_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not (math.isfinite(self.request_overhead_seconds) and self.request_overhead_seconds >= 0):
            raise ValueError(
                f"request_overhead_seconds must be a finite number ≥ 0, got {self.request_overhead_seconds}"
            )

    @property
    def kv_cache_tokens(self) -> int:
        """``kv_cache_blocks × block_size`` (what vLLM prints as "GPU KV cache size")."""
        return self.kv_cache_blocks * self.block_size


def engine_config(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    *,
    model_name: str | None = None,
    prefix_caching: PrefixCaching | None = None,
    speculative: Speculative | None = None,
    chunked_prefill: bool = True,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
    latency: LatencyModel | None = None,
) -> EngineConfig:
    """An :class:`EngineConfig` from the capacity pass: the pool is ``capacity_pass(inputs).kv_cache_blocks``,
    ``max_num_batched_tokens`` the engine default when unset (:attr:`CapacityInputs.profile_tokens`); the step cost
    and the per-request overhead from ``assumptions`` (:meth:`StepCost.from_capacity`,
    :attr:`~advisor.capacity.perf.PerfAssumptions.prefill_overhead_seconds`).

    The step model: ``latency`` (a deployment's :class:`~advisor.capacity.calibration.LatencyModel`, prior or
    calibrated: the one the daemon's rules use) when given — its prior's factors on ``gpu``
    (:func:`~advisor.capacity.perf.assumptions_for`) scaled by its decode and prefill ratios
    (:meth:`StepCost.scaled`), the per-request overhead ÷ the prefill ratio (the calibrated prefill divides the
    whole prefill, overhead included, by it) — else ``assumptions`` as they are.

    Raises:
        CapacityError: the capacity pass fails (weights do not fit, …) or the GPU lacks perf figures.
    """
    result = capacity_pass(inputs)
    if latency is not None:
        a = latency.assumptions(gpu)
        r_d, r_p = latency.decode.ratio, latency.prefill.ratio
        cost = StepCost.from_capacity(inputs, gpu, a).scaled(r_d, r_p, latency.decode_overhead.ratio)
        request_overhead = latency.request_overhead_seconds(gpu)
    else:
        cost = StepCost.from_capacity(inputs, gpu, assumptions)
        request_overhead = assumptions.prefill_overhead_seconds
    return EngineConfig(
        kv_cache_blocks=result.kv_cache_blocks,
        block_size=result.block_size,
        max_num_seqs=inputs.max_num_seqs,
        max_num_batched_tokens=inputs.profile_tokens,
        max_model_len=result.max_model_len,
        cost=cost,
        chunked_prefill=chunked_prefill,
        prefix_caching=prefix_caching,
        speculative=speculative,
        model_name=model_name or inputs.model.name,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        cache_dtype=inputs.kv_cache_dtype,
        request_overhead_seconds=request_overhead,
    )


class SimRequest:
    """One request's state and timestamps (seconds since the start; ``-1.0`` = not yet).

    ``prompt_tokens`` + ``generated`` is the sequence's length; ``computed`` of them have KV in the cache.
    """

    __slots__ = (
        "_c0",
        "_g0",
        "_t0",
        "arrival",
        "blocks",
        "cached_tokens",
        "computed",
        "finish_reason",
        "finished",
        "first_scheduled",
        "first_token",
        "generated",
        "id",
        "itl_max",
        "last_token",
        "output_tokens",
        "preemptions",
        "prompt_tokens",
        "ready",
        "shared_blocks",
    )

    def __init__(self, rid: int, arrival: float, prompt_tokens: int, output_tokens: int) -> None:
        self.id = rid
        self.arrival = arrival
        self.ready = arrival
        """When the scheduler may first see it (``arrival`` + :attr:`EngineConfig.request_overhead_seconds`)."""
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.generated = 0
        self.computed = 0
        self.blocks = 0
        self.shared_blocks = 0
        self.cached_tokens = 0
        self.first_scheduled = -1.0
        self.first_token = -1.0
        self.last_token = -1.0
        self.finished = -1.0
        self.itl_max = 0.0
        self.preemptions = 0
        self.finish_reason = ""
        # while in a fast Replica's decode cohort: computed, generated and step count when it joined
        self._c0 = 0
        self._g0 = 0
        self._t0 = 0

    @property
    def ttft(self) -> float:
        """Seconds from arrival to the first token (``-1`` before it)."""
        return self.first_token - self.arrival if self.first_token >= 0 else -1.0

    @property
    def tpot(self) -> float:
        """Mean seconds per output token after the first: ``(last − first) ÷ (generated − 1)`` (vLLM's
        ``request_time_per_output_token_seconds``); 0 for one-token outputs."""
        return (self.last_token - self.first_token) / (self.generated - 1) if self.generated > 1 else 0.0

    @property
    def queue_time(self) -> float:
        """Seconds from reaching the scheduler (:attr:`ready`) to first being scheduled (vLLM's WAITING phase: its
        queued timestamp is the engine core's, after the front end's tokenization)."""
        return self.first_scheduled - self.ready if self.first_scheduled >= 0 else -1.0

    @property
    def e2e(self) -> float:
        """Seconds from arrival to the last token."""
        return self.finished - self.arrival if self.finished >= 0 else -1.0


class ReplicaObserver(Protocol):
    """Receives what a replica does (engine metrics, request logs). Times in seconds since the start."""

    def on_admitted(self, req: SimRequest, now: float, queried_tokens: int, hit_tokens: int) -> None:
        """``req`` was scheduled from the waiting queue; the prefix cache was queried for ``queried_tokens``
        and held ``hit_tokens`` of them."""

    def on_step(self, now: float, tokens: int, prefill_tokens: int, decode_tokens: int) -> None:
        """A step ending at ``now`` processed ``tokens`` tokens (``prefill_tokens`` of prompts or recompute)
        and emitted ``decode_tokens`` output tokens."""

    def on_itl(self, seconds: float, count: int) -> None:
        """``count`` sequences emitted after a gap of ``seconds`` since their previous token."""

    def on_first_token(self, req: SimRequest, now: float) -> None:
        """``req`` emitted its first token at ``now``."""

    def on_preempted(self, req: SimRequest, now: float) -> None:
        """``req`` was preempted (recompute)."""

    def on_finished(self, req: SimRequest, now: float) -> None:
        """``req`` finished (``req.finish_reason``: ``stop``, ``length`` or ``abort``)."""

    def on_spec(self, drafts: int, draft_tokens: int, accepted_tokens: int, accepted_per_pos: Sequence[int]) -> None:
        """A speculative step: ``drafts`` sequences drafted ``draft_tokens`` tokens, ``accepted_tokens`` were
        accepted, ``accepted_per_pos[i]`` of them at draft position ``i``."""


class ReferenceReplica:
    """One engine replica, every request touched on every step: the pre-speed-up code path (issue 15), kept
    unchanged as the oracle :class:`Replica` must equal (``tests/sim/test_sim_fast_equals_reference.py``) and
    for :func:`advisor.sim.fleet.simulate` ``(reference=True)``. Drive it with :meth:`add` and
    :meth:`run_until` (see the module docstring)."""

    def __init__(
        self,
        config: EngineConfig,
        *,
        seed: int | str = 0,
        observers: Sequence[ReplicaObserver] = (),
        name: str = "replica-0",
    ) -> None:
        self.config = config
        self.name = name
        self.observers = list(observers)
        self.now = 0.0
        """End of the last step (seconds); the replica's clock."""
        self.usable_blocks = config.kv_cache_blocks - 1
        self.free_blocks = self.usable_blocks
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self._rng = random.Random(f"{seed}/{name}/spec")
        self._shared_refs: dict[int, int] = {}
        self._shared_resident = 0
        # running totals
        self.steps = 0
        self.busy_seconds = 0.0
        self.preemptions = 0
        self.prompt_tokens_computed = 0
        self.generation_tokens = 0
        self.finished = 0
        self.rejected = 0
        self.peak_usage = 0.0
        self.usage_seconds = 0.0
        """∫ KV usage dt over busy and idle time, for the time-weighted mean."""
        self.running_seconds = 0.0
        """∫ running sequences dt."""
        self._last_account = 0.0

    # --- state -----------------------------------------------------------------------------------------------
    @property
    def kv_usage(self) -> float:
        """Fraction of allocatable blocks in use (vLLM ``BlockPool.get_usage``)."""
        return 1.0 - self.free_blocks / self.usable_blocks if self.usable_blocks > 0 else 0.0

    @property
    def num_running(self) -> int:
        """Requests in the running batch."""
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        """Requests waiting (new or preempted)."""
        return len(self.waiting)

    @property
    def has_work(self) -> bool:
        """Whether anything is waiting or running."""
        return bool(self.running or self.waiting)

    def load(self) -> int:
        """Requests in the replica (running + waiting): the least-loaded router's measure."""
        return len(self.running) + len(self.waiting)

    # --- driving ---------------------------------------------------------------------------------------------
    def add(self, req: SimRequest) -> None:
        """Queue a request that reached the scheduler at ``req.ready`` (≤ the next step's start). Prompts that leave no
        room for one output token within ``max_model_len`` are rejected at once (vLLM answers 400)."""
        max_len = self.config.max_model_len
        if req.prompt_tokens >= max_len:
            req.finish_reason = "rejected"
            self.rejected += 1
            return
        if req.prompt_tokens + req.output_tokens > max_len:
            req.output_tokens = max_len - req.prompt_tokens
            req.finish_reason = "length"
        if not self.running and not self.waiting and self.now < req.ready:
            self._account(req.ready)
            self.now = req.ready
        self.waiting.append(req)

    def run_until(self, t: float) -> None:
        """Run every step that starts before ``t``. The last may end after ``t`` (``now`` ≥ ``t`` then);
        an idle replica's clock moves to ``t``."""
        while self.now < t and (self.running or self.waiting):
            self.step()
        if self.now < t:
            self._account(t)
            self.now = t

    def _account(self, t: float) -> None:
        dt = t - self._last_account
        if dt > 0:
            self.usage_seconds += self.kv_usage * dt
            self.running_seconds += len(self.running) * dt
            self._last_account = t

    # --- KV blocks -------------------------------------------------------------------------------------------
    def _blocks_for(self, req: SimRequest, tokens: int) -> int:
        bs = self.config.block_size
        return -(-tokens // bs) - req.shared_blocks

    def _free(self, req: SimRequest) -> None:
        self.free_blocks += req.blocks
        req.blocks = 0
        sb = req.shared_blocks
        if sb:
            left = self._shared_refs[sb] - 1
            if left:
                self._shared_refs[sb] = left
            else:
                del self._shared_refs[sb]
                if sb == self._shared_resident:
                    new = max(self._shared_refs, default=0)
                    self.free_blocks += sb - new
                    self._shared_resident = new
            req.shared_blocks = 0

    def _preempt(self, now: float) -> SimRequest:
        victim = self.running.pop()
        self._free(victim)
        victim.computed = 0
        victim.cached_tokens = 0
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)
        for o in self.observers:
            o.on_preempted(victim, now)
        return victim

    def _abort(self, req: SimRequest) -> None:
        """A request that cannot fit even in an empty pool (vLLM refuses such a max_model_len at start-up)."""
        self._free(req)
        req.finish_reason = "abort"
        req.finished = self.now
        self.finished += 1
        for o in self.observers:
            o.on_finished(req, self.now)

    # --- one step --------------------------------------------------------------------------------------------
    def step(self) -> None:
        """Schedule, run and apply one engine step starting at :attr:`now`."""
        cfg = self.config
        start = self.now
        self._account(start)
        budget = cfg.max_num_batched_tokens
        max_len = cfg.max_model_len
        spec = cfg.speculative
        k = 0
        if spec is not None and (spec.disable_by_batch_size is None or len(self.running) <= spec.disable_by_batch_size):
            k = spec.num_speculative_tokens
        sched_req: list[SimRequest] = []
        sched_n: list[int] = []
        preempted = False
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            length = req.prompt_tokens + req.generated
            n = length - req.computed
            if k and n == 1 and req.generated > 0:
                # decode with k draft tokens to verify (never past the output or max_model_len)
                n = 1 + max(0, min(k, req.output_tokens - req.generated - 1, max_len - length - 1))
            if n > budget:
                n = budget
            need = self._blocks_for(req, req.computed + n) - req.blocks
            scheduled = True
            while need > self.free_blocks:
                victim = self._preempt(start)
                preempted = True
                if victim is req:
                    scheduled = False
                    break
            if not scheduled:
                break
            if need > 0:
                self.free_blocks -= need
                req.blocks += need
            sched_req.append(req)
            sched_n.append(n)
            budget -= n
            i += 1
        if not preempted:
            self._admit(start, budget, sched_req, sched_n)
        if not sched_req:
            if not preempted and self.waiting and not self.running:
                # the head request needs more blocks than the whole pool: it can never run
                self._abort(self.waiting.popleft())
            return
        self._execute(start, sched_req, sched_n)

    def _admit(self, now: float, budget: int, sched_req: list[SimRequest], sched_n: list[int]) -> None:
        cfg = self.config
        bs = cfg.block_size
        waiting = self.waiting
        running = self.running
        pc = cfg.prefix_caching
        while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            req = waiting[0]
            length = req.prompt_tokens + req.generated
            shared = 0
            if pc is not None and pc.hit_rate > 0:
                shared = min(int(req.prompt_tokens * pc.hit_rate), length - 1) // bs
            extra_shared = max(0, shared - self._shared_resident)
            computed = shared * bs
            n = length - computed
            if n > budget:
                if not cfg.chunked_prefill:
                    break
                n = budget
            need = -(-(computed + n) // bs) - shared + extra_shared
            if need > self.free_blocks:
                break
            waiting.popleft()
            self.free_blocks -= need
            req.blocks = need - extra_shared
            if shared:
                self._shared_refs[shared] = self._shared_refs.get(shared, 0) + 1
                if shared > self._shared_resident:
                    self._shared_resident = shared
            req.shared_blocks = shared
            req.computed = computed
            req.cached_tokens = computed
            if req.first_scheduled < 0:
                req.first_scheduled = now
            for o in self.observers:
                o.on_admitted(req, now, length if pc is not None else 0, computed)
            running.append(req)
            sched_req.append(req)
            sched_n.append(n)
            budget -= n

    def _execute(self, start: float, sched_req: list[SimRequest], sched_n: list[int]) -> None:
        cfg = self.config
        tokens = 0
        kv_tokens = 0
        pairs = 0.0
        samples = 0
        prefill_tokens = 0
        spec_seqs = 0
        spec_ctx = 0
        for req, n in zip(sched_req, sched_n, strict=True):
            c = req.computed
            length = req.prompt_tokens + req.generated
            tokens += n
            kv_tokens += c + n
            pairs += n * c + n * (n + 1) / 2
            if c + n >= length:
                samples += 1
            if req.generated > 0 and c + 1 == length:
                if n > 1:
                    spec_seqs += 1
                    spec_ctx += c + 1
            else:
                prefill_tokens += n
        cost = cfg.cost
        seconds = cost.seconds(tokens, samples, kv_tokens, pairs)
        spec = cfg.speculative
        if spec_seqs and spec is not None:
            # the draft model's k forward passes over the decoding sequences, as a share of a target decode step
            drafted = max(sched_n) - 1
            seconds += drafted * spec.draft_cost_ratio * cost.seconds(spec_seqs, spec_seqs, spec_ctx, spec_ctx)
        end = start + seconds
        usage = self.kv_usage
        if usage > self.peak_usage:
            self.peak_usage = usage
        self._account(end)
        self.now = end
        self.steps += 1
        self.busy_seconds += seconds
        emitted_total = 0
        same_gap = 0
        observers = self.observers
        rng = self._rng
        drafts = draft_tokens = accepted_total = 0
        per_pos = [0] * (spec.num_speculative_tokens if spec is not None else 0)
        done: list[SimRequest] = []
        for req, n in zip(sched_req, sched_n, strict=True):
            length = req.prompt_tokens + req.generated
            c = req.computed
            if c + n < length:
                req.computed = c + n  # a prefill chunk: no token yet
                continue
            emitted = 1
            if spec is not None and n > 1 and req.generated > 0 and c + 1 == length:
                # verify n - 1 draft tokens: each accepted with probability α until the first rejection
                proposed = n - 1
                accepted = 0
                alpha = spec.acceptance_rate
                while accepted < proposed and rng.random() < alpha:
                    per_pos[accepted] += 1
                    accepted += 1
                drafts += 1
                draft_tokens += proposed
                accepted_total += accepted
                emitted += accepted
                req.computed = c + 1 + accepted
            else:
                req.computed = c + n
            left = req.output_tokens - req.generated
            if emitted > left:
                emitted = left
            req.generated += emitted
            emitted_total += emitted
            if req.first_token < 0:
                req.first_token = end
                for o in observers:
                    o.on_first_token(req, end)
            else:
                if req.last_token == start:
                    same_gap += 1
                    gap = seconds
                else:
                    gap = end - req.last_token
                    for o in observers:
                        o.on_itl(gap, 1)
                if gap > req.itl_max:
                    req.itl_max = gap
            req.last_token = end
            if req.generated >= req.output_tokens:
                done.append(req)
        if same_gap:
            for o in observers:
                o.on_itl(seconds, same_gap)
        for req in done:
            self._free(req)
            self.running.remove(req)
            req.finished = end
            if not req.finish_reason:
                req.finish_reason = "stop"
            self.finished += 1
            for o in observers:
                o.on_finished(req, end)
        self.prompt_tokens_computed += prefill_tokens
        self.generation_tokens += emitted_total
        for o in observers:
            o.on_step(end, tokens, prefill_tokens, emitted_total)
            if drafts:
                o.on_spec(drafts, draft_tokens, accepted_total, per_pos)


class Replica(ReferenceReplica):
    """One engine replica, the fast code path (issue 15): the same steps, counters, timestamps and observer calls
    as :class:`ReferenceReplica` (the same float operations in the same order: bit for bit in every case the
    equivalence test runs, which asserts 1e-9 relative), without touching every running request on every step.

    **The decode cohort.** A running request that emitted a token in the last step, has KV for all but that
    token (``computed = length − 1``), holds exactly ``ceil(computed ÷ block_size)`` private blocks and is not
    finished does the same thing in every following step without speculation, as long as every running
    request is scheduled and no block is short: it is scheduled for 1 token, allocates a block when
    ``computed`` is a multiple of ``block_size``, samples, emits one token after a gap equal to the step's
    duration, and finishes when ``generated`` reaches ``output_tokens``. Such requests join the *cohort*,
    kept as aggregates: their number, the sum of their ``computed``, how many of them sit at each block phase
    (``(computed − step) mod block_size``), and a heap of the step at which each one finishes. A step then
    costs O(1) for the cohort plus O(1) per other request ("individuals": prefill chunks, new admissions,
    finishers). A cohort member's own fields (``computed``, ``generated``, ``blocks``, ``last_token``,
    ``itl_max``) are brought up to date when it finishes and by :meth:`sync`.

    **Fallback.** A step that would cap a request by the token budget, preempt (too few free blocks for the
    running requests), speculate (``k > 0``), or admit into an empty batch dissolves the cohort (its members
    brought up to date) and runs :meth:`ReferenceReplica.step` itself, so those rules exist once.

    **Reading state.** :attr:`running` syncs before it answers, so its requests' fields are current whenever
    it is read between steps or from ``on_step``; the counters (``free_blocks``, ``steps``, ``now``, …) are
    always current. Inside a step (``on_admitted``, ``on_first_token``, ``on_itl``, ``on_finished``) other
    cohort members' fields may lag by the steps since their last sync. :meth:`run_until` syncs before it
    returns unless told not to.
    """

    def __init__(
        self,
        config: EngineConfig,
        *,
        seed: int | str = 0,
        observers: Sequence[ReplicaObserver] = (),
        name: str = "replica-0",
    ) -> None:
        self._run: list[SimRequest] = []
        self._indiv: list[SimRequest] = []
        """Running requests outside the cohort, in running order."""
        self._nl = 0
        """Cohort size."""
        self._sc = 0
        """Sum of the cohort's ``computed`` tokens (current)."""
        self._phase = [0] * config.block_size
        """Cohort members by ``(computed_at_join − step_at_join) mod block_size``."""
        self._heap: list[tuple[int, int, SimRequest]] = []
        """(step index at which it emits its last token, tie-breaker, request) per cohort member."""
        self._pushes = 0
        self._secs: list[float] = []
        """Durations of steps ``_secs_base …`` (for a cohort member's largest gap, ``itl_max``)."""
        self._secs_base = 0
        self._in_step = False
        spec = config.speculative
        self._spec_upto = (
            -1 if spec is None else spec.disable_by_batch_size if spec.disable_by_batch_size is not None else 1 << 62
        )
        """Speculation runs while at most this many sequences run (−1: never)."""
        c = config.cost
        self._coef = (
            c.weights_seconds,
            c.kv_seconds_per_token,
            c.matmul_seconds_per_token,
            c.lm_head_seconds_per_sample,
            c.attention_seconds_per_pair,
            c.comm_fixed_seconds,
            c.comm_seconds_per_token,
            c.overhead_seconds,
            c.expert_seconds,
            c.expert_untouched_base,
            c.serial_kv_seconds_per_token,
            c.serial_attention_seconds_per_pair,
            c.overhead_seconds_per_seq,
        )
        super().__init__(config, seed=seed, observers=observers, name=name)

    # --- state ---------------------------------------------------------------------------------------------
    @property
    def running(self) -> list[SimRequest]:
        """The running batch, oldest first, every request's fields current (syncs the cohort first)."""
        if self._nl and not self._in_step:
            self.sync()
        return self._run

    @running.setter
    def running(self, value: list[SimRequest]) -> None:
        if self._nl:
            self._drop_cohort()
        self._run = value
        self._indiv = list(value)

    @property
    def num_running(self) -> int:
        """Requests in the running batch."""
        return len(self._run)

    @property
    def has_work(self) -> bool:
        """Whether anything is waiting or running."""
        return bool(self._run or self.waiting)

    def load(self) -> int:
        """Requests in the replica (running + waiting): the least-loaded router's measure."""
        return len(self._run) + len(self.waiting)

    def _account(self, t: float) -> None:
        dt = t - self._last_account
        if dt > 0:
            self.usage_seconds += self.kv_usage * dt
            self.running_seconds += len(self._run) * dt
            self._last_account = t

    def sync(self) -> None:
        """Bring every cohort member's ``computed``, ``generated``, ``blocks``, ``last_token`` and ``itl_max``
        up to date (they stay in the cohort, counted from now). Call between steps; the fields are read-only
        while the cohort holds the request."""
        if not self._nl:
            return
        steps = self.steps
        for _, _, req in self._heap:
            self._materialize(req, steps)
            req._c0 = req.computed
            req._g0 = req.generated
            req._t0 = steps
        self._secs.clear()
        self._secs_base = steps

    def _dissolve(self) -> None:
        """:meth:`sync`, then every running request is outside the cohort (before the reference rules run)."""
        if not self._nl:
            return
        self.sync()
        self._drop_cohort()
        self._indiv = list(self._run)

    def _drop_cohort(self) -> None:
        self._heap.clear()
        self._nl = 0
        self._sc = 0
        self._phase = [0] * self.config.block_size
        self._secs.clear()
        self._secs_base = self.steps

    def _materialize(self, req: SimRequest, steps: int) -> None:
        """``req``'s fields after ``steps`` steps (it was in each since joining; ``now`` is the last's end)."""
        m = steps - req._t0
        if m <= 0:
            return
        c = req._c0 + m
        req.computed = c
        req.generated = req._g0 + m
        req.blocks = -(-c // self.config.block_size) - req.shared_blocks
        req.last_token = self.now
        base = self._secs_base
        gap = max(self._secs[req._t0 - base : steps - base])
        if gap > req.itl_max:
            req.itl_max = gap

    def _joinable(self, req: SimRequest) -> bool:
        c = req.computed
        return (
            req.last_token == self.now
            and c == req.prompt_tokens + req.generated - 1
            and req.generated < req.output_tokens
            and req.blocks == -(-c // self.config.block_size) - req.shared_blocks
        )

    def _join(self, req: SimRequest) -> None:
        c = req.computed
        steps = self.steps
        req._c0 = c
        req._g0 = req.generated
        req._t0 = steps
        self._phase[(c - steps) % self.config.block_size] += 1
        self._nl += 1
        self._sc += c
        self._pushes += 1
        heapq.heappush(self._heap, (steps + req.output_tokens - req.generated - 1, self._pushes, req))

    def _speculates(self, running: int) -> bool:
        return running <= self._spec_upto

    # --- driving -------------------------------------------------------------------------------------------
    def add(self, req: SimRequest) -> None:
        """As :meth:`ReferenceReplica.add`."""
        max_len = self.config.max_model_len
        if req.prompt_tokens >= max_len:
            req.finish_reason = "rejected"
            self.rejected += 1
            return
        if req.prompt_tokens + req.output_tokens > max_len:
            req.output_tokens = max_len - req.prompt_tokens
            req.finish_reason = "length"
        if not self._run and not self.waiting and self.now < req.ready:
            self._account(req.ready)
            self.now = req.ready
        self.waiting.append(req)

    def run_until(self, t: float, *, sync: bool = True) -> None:
        """As :meth:`ReferenceReplica.run_until`; then :meth:`sync` unless ``sync`` is False (a caller that
        reads no request's fields before the next call, such as :meth:`Fleet.advance` between arrivals)."""
        while self.now < t and (self._run or self.waiting):
            self.step()
        if self.now < t:
            self._account(t)
            self.now = t
        if sync:
            self.sync()

    def _slow_step(self) -> None:
        self._dissolve()
        ReferenceReplica.step(self)
        self._secs.clear()  # no cohort member spans this step
        self._secs_base = self.steps
        run = self._run
        if self._speculates(len(run)):
            self._indiv = list(run)
            return
        keep: list[SimRequest] = []
        for req in run:
            if self._joinable(req):
                self._join(req)
            else:
                keep.append(req)
        self._indiv = keep

    def step(self) -> None:
        """Schedule, run and apply one engine step starting at :attr:`now` (as :meth:`ReferenceReplica.step`)."""
        run = self._run
        if not run or len(run) <= self._spec_upto:
            self._slow_step()
            return
        if not self._indiv and (not self.waiting or len(run) >= self.config.max_num_seqs) and self._cohort_step():
            return
        self._mixed_step()

    def _cohort_step(self) -> bool:
        """A step of the cohort alone (every running request in it, none admitted): O(1) plus its finishers.
        False, with nothing changed, when the step needs the reference rules (budget cap, preemption)."""
        cfg = self.config
        nl = self._nl
        steps = self.steps
        need = self._phase[-steps % cfg.block_size]
        free = self.free_blocks - need
        if nl > cfg.max_num_batched_tokens or free < 0:
            return False
        start = self.now
        if start > self._last_account:
            self._account(start)
        self.free_blocks = free
        sc = self._sc
        kv = sc + nl
        (
            weights,
            per_kv,
            per_token,
            per_sample,
            per_pair,
            comm_fixed,
            comm_per_token,
            overhead,
            expert,
            base,
            serial_kv,
            serial_pair,
            overhead_per_seq,
        ) = self._coef
        # StepCost.seconds(nl, nl, kv, float(kv)), the same operations in the same order
        memory = weights + per_kv * kv
        if expert:
            memory -= expert * base**nl
        compute = per_token * nl + per_sample * nl + per_pair * float(kv)
        serial_k = serial_kv * kv
        serial_a = serial_pair * float(kv)
        seconds = (
            (memory if memory > compute else compute)
            + comm_fixed
            + comm_per_token * nl
            + (serial_k if serial_k > serial_a else serial_a)
            + overhead
            + overhead_per_seq * nl
        )
        end = start + seconds
        usable = self.usable_blocks
        usage = 1.0 - free / usable if usable > 0 else 0.0
        if usage > self.peak_usage:
            self.peak_usage = usage
        dt = end - start  # _account(end): the last account was at `start`
        if dt > 0:
            self.usage_seconds += usage * dt
            self.running_seconds += nl * dt
            self._last_account = end
        self.now = end
        self.steps = steps + 1
        self.busy_seconds += seconds
        self._secs.append(seconds)
        self._sc = sc + nl
        observers = self.observers
        for o in observers:
            o.on_itl(seconds, nl)
        heap = self._heap
        if heap and heap[0][0] == steps:
            self._in_step = True
            run = self._run
            done = self._pop_finishers(steps)
            if len(done) > 1:
                done.sort(key=run.index)
            for req in done:
                self._free(req)
                run.remove(req)
                req.finished = end
                if not req.finish_reason:
                    req.finish_reason = "stop"
                self.finished += 1
                for o in observers:
                    o.on_finished(req, end)
            self._in_step = False
        self.generation_tokens += nl
        for o in observers:
            o.on_step(end, nl, 0, nl)
        return True

    def _pop_finishers(self, steps: int) -> list[SimRequest]:
        """Cohort members emitting their last token in step ``steps`` (just run), out of the cohort and current."""
        heap = self._heap
        phase = self._phase
        bs = self.config.block_size
        done: list[SimRequest] = []
        while heap and heap[0][0] == steps:
            req = heapq.heappop(heap)[2]
            self._nl -= 1
            phase[(req._c0 - req._t0) % bs] -= 1
            self._materialize(req, steps + 1)
            self._sc -= req.computed
            done.append(req)
        if len(self._secs) > 8192 and heap:
            low = min(e[2]._t0 for e in heap)
            del self._secs[: low - self._secs_base]
            self._secs_base = low
        return done

    def _mixed_step(self) -> None:
        """A step with requests outside the cohort (prefill chunks, admissions, …)."""
        run = self._run
        cfg = self.config
        bs = cfg.block_size
        start = self.now
        self._account(start)
        steps = self.steps
        nl = self._nl
        # 1. running requests: the cohort asks 1 token each, and a block each for those at a block boundary
        need = self._phase[-steps % bs] if nl else 0
        tokens = nl
        ind = self._indiv
        ind_n: list[int] = []
        ind_need: list[int] = []
        for req in ind:
            c = req.computed
            n = req.prompt_tokens + req.generated - c
            d = -(-(c + n) // bs) - req.shared_blocks - req.blocks
            ind_n.append(n)
            ind_need.append(d)
            tokens += n
            if d > 0:
                need += d
        if tokens > cfg.max_num_batched_tokens or need > self.free_blocks:
            self._slow_step()  # a budget cap or a preemption: the reference rules, request by request
            return
        self.free_blocks -= need
        for req, d in zip(ind, ind_need, strict=True):
            if d > 0:
                req.blocks += d
        # 2. waiting requests (nothing was preempted)
        self._in_step = True
        sched_req = list(ind)
        sched_n = ind_n
        if self.waiting and len(run) < cfg.max_num_seqs:
            self._admit_fast(start, cfg.max_num_batched_tokens - tokens, sched_req, sched_n)
        # 3. the step's cost: the cohort's decodes (c + 1 KV entries and pairs each, one sample each), then the rest
        sc = self._sc
        kv_tokens = sc + nl
        pairs = float(sc + nl)
        samples = nl
        prefill_tokens = 0
        tokens = nl
        for req, n in zip(sched_req, sched_n, strict=True):
            c = req.computed
            length = req.prompt_tokens + req.generated
            tokens += n
            kv_tokens += c + n
            pairs += n * c + n * (n + 1) / 2
            if c + n >= length:
                samples += 1
            if not (req.generated > 0 and c + 1 == length):
                prefill_tokens += n
        seconds = cfg.cost.seconds(tokens, samples, kv_tokens, pairs)
        end = start + seconds
        usage = self.kv_usage
        if usage > self.peak_usage:
            self.peak_usage = usage
        self._account(end)
        self.now = end
        self.steps = steps + 1
        self.busy_seconds += seconds
        self._secs.append(seconds)
        # 4. tokens: every cohort member emits one after a gap of `seconds`; the others as the reference does
        emitted_total = nl
        same_gap = nl
        observers = self.observers
        done: list[SimRequest] = []
        for req, n in zip(sched_req, sched_n, strict=True):
            length = req.prompt_tokens + req.generated
            c = req.computed
            req.computed = c + n
            if c + n < length:
                continue  # a prefill chunk: no token yet
            emitted = 1
            left = req.output_tokens - req.generated
            if emitted > left:
                emitted = left
            req.generated += emitted
            emitted_total += emitted
            if req.first_token < 0:
                req.first_token = end
                for o in observers:
                    o.on_first_token(req, end)
            else:
                if req.last_token == start:
                    same_gap += 1
                    gap = seconds
                else:
                    gap = end - req.last_token
                    for o in observers:
                        o.on_itl(gap, 1)
                if gap > req.itl_max:
                    req.itl_max = gap
            req.last_token = end
            if req.generated >= req.output_tokens:
                done.append(req)
        if same_gap:
            for o in observers:
                o.on_itl(seconds, same_gap)
        if nl:
            self._sc = sc + nl
            done += self._pop_finishers(steps)
        if len(done) > 1:
            done.sort(key=run.index)
        keep: list[SimRequest] = []
        for req in sched_req:
            if req.last_token == end and req.generated >= req.output_tokens:
                continue  # finishing now
            if self._joinable(req):
                self._join(req)
            else:
                keep.append(req)
        self._indiv = keep
        for req in done:
            self._free(req)
            run.remove(req)
            req.finished = end
            if not req.finish_reason:
                req.finish_reason = "stop"
            self.finished += 1
            for o in observers:
                o.on_finished(req, end)
        self._in_step = False
        self.prompt_tokens_computed += prefill_tokens
        self.generation_tokens += emitted_total
        for o in observers:
            o.on_step(end, tokens, prefill_tokens, emitted_total)

    def _admit_fast(self, now: float, budget: int, sched_req: list[SimRequest], sched_n: list[int]) -> None:
        """:meth:`ReferenceReplica._admit` on the cohort-aware running list."""
        cfg = self.config
        bs = cfg.block_size
        waiting = self.waiting
        running = self._run
        pc = cfg.prefix_caching
        while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            req = waiting[0]
            length = req.prompt_tokens + req.generated
            shared = 0
            if pc is not None and pc.hit_rate > 0:
                shared = min(int(req.prompt_tokens * pc.hit_rate), length - 1) // bs
            extra_shared = max(0, shared - self._shared_resident)
            computed = shared * bs
            n = length - computed
            if n > budget:
                if not cfg.chunked_prefill:
                    break
                n = budget
            need = -(-(computed + n) // bs) - shared + extra_shared
            if need > self.free_blocks:
                break
            waiting.popleft()
            self.free_blocks -= need
            req.blocks = need - extra_shared
            if shared:
                self._shared_refs[shared] = self._shared_refs.get(shared, 0) + 1
                if shared > self._shared_resident:
                    self._shared_resident = shared
            req.shared_blocks = shared
            req.computed = computed
            req.cached_tokens = computed
            if req.first_scheduled < 0:
                req.first_scheduled = now
            for o in self.observers:
                o.on_admitted(req, now, length if pc is not None else 0, computed)
            running.append(req)
            sched_req.append(req)
            sched_n.append(n)
            budget -= n
