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
  ``num_blocks ÷ cdiv(L, block_size)``. Sliding-window models on V1 ≥ 0.9.1 are laid out in padded KV cache groups
  with a per-request window that includes the scheduled batch (:func:`hybrid_kv_layout`,
  :func:`hybrid_blocks_per_request`); V0 and earlier V1 keep their windows at full length
  (:func:`vllm_max_concurrency`).

What is modelled vs measured: weights, KV bytes per token, blocks and the ceiling are exact arithmetic
given the pool. The *overhead* (activation peak + non-torch) is what vLLM measures by running a dummy
batch; here it is a documented model (:class:`OverheadModel`: the larger of the forward pass and the
sampler warm-up), the main source of error. Against published start-up logs (all GiB = 2³⁰ bytes; the
tests in ``tests/capacity/test_vllm_startup_logs.py`` cite each):

==================================================  ============  ============  ======
case (vLLM version)                                 engine tokens ours          error
==================================================  ============  ============  ======
Qwen3-235B-A22B-FP8, 8× L40S, EP, 0.10.2            237,344       230,016       −3.1 %
Qwen2.5-0.5B fp16, T4, 0.6.6.post1 (V0)             928,944       932,096       +0.3 %
llava-v1.6-mistral-7b fp16, 79.19 GiB, 0.10.2       451,744       450,352       −0.3 %
Meta-Llama-3-8B, A100 40GB, 0.6.6 (V0)              91,056        158,080       +74 %
DeepSeek-R1 FP8, 8× H200, 0.7.3 (V0, MLA)           294,688       297,888       +1.1 %
==================================================  ============  ============  ======

Each term is traced in the engine's own breakdown (``determine_num_available_blocks`` in
``vllm/worker/worker.py``, 0.6.6 lines 177-248 / 0.7.3 lines 205-271: ``available = total × util − (weights +
torch peak increase + non-torch increase)``, the weights measured at load and *outside* the peak;
``profile_run`` in ``vllm/worker/model_runner.py``, 0.6.6 lines 1231-1333: ``max_num_seqs`` prompts sharing
``max_num_batched_tokens``, then the sampler over one logits row each):

* DeepSeek-R1, 0.7.3: the log reads activation 6.37 GiB (ours 6.35: the fused-MoE forward at 32,000 tokens,
  above the 4.8 GiB sampler) and ``non_torch_memory takes 7.16GiB`` (ours 7.05). ``non_torch`` in 0.7.3 is
  device-used − torch-reserved since ``init_device`` (``vllm/utils.py`` ``memory_profiling``), so it holds the
  two NCCL communicators V0 opens at TP 8 (pynccl, and torch.distributed's TP group that gathers the logits):
  their ring and P2P buffers (2.00 GiB at TP 8, from an 8 × A100 log) and, on an NVSwitch Hopper node, their
  NVLink SHARP buffers (4.95 GiB at TP 8, measured in vllm-project/vllm#9699; NCCL 2.19-2.22
  ``src/transport/nvls.cc``): :func:`non_torch_bytes_per_gpu`. Neither figure came from this log. With
  ``--gpu-memory-gib 139.81`` alone the plan knows the H200 (the only part with that CUDA total).
* Meta-Llama-3-8B, 0.6.6 (the one miss): non-torch matches (0.10 GiB) but the log's activation is 9.37 GiB
  against 1.19 here. The release's default accounting is pinned by the Qwen2.5-0.5B log above (0.6.6.post1,
  the same ``worker.py:241`` lines): 1.44 GiB at 256 sequences, the sampler term, reproduced to 0.3 %; the
  same architecture logs 1.26 GiB at these settings (vLLM PR #10511). 9.37 GiB is the sampler term at about
  2,048 sequences (2,048 × 128,256 × 38.3 B; ``--max-num-seqs 2048`` gives 5,606 blocks, −1.5 %), an engine
  argument the quoted log does not show, so the case stays an expected failure rather than a fitted constant.

With the engine's own KV memory (``kv_cache_memory_bytes``) all five match the engine's blocks to the rounding
of the printed GiB, and weights match within 0.6 %. Other engines (SGLang, TGI, TensorRT-LLM, llama.cpp):
:mod:`advisor.capacity.engines`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Final

from advisor.capacity.generation import Accounting, parse_version, vllm_accounting
from advisor.capacity.hardware import GIB
from advisor.capacity.lora import LoRASettings, lora_bytes, lora_counted, lora_problems
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import (
    DTYPE_BYTES,
    EXPERTS_ONLY,
    MXFP4_BITS,
    device_support_problems,
    kv_bytes_per_element,
    mxfp4_padded_expert_shape,
    resolve_dtype,
    weight_bytes_per_param,
)
from advisor.capacity.speculative import SpeculativeDraft
from advisor.errors import CapacityError

__all__ = [
    "ACCOUNTING_ENGINES",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "OVERHEAD_PROFILES",
    "SAMPLERS",
    "V0_FORWARD_FACTORS",
    "V0_MLP_REBINDING_TYPES",
    "CapacityInputs",
    "CapacityResult",
    "EngineSettings",
    "HybridKVLayout",
    "OverheadModel",
    "across_ranks",
    "activation_peak_bytes",
    "capacity_pass",
    "cpu_offload_bytes_per_gpu",
    "cuda_graph_bytes_per_gpu",
    "default_sampler",
    "draft_weights_bytes_per_gpu",
    "hybrid_blocks_per_request",
    "hybrid_kv_layout",
    "kv_bytes_per_token_per_gpu",
    "kv_bytes_per_token_per_layer",
    "kv_heads_per_gpu",
    "lora_bytes_per_gpu",
    "max_concurrency",
    "mla_v0_copies_bytes_per_layer",
    "mxfp4_padding_bytes_per_gpu",
    "non_torch_bytes_per_gpu",
    "nvls_bytes_per_gpu",
    "overhead_bytes_per_gpu",
    "parse_version",
    "profile_for_version",
    "recurrent_state_bytes_per_sequence",
    "sampler_bytes_per_logit",
    "sampler_problems",
    "v0_forward_elements_per_token",
    "v0_mlp_code",
    "vllm_accounting_of",
    "vllm_capacity_pass",
    "vllm_default_max_num_seqs",
    "vllm_max_concurrency",
    "vllm_mha_fallback_head_size",
    "weights_bytes_per_gpu",
]

MIB: Final = 1 << 20

GPUS_PER_NVLINK_NODE: Final = 8
"""GPUs behind one NVSwitch in an HGX/DGX node (H100, H200, B200): NCCL's intra-node peers and NVLS heads."""

NVLS_BYTES_PER_CHANNEL_HEAD: Final = int(4.95 * GIB / (2 * 24 * 8))
"""NCCL NVLink SHARP memory per channel per head per communicator (bytes), NCCL 2.19–2.22 (torch ≤ 2.6).

``src/transport/nvls.cc`` allocates ``nChannels × 2 × (NCCL_BUFFSIZE 4 MiB + 2 MiB)`` per head, 12 MiB per
channel per head; vLLM's NCCL log on 8 × H200 prints ``nvlsTotalSize 2415919104`` (24 channels, 8 heads: 2.25
GiB). Measured, switching NVLS off at TP 8 on 8 × H200 returns 17,595 → 227xx blocks of Llama-3.1-405B
(1,032,192 B each), 4.91–5.00 GiB, for V0's two communicators (vllm-project/vllm#9699): 10 % above
2 × 2.25 GiB. This constant carries the measured 4.95 GiB: 4.95 GiB ÷ (2 × 24 × 8) = 13.2 MiB."""

FUSED_MOE_CHUNK_TOKENS: Final = 32768
"""Tokens per fused-MoE call (``VLLM_FUSED_MOE_CHUNK_SIZE``); the MoE intermediates never exceed this chunk."""

CUDA_GRAPH_ESTIMATE_SINCE: Final = (0, 20)
"""The first vLLM release that subtracts its CUDA-graph memory estimate from the KV budget by default.

``vllm/v1/worker/gpu_worker.py`` ``Worker.determine_available_memory`` (0.20.0, 0.21.0): ``available =
requested − non_kv_cache_memory − cudagraph_memory_estimate_applied``, the estimate applied when
``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` holds. ``vllm/envs.py`` defaults it to "1" in the 0.20.0 and 0.21.0
wheels and to "0" in 0.19.0 (read from the PyPI wheels), although the log line of 0.20 and later says
"CUDA graph memory profiling is enabled (default since v0.21.0)". 0.18 and 0.19 compute and print the estimate
but apply it only when opted in ("In v0.19, CUDA graph memory profiling will be enabled by default …")."""

CUDA_GRAPH_ESTIMATE_ENV: Final = "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"
"""vLLM's switch for the CUDA-graph estimate (``vllm/envs.py``, 0.21.0): ``0`` turns the deduction off."""

MLA_ALIGN_ENV: Final = "VLLM_CUDA_MEM_ALIGN_KV_CACHE"
"""vLLM V0's switch for 256-byte MLA cache entries (``vllm/envs.py``, 0.7.x, default "1"; read by
``vllm/worker/cache_engine.py`` ``CacheEngine._allocate_kv_cache``): ``0`` leaves entries unpadded."""

DEFAULT_MAX_NUM_BATCHED_TOKENS: Final = 8192
"""Tokens in the profile batch when ``max_num_batched_tokens`` is None (V1 profile).

vLLM's own default depends on version and GPU: V1 0.8–0.9 used 2048 for the OpenAI server on most GPUs;
later releases use 8192 for the API server (16384 for the offline ``LLM`` class) on ≥ 70 GiB GPUs. V0
without chunked prefill used ``max(max_model_len, 2048)`` (the ``vllm-v0`` profile does that)."""


V0_CHUNKED_PREFILL_2048_SINCE: Final = (0, 6, 5)
"""The first V0 release whose chunked-prefill step defaults to 2048 tokens: ``SchedulerConfig.__post_init__``
(``vllm/config.py`` 0.6.5, 0.6.6, 0.7.3: ``self.max_num_batched_tokens = 2048``); 0.6.3.post1 and 0.6.4.post1
(``SchedulerConfig.__init__``) take 512 ("the values that have the best balance between ITL and TTFT on A100")."""

V1_CHUNKED_PREFILL_OFF_SINCE: Final = (0, 11, 1)
"""The first V1 release that honours ``--no-enable-chunked-prefill`` for generation models, sizing the step
``max(max_model_len, default)`` when ``max_num_batched_tokens`` is unset (``vllm/engine/arg_utils.py``
``EngineArgs._set_default_args``, 0.11.1, 0.11.2, 0.12.0: ``if not self.enable_chunked_prefill:
self.max_num_batched_tokens = max(model_config.max_model_len, self.max_num_batched_tokens)``). 0.8.5-0.11.0 set
``self.enable_chunked_prefill = True`` for every non-pooling model, whatever was asked."""


V0_MLP_REBINDING_TYPES: Final = frozenset({"llama", "mistral", "phi3", "aquila", "internlm", "internlm3", "xverse"})
"""``model_type``s vLLM V0 runs through ``llama.py``'s ``LlamaMLP``, whose ``forward`` rebinds ``x`` (``x, _ =
gate_up_proj(x); x = act_fn(x)``), so the gate-and-up output is freed once the activation is computed
(``vllm/model_executor/models/registry.py`` at v0.6.6 and v0.7.3: LlamaForCausalLM, MistralForCausalLM,
AquilaForCausalLM, InternLM(3)ForCausalLM and XverseForCausalLM → ``llama.py``; ``phi3.py``'s Phi3ForCausalLM
subclasses it; Yi's checkpoints say ``llama``). Every other gated MLP in those releases keeps ``gate_up`` until
``down_proj`` returns (``qwen2.py`` ``Qwen2MLP``, reused by ``qwen3.py``; ``deepseek_v2.py``, ``gemma*.py``,
``granite.py``, ``internlm2.py``, ``olmo*.py`` …: 19 of the 20 gated MLP classes of v0.7.3)."""

V0_FORWARD_FACTORS: Final[dict[str, tuple[float, float]]] = {
    "rebinding": (3.0, 3.0),
    "holding": (4.0, 3.0),
    "two_matrix": (3.0, 2.0),
}
"""(hidden factor, MLP factor) of vLLM V0's dense forward peak, by how the model code holds its MLP tensors: the
peak per token is ``hidden factor × hidden + MLP factor × intermediate ÷ TP`` activation elements, the most the
torch caching allocator holds at once over one decoder layer (V0 runs eagerly: no torch.compile, no fusion).

Read from the model files at v0.6.6 and v0.7.3. Throughout a layer three hidden-wide tensors live: the model
loop's ``hidden_states`` (the layer's input, which ``LlamaModel.forward`` keeps referenced while the layer runs;
the fused add-RMSNorm normalizes it in place), the residual, and the post-attention hidden state fed to the MLP.

* ``rebinding`` (``LlamaMLP``): gate_up (2i) + activation output (i) at ``act_fn``: 3h + 3i; at ``down_proj``
  gate_up is gone (3h + i + h).
* ``holding`` (``Qwen2MLP``): ``gate_up`` stays referenced until ``forward`` returns, so at ``down_proj`` 3h +
  2i + i + h: 4h + 3i.
* ``two_matrix`` (``PhiMLP``, ``GPT2MLP``, OPT …: ``ModelArch.gated_mlp`` False): ``fc1`` output (i) + activation
  output (i) beside the attention output of Phi's parallel block or GPT-2's ``ln_2`` output: 3h + 2i.

Check: Llama-3.1-8B at 20,000 tokens (bf16) is 20,000 × 2 × (3 × 4,096 + 3 × 14,336) = 2.06 GiB, and vLLM 0.6.4
logged ``peak_torch_memory=17.06GiB`` with 14.99 GiB of weights, 2.07 GiB (github.com/vllm-project/vllm/issues/10517).
The attention half of a layer (3h + qkv + attention output) is below these for every gated model we know; it is
taken when larger (:func:`v0_forward_elements_per_token`)."""


def v0_mlp_code(model: ModelArch) -> str:
    """Which key of :data:`V0_FORWARD_FACTORS` vLLM V0's model code for ``model`` follows: ``two_matrix`` when
    the MLP has no gate, ``rebinding`` for :data:`V0_MLP_REBINDING_TYPES`, else ``holding`` (also for an unknown
    ``model_type``: the pattern of nearly every gated model file, and the larger of the two)."""
    if not model.gated_mlp:
        return "two_matrix"
    return "rebinding" if model.model_type in V0_MLP_REBINDING_TYPES else "holding"


def v0_forward_elements_per_token(model: ModelArch, tensor_parallel_size: int) -> float:
    """Activation elements per token at the peak of one V0 decoder layer on one GPU: the larger of the MLP
    phase (:data:`V0_FORWARD_FACTORS`) and the attention phase, ``3h + (2 × q + 2 × kv) ÷ TP`` (the three
    hidden-wide tensors, the qkv projection, the attention output before ``o_proj``; ``q = heads × head_dim``,
    ``kv = kv_heads × head_dim``; ``llama.py`` ``LlamaAttention.forward`` at v0.6.6)."""
    hidden_factor, mlp_factor = V0_FORWARD_FACTORS[v0_mlp_code(model)]
    tp = tensor_parallel_size
    h = model.hidden_size
    mlp = hidden_factor * h + mlp_factor * model.intermediate_size / tp
    q = model.num_attention_heads * model.head_dim
    kv = model.num_kv_heads * model.head_dim
    attention = 3 * h + (2 * q + 2 * kv) / tp
    return max(mlp, attention)


SAMPLERS: Final = ("flashinfer", "torch")
"""Top-k/top-p samplers vLLM may run (``CapacityInputs.sampler``; ``--sampler``)."""

FLASHINFER_SAMPLER_DEFAULT_RELEASES: Final[tuple[tuple[tuple[int, ...], tuple[int, ...] | None], ...]] = (
    ((0, 8), (0, 11, 1)),
    ((0, 21), None),
)
"""V1 releases ``[first, last)`` (``None``: to date) that sample with FlashInfer by default whenever flashinfer is
importable (``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``:
``VLLM_USE_FLASHINFER_SAMPLER`` unset counts as on in V1 from 0.8 to 0.11.0, with flashinfer < 0.2.3 in 0.8.x and ≥
0.2.3 from 0.9; opt-in from 0.11.1, vllm-project/vllm#26859 (the 0.11.1 and 0.11.2 wheels' ``__init__``: ``if
envs.VLLM_USE_FLASHINFER_SAMPLER:`` … else ``forward_native``, "Users must opt in explicitly"), through 0.20, whose
``envs.py`` leaves it None; on again from 0.21, vllm-project/vllm#40376: ``envs.py`` 0.21.0
``VLLM_USE_FLASHINFER_SAMPLER`` defaults to True, the same in 0.22-0.34). V0 needs the variable set in every release
(``envs.py``: unset means off; ``model_executor/layers/sampler.py``). The official image ``vllm/vllm-openai``
installs flashinfer (0.8.x: the flashinfer_python 0.2.1.post2 wheel in ``Dockerfile``; later releases build it);
``pip install vllm`` does not before 0.11.1 (``flashinfer-python`` is the ``[flashinfer]`` extra of 0.10 and 0.11.0),
and does after ("flashinfer-python is a default dep of vLLM CUDA now", vllm-project/vllm#26859; the 0.11.1 and 0.11.2
wheels' METADATA: ``Requires-Dist: flashinfer-python==0.5.2``)."""

FLASHINFER_SAMPLER_CAPABILITY: Final = ((7, 5), (12, 1))
"""Compute capabilities ``[low, high]`` on which the default-on FlashInfer sampler of 0.21+ runs; elsewhere vLLM
quietly falls back to the PyTorch-native sampler (``TopKTopPSampler.__init__`` → ``FlashInferBackend.
supports_compute_capability``, ``vllm/v1/attention/backends/flashinfer.py`` 0.21.0: 7.5 ≤ capability ≤ 12.1)."""


def default_sampler(
    overhead_profile: str, engine_version: str | None, compute_capability: tuple[int, int] | None = None
) -> str:
    """The sampler the official image runs (``sampler`` None): ``flashinfer`` on V1 releases of
    :data:`FLASHINFER_SAMPLER_DEFAULT_RELEASES` (from 0.21 only on GPUs of :data:`FLASHINFER_SAMPLER_CAPABILITY`,
    when the capability is known), else ``torch``. An unstated version takes ``torch``: of the two warm-ups it leaves
    the smaller pool, so the plan never promises slots a release without FlashInfer would not have."""
    parsed = parse_version(engine_version)
    if overhead_profile != "vllm-v1" or parsed is None:
        return "torch"
    for first, last in FLASHINFER_SAMPLER_DEFAULT_RELEASES:
        if first <= parsed and (last is None or parsed < last):
            low, high = FLASHINFER_SAMPLER_CAPABILITY
            if last is None and compute_capability is not None and not low <= compute_capability <= high:
                return "torch"
            return "flashinfer"
    return "torch"


def sampler_problems(sampler: str | None, compute_capability: tuple[int, int] | None) -> list[str]:
    """An explicit ``flashinfer`` sampler on a CUDA GPU outside :data:`FLASHINFER_SAMPLER_CAPABILITY`: vLLM refuses it
    (``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``, 0.21.0: "FlashInfer does not support
    compute capability 7.0, unset VLLM_USE_FLASHINFER_SAMPLER=1"). Nothing when the capability is unknown."""
    low, high = FLASHINFER_SAMPLER_CAPABILITY
    if sampler != "flashinfer" or compute_capability is None or low <= compute_capability <= high:
        return []
    cc = f"{compute_capability[0]}.{compute_capability[1]}"
    return [
        f"sampler flashinfer (--sampler, VLLM_USE_FLASHINFER_SAMPLER=1): FlashInfer does not support compute "
        f"capability {cc} (it runs on {low[0]}.{low[1]} to {high[0]}.{high[1]}); vLLM refuses it, use --sampler torch"
    ]


FLASHINFER_SAMPLER_BYTES_PER_LOGIT: Final = 14.0
"""Bytes per (row × vocab) element at the peak of the FlashInfer top-k/top-p warm-up, no sort: the model's
logits (bf16, 2, held by ``_dummy_sampler_run``), their fp32 copy (4, ``Sampler.forward``), then in flashinfer
≥ 0.2.3's ``top_k_top_p_sampling_from_logits`` the top-k-masked logits (4, ``top_k_mask_logits``) and their
softmax (4) = 14 (vLLM 0.9-0.11 ``flashinfer_sample``). vLLM V0 with ``VLLM_USE_FLASHINFER_SAMPLER=1`` (0.6-0.7
``Sampler.forward``): bf16 logits, fp32 logits, probabilities and log-probabilities, 2 + 4 + 4 + 4 = 14 too."""

FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT: Final = 10.0
"""The same for vLLM V1 0.8.x, whose ``forward_cuda`` samples from probabilities with flashinfer 0.2.1's fused
``top_k_top_p_sampling_from_probs``: bf16 logits (2) + fp32 logits (4) + softmax (4) = 10."""


@dataclass(frozen=True)
class OverheadModel:
    """Per-GPU memory vLLM reserves besides weights and KV cache (bytes), as a function of the shapes.

    vLLM measures ``torch peak increase`` over a profile run: a forward pass over ``T`` =
    ``max_num_batched_tokens`` tokens split into ``max_num_seqs`` dummy requests, then the sampler over one
    logits row per request (V0 ``ModelRunner.profile_run`` with ``SamplingParams(top_p=0.99, top_k=vocab-1)``;
    V1 ``GPUModelRunner.profile_run`` → ``_dummy_run`` then ``_dummy_sampler_run``). The forward's
    intermediates are freed before the sampler runs, so the peak is the larger of the two::

        forward  = T × act_bytes × (hidden_factor × hidden + max(dense MLP, MoE) per token)
                     dense MLP per token = mlp_factor × intermediate ÷ TP
                     MoE per token       = top_k × (mlp_factor × moe_intermediate ÷ TP_moe + hidden)
                                           (fused_moe's intermediate caches 1-3; TP_moe = 1 under expert
                                           parallelism; T capped at the 32,768-token fused-MoE chunk)
        sampler  = max_num_seqs × vocab × sampler_bytes_per_logit   (full vocab on every rank)
        overhead = max(forward, sampler) + non_torch (+ tp_non_torch when TP > 1) + CUDA-graph estimate

    ``sampler_bytes_per_logit = 39``: fp32 logits (4), the top-k/top-p sort's values (4) and int64 indices (8),
    the inverse permutation (8), softmax probabilities (4), log-probabilities (4), the exponential draw ``q``
    (4) and masks ≈ 39 bytes per (row × vocab) element. Calibration: four vLLM 0.11 logs on H100 at
    max_num_seqs 1024 (Llama-3.1-8B 4.76 GiB, Qwen3-0.6B 5.56, Qwen3-32B 5.64, gpt-oss-20b 7.38 GiB "torch
    peak memory increase") give 38.4-38.9 bytes; the vLLM 0.6.6.post1 T4 log of Qwen2.5-0.5B (256 rows)
    fits 39 to 0.3 %. ``hidden_factor = 6`` (residual, normed input, qkv, attention output, MLP output
    buffers) and ``mlp_factor = 3`` (gate-and-up output and the activated product) are structural.
    ``non_torch_bytes``: CUDA context, cuBLAS workspaces (0.10-0.13 GiB on one GPU in the logs above);
    ``tp_non_torch_bytes``: NCCL and custom all-reduce buffers when TP > 1 (0.55 − 0.13 = 0.42 GiB measured
    at TP 2 on H100). ``tp_peer_non_torch_bytes``: each further GPU in the TP group (V0 only: its two NCCL
    communicators grow with the peers they connect to; an 8 × A100-40GB V0 log, DeepSeek-Coder-V2-Lite on
    vLLM 0.7.x, shows ``non_torch_memory takes 2.10GiB`` at TP 8 without NVLS, so (2.00 − 0.42) ÷ 6 = 0.263 GiB
    per peer, ±30 %: PCIe nodes use fewer NCCL channels and less). ``nvls_*``: NVLink SHARP buffers on NVSwitch
    nodes (:func:`non_torch_bytes_per_gpu`). ``cuda_graph_bytes``: vLLM's CUDA-graph memory estimate, subtracted
    before the KV cache from :data:`CUDA_GRAPH_ESTIMATE_SINCE` (0.20) on; earlier releases capture graphs after
    sizing the cache, outside the budget (:func:`cuda_graph_bytes_per_gpu`).

    ``forward_by_model_code``: the dense forward follows the model file's tensor lifetimes
    (:data:`V0_FORWARD_FACTORS` by :func:`v0_mlp_code`) instead of ``hidden_factor``/``mlp_factor`` (V0 runs the
    model eagerly; V1 compiles and fuses it, and keeps the factors above). ``whole_device_before``: releases
    below this one count *everything* on the device that torch did not allocate as non-torch memory, the CUDA
    context and libraries (``whole_device_non_torch_bytes``, 0.35 GiB on one GPU in the vLLM 0.6.4 log of
    github.com/vllm-project/vllm/issues/10517: ``non_torch_memory=0.35GiB``) and other processes' memory alike
    (V0 ``worker.py`` ``determine_num_available_blocks`` to v0.6.4.post1, V1 ``gpu_worker.py``
    ``determine_available_memory`` to v0.9.0: ``non_torch_allocations = (total − free) − allocated``); later
    releases count only the increase since a baseline taken at ``init_device`` (``vllm/utils.py``
    ``memory_profiling``, V0 from v0.6.5, V1 from v0.9.1), so the context and other processes drop out.
    """

    name: str
    logits_for_every_token: bool = False
    non_torch_bytes: int = int(0.13 * GIB)
    tp_non_torch_bytes: int = int(0.42 * GIB)
    tp_peer_non_torch_bytes: int = 0
    nvls_communicators: int = 0
    nvls_channels: int = 24
    nvls_bytes_per_channel: int = NVLS_BYTES_PER_CHANNEL_HEAD
    cuda_graph_bytes: int = 0
    mlp_factor: float = 3.0
    hidden_factor: float = 6.0
    logits_bytes: int = 8
    sampler_bytes_per_logit: float = 39.0
    mla_entry_alignment_bytes: int = 0
    mla_absorbed_weights: bool = False
    forward_by_model_code: bool = False
    whole_device_before: tuple[int, ...] = ()
    whole_device_non_torch_bytes: int = int(0.35 * GIB)
    description: str = field(default="", compare=False)


OVERHEAD_PROFILES: Final[dict[str, OverheadModel]] = {
    "vllm-v1": OverheadModel(
        name="vllm-v1",
        whole_device_before=(0, 9, 1),
        cuda_graph_bytes=int(0.62 * GIB),
        description="vLLM V1 engine (0.8 and later): GPUModelRunner.profile_run, peak of forward and sampler.",
    ),
    "vllm-v0": OverheadModel(
        name="vllm-v0",
        non_torch_bytes=int(0.10 * GIB),
        tp_peer_non_torch_bytes=int((2.00 - 0.42) / 6 * GIB),
        nvls_communicators=2,
        mla_entry_alignment_bytes=256,
        mla_absorbed_weights=True,
        forward_by_model_code=True,
        whole_device_before=(0, 6, 5),
        description=(
            "vLLM V0 engine (≤ 0.7): worker.py determine_num_available_blocks; MLA cache entries aligned to "
            "256 bytes (CacheEngine align_to_256bytes: 576 bf16 elements → 640); MLA decode weights W_UV·W_O "
            "and W_Q·W_UK pre-multiplied at load (VLLM_MLA_PERFORM_MATRIX_ABSORPTION, 0.7.x) and stored in "
            "the weight precision."
        ),
    ),
}
"""Overhead models by engine generation. ``vllm-v1`` is the default; :func:`profile_for_version` maps a
version string to one."""


def profile_for_version(engine_version: str | None) -> str:
    """The overhead profile of a vLLM version alone: ``vllm-v0`` before 0.8.0 (V1 became the default engine in
    0.8.0), else ``vllm-v1``. ``None`` or an unparsable string → ``vllm-v1``. The GPU and features can send a
    later release back to V0: :func:`advisor.capacity.generation.vllm_accounting` decides with them (the
    deployment resolver calls it).

    >>> profile_for_version("0.6.6.post1"), profile_for_version("0.10.2")
    ('vllm-v0', 'vllm-v1')
    """
    return vllm_accounting(engine_version).profile


def vllm_default_max_num_seqs(
    engine_version: str | None, gpu_memory_bytes: int, gpu_name: str = "", *, profile: str | None = None
) -> int:
    """``--max-num-seqs`` when not given: 1024 on ≥ 70 GiB GPUs other than the A100 for the V1 API server,
    else 256 (``EngineArgs._set_default_args`` in ``vllm/engine/arg_utils.py``; V0 always 256). ``profile``:
    the generation already decided (:func:`advisor.capacity.generation.vllm_accounting`), else the version's."""
    if (profile or profile_for_version(engine_version)) == "vllm-v0":
        return 256
    return 1024 if gpu_memory_bytes >= 70 * GIB and "a100" not in gpu_name.lower() else 256


def vllm_default_block_size(model: ModelArch, engine_version: str | None, *, profile: str | None = None) -> int:
    """``--block-size`` when not given: 64 for MLA models on V1 (the CUDA MLA backends, FlashMLA, need
    64-token blocks), else 16 (``vllm/config/cache.py``). ``profile`` as :func:`vllm_default_max_num_seqs`."""
    return 64 if model.is_mla and (profile or profile_for_version(engine_version)) == "vllm-v1" else 16


MAX_NUM_GPU_BLOCKS: Final = 1_000_000_000
"""``--num-gpu-blocks-override`` at most (a billion blocks: 16 billion tokens at 16 per block, far past any GPU):
the config's bound and the bound on what an engine may report (a larger number is a broken page, never a pool)."""
MAX_KV_CACHE_MEMORY_BYTES: Final = 16384 * 2**30
"""``--kv-cache-memory-bytes`` at most, 16 TiB per GPU (100× today's largest GPU): the config's and a report's bound."""


ACCOUNTING_ENGINES: Final = ("vllm", "sglang", "tgi", "trtllm", "llamacpp")
"""Engines with their own KV accounting (:mod:`advisor.capacity.engines`)."""


@dataclass(frozen=True)
class EngineSettings:
    """Engine-specific knobs, by each engine's own flag name (None = the engine's default).

    Attributes:
        mem_fraction_static: SGLang ``--mem-fraction-static``.
        page_size: SGLang ``--page-size`` (1).
        cuda_memory_fraction: TGI ``--cuda-memory-fraction`` (1.0).
        max_batch_prefill_tokens: TGI ``--max-batch-prefill-tokens`` (4096).
        tgi_block_size: TGI ``BLOCK_SIZE`` (1 for TGI ≥ 3 flashinfer, 16 for TGI 2 paged attention).
        free_gpu_memory_fraction: TensorRT-LLM ``kv_cache_config.free_gpu_memory_fraction`` (0.9).
        tokens_per_block: TensorRT-LLM ``tokens_per_block`` (32).
        max_num_tokens: TensorRT-LLM ``max_num_tokens`` (8192).
        max_tokens: TensorRT-LLM ``kv_cache_config.max_tokens``: a cap on the pool, tokens (the smaller of it
            and the fraction's memory is used, ``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``).
        ctx_size: llama.cpp ``--ctx-size`` (total cells over all slots).
        parallel: llama.cpp ``--parallel`` (slots).
        kv_unified: llama.cpp ``--kv-unified``: the slots share one buffer, so a request may use the whole
            context (``src/llama-context.cpp``: ``n_ctx_seq = kv_unified ? n_ctx : n_ctx / n_seq_max``).
        llamacpp_kv_type: llama.cpp ``--cache-type-k/-v`` (f16).
    """

    mem_fraction_static: float | None = None
    page_size: int | None = None
    cuda_memory_fraction: float | None = None
    max_batch_prefill_tokens: int | None = None
    tgi_block_size: int | None = None
    free_gpu_memory_fraction: float | None = None
    tokens_per_block: int | None = None
    max_num_tokens: int | None = None
    max_tokens: int | None = None
    ctx_size: int | None = None
    parallel: int | None = None
    kv_unified: bool = False
    llamacpp_kv_type: str = "f16"


@dataclass(frozen=True)
class CapacityInputs:
    """Everything the capacity pass reads (vLLM flag names in brackets).

    Attributes:
        model: the architecture.
        gpu_memory_bytes: device total as CUDA reports it, bytes (:attr:`GPUSpec.memory_bytes`).
        tensor_parallel_size: GPUs per pipeline stage [``--tensor-parallel-size``].
        gpu_memory_utilization: fraction of the device total vLLM may use [``--gpu-memory-utilization``].
        max_model_len: the longest request, tokens; None → ``model.max_position_embeddings``
            [``--max-model-len``].
        dtype: weight/compute dtype [``--dtype``], ``auto`` = checkpoint dtype (float32 → bfloat16).
        quantization: ``None`` (the checkpoint's own method, if any), ``fp8``, ``int8``, ``awq``, ``gptq``,
            ``mxfp4``, ``nvfp4`` [``--quantization``].
        kv_cache_dtype: [``--kv-cache-dtype``] ``auto`` (= compute dtype), ``fp8``, ``fp8_e4m3``,
            ``fp8_e5m2``.
        max_num_seqs: the batch cap, sequences [``--max-num-seqs``]; sizes the sampler warm-up.
        max_num_batched_tokens: tokens per step [``--max-num-batched-tokens``]; sizes the activation peak.
            None → the engine's default (see :attr:`profile_tokens`).
        block_size: tokens per KV block [``--block-size``].
        kv_cache_memory_bytes: per-GPU KV pool override, bytes [``--kv-cache-memory-bytes``].
        num_gpu_blocks_override: the pool fixed by the operator, blocks [``--num-gpu-blocks-override``]:
            replaces the block count the profile yields (``vllm/v1/core/kv_cache_utils.py``
            ``may_override_num_blocks``, V0 ``LLMEngine._initialize_kv_caches``), whatever the memory; the pool
            is then exactly ``N × block_size`` tokens.
        overhead_profile: key of :data:`OVERHEAD_PROFILES`.
        engine_version: the vLLM version the figures should follow (pick the profile with
            :func:`profile_for_version`); it also selects what counts as non-torch memory
            (:attr:`counts_whole_device`) and the default sampler (:func:`default_sampler`).
        enforce_eager: no CUDA graphs [``--enforce-eager``] (graphs are outside the sized budget in ≤ 0.10).
        pipeline_parallel_size: pipeline stages [``--pipeline-parallel-size``]; each holds its share of layers.
        enable_expert_parallel: experts are split whole across the TP ranks [``--enable-expert-parallel``].
        nvlink_sharp: the GPUs sit behind an NVSwitch with NVLink SHARP (:attr:`GPUSpec.nvlink_sharp`); with
            TP > 2 NCCL then allocates NVLS buffers (see :func:`non_torch_bytes_per_gpu`).
        engine: whose KV accounting sizes the pool, one of :data:`ACCOUNTING_ENGINES` (``vllm``: this
            module; the others: :mod:`advisor.capacity.engines`). :func:`capacity_pass` dispatches on it.
        engine_settings: the other engines' own knobs (:class:`EngineSettings`).
        data_parallel_size: data-parallel ranks behind one endpoint [``--data-parallel-size``; SGLang
            ``--dp-size``], each a full copy of the model on TP × PP GPUs with its own KV pool. The result
            counts blocks, tokens and concurrency over all ranks; a request still has to fit one rank.
        gpu_memory_used_by_others_bytes: memory other processes hold on each GPU before the engine starts,
            bytes. Engines that measure free memory lose it from the pool (SGLang, TGI, TensorRT-LLM); vLLM
            budgets ``gpu_memory_utilization`` × total for itself and refuses to start when less is free; vLLM
            releases that count the whole device as non-torch memory (V0 ≤ 0.6.4, V1 0.8-0.9.0) lose it from the
            pool instead (:func:`non_torch_bytes_per_gpu`).
        disable_hybrid_kv_cache_manager: [``--disable-hybrid-kv-cache-manager``] vLLM V1 ≥ 0.9.1 then keeps a
            sliding-window hybrid in one full-attention group (:func:`hybrid_kv_layout`). vLLM also sets it
            itself with a KV connector (``--kv-transfer-config``), KV events, or off CUDA/ROCm.
        compute_capability: the GPU's CUDA compute capability, ``(major, minor)`` (``GPUSpec.compute_capability``);
            None = unknown. It picks vLLM's MXFP4 MoE kernel and so the padding of MXFP4 experts
            (:func:`~advisor.capacity.precision.mxfp4_padded_expert_shape`): unknown pads nothing.
        sampler: the top-k/top-p sampler the warm-up runs, ``flashinfer`` (no sort) or ``torch`` (sorts the
            vocabulary); None = what the official ``vllm/vllm-openai`` image runs (:func:`default_sampler`:
            FlashInfer on V1 0.8-0.11.0, the torch sampler otherwise) [``VLLM_USE_FLASHINFER_SAMPLER``, and whether
            flashinfer is installed].
        accounting: which engine generation sizes the pool and why
            (:func:`advisor.capacity.generation.vllm_accounting`, decided by the deployment resolver from the
            version, the GPU's compute capability and the features); None → the ``overhead_profile``'s, from
            ``engine_version`` alone. Its profile must be ``overhead_profile``.
        cpu_offload_bytes: weights vLLM may move to host memory on each GPU, bytes [``--cpu-offload-gb`` × 2³⁰];
            see :func:`cpu_offload_bytes_per_gpu`.
        mla_align_kv_cache: V0 pads MLA cache entries to 256 bytes [``VLLM_CUDA_MEM_ALIGN_KV_CACHE``, default on];
            False: unpadded (576 bf16 elements = 1,152 B, not 1,280).
        speculative: the draft of ``--speculative-config`` (:mod:`advisor.capacity.speculative`): its attention
            layers share the KV pool, its weights load on the GPU; None = no speculative decoding.
        estimate_cuda_graphs: vLLM ≥ 0.20 subtracts its CUDA-graph estimate before the KV cache
            [``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, default on]; see :func:`cuda_graph_bytes_per_gpu`.
        lora: vLLM's LoRA dials [``--enable-lora`` with ``--max-loras``, ``--max-lora-rank``,
            ``--lora-extra-vocab-size``, ``--lora-dtype``, ``--fully-sharded-loras``]; None = LoRA off. See
            :func:`lora_bytes_per_gpu`.
        enable_chunked_prefill: [``--enable-chunked-prefill`` / ``--no-enable-chunked-prefill``] None = the
            engine's default; it sizes the profile batch when ``max_num_batched_tokens`` is None
            (:attr:`profile_tokens`).
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
    num_gpu_blocks_override: int | None = None
    overhead_profile: str = "vllm-v1"
    engine_version: str | None = None
    enforce_eager: bool = False
    pipeline_parallel_size: int = 1
    enable_expert_parallel: bool = False
    nvlink_sharp: bool = False
    engine: str = "vllm"
    engine_settings: EngineSettings = field(default_factory=EngineSettings)
    data_parallel_size: int = 1
    gpu_memory_used_by_others_bytes: int = 0
    disable_hybrid_kv_cache_manager: bool = False
    compute_capability: tuple[int, int] | None = None
    sampler: str | None = None
    accounting: Accounting | None = None
    cpu_offload_bytes: int = 0
    mla_align_kv_cache: bool = True
    speculative: SpeculativeDraft | None = None
    estimate_cuda_graphs: bool = True
    lora: LoRASettings | None = None
    enable_chunked_prefill: bool | None = None

    def __post_init__(self) -> None:
        problems: list[str] = []
        problems += _group_size_problems(self)
        if self.lora is not None:
            if self.engine != "vllm":
                problems.append(f"--enable-lora and its dials are vLLM's; engine {self.engine!r} has no such flag")
            else:
                problems += lora_problems(self.lora, self.model, self.engine_version, self.tensor_parallel_size)
        problems += _quantization_mismatch_problems(self)
        if self.engine == "vllm":
            problems += device_support_problems(self.dtype, self.effective_quantization, self.compute_capability)
            problems += sampler_problems(self.sampler, self.compute_capability)
        if self.sampler is not None and self.sampler not in SAMPLERS:
            problems.append(f"sampler {self.sampler!r} unknown; known: {', '.join(SAMPLERS)}")
        if self.cpu_offload_bytes < 0:
            problems.append(f"cpu_offload_gb must be ≥ 0, got {self.cpu_offload_bytes / GIB:g}")
        if self.engine not in ACCOUNTING_ENGINES:
            problems.append(f"engine {self.engine!r} has no KV accounting; known: {', '.join(ACCOUNTING_ENGINES)}")
        if self.data_parallel_size < 1:
            problems.append(f"data_parallel_size must be ≥ 1, got {self.data_parallel_size}")
        if not 0 <= self.gpu_memory_used_by_others_bytes < self.gpu_memory_bytes:
            problems.append(
                f"gpu_memory_used_by_others must be ≥ 0 and below the GPU's memory "
                f"({self.gpu_memory_bytes / GIB:.2f} GiB), got {self.gpu_memory_used_by_others_bytes / GIB:.2f} GiB"
            )
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
        if self.pipeline_parallel_size < 1 or self.pipeline_parallel_size > self.model.num_layers:
            problems.append(f"pipeline_parallel_size must be in 1..{self.model.num_layers}")
        if self.block_size < 1:
            problems.append(f"block_size must be ≥ 1, got {self.block_size}")
        if self.kv_cache_memory_bytes is not None and not 0 <= self.kv_cache_memory_bytes <= MAX_KV_CACHE_MEMORY_BYTES:
            problems.append(
                f"kv_cache_memory_bytes must be in 0..{MAX_KV_CACHE_MEMORY_BYTES} (16 TiB), "
                f"got {self.kv_cache_memory_bytes}"
            )
        if self.num_gpu_blocks_override is not None and (
            isinstance(self.num_gpu_blocks_override, bool)
            or not isinstance(self.num_gpu_blocks_override, int)
            or not 1 <= self.num_gpu_blocks_override <= MAX_NUM_GPU_BLOCKS
        ):
            problems.append(
                f"num_gpu_blocks_override must be an integer in 1..{MAX_NUM_GPU_BLOCKS:,}, "
                f"got {self.num_gpu_blocks_override!r}"
            )
        if self.overhead_profile not in OVERHEAD_PROFILES:
            problems.append(
                f"overhead_profile {self.overhead_profile!r} unknown; known: {', '.join(OVERHEAD_PROFILES)}"
            )
        acc = self.accounting
        if acc is not None and acc.engine == self.engine == "vllm" and acc.profile != self.overhead_profile:
            problems.append(f"accounting {acc.profile!r} is not overhead_profile {self.overhead_profile!r}")
        tp = self.tensor_parallel_size
        m = self.model
        if tp >= 1 and m.num_attention_heads % tp != 0:
            problems.append(
                f"{m.name}: {m.num_attention_heads} attention heads are not divisible by tensor_parallel_size {tp}"
            )
        if not m.is_mla and tp >= 1 and (m.num_kv_heads % tp if m.num_kv_heads >= tp else tp % m.num_kv_heads) != 0:
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
    def effective_quantization(self) -> str | None:
        """``quantization`` or, when None, the checkpoint's own method (vLLM reads ``quantization_config``)."""
        return self.quantization if self.quantization is not None else self.model.checkpoint_quantization

    @property
    def quantized_weight_bytes(self) -> float:
        """Bytes per quantized linear parameter under :attr:`effective_quantization` (0.0 when unquantized): the
        width the checkpoint's ``quantization_config`` states when the method is the checkpoint's own (GPTQ/AWQ
        ``bits`` and ``group_size``, :attr:`ModelArch.checkpoint_weight_bits`; vLLM loads the tensors as
        stored), else the method's usual width (:func:`~advisor.capacity.precision.weight_bytes_per_param`)."""
        q = self.effective_quantization
        if q is None:
            return 0.0
        stated = self.model.checkpoint_weight_bits
        own = self.model.checkpoint_quantization
        if stated is not None and own is not None and _method_family(q) == _method_family(own):
            return stated / 8
        return weight_bytes_per_param(self.compute_dtype, q)

    @property
    def effective_sampler(self) -> str:
        """``sampler`` or, when None, the official image's (:func:`default_sampler`)."""
        return self.sampler or default_sampler(self.overhead_profile, self.engine_version, self.compute_capability)

    @property
    def counts_whole_device(self) -> bool:
        """Whether this vLLM release counts all memory torch did not allocate as non-torch, the CUDA context
        and other processes included (:attr:`OverheadModel.whole_device_before`); False when no version is given."""
        parsed = parse_version(self.engine_version)
        before = OVERHEAD_PROFILES[self.overhead_profile].whole_device_before
        return parsed is not None and parsed < before

    @property
    def profile_tokens(self) -> int:
        """Tokens in vLLM's profile batch: ``max_num_batched_tokens`` or the engine's default.

        V1: 8192 on ≥ 70 GiB GPUs, else 2048 (API-server defaults, ``vllm/engine/arg_utils.py``); with
        ``enable_chunked_prefill`` False, ``max(max_model_len, that)`` from :data:`V1_CHUNKED_PREFILL_OFF_SINCE`
        (earlier V1 releases turn chunked prefill back on). V0: chunked prefill is on by default only when
        ``max_model_len > 32768`` and the model is neither MLA nor multimodal (``_set_default_args_v0``; 0.6.3
        ``EngineArgs.create_engine_config``), and an explicit ``enable_chunked_prefill`` overrides that rule;
        chunked, 2048 tokens (512 before :data:`V0_CHUNKED_PREFILL_2048_SINCE`), else ``max(max_model_len, 2048)``
        (``SchedulerConfig``, ``vllm/config.py``, 0.6.3-0.7.3).

        Example: Llama-3.1-405B, V0 0.6.3, ``max_model_len`` 131,072 with ``enable_chunked_prefill`` False (what
        ``benchmarks/benchmark_throughput.py`` passes unless ``--enable-chunked-prefill`` is given): 131,072
        tokens, not 2048.
        """
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        length = self.effective_max_model_len
        parsed = parse_version(self.engine_version)
        if self.overhead_profile == "vllm-v0":
            chunked = self.enable_chunked_prefill
            if chunked is None:
                chunked = length > 32768 and not self.model.is_mla and not self.model.vision_parameters
            if not chunked:
                return max(length, 2048)
            return 512 if parsed is not None and parsed < V0_CHUNKED_PREFILL_2048_SINCE else 2048
        default = DEFAULT_MAX_NUM_BATCHED_TOKENS if self.gpu_memory_bytes >= 70 * GIB else 2048
        if self.enable_chunked_prefill is False and parsed is not None and parsed >= V1_CHUNKED_PREFILL_OFF_SINCE:
            return max(length, default)
        return default


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
        kv_cache_blocks: blocks per replica (each block spans all TP ranks), summed over its data-parallel
            ranks.
        kv_cache_tokens: ``kv_cache_blocks × block_size``.
        max_concurrency: ``kv_cache_blocks ÷ ceil(max_model_len ÷ block_size)``: full-length requests the
            pool holds at once, as vLLM prints "Maximum concurrency" (e.g. 11.12); over data-parallel ranks
            only when one such request fits a rank (else the one rank's fraction, below 1).
        data_parallel_size: the ranks counted in the blocks, tokens and concurrency.
        max_request_tokens: the longest request one sequence can hold when the engine caps it below the pool
            (llama.cpp: a slot's ``ctx_size ÷ parallel`` cells, ``n_ctx_seq`` in ``src/llama-context.cpp``);
            ``None`` when a request may use the whole pool.
        max_model_len, block_size, tensor_parallel_size, gpu_memory_bytes, gpu_memory_utilization: inputs
            echoed.
        model_name, dtype, quantization, kv_cache_dtype, overhead_profile: input summary (dtype resolved).
        activation_peak_bytes_per_gpu: the torch activation peak of the engine's profile run, bytes per GPU
            (vLLM: ``max(forward, sampler)`` of :func:`activation_peak_bytes`); None when the engine's rule has
            no such term (unknown, never 0 for unknown).
        cuda_graph_bytes_per_gpu: CUDA-graph memory counted before the KV cache, bytes per GPU
            (:func:`cuda_graph_bytes_per_gpu`: vLLM's estimate from 0.20; before, graphs are captured after the
            cache is sized; 0 under ``--enforce-eager``); None when unknown.
        non_torch_bytes_per_gpu: memory outside torch's allocator that the engine counts (CUDA context,
            NCCL), bytes per GPU (:func:`non_torch_bytes_per_gpu`); None when unknown. Under vLLM's accounting
            ``weights + activation + non_torch + cuda_graph + kv_pool = gpu_memory × utilization`` (less
            than a byte of rounding) unless the pool is fixed by the operator.
        accounting: whose accounting and which generation sized the pool, and why
            (:class:`~advisor.capacity.generation.Accounting`).
        cpu_offload_bytes_per_gpu: weights ``--cpu-offload-gb`` keeps in host memory, bytes per GPU (already out of
            ``weights_bytes_per_gpu``; :func:`cpu_offload_bytes_per_gpu`); None when the engine has no such dial.
        draft_weights_bytes_per_gpu: the ``--speculative-config`` draft's weights, bytes per GPU (already in
            ``weights_bytes_per_gpu``; :func:`draft_weights_bytes_per_gpu`); None when the engine has no such dial.
        lora_bytes_per_gpu: the ``--enable-lora`` adapter slots, bytes per GPU (:func:`lora_bytes_per_gpu`; in
            ``weights_bytes_per_gpu`` where vLLM's budget counts them, :func:`~advisor.capacity.lora.lora_counted`);
            None when the engine has no such dial.
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
    data_parallel_size: int = 1
    max_request_tokens: int | None = None
    activation_peak_bytes_per_gpu: int | None = None
    cuda_graph_bytes_per_gpu: int | None = None
    non_torch_bytes_per_gpu: int | None = None
    accounting: Accounting | None = None
    cpu_offload_bytes_per_gpu: int | None = None
    draft_weights_bytes_per_gpu: int | None = None
    lora_bytes_per_gpu: int | None = None

    @property
    def fits_one_full_length_request(self) -> bool:
        """Whether one ``max_model_len`` request fits one rank (vLLM refuses to start otherwise)."""
        return self.max_concurrency >= 1.0

    @property
    def kv_cache_blocks_per_rank(self) -> int:
        """Blocks of one data-parallel rank (``kv_cache_blocks ÷ data_parallel_size``)."""
        return self.kv_cache_blocks // max(1, self.data_parallel_size)

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
        per_rank = self.kv_cache_blocks_per_rank / blocks_per_seq
        # a request lives on one data-parallel rank: ranks add up only for requests that fit one
        return per_rank * self.data_parallel_size if per_rank >= 1 else per_rank

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field, plus GiB conveniences and an ``inputs`` summary."""
        return {
            "weights_bytes_per_gpu": self.weights_bytes_per_gpu,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache_bytes_per_token_per_gpu": self.kv_cache_bytes_per_token_per_gpu,
            "overhead_bytes_per_gpu": self.overhead_bytes_per_gpu,
            "kv_pool_bytes_per_gpu": self.kv_pool_bytes_per_gpu,
            "activation_peak_bytes_per_gpu": self.activation_peak_bytes_per_gpu,
            "cuda_graph_bytes_per_gpu": self.cuda_graph_bytes_per_gpu,
            "non_torch_bytes_per_gpu": self.non_torch_bytes_per_gpu,
            "accounting": None if self.accounting is None else self.accounting.as_dict(),
            "cpu_offload_bytes_per_gpu": self.cpu_offload_bytes_per_gpu,
            "draft_weights_bytes_per_gpu": self.draft_weights_bytes_per_gpu,
            "lora_bytes_per_gpu": self.lora_bytes_per_gpu,
            "kv_cache_blocks": self.kv_cache_blocks,
            "kv_cache_tokens": self.kv_cache_tokens,
            "max_concurrency": self.max_concurrency,
            "max_model_len": self.max_model_len,
            "block_size": self.block_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "data_parallel_size": self.data_parallel_size,
            "kv_cache_blocks_per_rank": self.kv_cache_blocks_per_rank,
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


def layers_per_stage(inputs: CapacityInputs, layers: int) -> int:
    """Layers of a kind on the fullest pipeline stage: ``ceil(layers ÷ PP)`` (vLLM splits layers evenly,
    ``get_pp_indices``)."""
    return math.ceil(layers / inputs.pipeline_parallel_size)


PP_REMAINDER_BEFORE_LAST_SINCE: Final = (0, 8, 0)
"""From this vLLM release ``get_pp_indices`` gives the layers left over by ``num_layers ÷ PP`` one each to the stages
just before the last (``vllm/distributed/utils.py`` 0.8.0-0.21.0: ``for i in range(2, remaining_layers + 2):
partitions[-i] += 1``); before it (0.6.3.post1-0.7.3) the last stage takes them all (``if pp_rank == pp_size - 1:
end_layer = num_hidden_layers``). ``VLLM_PP_LAYER_PARTITION`` (not modelled) overrides both."""


def pipeline_stage_layers(inputs: CapacityInputs) -> list[range]:
    """The decoder-layer indices each pipeline stage holds, by :data:`PP_REMAINDER_BEFORE_LAST_SINCE` (an unstated
    version takes the current rule). DeepSeek-V3's 61 layers at PP 2: 0.6.6 → 0-29, 30-60; 0.8+ → 0-30, 31-60."""
    pp = inputs.pipeline_parallel_size
    layers = inputs.model.num_layers
    parts = [layers // pp] * pp
    remainder = layers % pp
    parsed = parse_version(inputs.engine_version)
    if parsed is not None and parsed < PP_REMAINDER_BEFORE_LAST_SINCE:
        parts[-1] += remainder
    else:
        for i in range(2, remainder + 2):
            parts[-i] += 1
    starts = [sum(parts[:i]) for i in range(pp)]
    return [range(start, start + part) for start, part in zip(starts, parts, strict=True)]


def kv_bytes_per_token_per_layer(inputs: CapacityInputs) -> int:
    """KV bytes one token occupies in one attention layer on one GPU.

    GQA: ``2 × max(1, kv_heads // TP) × head_dim × kv bytes`` (Llama-3.1-8B bf16: 2 × 8 × 128 × 2 = 4,096).
    MLA: ``(kv_lora_rank + qk_rope_head_dim) × kv bytes``, the same on every TP rank (DeepSeek-V3 bf16:
    576 × 2 = 1,152), rounded up to the profile's entry alignment (V0: 256 bytes → 1,280;
    unpadded, 1,152, with ``VLLM_CUDA_MEM_ALIGN_KV_CACHE=0``: ``align_to_256bytes`` applies only when
    ``envs.VLLM_CUDA_MEM_ALIGN_KV_CACHE`` holds, ``vllm/worker/cache_engine.py`` ``_allocate_kv_cache``, 0.7.3).
    Sources: ``vllm/v1/kv_cache_interface.py`` ``FullAttentionSpec.page_size_bytes`` /
    ``MLAAttentionSpec`` (one latent, no separate V); V0 ``vllm/worker/cache_engine.py``.
    """
    m = inputs.model
    element = kv_bytes_per_element(inputs.kv_cache_dtype, inputs.compute_dtype)
    fallback = vllm_mha_fallback_head_size(inputs)
    if fallback is not None:
        return 2 * (m.num_attention_heads // inputs.tensor_parallel_size) * fallback * element
    if m.is_mla:
        raw = m.mla_latent_elements * element
        align = OVERHEAD_PROFILES[inputs.overhead_profile].mla_entry_alignment_bytes
        if not inputs.mla_align_kv_cache:  # VLLM_CUDA_MEM_ALIGN_KV_CACHE=0
            align = 0
        return -(-raw // align) * align if align else raw
    return 2 * kv_heads_per_gpu(m, inputs.tensor_parallel_size) * m.head_dim * element


VLLM_MLA_SINCE: Final = (0, 7, 1)
"""First vLLM release that stores DeepSeek V2/V3's MLA latent in the KV cache (``vllm/config.py``
``ModelConfig.use_mla``, v0.7.1: ``is_deepseek_mla and not VLLM_MLA_DISABLE``). Before, ``deepseek_v2.py`` runs
multi-head attention and caches K and V for every local head."""

VLLM_MHA_HEAD_256_BEFORE: Final = (0, 7, 0)
"""Before this vLLM release the DeepSeek V2/V3 multi-head path pads q, k and v to a head size of 256 (``deepseek_v2.py``
``DeepseekV2Attention``: ``Attention(self.num_local_heads, 256, ...)``, "TODO, support head_size 192", v0.6.3.post1
to v0.6.6); v0.7.0 caches ``qk_head_dim`` (192) per head, V padded to it."""

VLLM_MLA_QUANTIZATIONS_0_7_1: Final = (None, "fp8", "compressed-tensors")
"""Checkpoint methods vLLM 0.7.1-0.7.2 keeps MLA for (``ModelConfig.use_mla``: "MLA is not supported with %s
quantization. Disabling MLA."); 0.7.3 dropped the condition."""


def vllm_mha_fallback_head_size(inputs: CapacityInputs) -> int | None:
    """The per-head K/V size vLLM caches for an MLA model it runs as multi-head attention, or None where it caches
    the MLA latent (every engine but vLLM; vLLM ≥ :data:`VLLM_MLA_SINCE`, or an unstated version).

    ``vllm/model_executor/models/deepseek_v2.py`` ``DeepseekV2Attention``: before 0.7.0 every local head caches K and
    V of 256 elements (:data:`VLLM_MHA_HEAD_256_BEFORE`); 0.7.0 (and 0.7.1-0.7.2 under a quantization outside
    :data:`VLLM_MLA_QUANTIZATIONS_0_7_1`) caches ``qk_nope_head_dim + qk_rope_head_dim``. DeepSeek-V3 at TP 8 on
    0.6.6: 2 × 16 heads × 256 × 2 B = 16,384 B per token per layer, against 1,280 B for the aligned V0 latent.
    """
    m = inputs.model
    if not m.is_mla or inputs.engine != "vllm":
        return None
    version = parse_version(inputs.engine_version)
    if version is None:
        return None
    qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
    if version < VLLM_MHA_HEAD_256_BEFORE:
        return 256
    if version < VLLM_MLA_SINCE:
        return qk_head
    method = inputs.effective_quantization
    if version < (0, 7, 3) and (method.strip().lower() if method else None) not in VLLM_MLA_QUANTIZATIONS_0_7_1:
        return qk_head
    return None


def kv_bytes_per_token_per_gpu(inputs: CapacityInputs) -> int:
    """KV bytes per token on one GPU: per-layer bytes × the attention layers on its pipeline stage.

    Llama-3.1-8B, bf16, TP1: 2 × 32 × 8 × 128 × 2 = 131,072 bytes (128 KiB) per token. Recurrent (Mamba)
    layers add nothing per token (their state is per sequence, :func:`recurrent_state_bytes_per_sequence`).
    Every attention layer is counted, windowed or not: vLLM sizes its blocks that way (the window only
    frees blocks while running, which :func:`max_concurrency` accounts for). A speculative draft's attention
    layers (EAGLE, MTP) take pages of the same pool at the target's per-layer size: Llama-3.1-8B + an EAGLE
    head is 33 × 4,096 = 135,168 bytes, as vllm-project/vllm#19996 logs (51.63 GiB for 410,128 tokens).
    """
    draft = inputs.speculative.draft_layers if inputs.speculative is not None else 0
    return kv_bytes_per_token_per_layer(inputs) * (layers_per_stage(inputs, inputs.model.attention_layers) + draft)


def recurrent_state_bytes_per_sequence(inputs: CapacityInputs) -> int:
    """Per-GPU bytes of one sequence's recurrent state (conv + SSM state of every Mamba layer on the stage),
    in the compute dtype, sharded over TP (Jamba: 28 layers × (3 × 8192 + 8192 × 16) × 2 B = 8.3 MiB)."""
    m = inputs.model
    if not m.linear_layers:
        return 0
    per_layer = m.recurrent_state_elements * DTYPE_BYTES[inputs.compute_dtype] / inputs.tensor_parallel_size
    return math.ceil(per_layer * layers_per_stage(inputs, m.linear_layers))


def _method_family(method: str) -> str:
    """A quantization method without vLLM's kernel suffix (``gptq_marlin`` → ``gptq``): the same checkpoint format."""
    return method.strip().lower().removesuffix("_marlin")


def _quantized_split(inputs: CapacityInputs) -> tuple[int, int]:
    """(parameters stored quantized, linear parameters left in the compute dtype)."""
    m = inputs.model
    linear = m.linear_parameters()
    q = inputs.effective_quantization
    routers = m.moe_layers * m.router_parameters() if m.is_moe else 0
    if q is None:
        return 0, linear
    if q.strip().lower() in EXPERTS_ONLY:
        experts = m.expert_weight_parameters()
        return experts, linear - experts
    return linear - routers, routers


def weights_bytes_total(inputs: CapacityInputs) -> int:
    """Bytes of all weights of one copy of the model (before sharding).

    ``quantized params × weight_bytes_per_param(quantization) + everything else × dtype bytes``: quantization
    methods leave embeddings, LM head, norms, MoE routers and the vision tower in the compute dtype, and
    MXFP4 checkpoints quantize only the experts. The checkpoint's own method applies when ``quantization``
    is None. Qwen3-235B-A22B FP8: 233.80 G × 1.000244 + (1.245 G embeddings + 49 M routers) × 2 = 236.4 GB.
    """
    m = inputs.model
    compute = inputs.compute_dtype
    quantized, plain_linear = _quantized_split(inputs)
    q_bytes = inputs.quantized_weight_bytes
    unquantized = m.num_parameters - m.linear_parameters() + plain_linear
    return math.ceil(quantized * q_bytes + unquantized * DTYPE_BYTES[compute])


def _replicated_parameters(m: ModelArch) -> tuple[int, int]:
    """(replicated linear parameters, of which quantized) that every TP rank holds whole: MoE routers
    (``ReplicatedLinear``, unquantized) and MLA's q_a / kv_a projections (``ReplicatedLinear``)."""
    routers = m.moe_layers * m.router_parameters() if m.is_moe else 0
    mla = 0
    if m.is_mla:
        mla = m.num_layers * m.hidden_size * (m.q_lora_rank + m.mla_latent_elements)
    return routers + mla, mla


def _replicated_bytes(inputs: CapacityInputs) -> float:
    """Bytes every TP rank holds whole: norms, MoE routers and MLA's q_a / kv_a (:func:`_replicated_parameters`)."""
    m = inputs.model
    act = DTYPE_BYTES[inputs.compute_dtype]
    q = inputs.effective_quantization
    q_bytes = inputs.quantized_weight_bytes if q is not None and q not in EXPERTS_ONLY else float(act)
    replicated, replicated_quantized = _replicated_parameters(m)
    return m.norm_parameters() * act + (replicated - replicated_quantized) * act + replicated_quantized * q_bytes


def weights_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Weight bytes resident on each GPU of a replica.

    vLLM shards every linear layer *and* the embedding/LM head (``VocabParallelEmbedding``,
    ``ParallelLMHead``) across TP ranks and splits layers over pipeline stages; norms, MoE routers and MLA's
    q_a/kv_a projections are replicated on every rank (``ReplicatedLinear``); when TP exceeds the KV heads,
    each rank stores whole replicated k/v projections (``QKVParallelLinear``), which is added. Expert
    parallelism moves whole experts instead of slices: the same bytes per rank. So ``per_gpu = (total −
    replicated) ÷ (TP × PP) + replicated ÷ PP + kv replication excess + rotary cache`` (+ V0's absorbed MLA
    matrices). The rotary cos/sin cache (``max_position_embeddings × rotary_dim`` elements of the compute
    dtype, a buffer of ``RotaryEmbedding`` on every rank) is what "Model loading took" adds to the
    parameters: Llama-3.1-8B 16,060,522,496 B + 131072 × 128 × 2 B = 14.9888 GiB, exactly as vLLM V1 logs;
    Meta-Llama-3-8B 14.9595 GiB, exactly as vLLM 0.6.6 logs; Qwen3-235B-A22B-FP8 at TP 8 with expert
    parallelism 27.71 GiB (vLLM 0.10.2 logs 27.72).
    """
    m = inputs.model
    tp = inputs.tensor_parallel_size
    pp = inputs.pipeline_parallel_size
    compute = inputs.compute_dtype
    act = DTYPE_BYTES[compute]
    total = weights_bytes_total(inputs)
    q = inputs.effective_quantization
    q_bytes = inputs.quantized_weight_bytes if q is not None and q not in EXPERTS_ONLY else float(act)
    replicated_bytes = _replicated_bytes(inputs)
    rotary_dim = m.qk_rope_head_dim if m.is_mla else m.head_dim
    rotary = m.max_position_embeddings * rotary_dim * act
    per_gpu = (total - replicated_bytes) / (tp * pp) + replicated_bytes / pp + rotary
    if not m.is_mla and tp > m.num_kv_heads:
        kv_layer = m.kv_projection_parameters_per_layer() * q_bytes
        stored = kv_layer * kv_heads_per_gpu(m, tp) / m.num_kv_heads
        per_gpu += layers_per_stage(inputs, m.attention_layers) * (stored - kv_layer / tp)
    if m.is_moe and inputs.enable_expert_parallel and inputs.data_parallel_size > 1:
        # the expert-parallel group is TP × DP (vLLM ``FusedMoEParallelConfig``): each GPU keeps 1/(TP·DP) of
        # the experts instead of the 1/TP that TP alone gives
        expert_bytes = m.expert_weight_parameters() * (inputs.quantized_weight_bytes if q is not None else act)
        per_gpu -= expert_bytes / (tp * pp) * (1 - 1 / inputs.data_parallel_size)
    if (
        m.is_mla
        and OVERHEAD_PROFILES[inputs.overhead_profile].mla_absorbed_weights
        and vllm_mha_fallback_head_size(inputs) is None
    ):
        per_gpu += layers_per_stage(inputs, m.num_layers) * mla_v0_copies_bytes_per_layer(inputs)
    return (
        math.ceil(per_gpu + mxfp4_padding_bytes_per_gpu(inputs))
        + draft_weights_bytes_per_gpu(inputs)
        - cpu_offload_bytes_per_gpu(inputs)
        + (lora_bytes_per_gpu(inputs) if _lora_in_budget(inputs) else 0)
    )


def lora_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """The ``--enable-lora`` adapter slots on each GPU, bytes (:func:`advisor.capacity.lora.lora_bytes`: the
    stacked A/B buffers of ``create_lora_weights`` for every LoRA-able layer of the stage, plus the embedding /
    LM-head wrappers and extra-vocabulary rows where the model has them); 0 without LoRA.

    Llama-3.1-8B, rank 16, one slot, bf16: TP 1 1,310,720 elements × 32 layers × 2 B = 80 MiB of linear
    slots, plus embed (128,512 × 16 + 4,096 × 16) × 2 + 256 × 4,096 × 2 and LM head (16 × 4,096 + 128,512 × 16)
    × 2 + 256 × 4,096 × 2, plus 2 × 256 × 4,096 × 2 / TP vocabulary rows (vLLM < 0.12).
    """
    if inputs.lora is None:
        return 0
    return lora_bytes(
        inputs.lora,
        inputs.model,
        compute_dtype=inputs.compute_dtype,
        tp=inputs.tensor_parallel_size,
        layers=layers_per_stage(inputs, inputs.model.num_layers),
        version=inputs.engine_version,
    )


def _lora_in_budget(inputs: CapacityInputs) -> bool:
    """Whether vLLM's KV budget subtracts the LoRA slots (:func:`~advisor.capacity.lora.lora_counted`)."""
    return inputs.lora is not None and lora_counted(inputs.engine_version, inputs.overhead_profile == "vllm-v0")


def mla_v0_copies_bytes_per_layer(inputs: CapacityInputs) -> float:
    """Bytes per MLA layer per GPU that V0's MLA backend adds at load (vLLM 0.7.x ``attention/backends/mla/utils.py``
    ``MLACommonImpl.process_weights_after_loading``, heads ``n`` = heads ÷ TP, ``q_in`` = ``q_lora_rank`` or
    hidden)::

        W_Q_UK   q_in × n × kv_lora_rank        weight precision (fp8 checkpoints are re-quantized to fp8)
        W_UV_O   n × kv_lora_rank × hidden       weight precision
        W_QR     q_in × n × qk_rope_head_dim     compute dtype ("W_QR is small so ... we dont bother requantizing
                                                 it"; a ``.contiguous()`` copy even when unquantized)
        kv_b     kv_lora_rank × n × (qk_nope + v) compute dtype, only when ``kv_b_proj`` is quantized: its
                                                 dequantized copy stays alive as ``self.W_UK, self.W_UV``

    DeepSeek-R1 FP8 at TP 8 (n 16, q_in 1536, kv_lora 512, rope 64, nope 128, v 128): W_QR 3.1 MB and kv_b 4.2 MB
    per layer, 0.42 GiB over 61 layers in bf16, beside the absorbed fp8 matrices.
    """
    m = inputs.model
    act = DTYPE_BYTES[inputs.compute_dtype]
    q = inputs.effective_quantization
    q_bytes = inputs.quantized_weight_bytes if q is not None and q not in EXPERTS_ONLY else float(act)
    heads = m.num_attention_heads / inputs.tensor_parallel_size
    q_in = m.q_lora_rank or m.hidden_size
    absorbed = heads * m.kv_lora_rank * (m.hidden_size + q_in) * q_bytes
    w_qr = q_in * heads * m.qk_rope_head_dim * act
    kv_b = m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) * act if q_bytes < act else 0.0
    return absorbed + w_qr + kv_b


def mxfp4_padding_bytes_per_gpu(inputs: CapacityInputs) -> float:
    """Bytes the MXFP4 MoE kernel's padding adds to each GPU's experts (0 unless the experts are MXFP4 and
    ``inputs.compute_capability`` is known).

    vLLM ``Mxfp4MoEMethod.create_weights`` allocates ``w13`` ``2 × I_pad × H_pad`` and ``w2`` ``H_pad × I_pad`` 4-bit
    elements with an 8-bit scale per 32 (4.25 bits) per local expert, ``I`` being the intermediate size per TP
    partition (the whole width under expert parallelism, which splits the experts instead), padded as
    :func:`~advisor.capacity.precision.mxfp4_padded_expert_shape`. gpt-oss-120b at TP 1 on Hopper (Marlin: H 2880 →
    3072, I 2880 → 2944): 36 layers × 128 experts × 3 × (3072 × 2944 − 2880²) × 4.25 / 8 = 5.13 GiB.
    """
    m = inputs.model
    q = inputs.effective_quantization
    if not m.is_moe or q is None or q.strip().lower() != "mxfp4" or inputs.compute_capability is None:
        return 0.0
    tp = inputs.tensor_parallel_size
    ep = inputs.enable_expert_parallel
    ep_group = tp * (inputs.data_parallel_size if ep else 1)
    width = m.moe_intermediate_size if ep else m.moe_intermediate_size / tp
    experts = m.num_experts / ep_group if ep else m.num_experts
    hidden_pad, width_pad = mxfp4_padded_expert_shape(m.hidden_size, math.ceil(width), inputs.compute_capability)
    extra_elements = 3 * (hidden_pad * width_pad - m.hidden_size * width)
    return layers_per_stage(inputs, m.moe_layers) * experts * extra_elements * MXFP4_BITS / 8


_SAME_METHOD: Final = {"modelopt_fp4": "nvfp4"}
"""Quantization names that are one checkpoint format under two names (ModelOpt's NVFP4 checkpoints, which
:func:`~advisor.capacity.models._checkpoint_quantization` reads as ``nvfp4``)."""


def _quantization_mismatch_problems(inputs: CapacityInputs) -> list[str]:
    """vLLM refuses a ``--quantization`` other than the method the checkpoint's ``quantization_config`` states
    (``vllm/config/model.py`` ``ModelConfig._verify_quantization``, 0.6-0.21: "Quantization method specified in
    the model config (fp8) does not match the quantization method specified in the `quantization` argument (awq)";
    SGLang's ``model_config.py`` copies the check). The Marlin kernel names (``gptq_marlin``, ``awq_marlin``) are
    the checkpoint's own format (:func:`_method_family`)."""
    own = inputs.model.checkpoint_quantization
    q = inputs.quantization
    if own is None or q is None:
        return []

    def family(method: str) -> str:
        name = _method_family(method)
        return _SAME_METHOD.get(name, name)

    if family(q) == family(own):
        return []
    return [
        f"quantization {q!r} (--quantization) contradicts {inputs.model.name}'s checkpoint, stored as {own!r} "
        f'(config.json quantization_config): vLLM refuses it ("Quantization method specified in the model config '
        f'({own}) does not match the quantization method specified in the `quantization` argument ({q})"); leave '
        "quantization unset to load the checkpoint as stored"
    ]


def _group_size_problems(inputs: CapacityInputs) -> list[str]:
    """vLLM refuses a GPTQ/AWQ layer whose input rows per TP rank the group size does not divide (``gptq.py``
    ``GPTQLinearMethod.create_weights``: "The input size is not aligned with the quantized weight shape. This can be
    caused by too large tensor parallel size."; ``awq.py`` likewise; the Marlin kernels'
    ``verify_marlin_supports_shape``). The row-parallel layers split their input over TP: ``o_proj``
    (heads × head_dim) and ``down_proj`` (intermediate); the others take the whole hidden size."""
    m = inputs.model
    group = m.checkpoint_group_size
    own = m.checkpoint_quantization
    q = inputs.effective_quantization
    if group is None or group <= 0 or own is None or q is None or _method_family(q) != _method_family(own):
        return []
    tp = inputs.tensor_parallel_size
    inputs_per_rank = {
        "hidden_size": m.hidden_size,
        "o_proj input (heads × head_dim ÷ TP)": m.num_attention_heads * m.head_dim // tp,
        "down_proj input (intermediate_size ÷ TP)": m.intermediate_size // tp,
    }
    if m.is_moe:
        inputs_per_rank["expert down_proj input (moe_intermediate_size ÷ TP)"] = m.moe_intermediate_size // tp
    bad = [f"{what} {rows}" for what, rows in inputs_per_rank.items() if rows % group]
    if not bad:
        return []
    return [
        f"{m.name}: quantization group size {group} does not divide {', '.join(bad)} at TP={tp}: vLLM refuses to "
        'load it ("The input size is not aligned with the quantized weight shape"); use a smaller tensor_parallel_size'
    ]


def draft_weights_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Weights of the ``--speculative-config`` draft on each GPU (bytes), loaded before the KV cache is sized.

    ``draft_parameters ÷ draft TP`` (the target's TP unless ``draft_tensor_parallel_size`` says otherwise) ×
    bytes per parameter: the compute dtype for EAGLE heads and draft models (the drafter's own quantization
    config, ``get_draft_quant_config`` in ``llama_eagle.py``, 0.21.0: none for the published heads), the
    target's quantized width for MTP layers, which ship in the target checkpoint. Llama-3.1-8B + EAGLE, bf16,
    TP 1: 251,662,336 × 2 = 503,324,672 B (0.47 GiB). 0 without a draft (``ngram``).
    """
    draft = inputs.speculative
    if draft is None or not draft.draft_parameters:
        return 0
    act = DTYPE_BYTES[inputs.compute_dtype]
    q = inputs.effective_quantization
    per_param = float(act)
    if draft.quantized_like_target and q is not None and q.strip().lower() not in EXPERTS_ONLY:
        per_param = inputs.quantized_weight_bytes
    tp = draft.draft_tensor_parallel_size or inputs.tensor_parallel_size
    return math.ceil(draft.draft_parameters * per_param / tp)


def _decoder_layer_tensors(inputs: CapacityInputs, moe: bool, recurrent: bool) -> list[float]:
    """Bytes on one GPU of each parameter tensor of one decoder layer, in the order ``named_parameters`` yields
    them for a Llama/DeepSeek-style layer: attention (qkv, o; MLA q_a, q_b, kv_a, kv_b, o) or the recurrent
    mixer, then the MLP (gate_up, down; MoE router, w13, w2, shared experts' gate_up and down), then the norms.
    Linear tensors are split over TP; routers, norms and MLA's q_a / kv_a are replicated."""
    m = inputs.model
    tp = inputs.tensor_parallel_size
    act = float(DTYPE_BYTES[inputs.compute_dtype])
    q = inputs.effective_quantization
    experts_only = q is not None and q.strip().lower() in EXPERTS_ONLY
    lin = act if q is None or experts_only else inputs.quantized_weight_bytes
    exp = inputs.quantized_weight_bytes if q is not None else act
    h = m.hidden_size
    tensors: list[float]
    if recurrent:
        tensors = [m.linear_layer_parameters / tp * lin]
    elif m.is_mla:
        n = m.num_attention_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        tensors = (
            [h * m.q_lora_rank * lin, m.q_lora_rank * n * qk / tp * lin] if m.q_lora_rank else [h * n * qk / tp * lin]
        )
        tensors += [
            h * m.mla_latent_elements * lin,
            m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim) / tp * lin,
            n * m.v_head_dim * h / tp * lin,
        ]
    else:
        kv = m.kv_projection_parameters_per_layer() * kv_heads_per_gpu(m, tp) / m.num_kv_heads
        q_params = h * m.num_attention_heads * m.head_dim + (
            m.num_attention_heads * m.head_dim if m.attention_bias else 0
        )
        tensors = [(q_params / tp + kv) * lin, (m.num_attention_heads * m.head_dim * h / tp) * lin]
    i = m.intermediate_size
    if moe:
        mi, e, shared = m.moe_intermediate_size, m.num_experts, m.num_shared_experts
        tensors += [m.router_parameters() * act, 2 * h * mi * e / tp * exp, h * mi * e / tp * exp]
        if shared:
            tensors += [2 * h * mi * shared / tp * lin, h * mi * shared / tp * lin]
    elif m.gated_mlp:
        tensors += [2 * h * i / tp * lin, h * i / tp * lin]
    else:
        tensors += [h * i / tp * lin, h * i / tp * lin]
    return tensors + [h * act] * m.norms_per_layer


def pipeline_stage_weights_bytes(inputs: CapacityInputs, stage: int) -> int:
    """Weights on each GPU of pipeline stage ``stage`` (bytes): :func:`weights_bytes_per_gpu` with its even split
    of the model over the stages (``(total − replicated) ÷ (TP × PP) + replicated ÷ PP``) replaced by what the
    stage holds: its own decoder layers (:func:`pipeline_stage_layers`, each layer's tensors as
    :func:`_decoder_layer_tensors` sizes them), the vocabulary table on the first stage (``VocabParallelEmbedding``)
    and on the last (``ParallelLMHead``; a tied head is a second copy there: ``LlamaModel.__init__`` builds
    ``embed_tokens`` ``if get_pp_group().is_first_rank or (config.tie_word_embeddings and
    get_pp_group().is_last_rank)``, ``llama.py`` 0.6.6), each ``vocab × hidden ÷ TP`` in the compute dtype.

    DeepSeek-V3 (block FP8) at TP 8 × PP 2 on 0.6.6: the last stage holds 31 MoE layers (1.35 GiB each) and the
    LM head (129,280 × 7,168 × 2 B ÷ 8 = 0.22 GiB), the first 3 dense + 27 MoE layers and the embedding: 42.1
    against 37.2 GiB, where the even split says 39.7 on both.
    """
    m = inputs.model
    tp = inputs.tensor_parallel_size
    pp = inputs.pipeline_parallel_size
    even = weights_bytes_per_gpu(inputs)
    if pp == 1:
        return even
    act = DTYPE_BYTES[inputs.compute_dtype]
    replicated = _replicated_bytes(inputs)
    sharded = weights_bytes_total(inputs) - replicated
    whole = sharded / tp + replicated  # one stage holding every layer and both tables
    dense = m.num_layers - (m.moe_layers if m.is_moe else 0)  # dense layers come first (first_k_dense_replace)
    held = pipeline_stage_layers(inputs)[stage]
    absent = sum(
        sum(_decoder_layer_tensors(inputs, moe=k >= dense, recurrent=k >= m.attention_layers))
        for k in range(m.num_layers)
        if k not in held
    )
    table = m.vocab_size * (m.word_embed_proj_dim or m.hidden_size) * act / tp
    tables = 1 if m.tie_word_embeddings else 2
    absent += (tables - (stage == 0) - (stage == pp - 1)) * table
    return math.ceil(even - (sharded / (tp * pp) + replicated / pp) + whole - absent)


def cpu_offload_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Weights ``--cpu-offload-gb`` moves to host memory on each GPU (bytes), so they are not on the GPU.

    vLLM offloads parameter by parameter, in load order, through the decoder layers ``make_layers`` builds on
    the rank's pipeline stage, while the running total is below the budget (``vllm/model_executor/offloader/
    uva.py`` ``UVAOffloader._maybe_offload_to_cpu``, 0.21.0: ``if self.cpu_offload_bytes >=
    self.cpu_offload_max_bytes: break`` before each parameter; ``maybe_offload_to_cpu`` in
    ``vllm/model_executor/models/utils.py`` has the same rule in 0.9). So it overshoots the budget by up to one
    tensor (a fused MoE ``w13`` is all of a layer's experts), and never touches the embedding, the LM head or
    a draft model. The budget is per GPU, in GiB (``cpu_offload_max_bytes = int(cpu_offload_gb × 1024**3)``,
    ``vllm/model_executor/offloader/base.py``).

    Llama-3.1-8B bf16, TP 1, ``--cpu-offload-gb 4``: a layer is qkv 50,331,648 + o 33,554,432 + gate_up
    234,881,024 + down 117,440,512 + 2 norms × 8,192 = 436,224,000 B; 9 layers = 3,926,016,000 B, then qkv, o and
    gate_up of the 10th stay below 4 GiB (4,244,783,104) and its down_proj crosses it: 4,362,223,616 B offloaded
    (4.06 GiB), so 14.99 − 4.06 = 10.93 GiB stay on the GPU.
    """
    budget = inputs.cpu_offload_bytes
    if budget <= 0:
        return 0
    m = inputs.model
    stage = layers_per_stage(inputs, m.num_layers)
    dense = m.num_layers - (m.moe_layers if m.is_moe else 0)  # dense layers come first (first_k_dense_replace)
    offloaded = 0.0
    for index in range(stage):
        tensors = _decoder_layer_tensors(inputs, moe=index >= dense, recurrent=index >= m.attention_layers)
        for size in tensors:
            if offloaded >= budget:
                return math.ceil(offloaded)
            offloaded += size
    return math.ceil(offloaded)


def cuda_graph_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """vLLM's CUDA-graph memory estimate on each GPU, subtracted before the KV cache (bytes): the profile's
    ``cuda_graph_bytes`` from :data:`CUDA_GRAPH_ESTIMATE_SINCE` (0.20) on, else 0, and 0 with
    ``--enforce-eager`` (``cudagraph_mode`` NONE), with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0``
    (``estimate_cuda_graphs``) or when the version is not stated (the term is version-gated).

    The engine measures it (``vllm/v1/worker/gpu_model_runner.py`` ``GPUModelRunner.profile_cudagraph_memory``,
    0.21.0): per graph mode (PIECEWISE, FULL) it captures the two largest batch sizes into a scratch pool and
    reads free memory around each capture; ``estimate = max over modes (first capture) + Σ over modes
    (second capture, at least 1 MiB) × (graphs in the mode − 1)``. The first capture carries the graph pool's
    buffers and the kernels' workspaces, and dominates: a model of one size (``PIECEWISE=1, FULL=1``) still
    logs 0.36 GiB. Twelve published estimates ("Estimated CUDA graph memory: … GiB total", vLLM 0.18-0.28, 1
    to 86 graphs, TP 1-4) lie between 0.17 GiB (noonghunna/club-3090#127, TP 4) and 2.43 GiB
    (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#25), median 0.62 GiB (gpustack/runner#251: 0.36 GiB at TP 2),
    with no trend in the capture sizes: the profile carries the median. Not modelled: hybrid Gated-DeltaNet
    models from 0.26, whose estimate includes a transient linear in ``max_num_batched_tokens``
    (vllm-project/vllm#50780, estimates of tens of GiB).
    """
    if inputs.enforce_eager or not inputs.estimate_cuda_graphs:
        return 0
    parsed = parse_version(inputs.engine_version)
    if parsed is None or parsed < CUDA_GRAPH_ESTIMATE_SINCE:
        return 0
    return OVERHEAD_PROFILES[inputs.overhead_profile].cuda_graph_bytes


def activation_peak_bytes(inputs: CapacityInputs) -> tuple[int, int]:
    """(forward peak, sampler peak) of the profile run on one GPU, bytes; see :class:`OverheadModel`.

    Llama-3.1-8B bf16, TP1, 8192 tokens, 1024 sequences: forward 8192 × 2 × (6 × 4096 + 3 × 14336) =
    1.03 GiB; sampler 1024 × 128,256 × 39 = 4.77 GiB (vLLM 0.11 logs 4.76 GiB).
    """
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    m = inputs.model
    tp = inputs.tensor_parallel_size
    act = DTYPE_BYTES[inputs.compute_dtype]
    tokens = inputs.profile_tokens
    has_dense = m.num_layers > m.moe_layers or not m.is_moe
    if om.forward_by_model_code and has_dense:
        forward = tokens * act * v0_forward_elements_per_token(m, tp)
    else:
        dense = om.mlp_factor * m.intermediate_size / tp if has_dense else 0.0
        forward = tokens * act * (om.hidden_factor * m.hidden_size + dense)
    if m.is_moe:
        tp_moe = 1 if inputs.enable_expert_parallel else tp
        per_token = m.experts_per_token * (om.mlp_factor * m.moe_intermediate_size / tp_moe + m.hidden_size)
        moe = min(tokens, FUSED_MOE_CHUNK_TOKENS) * act * per_token + tokens * act * om.hidden_factor * m.hidden_size
        forward = max(forward, moe)
    rows = inputs.max_num_seqs
    logits = tokens if om.logits_for_every_token else rows
    sampler = logits * m.vocab_size * sampler_bytes_per_logit(inputs)
    return math.ceil(forward), math.ceil(sampler)


def sampler_bytes_per_logit(inputs: CapacityInputs) -> float:
    """Bytes per (row × vocab) element at the peak of the sampler warm-up, by :attr:`CapacityInputs.effective_sampler`:
    the torch sampler's :attr:`OverheadModel.sampler_bytes_per_logit` (39: it sorts the vocabulary), FlashInfer's
    :data:`FLASHINFER_SAMPLER_BYTES_PER_LOGIT` (14), or :data:`FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT` (10) on
    V1 before 0.9 (flashinfer 0.2.1's sampling from probabilities)."""
    if inputs.effective_sampler == "torch":
        return OVERHEAD_PROFILES[inputs.overhead_profile].sampler_bytes_per_logit
    parsed = parse_version(inputs.engine_version)
    if inputs.overhead_profile == "vllm-v1" and parsed is not None and parsed < (0, 9):
        return FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT
    return FLASHINFER_SAMPLER_BYTES_PER_LOGIT


def overhead_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Non-KV, non-weight memory on each GPU (bytes) per :class:`OverheadModel` of ``overhead_profile``:
    ``max(forward, sampler) + non-torch (+ TP buffers) + CUDA graphs``.

    Example (vllm-v1, Llama-3.1-8B, bf16, TP1, 8192 batched tokens, 256 seqs): max(1.03 GiB forward,
    256 × 128,256 × 39 = 1.19 GiB sampler) + 0.13 GiB non-torch = 1.32 GiB.
    """
    forward, sampler = activation_peak_bytes(inputs)
    return max(forward, sampler) + non_torch_bytes_per_gpu(inputs) + cuda_graph_bytes_per_gpu(inputs)


def vllm_accounting_of(inputs: CapacityInputs) -> Accounting:
    """``inputs.accounting`` when the resolver decided it, else the accounting of ``inputs.overhead_profile``:
    the version's own reason when the version gives that profile, else "as given"."""
    if inputs.accounting is not None and inputs.accounting.engine == "vllm":
        return inputs.accounting
    acc = vllm_accounting(inputs.engine_version)
    if acc.profile == inputs.overhead_profile:
        return acc
    generation = inputs.overhead_profile.removeprefix("vllm-")
    return Accounting(
        "vllm",
        generation,
        inputs.engine_version,
        f"{generation.upper()}: overhead profile {inputs.overhead_profile} as given",
    )


def non_torch_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Memory vLLM counts as ``non_torch`` on each GPU (bytes): the CUDA context and libraries, plus NCCL's
    buffers when ``TP > 1``::

        non_torch = non_torch_bytes
                    + tp_non_torch_bytes + (TP − 2) × tp_peer_non_torch_bytes          (TP > 1)
                    + nvls_communicators × nvls_channels × nvls_bytes_per_channel × TP  (TP > 2, NVLS)

    The NVLS term is NCCL 2.19–2.22's NVLink SHARP allocation (``src/transport/nvls.cc`` ``ncclNvlsSetup``:
    ``nChannels × 2 × (NCCL_BUFFSIZE 4 MiB + 2 MiB) × nHeads``, one head per GPU), made at communicator init on
    nodes where ``inputs.nvlink_sharp`` holds and more than two GPUs share the communicator. vLLM's own NCCL
    log on 8 × H200 prints ``nHeads 8 buffSize 4194304 memSize 2097152 nvlsPerRankSize 301989888
    nvlsTotalSize 2415919104`` (24 channels, 2.25 GiB; vllm-project/vllm#9699), and the same issue measures
    ~5 GiB of KV cache returned by ``NCCL_NVLS_ENABLE=0`` at TP 8, i.e. two communicators (V0's pynccl one and
    torch.distributed's TP group, which gathers the logits). vLLM ≥ 0.9 ships NCCL ≥ 2.26, which sizes NVLS
    by its 128 KiB chunk and allocates on first use: the V1 profile has no NVLS term.

    The NVLS bytes per channel and head are the measured :data:`NVLS_BYTES_PER_CHANNEL_HEAD` (13.2 MiB; the
    source's buffers alone are 12 MiB).

    Example (vllm-v0, TP 8, H200): 0.10 + 0.42 + 6 × 0.263 + 2 × 24 × 13.2 MiB × 8 = 0.10 + 2.00 + 4.95
    = 7.05 GiB (DeepSeek-R1 on vLLM 0.7.3 logged 7.16 GiB; neither figure was fitted to that log).

    Releases that count the whole device (:attr:`CapacityInputs.counts_whole_device`: V0 ≤ 0.6.4, V1 0.8-0.9.0)
    replace ``non_torch_bytes`` by ``whole_device_non_torch_bytes`` (CUDA context and libraries, 0.35 GiB) plus
    ``gpu_memory_used_by_others_bytes``: Llama-3.1-8B on an RTX 3090 with vLLM 0.6.4 logs
    ``non_torch_memory=0.35GiB`` (github.com/vllm-project/vllm/issues/10517).
    """
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    tp = inputs.tensor_parallel_size
    total = om.non_torch_bytes
    if inputs.counts_whole_device:
        # the release subtracts torch's allocations from the device's whole use: the CUDA context and libraries
        # of this process, and whatever other processes hold, count as this instance's non-torch memory
        total = om.whole_device_non_torch_bytes + inputs.gpu_memory_used_by_others_bytes
    if tp > 1:
        # peers beyond one node's NVLink domain connect over the network, through other, smaller buffers
        total += om.tp_non_torch_bytes + (min(tp, GPUS_PER_NVLINK_NODE) - 2) * om.tp_peer_non_torch_bytes
    return total + nvls_bytes_per_gpu(inputs)


def nvls_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """The NCCL NVLink SHARP part of :func:`non_torch_bytes_per_gpu` (bytes): 0 unless the profile allocates it
    (``nvls_communicators``), ``inputs.nvlink_sharp`` holds and TP > 2. One head per GPU of the node's NVSwitch
    domain, so TP beyond :data:`GPUS_PER_NVLINK_NODE` adds no heads."""
    om = OVERHEAD_PROFILES[inputs.overhead_profile]
    tp = inputs.tensor_parallel_size
    if tp <= 2 or not inputs.nvlink_sharp:
        return 0
    return om.nvls_communicators * om.nvls_channels * om.nvls_bytes_per_channel * min(tp, GPUS_PER_NVLINK_NODE)


def max_concurrency(inputs: CapacityInputs, pool_bytes: int, blocks: int, context_tokens: int) -> float:
    """Requests of ``context_tokens`` tokens the pool holds at once.

    Uniform models: ``blocks ÷ ceil(context ÷ block_size)`` (vLLM ``kv_cache_utils.py`` "Maximum concurrency").
    Sliding-window and recurrent hybrids follow the engine's per-layer rule: a windowed layer holds at most
    ``ceil(window ÷ block) + 1`` blocks of a request, a recurrent layer one fixed state, so::

        per request = per-layer bytes × block × (full layers × ceil(L/block) + windowed × min(ceil(L/block),
                      ceil(window/block) + 1)) + recurrent state;   concurrency = pool ÷ per request
    """
    m = inputs.model
    bs = inputs.block_size
    need = max(1, math.ceil(context_tokens / bs))
    if not m.sliding_window_layers and not m.linear_layers:
        return blocks / need
    per_layer = kv_bytes_per_token_per_layer(inputs) * bs
    windowed = min(need, math.ceil(m.sliding_window / bs) + 1) if m.sliding_window_layers else 0
    full = layers_per_stage(inputs, m.full_attention_layers)
    full += inputs.speculative.draft_layers if inputs.speculative is not None else 0
    sliding = layers_per_stage(inputs, m.sliding_window_layers) if m.sliding_window_layers else 0
    per_request = per_layer * (full * need + sliding * windowed) + recurrent_state_bytes_per_sequence(inputs)
    return pool_bytes / per_request if per_request else math.inf


HYBRID_KV_CACHE_MANAGER_SINCE: Final = (0, 9, 1)
"""First vLLM release whose V1 engine keeps sliding-window layers apart from full-attention layers (the hybrid KV
cache manager): ``vllm/v1/core/kv_cache_utils.py`` ``get_kv_cache_config`` at v0.9.1 calls
``unify_hybrid_kv_cache_specs`` only under ``--disable-hybrid-kv-cache-manager``. At v0.8.0–v0.9.0 it is called
for every model and turns each ``SlidingWindowSpec`` into a ``FullAttentionSpec``: blocks for every token of every
layer, the window applied only in the attention kernel."""

HYBRID_GROUP_SIZE_MAX_RATIO: Final = (((0, 18), 1.5), ((0, 12), 1.25))
"""(first version, ratio): from that vLLM release on, a hybrid whose largest layer type has fewer than ratio ×
the smallest type's layers is grouped by the largest count (``_get_kv_cache_groups_uniform_page_size``:
``if max_num_layers < min_num_layers * 1.25: group_size = max_num_layers`` at v0.12.0–v0.16.0, ``* 1.5`` at
v0.18.0 and later); before v0.12 the group size is always the smallest count."""

HYBRID_TOKENS_FROM_CONCURRENCY_SINCE: Final = (0, 22)
"""From vLLM 0.22 "GPU KV cache size" is ``int(max_concurrency × max_model_len)`` (``kv_cache_utils.py``
``get_kv_cache_capacity``, v0.22.0 line 1731); before, ``num_blocks // len(kv_cache_groups) × block_size``
(``_report_kv_cache_config``, v0.13.0; ``_get_kv_cache_config_uniform_page_size``, v0.9.1–v0.10.x)."""


@dataclass(frozen=True)
class HybridKVLayout:
    """How vLLM V1 lays out the KV cache of a sliding-window model (one pipeline stage, one GPU).

    Attributes:
        group_size: layers per KV cache group, the number of shared per-layer tensors; one block of the pool
            is ``group_size`` layer pages.
        full_groups: groups of full-attention layers (the last one padded to ``group_size``).
        sliding_groups: groups of sliding-window layers (the last one padded).
    """

    group_size: int
    full_groups: int
    sliding_groups: int

    @property
    def groups(self) -> int:
        """All KV cache groups (``len(kv_cache_groups)``)."""
        return self.full_groups + self.sliding_groups


def hybrid_kv_layout(inputs: CapacityInputs) -> HybridKVLayout | None:
    """The KV cache groups vLLM V1 makes of a model with sliding-window layers, or ``None`` where the engine keeps
    every layer in one group at full length (no sliding layers; recurrent layers, kept on their own path here;
    MLA; V0; V1 before :data:`HYBRID_KV_CACHE_MANAGER_SINCE`; ``disable_hybrid_kv_cache_manager``).

    ``vllm/v1/core/kv_cache_utils.py`` ``_get_kv_cache_config_uniform_page_size`` (v0.9.1–v0.11.x;
    ``_get_kv_cache_groups_uniform_page_size`` from v0.11.0): layers of one spec are split into groups of
    ``group_size`` = the smallest type's layer count (see :data:`HYBRID_GROUP_SIZE_MAX_RATIO`), the last group of
    each type padded: Gemma-3-1B's 22 sliding and 4 full layers make 6 sliding groups (24 layer slots, "Add 2
    padding layers, may waste at most 9.09% KV cache memory") and 1 full group, 7 groups of 4. A model whose
    every attention layer slides is one group of all its layers (``_get_kv_cache_config_uniform_type``).
    Pipeline stages: the fullest stage's ``ceil(layers ÷ PP)`` of each type.
    """
    m = inputs.model
    if (
        not m.sliding_window_layers
        or m.linear_layers
        or m.is_mla
        or inputs.overhead_profile != "vllm-v1"
        or inputs.disable_hybrid_kv_cache_manager
    ):
        return None
    version = parse_version(inputs.engine_version)
    if version is not None and version < HYBRID_KV_CACHE_MANAGER_SINCE:
        return None
    sliding = layers_per_stage(inputs, m.sliding_window_layers)
    full = layers_per_stage(inputs, m.full_attention_layers) if m.full_attention_layers else 0
    if not full:
        return HybridKVLayout(group_size=sliding, full_groups=0, sliding_groups=1)
    size = min(full, sliding)
    for since, ratio in HYBRID_GROUP_SIZE_MAX_RATIO:
        if (version is None or version >= since) and max(full, sliding) < size * ratio:
            size = max(full, sliding)
            break
    return HybridKVLayout(group_size=size, full_groups=-(-full // size), sliding_groups=-(-sliding // size))


def hybrid_blocks_per_request(inputs: CapacityInputs, layout: HybridKVLayout, context_tokens: int) -> int:
    """Pool blocks (``group_size`` layer pages each) one request of ``context_tokens`` tokens may hold in vLLM V1:
    the sum over the groups of each spec's ``max_memory_usage_bytes`` ÷ its page (``kv_cache_utils.py``
    ``get_max_concurrency_for_kv_cache_config``, v0.9.1–v0.21; ``kv_cache_interface.py``)::

        full group     cdiv(L, block)                                          (FullAttentionSpec)
        sliding group  cdiv(min(window − 1 + max_num_batched_tokens, L), block) + 1   (SlidingWindowSpec)

    During chunked prefill a windowed layer holds the last ``window − 1`` tokens plus the chunk being scheduled;
    the +1 is a window that starts mid-block. ``max_num_batched_tokens`` is :attr:`CapacityInputs.profile_tokens`
    (vLLM ≥ 0.25 uses ``max_in_flight_tokens``, which is larger under async scheduling or PP: not modelled).

    Gemma-3-1B at L = 2,048, block 16, 8,192 batched tokens: 1 × 128 + 6 × (cdiv(2,048, 16) + 1) = 902 blocks.
    """
    bs = inputs.block_size
    full = -(-context_tokens // bs)
    window = inputs.model.sliding_window
    sliding = -(-min(window - 1 + inputs.profile_tokens, context_tokens) // bs) + 1
    return max(1, layout.full_groups * full + layout.sliding_groups * sliding)


def vllm_max_concurrency(inputs: CapacityInputs, pool_bytes: int, blocks: int, context_tokens: int) -> float:
    """vLLM's "Maximum concurrency" for models :func:`hybrid_kv_layout` keeps in one group (``blocks`` = the
    engine's blocks of every layer), by engine generation; recurrent hybrids as :func:`max_concurrency`.

    * V1 before 0.9.1, or the hybrid manager off: every sliding layer is full attention (``unify_hybrid_kv_cache_
      specs``), so ``blocks ÷ ceil(L ÷ block)`` (0.8.x–0.9.0 print ``num_tokens / max_model_len``).
    * V0 (``vllm/config.py`` ``ModelConfig.__init__``; 0.6.6 lists gemma2, 0.7.3 adds cohere2, 0.8.5
      gemma3_text): an interleaved model (a list ``sliding_window``, or one of those types) has its window removed:
      "the scheduler and the model treat it as full attention", so ``blocks ÷ ceil(L ÷ block)`` too. A model whose
      every layer slides (Mistral-7B-v0.1) is capped per sequence by the block manager
      (``vllm/core/block_manager.py`` ``SelfAttnBlockSpaceManager.__init__``, 0.6.6 and 0.7.3:
      ``max_block_sliding_window = window // block + 2``), so ``blocks ÷ min(ceil(L ÷ block), window // block + 2)``.
      (V0 prints ``num_gpu_blocks × block_size / max_model_len``, ``executor_base.py``; this is what it admits.)
    """
    m = inputs.model
    if not m.sliding_window_layers or m.linear_layers:
        return max_concurrency(inputs, pool_bytes, blocks, context_tokens)
    bs = inputs.block_size
    need = max(1, math.ceil(context_tokens / bs))
    if inputs.overhead_profile == "vllm-v0" and not m.full_attention_layers:
        need = min(need, m.sliding_window // bs + 2)
    return blocks / need


def capacity_pass(inputs: CapacityInputs) -> CapacityResult:
    """The capacity of one replica under ITS engine's own KV accounting (``inputs.engine``): vLLM's
    (:func:`vllm_capacity_pass`) or SGLang's, TGI's, TensorRT-LLM's, llama.cpp's
    (:func:`advisor.capacity.engines.engine_capacity_pass`), then summed over ``data_parallel_size`` ranks.

    This is the one entry point the daemon, the API, ``plan`` and ``simulate`` size a deployment with, and
    what the rules re-run with a dial turned.

    Raises:
        CapacityError: as the engine's rule (weights do not fit, no memory left for the KV cache).
    """
    from advisor.capacity.engines import engine_capacity_pass

    return engine_capacity_pass(inputs.engine, inputs, inputs.engine_settings).result


def across_ranks(result: CapacityResult, data_parallel_size: int) -> CapacityResult:
    """One rank's result counted over ``data_parallel_size`` data-parallel ranks: blocks and tokens × ranks,
    concurrency × ranks when one full-length request fits a rank (a request never spans ranks). Per-GPU
    figures (weights, pool bytes) stay per GPU."""
    if data_parallel_size <= 1:
        return result
    per_rank = result.max_concurrency
    return replace(
        result,
        kv_cache_blocks=result.kv_cache_blocks * data_parallel_size,
        kv_cache_tokens=result.kv_cache_tokens * data_parallel_size,
        max_concurrency=per_rank * data_parallel_size if per_rank >= 1 else per_rank,
        data_parallel_size=data_parallel_size,
    )


def binding_pipeline_stage(inputs: CapacityInputs, requested: float) -> tuple[int, int, int]:
    """(weights, overhead, attention layers) on one GPU of the pipeline stage with the fewest KV blocks.

    Every stage sizes its own cache and the executor keeps the smallest count (``distributed_gpu_executor.py``
    ``determine_num_available_blocks``, 0.6.6: ``num_gpu_blocks = min(b[0] for b in num_blocks)``; V1
    ``kv_cache_utils.py`` ``get_kv_cache_configs`` likewise takes the minimum over workers). A stage holds its layers
    (:func:`pipeline_stage_layers`) and weights (:func:`pipeline_stage_weights_bytes`); only the last runs the
    sampler warm-up (``ModelRunner.execute_model`` returns the intermediate tensors on the others, V0; V1
    ``profile_run``: ``if get_pp_group().is_last_rank``). Blocks of stage ``s`` = ``(requested − weights_s −
    overhead_s) ÷ (block_size × KV bytes per token per layer × layers_s)``.
    """
    forward, sampler = activation_peak_bytes(inputs)
    fixed = non_torch_bytes_per_gpu(inputs) + cuda_graph_bytes_per_gpu(inputs)
    draft = inputs.speculative.draft_layers if inputs.speculative is not None else 0
    last = inputs.pipeline_parallel_size - 1
    best: tuple[float, int, int, int] | None = None
    for stage, held in enumerate(pipeline_stage_layers(inputs)):
        weights = pipeline_stage_weights_bytes(inputs, stage)
        overhead = (max(forward, sampler) if stage == last else forward) + fixed
        blocks = (requested - weights - overhead) / (len(held) + draft)
        if best is None or blocks < best[0]:
            best = (blocks, weights, overhead, len(held))
    assert best is not None
    return best[1], best[2], best[3]


def vllm_capacity_pass(inputs: CapacityInputs) -> CapacityResult:
    """Weights → KV pool → blocks → tokens → concurrency ceiling, for one replica (one data-parallel rank),
    by vLLM's accounting.

    Formulas (sources: vLLM ``vllm/v1/worker/gpu_worker.py`` ``determine_available_memory`` and
    ``vllm/v1/core/kv_cache_utils.py``; see the module docstring)::

        weights/GPU   = see weights_bytes_per_gpu           (params × bytes/param, ÷ TP)
        KV/token/GPU  = 2 × layers × max(1, kv_heads // TP) × head_dim × kv_bytes
        pool/GPU      = gpu_memory × utilization − weights/GPU − overhead/GPU   (or the override)
        blocks        = floor(pool/GPU ÷ (block_size × KV/token/GPU))      (or num_gpu_blocks_override)
        tokens        = blocks × block_size
        concurrency   = blocks ÷ ceil(max_model_len ÷ block_size)

    WORKED EXAMPLE: Llama-3.1-8B-Instruct on one H100-SXM (CUDA total 79.15 GiB), util 0.9,
    ``--max-model-len 8192``, bf16, defaults otherwise (vllm-v1 overhead)::

        requested     79.15 GiB × 0.9                            = 71.235 GiB
        weights       8,030,261,248 × 2 B + rotary 32 MiB        = 14.99 GiB   (vLLM logs 14.99)
        overhead      max(1.03 forward, 1.19 sampler) + 0.13     =  1.32 GiB   (vLLM 1.21-1.24 + 0.32-0.35)
        KV pool       71.235 − 14.99 − 1.32                      = 54.92 GiB   (vLLM logs 54.62-54.68)
        KV/token      2 × 32 × 8 × 128 × 2 B                     = 131,072 B   (128 KiB)
        blocks        floor(54.92 GiB ÷ (16 × 131,072 B))        = 28,120
        tokens        28,120 × 16                                = 449,920     (vLLM logs 447,088-447,776)
        concurrency   28,120 ÷ ceil(8192 ÷ 16) = 28,120 ÷ 512    = 54.92×
        at a 2,000-token mean context: 28,120 ÷ 125 = 225.0 sequences (max_num_seqs=256 binds later)

    (vLLM figures: V1 logs of this model on H100 80GB HBM3 reporting 79.11 GiB total, cited in the module
    docstring; ours at 79.11 GiB gives 54.89 GiB, +0.5 %.)

    Memory held by other processes (``gpu_memory_used_by_others_bytes``) does not shrink the pool: vLLM
    measures its own use from a baseline taken at start-up (``vllm/v1/worker/gpu_worker.py`` ``init_device``,
    V0 ≥ 0.6.5 ``memory_profiling``) and budgets ``total × utilization`` for itself; when less than that is
    free, V1 refuses to start ("Free memory on device … on startup is less than desired GPU memory
    utilization") and V0 runs out of memory allocating the cache. Both are a :class:`CapacityError` here.
    Releases before the baseline (V0 ≤ 0.6.4, V1 0.8-0.9.0) count that memory as their own non-torch memory
    instead: it shrinks the pool (:func:`non_torch_bytes_per_gpu`) and nothing refuses to start.

    Raises:
        CapacityError: the weights do not fit in ``gpu_memory × utilization``, nothing is left for the KV
            cache after the overhead, or other processes leave less than the budget free; the message
            carries the GiB figures.
    """
    m = inputs.model
    tp = inputs.tensor_parallel_size
    weights = weights_bytes_per_gpu(inputs)
    overhead = overhead_bytes_per_gpu(inputs)
    requested = inputs.gpu_memory_bytes * inputs.gpu_memory_utilization
    fixed = inputs.kv_cache_memory_bytes is not None or inputs.num_gpu_blocks_override is not None
    stage_layers = None
    if (
        inputs.pipeline_parallel_size > 1
        and not fixed
        and m.attention_layers == m.num_layers
        and hybrid_kv_layout(inputs) is None
    ):
        # the stage with the fewest blocks sizes every stage's cache (binding_pipeline_stage)
        weights, overhead, stage_layers = binding_pipeline_stage(inputs, requested)
    others = inputs.gpu_memory_used_by_others_bytes
    # releases that count the whole device take others' memory as non-torch memory (in the overhead above) and
    # start; the later ones measure from a baseline and check the free memory at start-up
    if others and not inputs.counts_whole_device and inputs.gpu_memory_bytes - others < requested:
        free = inputs.gpu_memory_bytes - others
        at_most = math.floor(free / inputs.gpu_memory_bytes * 100) / 100
        if at_most * inputs.gpu_memory_bytes <= weights + overhead:
            # no utilization vLLM would start with leaves room for a KV cache: say so, not "at most 0.00"
            advice = (
                f"nothing fits beside them: the weights and overhead alone need {(weights + overhead) / GIB:.2f} GiB "
                f"per GPU at TP={tp}; free the GPU, or use GPUs with more memory or a larger tensor_parallel_size"
            )
        else:
            advice = f"lower gpu_memory_utilization to at most {at_most:.2f}"
        raise CapacityError(
            f"{m.name}: other processes hold {others / GIB:.2f} GiB per GPU, leaving {free / GIB:.2f} GiB free, "
            f"less than gpu_memory_utilization {inputs.gpu_memory_utilization} × {inputs.gpu_memory_bytes / GIB:.2f}"
            f" GiB = {requested / GIB:.2f} GiB: vLLM refuses to start (V1) or runs out of memory (V0); {advice}"
        )
    if fixed:
        if weights > inputs.gpu_memory_bytes:
            raise CapacityError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} but the GPU has "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB"
            )
        pool = inputs.kv_cache_memory_bytes or 0
    else:
        if weights >= requested:
            raise CapacityError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} "
                f"({inputs.compute_dtype}, quantization {inputs.effective_quantization or 'none'}) but only "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB × {inputs.gpu_memory_utilization} = "
                f"{requested / GIB:.2f} GiB may be used; raise tensor_parallel_size, quantize, or use a "
                "larger GPU"
            )
        pool = math.floor(requested - weights - overhead)
        if pool <= 0:
            forward, sampler = activation_peak_bytes(inputs)
            dial = (
                f"lower max_num_seqs ({inputs.max_num_seqs:,}: its sampler warm-up takes {sampler / GIB:.2f} GiB)"
                if sampler >= forward
                else f"lower max_num_batched_tokens ({inputs.profile_tokens:,}: its forward pass takes "
                f"{forward / GIB:.2f} GiB)"
            )
            raise CapacityError(
                f"{m.name}: weights {weights / GIB:.2f} GiB + overhead {overhead / GIB:.2f} GiB per GPU "
                f"leave no KV cache in {requested / GIB:.2f} GiB ({inputs.gpu_memory_bytes / GIB:.2f} GiB × "
                f"{inputs.gpu_memory_utilization}); {dial}, raise utilization or TP"
            )
    per_token_gpu = kv_bytes_per_token_per_gpu(inputs)
    if stage_layers is not None:
        draft = inputs.speculative.draft_layers if inputs.speculative is not None else 0
        per_token_gpu = kv_bytes_per_token_per_layer(inputs) * (stage_layers + draft)
    max_len = inputs.effective_max_model_len
    layout = hybrid_kv_layout(inputs)
    if layout is not None:
        # V1's hybrid manager: a pool block is group_size layer pages; every group draws from the one pool
        page = kv_bytes_per_token_per_layer(inputs) * inputs.block_size * layout.group_size
        per_token_gpu = kv_bytes_per_token_per_layer(inputs) * layout.group_size * layout.groups
        engine_blocks = inputs.num_gpu_blocks_override or pool // page
        pool = engine_blocks * page if inputs.num_gpu_blocks_override is not None else pool
        concurrency = engine_blocks / hybrid_blocks_per_request(inputs, layout, max_len)
        blocks = engine_blocks // layout.groups
        version = parse_version(inputs.engine_version)
        if version is not None and version >= HYBRID_TOKENS_FROM_CONCURRENCY_SINCE:
            blocks = int(concurrency * max_len) // inputs.block_size
    elif inputs.num_gpu_blocks_override is not None:
        # the operator's block count replaces the profiled one; the engine allocates exactly that many
        blocks = inputs.num_gpu_blocks_override
        pool = blocks * inputs.block_size * per_token_gpu
    else:
        blocks = pool // (inputs.block_size * per_token_gpu)
    if layout is None:
        concurrency = vllm_max_concurrency(inputs, pool, blocks, max_len)
    return CapacityResult(
        weights_bytes_per_gpu=weights,
        kv_cache_bytes_per_token=per_token_gpu * tp * inputs.pipeline_parallel_size,
        kv_cache_bytes_per_token_per_gpu=per_token_gpu,
        overhead_bytes_per_gpu=0 if fixed else overhead,
        kv_pool_bytes_per_gpu=pool,
        kv_cache_blocks=blocks,
        kv_cache_tokens=blocks * inputs.block_size,
        max_concurrency=concurrency,
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
        activation_peak_bytes_per_gpu=max(activation_peak_bytes(inputs)),
        cuda_graph_bytes_per_gpu=cuda_graph_bytes_per_gpu(inputs),
        non_torch_bytes_per_gpu=non_torch_bytes_per_gpu(inputs),
        accounting=vllm_accounting_of(inputs),
        cpu_offload_bytes_per_gpu=cpu_offload_bytes_per_gpu(inputs),
        draft_weights_bytes_per_gpu=draft_weights_bytes_per_gpu(inputs),
        lora_bytes_per_gpu=lora_bytes_per_gpu(inputs),
    )
