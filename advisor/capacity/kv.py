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
  (:func:`vllm_max_concurrency`). Recurrent hybrids (Gated DeltaNet, Mamba-1) on V1 ≥ 0.10 get an attention block
  raised to hold one layer's state and equal-sized groups (:func:`recurrent_hybrid_layout`).

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

Each overhead term is traced against these logs in :mod:`advisor.capacity.overhead`.

With the engine's own KV memory (``kv_cache_memory_bytes``) all five match the engine's blocks to the rounding
of the printed GiB, and weights match within 0.6 %. Other engines (SGLang, TGI, TensorRT-LLM, llama.cpp):
:mod:`advisor.capacity.engines`.

The steps live in their own modules and are re-exported here (every name of ``__all__``):
:mod:`~advisor.capacity.profiles` (the overhead models, version gates and sampler defaults by release),
:mod:`~advisor.capacity.inputs` (:class:`CapacityInputs`, :class:`EngineSettings`, :class:`CapacityResult`),
:mod:`~advisor.capacity.kvlayout` (KV bytes per token, layers per stage, concurrency, hybrid layouts),
:mod:`~advisor.capacity.weights` (weights per GPU) and :mod:`~advisor.capacity.overhead` (activation, non-torch,
CUDA graphs). This module keeps the pass itself.
"""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.capacity.encoder import encoder_profile
from advisor.capacity.generation import parse_version
from advisor.capacity.hardware import GIB
from advisor.capacity.inputs import ACCOUNTING_ENGINES, CapacityInputs, CapacityResult, EngineSettings
from advisor.capacity.inputs import MAX_KV_CACHE_MEMORY_BYTES as MAX_KV_CACHE_MEMORY_BYTES
from advisor.capacity.inputs import MAX_NUM_GPU_BLOCKS as MAX_NUM_GPU_BLOCKS
from advisor.capacity.kvlayout import GEMMA4_SINCE as GEMMA4_SINCE
from advisor.capacity.kvlayout import HYBRID_GROUP_SIZE_MAX_RATIO as HYBRID_GROUP_SIZE_MAX_RATIO
from advisor.capacity.kvlayout import HYBRID_KV_CACHE_MANAGER_SINCE as HYBRID_KV_CACHE_MANAGER_SINCE
from advisor.capacity.kvlayout import (
    HYBRID_TOKENS_FROM_CONCURRENCY_SINCE,
    HybridKVLayout,
    RecurrentHybridLayout,
    hybrid_blocks_per_request,
    hybrid_kv_layout,
    kv_bytes_per_token_per_gpu,
    kv_bytes_per_token_per_layer,
    kv_heads_per_gpu,
    max_concurrency,
    pipeline_stage_layers,
    recurrent_hybrid_layout,
    recurrent_state_bytes_per_sequence,
    recurrent_state_page_bytes,
    vllm_max_concurrency,
    vllm_mha_fallback_head_size,
)
from advisor.capacity.kvlayout import PP_REMAINDER_BEFORE_LAST_SINCE as PP_REMAINDER_BEFORE_LAST_SINCE
from advisor.capacity.kvlayout import VLLM_MHA_HEAD_256_BEFORE as VLLM_MHA_HEAD_256_BEFORE
from advisor.capacity.kvlayout import VLLM_MLA_QUANTIZATIONS_0_7_1 as VLLM_MLA_QUANTIZATIONS_0_7_1
from advisor.capacity.kvlayout import VLLM_MLA_SINCE as VLLM_MLA_SINCE
from advisor.capacity.kvlayout import layers_per_stage as layers_per_stage
from advisor.capacity.overhead import (
    activation_peak_bytes,
    cuda_graph_bytes_per_gpu,
    non_torch_bytes_per_gpu,
    nvls_bytes_per_gpu,
    overhead_bytes_per_gpu,
    sampler_bytes_per_logit,
    vllm_accounting_of,
)
from advisor.capacity.profiles import CUDA_GRAPH_ESTIMATE_ENV as CUDA_GRAPH_ESTIMATE_ENV
from advisor.capacity.profiles import CUDA_GRAPH_ESTIMATE_SINCE as CUDA_GRAPH_ESTIMATE_SINCE
from advisor.capacity.profiles import (
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    OVERHEAD_PROFILES,
    SAMPLERS,
    V0_FORWARD_FACTORS,
    V0_MLP_REBINDING_TYPES,
    OverheadModel,
    default_sampler,
    profile_for_version,
    sampler_problems,
    v0_forward_elements_per_token,
    v0_mlp_code,
    vllm_default_max_num_seqs,
)
from advisor.capacity.profiles import (
    FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT as FLASHINFER_0_2_1_SAMPLER_BYTES_PER_LOGIT,
)
from advisor.capacity.profiles import FLASHINFER_SAMPLER_BYTES_PER_LOGIT as FLASHINFER_SAMPLER_BYTES_PER_LOGIT
from advisor.capacity.profiles import FLASHINFER_SAMPLER_CAPABILITY as FLASHINFER_SAMPLER_CAPABILITY
from advisor.capacity.profiles import FLASHINFER_SAMPLER_DEFAULT_RELEASES as FLASHINFER_SAMPLER_DEFAULT_RELEASES
from advisor.capacity.profiles import FUSED_MOE_CHUNK_TOKENS as FUSED_MOE_CHUNK_TOKENS
from advisor.capacity.profiles import GPUS_PER_NVLINK_NODE as GPUS_PER_NVLINK_NODE
from advisor.capacity.profiles import MIB as MIB
from advisor.capacity.profiles import MLA_ALIGN_ENV as MLA_ALIGN_ENV
from advisor.capacity.profiles import NVLS_BYTES_PER_CHANNEL_HEAD as NVLS_BYTES_PER_CHANNEL_HEAD
from advisor.capacity.profiles import V0_CHUNKED_PREFILL_2048_SINCE as V0_CHUNKED_PREFILL_2048_SINCE
from advisor.capacity.profiles import V1_CHUNKED_PREFILL_OFF_SINCE as V1_CHUNKED_PREFILL_OFF_SINCE
from advisor.capacity.profiles import vllm_default_block_size as vllm_default_block_size
from advisor.capacity.weights import (
    cpu_offload_bytes_per_gpu,
    draft_weights_bytes_per_gpu,
    lora_bytes_per_gpu,
    mla_v0_copies_bytes_per_layer,
    mxfp4_padding_bytes_per_gpu,
    pipeline_stage_weights_bytes,
    weights_bytes_per_gpu,
)
from advisor.capacity.weights import weights_bytes_total as weights_bytes_total
from advisor.errors import CapacityError, WontStartError

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
    "RecurrentHybridLayout",
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
    "recurrent_hybrid_layout",
    "recurrent_state_bytes_per_sequence",
    "recurrent_state_page_bytes",
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


def refuse_unmodelled_layer_kinds(inputs: CapacityInputs, layout: HybridKVLayout | None) -> None:
    """Refuse a model whose layers differ in head size or share KV (Gemma 4) where its layout is not modelled: a vLLM
    release before :data:`GEMMA4_SINCE`, V1 without the hybrid KV cache manager (``layout`` None), or KV-shared
    layers split over pipeline stages (they would read a cache held by another stage).

    Raises:
        CapacityError: naming the setting.
    """
    m = inputs.model
    version = parse_version(inputs.engine_version)
    if m.model_type == "gemma4_text" and version is not None and version < GEMMA4_SINCE:
        raise CapacityError(
            f"{m.name}: vLLM {inputs.engine_version} has no Gemma 4 (model_executor/models/gemma4.py first ships in "
            f"{'.'.join(map(str, GEMMA4_SINCE))})"
        )
    if layout is None:
        raise CapacityError(
            f"{m.name}: its layers differ in head size or share KV (Gemma 4), which is modelled only under vLLM V1's "
            f"hybrid KV cache manager (V1 from {'.'.join(map(str, HYBRID_KV_CACHE_MANAGER_SINCE))}, the manager on); "
            f"this configuration ({inputs.overhead_profile}, vLLM {inputs.engine_version or 'version not stated'}) "
            "runs without it"
        )
    if m.kv_shared_layers and inputs.pipeline_parallel_size > 1:
        raise CapacityError(
            f"{m.name}: its last {m.kv_shared_layers} layers read the KV cache of earlier layers, which pipeline "
            f"parallelism ({inputs.pipeline_parallel_size} stages) would put on another GPU; not modelled"
        )


def _device_room(inputs: CapacityInputs) -> str:
    """The memory a fixed KV pool must fit in, for a refusal: ``GPU's 79.15 GiB`` or, beside other processes,
    ``69.15 GiB other processes leave of the GPU's 79.15 GiB``."""
    total = f"GPU's {inputs.gpu_memory_bytes / GIB:.2f} GiB"
    others = inputs.gpu_memory_used_by_others_bytes
    return (
        total
        if not others
        else f"{(inputs.gpu_memory_bytes - others) / GIB:.2f} GiB other processes leave of the {total}"
    )


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
        raise WontStartError(
            f"{m.name}: other processes hold {others / GIB:.2f} GiB per GPU, leaving {free / GIB:.2f} GiB free, "
            f"less than gpu_memory_utilization {inputs.gpu_memory_utilization} × {inputs.gpu_memory_bytes / GIB:.2f}"
            f" GiB = {requested / GIB:.2f} GiB: vLLM refuses to start (V1) or runs out of memory (V0)",
            advice,
        )
    if fixed:
        if weights > inputs.gpu_memory_bytes:
            raise WontStartError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} but the GPU has "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB"
            )
        pool = inputs.kv_cache_memory_bytes or 0
        if inputs.kv_cache_memory_bytes is not None and weights + pool > inputs.gpu_memory_bytes - others:
            # vLLM takes --kv-cache-memory-bytes per GPU as given, skipping the memory profile
            # (vllm/v1/worker/gpu_worker.py determine_available_memory): a cache larger than what the weights leave
            # (of what other processes leave) fails to allocate at start
            room = (inputs.gpu_memory_bytes - others - weights) / GIB
            raise WontStartError(
                f"{m.name}: weights {weights / GIB:.2f} GiB + kv_cache_memory_bytes {pool / GIB:.2f} GiB per GPU "
                f"exceed the {_device_room(inputs)}: the cache cannot be allocated",
                f"lower kv_cache_memory_bytes below {room:.2f} GiB (less activations and CUDA graphs)",
            )
    else:
        if weights >= requested:
            raise WontStartError(
                f"{m.name}: weights need {weights / GIB:.2f} GiB per GPU at TP={tp} "
                f"({inputs.compute_dtype}, quantization {inputs.effective_quantization or 'none'}) but only "
                f"{inputs.gpu_memory_bytes / GIB:.2f} GiB × {inputs.gpu_memory_utilization} = "
                f"{requested / GIB:.2f} GiB may be used",
                "look to a larger tensor_parallel_size, "
                + ("" if inputs.effective_quantization else "smaller (quantized) weights, ")
                + "or a GPU with more memory",
            )
        pool = math.floor(requested - weights - overhead)
        if pool <= 0:
            forward, sampler = activation_peak_bytes(inputs)
            dial, cause = (
                (
                    "max_num_seqs",
                    f"max_num_seqs {inputs.max_num_seqs:,}: its sampler warm-up takes {sampler / GIB:.2f} GiB",
                )
                if sampler >= forward
                else (
                    "max_num_batched_tokens",
                    f"max_num_batched_tokens {inputs.profile_tokens:,}: its forward pass takes {forward / GIB:.2f} GiB",
                )
            )
            encoder = encoder_profile(inputs)
            if encoder is not None and encoder.peak_bytes >= max(forward, sampler):
                # the tower's run on its largest item, not the batch (advisor.capacity.encoder)
                dial = "--limit-mm-per-prompt (the video at 0 leaves the image)"
                cause = (
                    f"the vision encoder's profile run on {encoder.items} × {encoder.tokens_per_item:,}-token "
                    f"{encoder.modality}: {encoder.peak_bytes / GIB:.2f} GiB"
                )
            raise WontStartError(  # the cause is part of the problem; the remedy only a direction
                f"{m.name}: weights {weights / GIB:.2f} GiB + overhead {overhead / GIB:.2f} GiB per GPU "
                f"leave no KV cache in {requested / GIB:.2f} GiB ({inputs.gpu_memory_bytes / GIB:.2f} GiB × "
                f"{inputs.gpu_memory_utilization}); the overhead is mostly {cause}",
                f"lower {dial}, raise utilization or TP",
            )
    per_token_gpu = kv_bytes_per_token_per_gpu(inputs)
    if stage_layers is not None:
        draft = inputs.speculative.draft_layers if inputs.speculative is not None else 0
        per_token_gpu = kv_bytes_per_token_per_layer(inputs) * (stage_layers + draft)
    max_len = inputs.effective_max_model_len
    layout = hybrid_kv_layout(inputs)
    if m.has_layer_kinds:
        refuse_unmodelled_layer_kinds(inputs, layout)
    recurrent = recurrent_hybrid_layout(inputs)
    block_size = inputs.block_size
    tokens: int | None = None
    if recurrent is not None:
        # V1's recurrent hybrid: attention block raised to hold a state page, every group drawing pool blocks of
        # group_size pages (kvlayout.recurrent_hybrid_layout)
        block_size = recurrent.block_size
        page = recurrent.page_bytes * recurrent.group_size
        per_token_gpu = kv_bytes_per_token_per_layer(inputs) * recurrent.group_size * recurrent.groups
        engine_blocks = inputs.num_gpu_blocks_override or pool // page
        pool = engine_blocks * page if inputs.num_gpu_blocks_override is not None else pool
        concurrency = engine_blocks / recurrent.blocks_per_request(max_len)
        version = parse_version(inputs.engine_version)
        if version is None or version >= HYBRID_TOKENS_FROM_CONCURRENCY_SINCE:
            tokens = int(concurrency * max_len)  # get_kv_cache_capacity: not a whole number of blocks
        else:
            tokens = engine_blocks // recurrent.groups * min(block_size, recurrent.state_block_size)
        blocks = tokens // block_size
    elif layout is not None:
        # V1's hybrid manager: a pool block is group_size layer pages; every group draws from the one pool
        page = layout.page_bytes * layout.group_size
        per_token_gpu = layout.bytes_per_token
        engine_blocks = inputs.num_gpu_blocks_override or pool // page
        pool = engine_blocks * page if inputs.num_gpu_blocks_override is not None else pool
        concurrency = engine_blocks / hybrid_blocks_per_request(inputs, layout, max_len)
        blocks = engine_blocks // layout.groups
        version = parse_version(inputs.engine_version)
        if version is None or version >= HYBRID_TOKENS_FROM_CONCURRENCY_SINCE:  # unstated: the current release
            tokens = int(concurrency * max_len)  # the engine's print, not a whole number of blocks
            blocks = tokens // inputs.block_size
    elif inputs.num_gpu_blocks_override is not None:
        # the operator's block count replaces the profiled one; the engine allocates exactly that many
        blocks = inputs.num_gpu_blocks_override
        pool = blocks * inputs.block_size * per_token_gpu
    else:
        blocks = pool // (inputs.block_size * per_token_gpu)
    override = inputs.num_gpu_blocks_override
    if override is not None and weights + pool > inputs.gpu_memory_bytes - others:
        # the engine replaces the profiled block count with the override and allocates that many blocks at start
        # (vllm/v1/core/kv_cache_utils.py get_num_blocks, "Overriding num_gpu_blocks"): as with a fixed
        # kv_cache_memory_bytes above, a cache larger than what the weights leave cannot be allocated
        most = int((inputs.gpu_memory_bytes - others - weights) // (pool / override))
        raise WontStartError(
            f"{m.name}: num_gpu_blocks_override {override:,} needs {pool / GIB:.2f} GiB of KV cache per GPU; with "
            f"the weights' {weights / GIB:.2f} GiB that exceeds the {_device_room(inputs)}: "
            "the cache cannot be allocated",
            f"lower num_gpu_blocks_override below {max(most, 0):,} (less activations and CUDA graphs)",
        )
    if layout is None and recurrent is None:
        concurrency = vllm_max_concurrency(inputs, pool, blocks, max_len)
    encoder = encoder_profile(inputs)
    recurrent_blocks = None
    if recurrent is not None:
        state_blocks = recurrent.recurrent_groups * recurrent.state_pages
        recurrent_blocks = (engine_blocks, recurrent.attention_groups, state_blocks)
    return CapacityResult(
        weights_bytes_per_gpu=weights,
        kv_cache_bytes_per_token=per_token_gpu * tp * inputs.pipeline_parallel_size,
        kv_cache_bytes_per_token_per_gpu=per_token_gpu,
        overhead_bytes_per_gpu=0 if fixed else overhead,
        kv_pool_bytes_per_gpu=pool,
        kv_cache_blocks=blocks,
        kv_cache_tokens=blocks * block_size if tokens is None else tokens,
        max_concurrency=concurrency,
        max_model_len=max_len,
        block_size=block_size,
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
        encoder_profile=None if encoder is None else encoder.as_dict(),
        recurrent_blocks=recurrent_blocks,
    )
