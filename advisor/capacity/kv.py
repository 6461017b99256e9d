"""The capacity pass: weights, KV pool, blocks, tokens and the concurrency ceiling of one replica.

The accounting follows vLLM's own start-up profile, so that our numbers can be checked line by line
against the engine's log:

* ``vllm/v1/worker/gpu_worker.py`` ``Worker.determine_available_memory`` (V0:
  ``vllm/worker/worker.py`` ``determine_num_available_blocks``)::

      requested  = total_gpu_memory × gpu_memory_utilization
      non_kv     = weights + torch activation peak (profile run) + non-torch memory (CUDA context, NCCL, …)
      available  = requested − non_kv                       # "Available KV cache memory"

  (``--kv-cache-memory-bytes`` replaces ``available`` outright.)
* ``vllm/v1/core/kv_cache_utils.py``: ``page_size = 2 × block_size × kv_heads_per_gpu × head_dim ×
  dtype_bytes`` per layer; ``num_blocks = available // page_size // num_layers``; "GPU KV cache size" =
  ``num_blocks × block_size`` tokens; "Maximum concurrency for L tokens per request" =
  ``num_blocks ÷ cdiv(L, block_size)``.

What is modelled vs measured: weights, KV bytes per token, blocks and the ceiling are exact arithmetic
given the pool. The *overhead* (activation peak + non-torch) is what vLLM measures by running a dummy
batch; here it is an approximate, documented model (:class:`OverheadModel`), which is the main source of
error. Calibration against published logs (all GiB = 2³⁰ bytes):

=============================================  ===========  ===========  ======================  =======
case (vLLM version)                             measured     ours         blocks/tokens (ours)    error
=============================================  ===========  ===========  ======================  =======
Llama-3.1-8B, H100 79.11 GiB, 0.9, 8k (V1)      54.62 GiB    54.58 GiB    447,152 tok (447,088)   −0.1 %
Meta-Llama-3-8B, A100 39.50 GiB, 0.9 (0.6.6)    11.12 GiB    11.63 GiB    5,955 blk (5,691)       +4.6 %
=============================================  ===========  ===========  ======================  =======

Where the "measured" figures come from: the 0.6.6 row is a user's log quoted in a vLLM usage issue (Jan
2025: "total_gpu_memory (39.50GiB) … PyTorch activation peak memory takes 9.37GiB … # GPU blocks: 5691").
The V1 row's figures (total 79.11 GiB, weights 14.99, non-torch 0.32-0.35, activation 1.21-1.24, KV
54.62-54.68 GiB, 447,088-447,776 tokens) come from public course material and log-parser tests that print
them as *representative* V1 output; treat that row as a plausibility check until a captured log of our own
replaces it. Weights agree exactly (14.9888 GiB in V1, 14.9595 GiB in 0.6.6) once the rotary cache is counted.
The 0.6.6 row uses ``overhead_profile="vllm-v0"``: that log measured a 9.37 GiB activation peak (ours
8.86 GiB, the whole +4.6 %). With the default V1 profile the same case predicts 18.96 GiB, because V1 no
longer incurs that peak. See :data:`OVERHEAD_PROFILES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.capacity.hardware import GIB
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import (
    DTYPE_BYTES,
    kv_bytes_per_element,
    resolve_dtype,
    weight_bytes_per_param,
)
from advisor.errors import CapacityError

__all__ = [
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "OVERHEAD_PROFILES",
    "CapacityInputs",
    "CapacityResult",
    "OverheadModel",
    "capacity_pass",
    "kv_bytes_per_token_per_gpu",
    "kv_heads_per_gpu",
    "overhead_bytes_per_gpu",
    "weights_bytes_per_gpu",
]

DEFAULT_MAX_NUM_BATCHED_TOKENS: Final = 8192
"""Tokens in the profile batch when ``max_num_batched_tokens`` is None (V1 profile).

vLLM's own default depends on version and GPU: V1 0.8–0.9 used 2048 for the OpenAI server on most GPUs;
later releases use 8192 for the API server (16384 for the offline ``LLM`` class) on ≥ 70 GiB GPUs. V0
without chunked prefill used ``max(max_model_len, 2048)`` (the ``vllm-v0`` profile does that)."""


@dataclass(frozen=True)
class OverheadModel:
    """Per-GPU memory vLLM reserves besides weights and KV cache (bytes), as a function of the shapes.

    ``activation peak = T × per_token + S × vocab × logits_bytes`` where ``T`` is the profile batch in
    tokens (``max_num_batched_tokens``), ``S`` the logits rows (``max_num_seqs`` for V1's dummy sampler run,
    or ``T`` when ``logits_for_every_token``), and::

        per_token = act_bytes × (mlp_factor × intermediate ÷ TP + hidden_factor × hidden)

    ``mlp_factor = 3``: the gate-and-up output (2 × intermediate) and the activated product (1 ×
    intermediate) alive at the MLP peak, sharded by TP. ``hidden_factor = 6``: residual, normed input,
    fused qkv and attention output buffers (≈ 6 × hidden, not sharded). ``logits_bytes = 8``: fp32 logits
    plus one fp32 copy (softmax/probabilities) in the sampler. ``non_torch_bytes`` is CUDA context,
    cuBLAS workspaces and NCCL buffers (vLLM prints it as ``non_torch_memory``: 0.01–0.35 GiB on one GPU
    in published logs); ``tp_non_torch_bytes`` is added when TP > 1 (NCCL / custom all-reduce buffers;
    rough). ``cuda_graph_bytes`` is 0: vLLM ≤ 0.10 captures CUDA graphs *after* sizing the KV cache, so
    graphs come out of the (1 − utilization) head-room; newer releases may estimate and subtract them
    (0.5–1 GiB for an 8B model), which this term can carry.

    The coefficients are approximate (structural, not fitted per model); see the calibration table in
    the module docstring for the error they leave.
    """

    name: str
    logits_for_every_token: bool
    non_torch_bytes: int
    tp_non_torch_bytes: int = int(0.5 * GIB)
    cuda_graph_bytes: int = 0
    mlp_factor: float = 3.0
    hidden_factor: float = 6.0
    logits_bytes: int = 8
    description: str = field(default="", compare=False)


OVERHEAD_PROFILES: Final[dict[str, OverheadModel]] = {
    "vllm-v1": OverheadModel(
        name="vllm-v1",
        logits_for_every_token=False,
        non_torch_bytes=int(0.35 * GIB),
        description=(
            "vLLM V1 (0.8+): profile run of max_num_batched_tokens tokens computes hidden states only; "
            "logits come from a dummy sampler run over max_num_seqs rows. Checked against Llama-3.1-8B on "
            "H100 (measured activation 1.21-1.24 GiB, non-torch 0.32-0.35 GiB; ours 1.28 + 0.35)."
        ),
    ),
    "vllm-v0": OverheadModel(
        name="vllm-v0",
        logits_for_every_token=True,
        non_torch_bytes=int(0.10 * GIB),
        description=(
            "vLLM 0.6.x V0 without chunked prefill: the published 0.6.6 log for Meta-Llama-3-8B on A100 40GB "
            "shows a 9.37 GiB activation peak at 8192 tokens (≈ 1.2 MB/token), which only fits if fp32 "
            "logits (+ one copy) were materialised for every profiled token; modelled that way. This "
            "mechanism is inferred from the log, not read in the 0.6.6 source; a 0.7 V0 log with chunked "
            "prefill (2048 tokens) shows 0.22 GiB, so use this profile for 0.6.x only."
        ),
    ),
}
"""Overhead models by engine generation. ``vllm-v1`` is the default."""


@dataclass(frozen=True)
class CapacityInputs:
    """Everything the capacity pass reads (vLLM flag names in brackets).

    Attributes:
        model: the architecture.
        gpu_memory_bytes: device total as CUDA reports it, bytes (:attr:`GPUSpec.memory_bytes`).
        tensor_parallel_size: GPUs per replica [``--tensor-parallel-size``].
        gpu_memory_utilization: fraction of the device total vLLM may use [``--gpu-memory-utilization``].
        max_model_len: the longest request, tokens; None → ``model.max_position_embeddings``
            [``--max-model-len``].
        dtype: weight/compute dtype [``--dtype``], ``auto`` = checkpoint dtype (float32 → bfloat16).
        quantization: ``None``, ``fp8``, ``int8``, ``awq``, ``gptq`` [``--quantization``].
        kv_cache_dtype: [``--kv-cache-dtype``] ``auto`` (= compute dtype), ``fp8``, ``fp8_e4m3``,
            ``fp8_e5m2``.
        max_num_seqs: the batch cap, sequences [``--max-num-seqs``]; sizes the V1 sampler warm-up.
        max_num_batched_tokens: tokens per step [``--max-num-batched-tokens``]; sizes the activation peak.
            None → :data:`DEFAULT_MAX_NUM_BATCHED_TOKENS` (V1) or ``max(max_model_len, 2048)`` (V0).
        block_size: tokens per KV block [``--block-size``].
        kv_cache_memory_bytes: per-GPU KV pool override, bytes [``--kv-cache-memory-bytes``].
        overhead_profile: key of :data:`OVERHEAD_PROFILES`.
    """

    model: ModelArch
    gpu_memory_bytes: int
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    block_size: int = 16
    kv_cache_memory_bytes: int | None = None
    overhead_profile: str = "vllm-v1"

    def __post_init__(self) -> None:
        problems: list[str] = []
        if self.gpu_memory_bytes <= 0:
            problems.append(f"gpu_memory_bytes must be > 0, got {self.gpu_memory_bytes}")
        if self.tensor_parallel_size < 1:
            problems.append(f"tensor_parallel_size must be ≥ 1, got {self.tensor_parallel_size}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            problems.append(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.max_model_len is not None and self.max_model_len < 1:
            problems.append(f"max_model_len must be ≥ 1, got {self.max_model_len}")
        if self.max_num_seqs < 1:
            problems.append(f"max_num_seqs must be ≥ 1, got {self.max_num_seqs}")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 1:
            problems.append(f"max_num_batched_tokens must be ≥ 1, got {self.max_num_batched_tokens}")
        if self.block_size < 1:
            problems.append(f"block_size must be ≥ 1, got {self.block_size}")
        if self.kv_cache_memory_bytes is not None and self.kv_cache_memory_bytes < 0:
            problems.append(f"kv_cache_memory_bytes must be ≥ 0, got {self.kv_cache_memory_bytes}")
        if self.overhead_profile not in OVERHEAD_PROFILES:
            problems.append(
                f"overhead_profile {self.overhead_profile!r} unknown; known: {', '.join(OVERHEAD_PROFILES)}"
            )
        tp = self.tensor_parallel_size
        m = self.model
        if tp >= 1 and m.num_attention_heads % tp != 0:
            problems.append(
                f"{m.name}: {m.num_attention_heads} attention heads are not divisible by tensor_parallel_size {tp}"
            )
        if tp >= 1 and (m.num_kv_heads % tp if m.num_kv_heads >= tp else tp % m.num_kv_heads) != 0:
            problems.append(f"{m.name}: {m.num_kv_heads} KV heads cannot be split or replicated evenly over TP={tp}")
        if problems:
            raise CapacityError("; ".join(problems))

    @property
    def effective_max_model_len(self) -> int:
        """``max_model_len`` or, when None, the model's ``max_position_embeddings`` (tokens)."""
        return self.max_model_len if self.max_model_len is not None else self.model.max_position_embeddings

    @property
    def compute_dtype(self) -> str:
        """The serving dtype (``auto`` resolved; see :func:`~advisor.capacity.precision.resolve_dtype`)."""
        return resolve_dtype(self.dtype, self.model.torch_dtype)

    @property
    def profile_tokens(self) -> int:
        """Tokens in vLLM's profile batch: ``max_num_batched_tokens`` or the profile's default."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        if self.overhead_profile == "vllm-v0":
            length = self.effective_max_model_len
            return max(length, 2048) if length < 32768 else 2048
        return DEFAULT_MAX_NUM_BATCHED_TOKENS


@dataclass(frozen=True)
class CapacityResult:
    """The capacity of one replica (``tensor_parallel_size`` GPUs). Bytes, tokens, blocks.

    Attributes:
        weights_bytes_per_gpu: model weights resident on each GPU.
        kv_cache_bytes_per_token: KV bytes one token occupies across the replica's GPUs (per-GPU × TP; KV
            heads replicated under TP > kv_heads are counted once per copy, as they are stored).
        kv_cache_bytes_per_token_per_gpu: ``2 × layers × kv_heads_per_gpu × head_dim × kv bytes``.
        overhead_bytes_per_gpu: activation peak + non-torch (+ CUDA graphs) per GPU (modelled).
        kv_pool_bytes_per_gpu: memory handed to the KV cache on each GPU.
        kv_cache_blocks: blocks per replica (each block spans all TP ranks).
        kv_cache_tokens: ``kv_cache_blocks × block_size``.
        max_concurrency: ``kv_cache_blocks ÷ ceil(max_model_len ÷ block_size)``: full-length requests the
            pool holds at once, as vLLM prints "Maximum concurrency" (e.g. 11.12).
        max_model_len, block_size, tensor_parallel_size, gpu_memory_bytes, gpu_memory_utilization: inputs
            echoed.
        model_name, dtype, quantization, kv_cache_dtype, overhead_profile: input summary (dtype resolved).
    """

    weights_bytes_per_gpu: int
    kv_cache_bytes_per_token: int
    kv_cache_bytes_per_token_per_gpu: int
    overhead_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int
    kv_cache_blocks: int
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len: int
    block_size: int
    tensor_parallel_size: int
    gpu_memory_bytes: int
    gpu_memory_utilization: float
    model_name: str = ""
    dtype: str = ""
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    overhead_profile: str = "vllm-v1"

    @property
    def fits_one_full_length_request(self) -> bool:
        """Whether one ``max_model_len`` request fits (vLLM refuses to start otherwise)."""
        return self.max_concurrency >= 1.0

    def concurrency_at(self, context_tokens: float) -> float:
        """Sequences the pool holds at a mean context of ``context_tokens`` tokens.

        ``kv_cache_blocks ÷ ceil(context_tokens ÷ block_size)`` (paged allocation: a sequence holds whole
        blocks). Contexts below one token count as one block.

        Raises:
            CapacityError: ``context_tokens`` is negative or not finite.
        """
        if not math.isfinite(context_tokens) or context_tokens < 0:
            raise CapacityError(f"context_tokens must be a finite number ≥ 0, got {context_tokens}")
        blocks_per_seq = max(1, math.ceil(context_tokens / self.block_size))
        return self.kv_cache_blocks / blocks_per_seq

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field, plus GiB conveniences and an ``inputs`` summary."""
        return {
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache_bytes_per_token_per_gpu": self.kv_cache_bytes_per_token_per_gpu,
            "overhead_bytes_per_gpu": self.overhead_bytes_per_gpu,
            "kv_pool_bytes_per_gpu": self.kv_pool_bytes_per_gpu,
            "kv_cache_blocks": self.kv_cache_blocks,
            "kv_cache_tokens": self.kv_cache_tokens,
            "max_concurrency": self.max_concurrency,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "fits_one_full_length_request": self.fits_one_full_length_request,
            "gib": {
                "gpu_memory": round(self.gpu_memory_bytes / GIB, 2),
                "weights_per_gpu": round(self.weights_bytes_per_gpu / GIB, 2),
                "overhead_per_gpu": round(self.overhead_bytes_per_gpu / GIB, 2),
                "kv_pool_per_gpu": round(self.kv_pool_bytes_per_gpu / GIB, 2),
            },
            "inputs": {
                "model": self.model_name,
                "dtype": self.dtype,
                "quantization": self.quantization,
                "kv_cache_dtype": self.kv_cache_dtype,
                "overhead_profile": self.overhead_profile,
            },
        }


# --- the steps, each usable on its own --------------------------------------------------------------------


def kv_heads_per_gpu(model: ModelArch, tensor_parallel_size: int) -> int:
    """KV heads each TP rank stores: ``max(1, kv_heads // TP)``; below one head per rank vLLM replicates
    heads (``vllm/model_executor/layers/linear.py`` ``QKVParallelLinear``)."""
    return max(1, model.num_kv_heads // tensor_parallel_size)


def kv_bytes_per_token_per_gpu(inputs: CapacityInputs) -> int:
    """KV bytes per token on one GPU: ``2 (K and V) × layers × kv_heads_per_gpu × head_dim × kv bytes``.

    Llama-3.1-8B, bf16, TP1: 2 × 32 × 8 × 128 × 2 = 131,072 bytes (128 KiB) per token.
    """
    m = inputs.model
    element = kv_bytes_per_element(inputs.kv_cache_dtype, inputs.compute_dtype)
    return 2 * m.num_layers * kv_heads_per_gpu(m, inputs.tensor_parallel_size) * m.head_dim * element


def weights_bytes_total(inputs: CapacityInputs) -> int:
    """Bytes of all weights of one copy of the model (before sharding).

    ``linear params × weight_bytes_per_param(dtype, quantization) + (embeddings + LM head + norms) × dtype
    bytes``: quantization methods leave embeddings, LM head and norms in the compute dtype.
    """
    m = inputs.model
    compute = inputs.compute_dtype
    linear = weight_bytes_per_param(compute, inputs.quantization)
    unquantized = m.num_parameters - m.linear_parameters()
    return math.ceil(m.linear_parameters() * linear + unquantized * DTYPE_BYTES[compute])


def weights_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Weight bytes resident on each GPU of a replica.

    vLLM shards every linear layer *and* the embedding/LM head (``VocabParallelEmbedding``,
    ``ParallelLMHead``) across TP ranks; norms are replicated (counted on every rank); when TP exceeds
    the KV heads, each rank stores whole replicated k/v projections (``QKVParallelLinear``), which is added.
    So ``per_gpu = (total − norms) ÷ TP + norms + kv replication excess + rotary cache``. The rotary
    cos/sin cache (``max_position_embeddings × head_dim`` elements of the compute dtype, a registered buffer
    of ``RotaryEmbedding`` on every rank) is what vLLM's "Model loading took" adds to the parameters:
    Llama-3.1-8B 16,060,522,496 B + 131072 × 128 × 2 B = 14.9888 GiB, exactly as vLLM V1 logs;
    Meta-Llama-3-8B (8192 positions) 14.9595 GiB, exactly as vLLM 0.6.6 logs. TP=2 halves per-GPU
    weights to within the norms and rotary cache (≈ 0.2 %).
    """
    m = inputs.model
    tp = inputs.tensor_parallel_size
    compute = inputs.compute_dtype
    total = weights_bytes_total(inputs)
    norms = m.norm_parameters() * DTYPE_BYTES[compute]
    rotary = m.max_position_embeddings * m.head_dim * DTYPE_BYTES[compute]
    per_gpu = (total - norms) / tp + norms + rotary
    if tp > m.num_kv_heads:
        linear = weight_bytes_per_param(compute, inputs.quantization)
        kv_layer = m.kv_projection_parameters_per_layer() * linear
        stored = kv_layer * kv_heads_per_gpu(m, tp) / m.num_kv_heads
        per_gpu += m.num_layers * (stored - kv_layer / tp)
    return math.ceil(per_gpu)


def overhead_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Non-KV, non-weight memory on each GPU (bytes) per :class:`OverheadModel` of ``overhead_profile``.

    Example (vllm-v1, Llama-3.1-8B, bf16, TP1, 8192 batched tokens, 256 seqs):
    8192 × 2 × (3 × 14336 + 6 × 4096) = 1.031 GiB activations + 256 × 128256 × 8 = 0.245 GiB sampler
    + 0.35 GiB non-torch = 1.63 GiB.
    """
    model = OVERHEAD_PROFILES[inputs.overhead_profile]
    m = inputs.model
    tp = inputs.tensor_parallel_size
    act = DTYPE_BYTES[inputs.compute_dtype]
    tokens = inputs.profile_tokens
    per_token = act * (model.mlp_factor * m.intermediate_size / tp + model.hidden_factor * m.hidden_size)
    logit_rows = tokens if model.logits_for_every_token else min(inputs.max_num_seqs, tokens)
    logits = logit_rows * m.vocab_size * model.logits_bytes
    non_torch = model.non_torch_bytes + (model.tp_non_torch_bytes if tp > 1 else 0)
    return math.ceil(tokens * per_token + logits + non_torch + model.cuda_graph_bytes)


def capacity_pass(inputs: CapacityInputs) -> CapacityResult:
    """Weights → KV pool → blocks → tokens → concurrency ceiling, for one replica.

    Formulas (sources: vLLM ``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory`` and
    ``vllm/v1/core/kv_cache_utils.py``; see the module docstring)::

        weights/GPU   = see weights_bytes_per_gpu           (params × bytes/param, ÷ TP)
        KV/token/GPU  = 2 × layers × max(1, kv_heads // TP) × head_dim × kv_bytes
        pool/GPU      = gpu_memory × utilization − weights/GPU − overhead/GPU   (or the override)
        blocks        = floor(pool/GPU ÷ (block_size × KV/token/GPU))
        tokens        = blocks × block_size
        concurrency   = blocks ÷ ceil(max_model_len ÷ block_size)

    WORKED EXAMPLE: Llama-3.1-8B-Instruct on one H100-SXM (CUDA total 79.15 GiB), util 0.9,
    ``--max-model-len 8192``, bf16, defaults otherwise (vllm-v1 overhead)::

        requested     79.15 GiB × 0.9                            = 71.235 GiB
        weights       8,030,261,248 × 2 B + rotary 32 MiB        = 14.99 GiB   (vLLM logs 14.99)
        overhead      1.03 act + 0.24 sampler + 0.35 non-torch   =  1.63 GiB   (vLLM 1.21-1.24 + 0.32-0.35)
        KV pool       71.235 − 14.99 − 1.63                      = 54.62 GiB   (vLLM logs 54.62-54.68)
        KV/token      2 × 32 × 8 × 128 × 2 B                     = 131,072 B   (128 KiB)
        blocks        floor(54.62 GiB ÷ (16 × 131,072 B))        = 27,965
        tokens        27,965 × 16                                = 447,440     (vLLM logs 447,088-447,776)
        concurrency   27,965 ÷ ceil(8192 ÷ 16) = 27,965 ÷ 512    = 54.62×
        at a 2,000-token mean context: 27,965 ÷ 125 = 223.7 sequences (max_num_seqs=256 binds later)

    (vLLM figures: V1 logs of this model on H100 80GB HBM3 reporting 79.11 GiB total, cited in the module
    docstring; ours at 79.11 GiB gives 54.58 GiB / 447,152 tokens.)

    Raises:
        CapacityError: the weights do not fit in ``gpu_memory × utilization``, or nothing is left for the
            KV cache after the overhead; the message carries the GiB figures.
    """
    m = inputs.model
    tp = inputs.tensor_parallel_size
    weights = weights_bytes_per_gpu(inputs)
    overhead = overhead_bytes_per_gpu(inputs)
    requested = inputs.gpu_memory_bytes * inputs.gpu_memory_utilization
    if inputs.kv_cache_memory_bytes is not None:
        if weights > inputs.gpu_memory_bytes:
            raise CapacityError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} but the GPU has "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB"
            )
        pool = inputs.kv_cache_memory_bytes
    else:
        if weights >= requested:
            raise CapacityError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} "
                f"({inputs.compute_dtype}, quantization={inputs.quantization}) but only "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB × {inputs.gpu_memory_utilization} = "
                f"{requested / GIB:.2f} GiB may be used; raise tensor_parallel_size, quantize, or use a "
                "larger GPU"
            )
        pool = math.floor(requested - weights - overhead)
        if pool <= 0:
            raise CapacityError(
                f"{m.name}: weights {weights / GIB:.2f} GiB + overhead {overhead / GIB:.2f} GiB per GPU "
                f"leave no KV cache in {requested / GIB:.2f} GiB ({inputs.gpu_memory_bytes / GIB:.2f} GiB × "
                f"{inputs.gpu_memory_utilization}); lower max_num_batched_tokens, raise utilization or TP"
            )
    per_token_gpu = kv_bytes_per_token_per_gpu(inputs)
    blocks = pool // (inputs.block_size * per_token_gpu)
    max_len = inputs.effective_max_model_len
    return CapacityResult(
        weights_bytes_per_gpu=weights,
        kv_cache_bytes_per_token=per_token_gpu * tp,
        kv_cache_bytes_per_token_per_gpu=per_token_gpu,
        overhead_bytes_per_gpu=overhead if inputs.kv_cache_memory_bytes is None else 0,
        kv_pool_bytes_per_gpu=pool,
        kv_cache_blocks=blocks,
        kv_cache_tokens=blocks * inputs.block_size,
        max_concurrency=blocks / math.ceil(max_len / inputs.block_size),
        max_model_len=max_len,
        block_size=inputs.block_size,
        tensor_parallel_size=tp,
        gpu_memory_bytes=inputs.gpu_memory_bytes,
        gpu_memory_utilization=inputs.gpu_memory_utilization,
        model_name=m.name,
        dtype=inputs.compute_dtype,
        quantization=inputs.quantization,
        kv_cache_dtype=inputs.kv_cache_dtype,
        overhead_profile=inputs.overhead_profile,
    )
