"""Roofline estimates of decode step time, TPOT, decode throughput and prefill time (seconds, tokens/s).

A step costs its memory time and its compute time joined by a roofline (their max, or a fitted p-norm), plus
tensor-parallel communication::

    t_memory  = bytes read per GPU ÷ (peak bandwidth × memory_bandwidth_efficiency)
    t_compute = FLOPs per GPU ÷ (peak tensor FLOP/s × compute_efficiency)
    t_comm    = 2 all-reduces per layer × (latency + ring bytes ÷ (per-direction link × efficiency))
                (a group larger than the part's NVLink domain crosses nodes: network latency and bandwidth,
                :func:`allreduce_seconds`)
    step      = roofline(t_memory, t_compute) + t_comm

``roofline`` is the max of the two (the roofline of Williams et al., perfect overlap) or, with a fitted
:attr:`PerfAssumptions.roofline_exponent` ``p``, their p-norm: measured kernels reach the roofline only far from
its ridge (:func:`roofline`).

Decode reads every weight once per step plus the KV of every running sequence
(``batch × mean_context × KV bytes/token/GPU``) and performs ``2 × matmul params ÷ TP`` FLOPs per
sequence plus attention ``4 × layers × heads/TP × head_dim × context`` (QKᵀ and PV). Prefill of ``P``
tokens performs ``2 × P × matmul params ÷ TP`` plus causal attention ``2 × layers × heads/TP × head_dim ×
P²``. A windowed layer reads and attends at most its window, and a recurrent layer its state instead
(:func:`advisor.capacity.kvlayout.attended_kv_bytes_per_gpu`, ``attended_head_tokens``,
``prefill_attended_head_pairs``): gpt-oss, Gemma 2/3/4 and Mistral-v0.1 decode at long context read far less
than ``layers × context``.
The roofline model is Williams, Waterman & Patterson, "Roofline: an insightful visual performance
model" (CACM 2009); its use for LLM inference follows e.g. Pope et al., "Efficiently Scaling Transformer
Inference" (MLSys 2023). A ring all-reduce moves ``2 (TP − 1) / TP`` of the buffer per GPU (Patarasuk &
Yuan 2009).

Efficiency factors (:class:`PerfAssumptions`) are *assumptions* to calibrate against measured TPOT/TTFT,
not measurements: decode kernels typically reach 70–85 % of peak HBM bandwidth and prefill GEMMs 50–70 %
of dense tensor peak.

Calibration: with the defaults (no overheads) the Musgrave point (vLLM 0.23.0, Llama-3.1-8B bf16, one A100 40GB,
1,024 + 128 tokens, concurrency 1, ≈ 75 tokens/s; johnmusgrave.com/p/vllm-throughput-latency-sweep-on) is
predicted at 76.6 tokens/s (+2 %; ``tests/capacity/test_perf.py``). The fitted factors by engine × GPU generation
(:func:`assumptions_for`, ``advisor/data/perf_calibration.json``, fitted by ``bench/fit_perf.py`` on 147 published
measurements with the per-row physics of :mod:`advisor.capacity.perfpredict`) add per-step and per-request
overheads, FP8/FP4 effective peaks, a KV-read efficiency and MoE expert streaming; their held-out error is in
``docs/capacity.md`` ("Performance model calibration").

Ignored: prefill chunking of long prompts, speculative decoding, quantization dequant cost beyond what the
fitted efficiencies absorb. Peak figures come from :class:`GPUSpec` (dense, no sparsity).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from advisor.capacity.data import read_data
from advisor.capacity.hardware import GPUSpec, gpu_generation, tensor_parallel_nodes
from advisor.capacity.kv import CapacityInputs, weights_bytes_per_gpu
from advisor.capacity.kvlayout import (
    attended_head_tokens,
    attended_kv_bytes_per_gpu,
    kv_bytes_per_token_per_gpu,
    prefill_attended_head_pairs,
)
from advisor.capacity.precision import DTYPE_BYTES
from advisor.errors import CapacityError

__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT_ASSUMPTIONS",
    "ENGINE_FAMILY",
    "FP4_WEIGHTS",
    "INTERNODE_ALLREDUCE_LATENCY_SECONDS",
    "INTERNODE_LATENCY_PER_DOUBLING_SECONDS",
    "DecodeStepModel",
    "PerfAssumptions",
    "PrefillRoofline",
    "allreduce_seconds",
    "assumptions_for",
    "calibration_group",
    "compute_precision",
    "decode_step_model",
    "decode_step_seconds",
    "decode_tokens_per_second",
    "engine_family",
    "mixed_step_seconds",
    "prefill_batch_roofline",
    "prefill_batch_seconds",
    "prefill_occupancy_seconds",
    "prefill_roofline",
    "prefill_seconds",
    "roofline",
    "tpot_seconds",
    "untouched_expert_fraction",
]


@dataclass(frozen=True)
class PerfAssumptions:
    """Efficiency factors of the roofline (dimensionless fractions unless stated).

    Attributes:
        memory_bandwidth_efficiency: achieved ÷ peak HBM bandwidth in decode (assumed 0.80).
        compute_efficiency: achieved ÷ peak dense tensor FLOP/s (assumed 0.60, a typical prefill MFU).
        interconnect_efficiency: achieved ÷ per-direction link bandwidth for all-reduce (assumed 0.70).
        allreduce_latency_seconds: fixed cost per all-reduce, seconds (assumed 10 µs; NCCL small-message
            latency on NVLink is of this order).
        fallback_interconnect_bytes_per_second: per-direction bandwidth when the GPU has no stated
            interconnect: PCIe Gen4 x16, 32 GB/s (PCI-SIG).
        step_overhead_seconds: fixed time every engine step (decode or prefill) adds beyond the GPU work, seconds:
            the scheduler, input preparation, kernel launches not hidden by CUDA graphs, sampling and output
            processing on the CPU (vLLM's V1 design notes name this CPU overhead as what bounds small-model decode,
            https://blog.vllm.ai/2025/01/27/v1-alpha-release.html). 0 = not modelled (the roofline alone).
        prefill_overhead_seconds: fixed time a request's first token adds once, seconds: tokenization, admission
            into the scheduler, the first chunk's detokenize and HTTP flush. 0 = not modelled.
        fp8_compute_efficiency: achieved ÷ peak dense FP8 tensor FLOP/s for FP8 (W8A8) GEMMs; ``None`` = the
            same as ``compute_efficiency`` (FP8 GEMMs reach a lower fraction of their doubled peak in practice).
        fp4_compute_efficiency: achieved ÷ peak dense FP4 tensor FLOP/s for FP4 weights (NVFP4/MXFP4) on a GPU with
            FP4 tensor cores (Blackwell); ``None`` = FP4 peaks are not used (FP4 weights then compute at the BF16
            or FP8 peak, as before the calibration).
        kv_bandwidth_efficiency: achieved ÷ peak HBM bandwidth when decode attention reads the KV cache;
            ``None`` = ``memory_bandwidth_efficiency``. Paged attention gathers blocks scattered over the pool
            (page-sized reads, one head group per block) where the weight stream reads large contiguous
            matrices; the fit tests whether it reaches a lower fraction of peak (it is what a large batch at
            long context is bound by).
        attention_serial_fraction: share (0–1) of decode attention that runs as its own kernel *after* the
            weight GEMMs instead of under one roofline with them. A decoder layer runs QKV projection → attention
            → output projection → MLP one kernel after another on one CUDA stream (vLLM, SGLang and TensorRT-LLM
            alike), so the roofline applies per kernel: ``max(weights ÷ BW, GEMM FLOPs ÷ peak) + max(KV ÷ BW,
            attention FLOPs ÷ peak)`` (the per-layer roofline of Yuan et al., "LLM Inference Unveiled: Survey and
            Roofline Model Insights", arXiv 2402.16363, 2024; NanoFlow, Zhu et al., arXiv 2408.12757, overlaps
            these kernels as its contribution because engines run them in sequence). 0 = the single roofline over
            the whole step (the pre-calibration model), 1 = fully serial kernels. It matters where the GEMMs
            are compute-bound and the KV reads large: a large batch at long context.
        step_overhead_per_seq_seconds: CPU time every step adds *per running sequence*, seconds: per-request
            scheduling (block-table updates, input tensors), the sampler's per-request work (penalties, top-k/p,
            logprobs) and incremental detokenization of each new token, which grow with the batch (vLLM's V1
            design notes: "the CPU overhead ... scheduling, detokenization" grows with the batch and is what
            motivated moving it beside the GPU, https://blog.vllm.ai/2025/01/27/v1-alpha-release.html; SGLang
            v0.4's overlap scheduler, https://lmsys.org/blog/2024-12-04-sglang-v0-4/). 0 = not modelled.
        allreduce_hop_latency_seconds: latency of each of a ring all-reduce's ``2 (TP − 1)`` steps, seconds (Thakur,
            Rabenseifner & Gropp 2005), on top of ``allreduce_latency_seconds``. 0 = latency flat in TP.
        expert_bandwidth_efficiency: achieved ÷ peak HBM bandwidth when a MoE layer streams its routed experts'
            weights; ``None`` = ``memory_bandwidth_efficiency``. At a decode batch each selected expert's GEMM has a
            few rows (``batch × k ÷ E`` tokens), run as a grouped or fused MoE kernel over many small weight blocks
            (vLLM's and SGLang's Triton ``fused_moe``, TensorRT-LLM's MoE plugin) rather than one large dense GEMM;
            the fit tests whether those kernels reach a lower fraction of peak than the dense weight stream.
        roofline_exponent: ``p`` of the p-norm that joins a kernel's memory time and compute time
            (:func:`roofline`): 0 = their max (the roofline, perfect overlap), 1 = their sum (no overlap). Fitted
            by ``bench/fit_perf.py``: measured decode steps near the ridge (a batch of a few hundred) are slower than
            the max of the two, and fitting the max instead pushes the weight-streaming efficiency down to
            0.50–0.62, which then makes every batch-1 decode too slow.

    The defaults leave every term added for issue 17 off (overheads 0, FP8 at ``compute_efficiency``, no FP4
    peak), so an uncalibrated model is the plain roofline; :func:`assumptions_for` returns the fitted values.
    """

    memory_bandwidth_efficiency: float = 0.80
    compute_efficiency: float = 0.60
    interconnect_efficiency: float = 0.70
    allreduce_latency_seconds: float = 10e-6
    fallback_interconnect_bytes_per_second: float = 32e9
    step_overhead_seconds: float = 0.0
    prefill_overhead_seconds: float = 0.0
    fp8_compute_efficiency: float | None = None
    fp4_compute_efficiency: float | None = None
    kv_bandwidth_efficiency: float | None = None
    attention_serial_fraction: float = 0.0
    step_overhead_per_seq_seconds: float = 0.0
    allreduce_hop_latency_seconds: float = 0.0
    roofline_exponent: float = 0.0
    expert_bandwidth_efficiency: float | None = None


DEFAULT_ASSUMPTIONS: Final = PerfAssumptions()

ENGINE_FAMILY: Final = {"nim": "trtllm"}
"""Engines read as another: NVIDIA NIM 1.x serves LLMs through TensorRT-LLM profiles."""


def engine_family(engine: str) -> str:
    """``engine`` as calibrated (:data:`ENGINE_FAMILY`), lower case."""
    e = engine.strip().lower()
    return ENGINE_FAMILY.get(e, e)


CALIBRATION_FILE: Final = "perf_calibration.json"
"""The fitted factors, ``advisor/data/perf_calibration.json`` (written by ``bench/fit_perf.py``)."""


@cache
def _calibration() -> dict[str, Any]:
    try:
        loaded = json.loads(read_data(CALIBRATION_FILE))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _from_fields(fields: Any) -> PerfAssumptions | None:
    if not isinstance(fields, dict):
        return None
    known = {f.name for f in dataclasses.fields(PerfAssumptions)}
    values = {k: float(v) for k, v in fields.items() if k in known and isinstance(v, (int, float))}
    return dataclasses.replace(DEFAULT_ASSUMPTIONS, **values)


def calibration_group(engine: str, gpu: GPUSpec) -> str:
    """The calibration group key of ``engine`` on ``gpu``: ``"<engine family>/<generation>"``
    (:func:`engine_family`, :func:`~advisor.capacity.hardware.gpu_generation`), e.g. ``"vllm/hopper"``."""
    return f"{engine_family(engine)}/{gpu_generation(gpu)}"


def assumptions_for(engine: str, gpu: GPUSpec) -> PerfAssumptions:
    """The efficiency factors fitted for ``engine`` (``vllm``, ``sglang``, ``trtllm`` …) on ``gpu``'s generation
    from the published measurements (``advisor/data/perf_calibration.json``, written by
    ``bench/fit_perf.py`` from ``advisor/data/perf_measurements.csv``, :mod:`advisor.capacity.perfdata`).

    The group ``engine/generation`` (:func:`calibration_group`) when the data fitted one (its factors are
    already shrunk toward the global fit), else the global fit over all engines and GPUs, else (no calibration
    file) :data:`DEFAULT_ASSUMPTIONS`. The factors are a *serving* deployment's (per-step and per-request
    overheads included). The daemon's online calibration starts from these (its prior)."""
    data = _calibration()
    groups = data.get("groups")
    if isinstance(groups, dict):
        group = _from_fields((groups.get(calibration_group(engine, gpu)) or {}).get("factors"))
        if group is not None:
            return group
    fitted = _from_fields((data.get("global") or {}).get("factors"))
    return fitted if fitted is not None else DEFAULT_ASSUMPTIONS


FP4_WEIGHTS: Final = frozenset({"nvfp4", "modelopt_fp4", "mxfp4"})
"""Quantization methods with 4-bit floating-point (E2M1) weights, which Blackwell's FP4 tensor cores multiply
directly (NVIDIA Blackwell architecture technical brief); elsewhere they are dequantized to the compute dtype."""


def compute_precision(inputs: CapacityInputs, gpu: GPUSpec, assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS) -> str:
    """Which tensor-core peak the matmuls run at: ``fp4`` (FP4 weights on a GPU with an FP4 peak, when
    ``assumptions.fp4_compute_efficiency`` is set), ``fp8`` (``fp8`` quantization, requested or the checkpoint's
    own, on a GPU with an FP8 peak), else ``bf16`` (the dense BF16/FP16 rate)."""
    q = inputs.effective_quantization or ""
    if q in FP4_WEIGHTS and gpu.fp4_flops and assumptions.fp4_compute_efficiency is not None:
        return "fp4"
    if (inputs.quantization == "fp8" or q.startswith("fp8")) and gpu.fp8_flops:
        return "fp8"
    return "bf16"


def _effective_flops(inputs: CapacityInputs, gpu: GPUSpec, a: PerfAssumptions) -> float:
    """Peak × efficiency of the precision :func:`compute_precision` picks, FLOP/s."""
    precision = compute_precision(inputs, gpu, a)
    if precision == "fp4" and gpu.fp4_flops and a.fp4_compute_efficiency is not None:
        return gpu.fp4_flops * a.fp4_compute_efficiency
    if precision == "fp8" and gpu.fp8_flops:
        return gpu.fp8_flops * (a.compute_efficiency if a.fp8_compute_efficiency is None else a.fp8_compute_efficiency)
    if gpu.bf16_flops:
        return gpu.bf16_flops * a.compute_efficiency
    raise CapacityError(
        f"{gpu.name}: no published dense BF16/FP16 tensor rate in the catalog (advisor/data/gpus.csv), so tokens/s "
        "and latency cannot be estimated on it (the KV sizing does not need it); time a catalog part of like "
        "speed instead (capacity-advisor catalog gpus lists the parts)"
    )


def _kv_bandwidth(gpu: GPUSpec, a: PerfAssumptions) -> float:
    """Achieved bandwidth of decode attention's KV reads, bytes/s."""
    eff = a.memory_bandwidth_efficiency if a.kv_bandwidth_efficiency is None else a.kv_bandwidth_efficiency
    return _bandwidth(gpu) * eff


def _expert_seconds(inputs: CapacityInputs, gpu: GPUSpec, a: PerfAssumptions) -> tuple[float, float]:
    """(seconds to stream every routed expert on one GPU at the experts' achieved bandwidth, the same bytes at the
    dense weights' bandwidth): the second is what ``weights_bytes_per_gpu ÷ bandwidth`` already counts for them."""
    experts = _expert_bytes_per_gpu(inputs)
    if not experts:
        return 0.0, 0.0
    eff = a.memory_bandwidth_efficiency if a.expert_bandwidth_efficiency is None else a.expert_bandwidth_efficiency
    return experts / (_bandwidth(gpu) * eff), experts / (_bandwidth(gpu) * a.memory_bandwidth_efficiency)


def _bandwidth(gpu: GPUSpec) -> float:
    bw = gpu.memory_bandwidth_bytes_per_second
    if not math.isfinite(bw) or bw <= 0:
        raise CapacityError(f"{gpu.name}: no memory bandwidth in the catalog; cannot estimate memory time")
    return bw


def _matmul_parameters(inputs: CapacityInputs) -> tuple[int, int]:
    """(parameters one token multiplies in matmuls except the LM head, LM head parameters). A MoE token passes
    through ``experts_per_token`` of the routed experts only (:meth:`ModelArch.active_parameters`)."""
    m = inputs.model
    lm_head = m.vocab_size * m.hidden_size
    total = m.active_parameters() if m.is_moe else m.num_parameters
    body = total - m.norm_parameters() - m.embedding_parameters()
    return body, lm_head


def _expert_bytes_per_gpu(inputs: CapacityInputs) -> float:
    """Bytes of the routed experts on one GPU (0 for a dense model): experts are sliced (TP) or placed whole
    (EP) over the replica's GPUs, the same bytes per GPU either way (:func:`weights_bytes_per_gpu`)."""
    m = inputs.model
    if not m.is_moe or m.num_experts <= 0:
        return 0.0
    q = inputs.effective_quantization
    per_param = inputs.quantized_weight_bytes if q is not None else float(DTYPE_BYTES[inputs.compute_dtype])
    return m.expert_weight_parameters() * per_param / (inputs.tensor_parallel_size * inputs.pipeline_parallel_size)


def untouched_expert_fraction(inputs: CapacityInputs, tokens: float) -> float:
    """Expected fraction of a MoE layer's routed experts that no token of a step of ``tokens`` tokens selects,
    under uniform routing: each token picks ``k`` of ``E`` experts, so one expert escapes all of them with
    probability ``(1 − k/E)^tokens`` (Mixtral, k = 2 of 8: 0.75 at one token, 0.10 at 8, 0.001 at 24). 0 for a
    dense model. Decode streams only the touched experts' weights, so small-batch MoE decode reads far less
    than the whole model (``memory = all weights − expert bytes × this fraction``)."""
    m = inputs.model
    if not m.is_moe or m.num_experts <= 0 or m.experts_per_token <= 0:
        return 0.0
    escape: float = 1.0 - min(1.0, m.experts_per_token / m.num_experts)
    return float(escape ** max(0.0, tokens))


INTERNODE_ALLREDUCE_LATENCY_SECONDS: Final = 47e-6
"""One small all-reduce whose group spans two nodes, seconds. Measured: 46–48 µs at 4–512 bytes on 2 × 8 H20 with
one 400 Gb/s ConnectX-7 (InfiniBand NDR) a GPU, NCCL 2.21.5, NVLSTree (https://github.com/NVIDIA/nccl/issues/1244);
NCCL's own cost model gives 51 µs for that algorithm at two nodes (``src/graph/tuning.cc``: NVLS base 23 µs +
2 × log2(nodes) × 14 µs network latency). The engines' one-shot custom all-reduce kernels work inside one node's
NVLink only (vLLM ``custom_all_reduce.py``, TensorRT-LLM's ``AllReduceStrategy``), so a group across nodes runs
NCCL's, and its latency is this rather than the few µs in a node."""
INTERNODE_LATENCY_PER_DOUBLING_SECONDS: Final = 28e-6
"""Further latency of a cross-node all-reduce each time its nodes double beyond two, seconds: NCCL's tree term
``2 × log2(nodes) × 14 µs`` (``src/graph/tuning.cc``, network latency of the NVLSTree algorithm)."""


def allreduce_seconds(inputs: CapacityInputs, gpu: GPUSpec, rows: float, a: PerfAssumptions) -> float:
    """Seconds of one step's tensor-parallel all-reduces over ``rows`` tokens (0 at TP 1): ``2 × layers × (latency +
    2 (TP − 1) ÷ TP × rows × hidden × activation bytes ÷ (link × interconnect_efficiency))`` (a ring all-reduce,
    Patarasuk & Yuan 2009).

    In one node the link is the catalog's per-GPU NVLink/Infinity Fabric figure per direction (half the
    bidirectional figure; PCIe Gen4 when none) and the latency ``allreduce_latency_seconds`` + ``2 (TP − 1)`` ×
    ``allreduce_hop_latency_seconds`` (fitted). A group across nodes (:func:`tensor_parallel_nodes`) pays at least
    :data:`INTERNODE_ALLREDUCE_LATENCY_SECONDS` (+ :data:`INTERNODE_LATENCY_PER_DOUBLING_SECONDS` per doubling of
    the nodes beyond two), and its ring is bounded by the network as well: each node's GPUs send through their NICs
    in parallel rings, so the bus bandwidth is at most ``domain × the per-GPU NIC`` (DGX A100, 8 × 200 Gb/s:
    "we measure 192GB/s AllReduce BusBW", https://github.com/NVIDIA/nccl/issues/1576) — for HGX H100's 8 × 400 Gb/s
    (400 GB/s) near its NVLink's 450 GB/s, so at decode's small messages the latency is what grows.
    """
    tp = inputs.tensor_parallel_size
    if tp == 1:
        return 0.0
    link = (
        gpu.interconnect_bytes_per_second / 2  # catalog figure is bidirectional
        if gpu.interconnect_bytes_per_second
        else a.fallback_interconnect_bytes_per_second
    )
    latency = a.allreduce_latency_seconds + 2 * (tp - 1) * a.allreduce_hop_latency_seconds
    nodes = tensor_parallel_nodes(gpu, tp) or 1  # an unstated domain: priced as one
    if nodes > 1:
        across = INTERNODE_ALLREDUCE_LATENCY_SECONDS + math.log2(nodes / 2) * INTERNODE_LATENCY_PER_DOUBLING_SECONDS
        latency = max(latency, across)
        if gpu.scale_out_bytes_per_second and gpu.scale_up_domain_gpus:
            link = min(link, gpu.scale_up_domain_gpus * gpu.scale_out_bytes_per_second)
    buffer = rows * inputs.model.hidden_size * DTYPE_BYTES[inputs.compute_dtype]
    per_gpu = 2 * (tp - 1) / tp * buffer
    per_allreduce = latency + per_gpu / (link * a.interconnect_efficiency)
    return 2 * inputs.model.num_layers * per_allreduce


LAYER_SPLIT_ENGINES: Final = frozenset({"llamacpp"})
"""Engines whose ``tensor_parallel_size`` counts GPUs holding whole layers, run one after another on every token
(llama.cpp's default ``--split-mode layer``: ``ggml_backend_sched`` hands each GPU its layers' graph in turn;
:func:`advisor.capacity.engines.llamacpp_capacity` sizes the pool the same way)."""


def timed_inputs(inputs: CapacityInputs) -> CapacityInputs:
    """The inputs a step's time is computed from: ``inputs`` as given, except for :data:`LAYER_SPLIT_ENGINES`, whose
    GPUs take a token's layers in turn, so a step streams every layer's weights and KV at one GPU's bandwidth and
    no tensor is all-reduced: one GPU of the part holding the whole model (TP 1, PP 1). The activations passed
    between GPUs (one hidden vector per token per boundary, kilobytes) are not priced.

    Example: Llama-3.1-8B under llama.cpp on 2 × RTX 3090 decodes a token in the time one RTX 3090 streams all
    16 GB of its weights (≈ 22 ms at 0.8 of 936 GB/s), not half of it.
    """
    if inputs.engine in LAYER_SPLIT_ENGINES and (inputs.tensor_parallel_size > 1 or inputs.pipeline_parallel_size > 1):
        return dataclasses.replace(inputs, tensor_parallel_size=1, pipeline_parallel_size=1)
    return inputs


def pipeline_fill(stages: int, sequences: float) -> float:
    """How many times a step's per-sequence work is paid per token at ``stages`` pipeline stages with ``sequences``
    sequences in the step: ``PP ÷ min(PP, sequences)`` (1 without stages). The engine runs up to PP micro-batches at
    once, each of whole sequences (vLLM V1 ``max_concurrent_batches`` = PP; a request is in one batch in flight at a
    time), and a token passes every stage in turn: with fewer sequences than stages the stages idle, and a lone
    sequence's token (a lone prompt's tokens) costs the whole model's work, stage after stage.

    Example: PP 4 and one prompt → 4 (its FLOPs, a quarter a stage, are paid four times in a row); 16 sequences → 1.
    """
    if stages <= 1:
        return 1.0
    return stages / min(float(stages), max(1.0, sequences))


def roofline(memory: float, compute: float, exponent: float = 0.0) -> float:
    """One kernel's time from its memory time and its compute time, seconds: ``max(memory, compute)`` when
    ``exponent`` is 0 (the roofline: the two overlap completely), else the p-norm ``(memory^p + compute^p)^(1/p)``
    with ``p = exponent`` (p = 1: their sum, no overlap; p → ∞: the max again).

    The roofline is an upper bound on performance that a kernel reaches only where its memory traffic and its
    arithmetic overlap completely (Williams, Waterman & Patterson, CACM 2009); near the ridge, where the two times
    are alike, measured kernels fall below it (pipeline fill and drain, tile and wave quantization, epilogues).
    The p-norm is this project's choice of a smooth curve between the two limits, not a published law: one
    number, fitted to the published measurements (:attr:`PerfAssumptions.roofline_exponent`, ``bench/fit_perf.py``),
    that is the max far from the ridge and costs most at it.

    Args:
        memory: seconds the kernel's bytes take at the achieved bandwidth (≥ 0).
        compute: seconds its FLOPs take at the achieved rate (≥ 0).
        exponent: ``p``; 0, less or NaN = the max.
    """
    if not exponent > 0.0:  # 0, negative or NaN: the max
        return memory if memory > compute else compute
    top = memory if memory > compute else compute
    if top <= 0.0:
        return 0.0
    return float(top * ((memory / top) ** exponent + (compute / top) ** exponent) ** (1.0 / exponent))


def _check(name: str, value: float, minimum: float) -> None:
    if not math.isfinite(value) or value < minimum:
        raise CapacityError(f"{name} must be a finite number ≥ {minimum}, got {value}")


@dataclass(frozen=True)
class DecodeStepModel:
    """One decode step as straight lines in the batch ``B`` (seconds)::

        step(B) = roofline(memory_fixed + memory_per_seq·B, compute_per_seq·B) + comm_fixed + comm_per_seq·B
                  + max(attention_memory_per_seq, attention_compute_per_seq)·B + overhead + overhead_per_seq·B

    ``memory_fixed`` streams the weights, ``memory_per_seq`` one sequence's KV at the mean context,
    ``compute_per_seq`` its matmul and attention FLOPs, ``comm_*`` the tensor-parallel all-reduces. The
    ``attention_*_per_seq`` pair is the share of decode attention run as its own kernel after the GEMMs
    (:attr:`PerfAssumptions.attention_serial_fraction` of one sequence's KV read and attention FLOPs; that share
    is left out of ``memory_per_seq`` and ``compute_per_seq``); ``overhead`` and ``overhead_per_seq`` the CPU
    time per step and per sequence per step (:attr:`PerfAssumptions.step_overhead_seconds`,
    :attr:`PerfAssumptions.step_overhead_per_seq_seconds`); ``roofline`` is :func:`roofline` with
    ``roofline_exponent`` (:attr:`PerfAssumptions.roofline_exponent`; 0 = the max). Built by
    :func:`decode_step_model`; :func:`decode_step_seconds` is this evaluated at one batch. The dial search
    evaluates it thousands of times, hence the precomputed coefficients.
    """

    memory_fixed: float
    memory_per_seq: float
    compute_per_seq: float
    comm_fixed: float
    comm_per_seq: float
    overhead: float = 0.0
    expert_memory: float = 0.0
    expert_untouched_base: float = 0.0
    attention_memory_per_seq: float = 0.0
    attention_compute_per_seq: float = 0.0
    overhead_per_seq: float = 0.0
    roofline_exponent: float = 0.0
    pipeline_stages: int = 1

    def filled(self, batch: float) -> float:
        """The batch the batch-dependent terms are priced at: ``batch``, or at least :attr:`pipeline_stages` (PP
        micro-batches of at least one sequence: fewer sequences than stages leave stages idle, and each token still
        passes every stage, :func:`pipeline_fill`)."""
        return batch if self.pipeline_stages <= 1 else max(batch, float(self.pipeline_stages))

    def overhead_at(self, batch: float) -> float:
        """The CPU part of the step at ``batch`` sequences, seconds: ``overhead + overhead_per_seq·B``."""
        return self.overhead + self.overhead_per_seq * batch

    def __call__(self, batch: float) -> float:
        """Seconds of one step at ``batch`` sequences (any batch ≥ 0; linear in it for a dense model).

        ``overhead`` (:attr:`PerfAssumptions.step_overhead_seconds`) is added to every step, ``overhead_per_seq``
        and the serial attention kernel per sequence. A MoE model
        streams only the experts its ``batch`` tokens select: ``expert_memory`` (seconds to stream all routed
        experts, included in ``memory_fixed``) × ``expert_untouched_base^batch``
        (:func:`untouched_expert_fraction`) is not read."""
        b = self.filled(batch)
        memory = self.memory_fixed + self.memory_per_seq * b
        if self.expert_memory:
            memory -= self.expert_memory * self.expert_untouched_base ** max(0.0, b)
        return (
            roofline(memory, self.compute_per_seq * b, self.roofline_exponent)
            + self.comm_fixed
            + self.comm_per_seq * b
            + max(self.attention_memory_per_seq, self.attention_compute_per_seq) * b
            + self.overhead
            + self.overhead_per_seq * batch
        )

    def verify(self, batch: float, tokens_per_seq: float) -> float:
        """Seconds of one speculative verification step: ``batch`` sequences each scoring ``tokens_per_seq`` query
        tokens (the draft tokens plus the one the step always yields) in one forward pass. The weights and each
        sequence's KV are read once, as in a decode step; the matmul and attention FLOPs, the all-reduce rows and the
        experts the tokens select grow with ``batch × tokens_per_seq``::

            verify(B, q) = roofline(memory_fixed + memory_per_seq·B, compute_per_seq·B·q)
                           + comm_fixed + comm_per_seq·B·q
                           + max(attention_memory_per_seq, attention_compute_per_seq·q)·B
                           + overhead + overhead_per_seq·B

        ``verify(B, 1)`` is ``self(B)``. The draft's own forward passes are not included (an n-gram lookup costs
        none; a draft model or head costs more): a lower bound on the speculative step. This is how vLLM V1
        verifies (``vllm/v1/worker/gpu_model_runner.py``: the draft tokens are scheduled as extra query tokens of
        the running request, ``vllm/v1/sample/rejection_sampler.py`` then accepts a prefix), as SGLang's and
        TensorRT-LLM's target-model verification do.

        Raises:
            ValueError: ``tokens_per_seq`` < 1.
        """
        if not tokens_per_seq >= 1:
            raise ValueError(f"tokens_per_seq must be ≥ 1, got {tokens_per_seq}")
        b = self.filled(batch)
        tokens = b * tokens_per_seq
        memory = self.memory_fixed + self.memory_per_seq * b
        if self.expert_memory:
            memory -= self.expert_memory * self.expert_untouched_base ** max(0.0, tokens)
        return (
            roofline(memory, self.compute_per_seq * tokens, self.roofline_exponent)
            + self.comm_fixed
            + self.comm_per_seq * tokens
            + max(self.attention_memory_per_seq, self.attention_compute_per_seq * tokens_per_seq) * b
            + self.overhead
            + self.overhead_per_seq * batch
        )

    def compute_bound(self, batch: float) -> bool:
        """Whether the step at ``batch`` sequences is set by its FLOPs (``compute_per_seq·B`` ≥ the memory time)
        rather than by the bytes it streams: the roofline's ridge, ``B* = memory_fixed ÷ (compute_per_seq −
        memory_per_seq)`` when compute per sequence outweighs its KV read, else never."""
        b = self.filled(batch)
        return self.compute_per_seq * b >= self.memory_fixed + self.memory_per_seq * b


def decode_step_model(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    mean_context_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> DecodeStepModel:
    """The coefficients of :class:`DecodeStepModel` at a mean context of ``mean_context_tokens`` tokens.

    Pipeline parallelism (PP stages, ``pipeline_parallel_size``): the engine splits the running batch into PP
    micro-batches in flight at once (vLLM V1 ``EngineCore.step_with_batch_queue``, ``max_concurrent_batches`` = PP;
    TensorRT-LLM's and SGLang's micro-batches likewise), and a sequence's next token needs its micro-batch to pass
    every stage in turn. So the time between a sequence's tokens is ``PP × stage(B ÷ PP)``: each stage streams its
    weights (1/PP of them) once per micro-batch, so the weights stream PP times, which is the whole model once; the
    stage's GEMM FLOPs (1/PP of the model's) for its B/PP sequences add up to the model's FLOPs ÷ PP per sequence;
    its KV reads and attention for B/PP sequences on 1/PP of the layers, PP times, are the fullest stage's per
    sequence × B; its all-reduces (TP within a stage) likewise. At batch 1 a PP 2 replica is no faster per token than
    one GPU holding the model; at a large batch it serves PP micro-batches at once. The sends between stages (one
    hidden vector per token) are not priced.

    Raises:
        CapacityError: a negative context; the GPU lacks a bandwidth or FLOP/s figure.
    """
    _check("mean_context_tokens", mean_context_tokens, 0.0)
    inputs = timed_inputs(inputs)
    m = inputs.model
    tp = inputs.tensor_parallel_size
    pp = inputs.pipeline_parallel_size
    bandwidth = _bandwidth(gpu) * assumptions.memory_bandwidth_efficiency
    peak = _effective_flops(inputs, gpu, assumptions)
    body, lm_head = _matmul_parameters(inputs)
    gemm = 2 * (body + lm_head) / tp / peak / pp  # a stage's share, for the B/PP sequences of its micro-batch
    attention_compute = 4 * (m.num_attention_heads / tp) * attended_head_tokens(inputs, mean_context_tokens) / peak
    kv_read = attended_kv_bytes_per_gpu(inputs, mean_context_tokens) / _kv_bandwidth(gpu, assumptions)
    serial = assumptions.attention_serial_fraction
    comm_fixed = allreduce_seconds(inputs, gpu, 0.0, assumptions)
    expert, expert_at_dense = _expert_seconds(inputs, gpu, assumptions)
    return DecodeStepModel(
        # a token passes the PP stages in turn: each streams its weights once per micro-batch
        memory_fixed=pp * (weights_bytes_per_gpu(inputs) / bandwidth - expert_at_dense + expert),
        memory_per_seq=(1.0 - serial) * kv_read,
        compute_per_seq=gemm + (1.0 - serial) * attention_compute,
        comm_fixed=comm_fixed,
        comm_per_seq=(allreduce_seconds(inputs, gpu, 1.0, assumptions) - comm_fixed) / pp,
        overhead=assumptions.step_overhead_seconds,
        expert_memory=pp * expert,
        expert_untouched_base=untouched_expert_fraction(inputs, 1.0 / pp),
        attention_memory_per_seq=serial * kv_read,
        attention_compute_per_seq=serial * attention_compute,
        overhead_per_seq=assumptions.step_overhead_per_seq_seconds,
        roofline_exponent=assumptions.roofline_exponent,
        pipeline_stages=pp,
    )


def decode_step_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    batch: float,
    mean_context_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Seconds for one decode step of ``batch`` sequences at a mean context of ``mean_context_tokens``.

    Example: Llama-3.1-8B bf16 on one H100-SXM (3.35 TB/s), batch 1, 1,000 tokens of context:
    (16.09 GB weights + 0.13 GB KV) ÷ (3.35 TB/s × 0.8) ≈ 6.05 ms (memory-bound; compute 0.03 ms).

    Raises:
        CapacityError: batch < 1 or a negative context; the GPU lacks a bandwidth or FLOP/s figure.
    """
    _check("batch", batch, 1.0)
    return decode_step_model(inputs, gpu, mean_context_tokens, assumptions)(batch)


def tpot_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    batch: float,
    mean_context_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Time per output token, seconds: each running sequence gets one token per decode step, so TPOT =
    :func:`decode_step_seconds` (without prefill interference)."""
    return decode_step_seconds(inputs, gpu, batch, mean_context_tokens, assumptions)


def decode_tokens_per_second(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    batch: float,
    mean_context_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Output tokens per second of one replica: ``batch ÷ decode_step_seconds``."""
    return batch / decode_step_seconds(inputs, gpu, batch, mean_context_tokens, assumptions)


@dataclass(frozen=True)
class PrefillRoofline:
    """The terms of one prefill step (seconds): ``memory`` (weights once + the KV written, at the achieved
    bandwidth), ``compute`` (its FLOPs at the achieved tensor rate), ``comm`` (the tensor-parallel all-reduces of
    its rows) and ``overhead`` (the fixed per-step and per-request CPU costs of :class:`PerfAssumptions`).
    :func:`prefill_seconds` is ``roofline(memory, compute) + comm + overhead`` (:func:`roofline`, with
    :attr:`PerfAssumptions.roofline_exponent`)."""

    memory: float
    compute: float
    comm: float
    overhead: float = 0.0
    roofline_exponent: float = 0.0

    @property
    def seconds(self) -> float:
        """The prefill time, seconds: ``roofline(memory, compute) + comm + overhead`` (:func:`roofline`)."""
        return roofline(self.memory, self.compute, self.roofline_exponent) + self.comm + self.overhead

    @property
    def compute_bound(self) -> bool:
        """Whether the FLOPs, not the bytes, set the prefill time (``compute ≥ memory``)."""
        return self.compute >= self.memory


def prefill_batch_roofline(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    prompt_tokens: float,
    prompts: float = 1.0,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> PrefillRoofline:
    """The terms of the forward pass that prefills ``prompts`` prompts of ``prompt_tokens`` tokens together (a
    static batch's prefill, or the prompts one engine step admits), with one
    :attr:`PerfAssumptions.step_overhead_seconds` and ``prompts`` ×
    :attr:`PerfAssumptions.step_overhead_per_seq_seconds`; no per-request overhead.

    FLOPs per GPU: ``prompts × (2 × P × body ÷ TP + 2 × LM head ÷ TP + 2 × layers × heads/TP × head_dim × P²)``
    (the attention term per layer kind, :func:`~advisor.capacity.kvlayout.prefill_attended_head_pairs`)
    (each prompt attends to itself only); bytes: the weights once (the experts the step's tokens select,
    :func:`untouched_expert_fraction`) + ``prompts × P`` tokens of KV written; all-reduces over ``prompts × P``
    rows.

    Raises:
        CapacityError: ``prompt_tokens`` < 1 or ``prompts`` < 1; the GPU lacks a bandwidth or FLOP/s figure.
    """
    _check("prompt_tokens", prompt_tokens, 1.0)
    _check("prompts", prompts, 1.0)
    inputs = timed_inputs(inputs)
    m = inputs.model
    tp = inputs.tensor_parallel_size
    pp = inputs.pipeline_parallel_size
    fill = pipeline_fill(pp, prompts)
    body, lm_head = _matmul_parameters(inputs)
    # at PP stages (pipeline_fill): each stage holds 1/PP of the GEMMs and its layers' attention, KV and experts;
    # min(PP, prompts) micro-batches of whole prompts pass the stages at once, so the stage work is paid fill times
    flops = (
        fill
        * prompts
        * (
            (2 * prompt_tokens * body / tp + 2 * lm_head / tp) / pp
            + 4 * (m.num_attention_heads / tp) * prefill_attended_head_pairs(inputs, prompt_tokens)
        )
    )
    tokens = prompts * prompt_tokens
    expert, expert_at_dense = _expert_seconds(inputs, gpu, assumptions)
    bytes_moved = pp * weights_bytes_per_gpu(inputs) + fill * tokens * kv_bytes_per_token_per_gpu(inputs)
    touched = 1.0 - untouched_expert_fraction(inputs, fill * tokens / pp)
    return PrefillRoofline(
        memory=bytes_moved / (_bandwidth(gpu) * assumptions.memory_bandwidth_efficiency)
        + pp * (expert * touched - expert_at_dense),
        compute=flops / _effective_flops(inputs, gpu, assumptions),
        comm=allreduce_seconds(inputs, gpu, fill * tokens / pp, assumptions),
        overhead=assumptions.step_overhead_seconds + assumptions.step_overhead_per_seq_seconds * prompts,
        roofline_exponent=assumptions.roofline_exponent,
    )


def prefill_batch_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    prompt_tokens: float,
    prompts: float = 1.0,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Seconds of :func:`prefill_batch_roofline`: ``roofline(memory, compute) + all-reduce + step overhead``.

    Raises:
        CapacityError: as :func:`prefill_batch_roofline`.
    """
    return prefill_batch_roofline(inputs, gpu, prompt_tokens, prompts, assumptions).seconds


def prefill_occupancy_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    prompt_tokens: float,
    concurrent: float | None = None,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """The replica time one prompt's prefill takes from its other work, seconds: :func:`prefill_batch_seconds` of
    one prompt without pipeline stages; at PP stages with ``concurrent`` micro-batches in flight (default PP: a
    loaded replica's decode batch fills the stages), the prefill of ``k = min(PP, concurrent)`` prompts passing the
    stages together ÷ ``k``. A prompt occupies each stage for its stage's share while the other stages run other
    micro-batches (vLLM V1 ``EngineCore.step_with_batch_queue``, up to PP batches in flight), so its latency
    (:func:`prefill_batch_seconds` of one prompt, every stage in turn) is not what it takes from the others'
    throughput. Equal to that latency at PP 1 and for llama.cpp's layer split (one batch at a time,
    :func:`timed_inputs`).

    Example: Llama-3.1-8B on 4 stages, a 3,000-token prompt: alone it passes the four stages in turn (the whole
    model's time); beside three other micro-batches it holds each stage a quarter of that.

    Raises:
        CapacityError: as :func:`prefill_batch_roofline`; ``concurrent`` < 1.
    """
    pp = timed_inputs(inputs).pipeline_parallel_size
    if pp <= 1:
        return prefill_batch_seconds(inputs, gpu, prompt_tokens, 1.0, assumptions)
    k = float(pp) if concurrent is None else min(float(pp), concurrent)
    _check("concurrent", k, 1.0)
    return prefill_batch_seconds(inputs, gpu, prompt_tokens, k, assumptions) / k


def prefill_roofline(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    prompt_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> PrefillRoofline:
    """The terms of prefilling one prompt of ``prompt_tokens`` tokens alone: :func:`prefill_batch_roofline` with one
    prompt, its overhead plus :attr:`PerfAssumptions.prefill_overhead_seconds` (formulas: :func:`prefill_seconds`).

    Raises:
        CapacityError: ``prompt_tokens`` < 1; the GPU lacks a bandwidth or FLOP/s figure.
    """
    one = prefill_batch_roofline(inputs, gpu, prompt_tokens, 1.0, assumptions)
    return dataclasses.replace(one, overhead=one.overhead + assumptions.prefill_overhead_seconds)


def prefill_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    prompt_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Seconds to prefill one prompt of ``prompt_tokens`` tokens alone (a lower bound on TTFT): one step of
    :func:`prefill_batch_seconds` with one prompt, plus :attr:`PerfAssumptions.prefill_overhead_seconds`.

    FLOPs per GPU: ``2 × P × body params ÷ TP + 2 × LM head ÷ TP`` (logits for the last token only) +
    causal attention ``2 × layers × heads/TP × head_dim × P²`` (windowed layers ``4 × heads/TP × head_dim ×
    (W·P − W²/2)`` beyond their window ``W``). Bytes: weights once + the KV written. The terms:
    :func:`prefill_roofline`.

    Example: Llama-3.1-8B bf16 on one H100-SXM, 2,000 tokens: 2 × 2000 × 6.98 G + attention 0.07 T ≈ 28 TFLOP
    ÷ (989.5 TFLOP/s × 0.6) ≈ 48 ms (compute-bound).

    Raises:
        CapacityError: ``prompt_tokens`` < 1; the GPU lacks a bandwidth or FLOP/s figure.
    """
    return prefill_roofline(inputs, gpu, prompt_tokens, assumptions).seconds


def mixed_step_seconds(
    inputs: CapacityInputs,
    gpu: GPUSpec,
    decode_batch: float,
    mean_context_tokens: float,
    prompts: float,
    prompt_tokens: float,
    assumptions: PerfAssumptions = DEFAULT_ASSUMPTIONS,
) -> float:
    """Seconds of one engine step that decodes ``decode_batch`` sequences (mean context ``mean_context_tokens``)
    and prefills ``prompts`` prompts of ``prompt_tokens`` tokens in the same forward pass, as continuous
    batching with chunked prefill runs them (vLLM V1's unified scheduler, SGLang's mixed chunks, TensorRT-LLM's
    in-flight batching). ``prompts`` may be fractional: the mean admitted per step.

    The step is one roofline over the sum of the work: the weights are read once (the experts all the step's
    tokens select), the decode KV is read and the prompts' KV written; the FLOPs add::

        memory  = decode memory(B) + prompts × P × KV bytes/token ÷ bandwidth
        compute = decode compute(B) + prompts × prefill FLOPs(P) ÷ peak
        step    = roofline(memory, compute) + all-reduce(B + prompts × P rows) + serial decode attention(B)
                  + step overhead + per-sequence overhead × (B + prompts)

    so a memory-bound decode hides prefill compute up to its idle compute. With ``prompts = 0`` this is
    :func:`decode_step_seconds`; with ``decode_batch = 0`` it is :func:`prefill_batch_seconds`.

    Raises:
        CapacityError: a negative batch, context, prompt count; ``prompt_tokens`` < 1; the GPU lacks a bandwidth
            or FLOP/s figure.
    """
    _check("decode_batch", decode_batch, 0.0)
    _check("prompts", prompts, 0.0)
    _check("prompt_tokens", prompt_tokens, 1.0)
    inputs = timed_inputs(inputs)
    step = decode_step_model(inputs, gpu, mean_context_tokens, assumptions)
    m = inputs.model
    tp = inputs.tensor_parallel_size
    pp = inputs.pipeline_parallel_size
    fill = pipeline_fill(pp, decode_batch + prompts)  # the decode step's stages (above), filled or not
    body, lm_head = _matmul_parameters(inputs)
    bandwidth = _bandwidth(gpu) * assumptions.memory_bandwidth_efficiency
    prefill_tokens = prompts * prompt_tokens
    tokens = decode_batch + prefill_tokens
    memory = step.memory_fixed + fill * (
        step.memory_per_seq * decode_batch + (prefill_tokens * kv_bytes_per_token_per_gpu(inputs) / bandwidth)
    )
    if step.expert_memory:
        memory -= step.expert_memory * untouched_expert_fraction(inputs, fill * tokens / pp)
    prefill_flops = prompts * (
        (2 * prompt_tokens * body / tp + 2 * lm_head / tp) / pp  # the GEMMs as the decode step's (above)
        + 4 * (m.num_attention_heads / tp) * prefill_attended_head_pairs(inputs, prompt_tokens)
    )
    compute = fill * (step.compute_per_seq * decode_batch + prefill_flops / _effective_flops(inputs, gpu, assumptions))
    serial_attention = fill * max(step.attention_memory_per_seq, step.attention_compute_per_seq) * decode_batch
    return (
        roofline(memory, compute, assumptions.roofline_exponent)
        + allreduce_seconds(inputs, gpu, fill * tokens / pp, assumptions)
        + serial_attention
        + step.overhead_at(decode_batch + prompts)
    )
