"""The KV cache's layout on one GPU: heads and layers per rank and pipeline stage, KV bytes per token, the recurrent
state per sequence, and how many requests the blocks hold (sliding-window hybrids included).

Sources: ``vllm/v1/core/kv_cache_utils.py`` (``page_size``, "Maximum concurrency", the hybrid KV cache groups),
``vllm/v1/kv_cache_interface.py`` (page sizes per spec), ``vllm/distributed/utils.py`` ``get_pp_indices`` (layers
per stage), V0 ``vllm/worker/cache_engine.py`` and ``vllm/core/block_manager.py``; each function cites its version.
The pass that sizes the pool from these: :mod:`advisor.capacity.kv`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from advisor.capacity.generation import parse_version
from advisor.capacity.inputs import CapacityInputs
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import DTYPE_BYTES, kv_bytes_per_element
from advisor.capacity.profiles import OVERHEAD_PROFILES
from advisor.errors import CapacityError

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


def full_kv_bytes_per_token_per_layer(inputs: CapacityInputs) -> int:
    """KV bytes one token occupies in one full-attention layer on one GPU: :func:`kv_bytes_per_token_per_layer` for
    models whose layers share one shape; with :attr:`~advisor.capacity.models.ModelArch.has_layer_kinds`, ``2 ×
    max(1, full_kv_heads // TP) × full_head_dim × kv bytes`` (Gemma-4-E2B bf16: 2 × 1 × 512 × 2 = 2,048 against the
    sliding layers' 1,024; vLLM ``gemma4.py`` ``Gemma4DecoderLayer`` passes ``global_head_dim`` and, under
    ``attention_k_eq_v``, ``num_global_key_value_heads`` to the layer's ``Attention``)."""
    m = inputs.model
    if not m.has_layer_kinds:
        return kv_bytes_per_token_per_layer(inputs)
    element = kv_bytes_per_element(inputs.kv_cache_dtype, inputs.compute_dtype)
    return 2 * max(1, m.full_kv_heads // inputs.tensor_parallel_size) * m.full_head_dim * element


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
    m = inputs.model
    if m.has_layer_kinds:  # per kind, the KV-shared layers keeping none
        sliding = kv_bytes_per_token_per_layer(inputs) * layers_per_stage(inputs, m.kv_sliding_layers)
        full = full_kv_bytes_per_token_per_layer(inputs) * (layers_per_stage(inputs, m.kv_full_layers) + draft)
        return sliding + full
    return kv_bytes_per_token_per_layer(inputs) * (layers_per_stage(inputs, m.attention_layers) + draft)


def _windowed_tokens(inputs: CapacityInputs, context_tokens: float) -> float:
    """Tokens a windowed layer keeps of a ``context_tokens`` context: ``min(L, window)`` (``L`` without a window).

    Raises:
        CapacityError: a negative context.
    """
    if context_tokens < 0:
        raise CapacityError(f"context_tokens must be ≥ 0, got {context_tokens}")
    window = inputs.model.sliding_window
    return min(context_tokens, float(window)) if window else context_tokens


def attended_kv_bytes_per_gpu(inputs: CapacityInputs, context_tokens: float) -> float:
    """Cache bytes one decode step reads for one sequence at ``context_tokens`` tokens of context, on one GPU.

    A full-attention layer reads the whole context, a windowed layer at most its window (vLLM's FlashAttention
    backends pass ``window_size`` to the kernel, which skips the keys outside it; TensorRT-LLM's
    ``attention_window_size``), and a recurrent layer reads its fixed state and writes it back (Mamba's
    ``selective_state_update``, Gated DeltaNet's fused recurrent kernel update the state in place)::

        full layers × full bytes × L + windowed layers × bytes × min(L, window) + 2 × recurrent state

    KV-shared layers (Gemma 4) read another layer's cache, so they count here though they keep none. Speculative
    drafts are not decode steps of the target and are not counted. Llama-3.1-8B bf16 TP 1 at 1,000 tokens:
    131,072 × 1,000 = 131.1 MB; gpt-oss-120b (18 full + 18 windowed layers of 128 tokens, 8 KV heads × 64, bf16)
    at 8,192 tokens reads 18 × 2,048 × 8,192 + 18 × 2,048 × 128 bytes (307 MB), not 36 × 2,048 × 8,192 (604 MB).

    Raises:
        CapacityError: a negative context.
    """
    m = inputs.model
    windowed = _windowed_tokens(inputs, context_tokens)
    sliding = kv_bytes_per_token_per_layer(inputs) * layers_per_stage(inputs, m.sliding_window_layers) * windowed
    full = full_kv_bytes_per_token_per_layer(inputs) * layers_per_stage(inputs, m.full_attention_layers)
    return sliding + full * context_tokens + 2 * recurrent_state_bytes_per_sequence(inputs)


def attended_head_tokens(inputs: CapacityInputs, context_tokens: float) -> float:
    """Σ over the attention layers on the fullest stage of (head size × tokens attended) for one decode token:
    ``head_dim × windowed layers × min(L, window) + D × full layers × L`` (``D``:
    :attr:`~advisor.capacity.models.ModelArch.decode_attention_head_size`, MLA's latent widths); decode attention's
    FLOPs are ``4 × query heads per GPU ×`` this (QKᵀ and PV, a multiply-add each). Recurrent layers attend nothing
    (their state update is in :func:`attended_kv_bytes_per_gpu`).

    Raises:
        CapacityError: a negative context.
    """
    m = inputs.model
    windowed = _windowed_tokens(inputs, context_tokens)
    windowed_part = m.head_dim * layers_per_stage(inputs, m.sliding_window_layers) * windowed
    full_part = m.decode_attention_head_size * layers_per_stage(inputs, m.full_attention_layers) * context_tokens
    return windowed_part + full_part


def prefill_attended_head_pairs(inputs: CapacityInputs, prompt_tokens: float) -> float:
    """Σ over the attention layers on the fullest stage of (head size × causal query-key pairs) for one prompt of
    ``P`` tokens: a full layer attends ``P²/2`` pairs, a windowed layer of window ``W`` ``P²/2`` while ``P ≤ W`` and
    ``W·P − W²/2`` beyond (each query sees at most ``W`` keys). Prefill attention's FLOPs are ``4 × query heads per
    GPU ×`` this (the causal half of QKᵀ and PV; a full layer's head size is
    :attr:`~advisor.capacity.models.ModelArch.prefill_attention_head_size`, MLA's expanded widths). Recurrent layers
    attend nothing.

    Raises:
        CapacityError: a negative prompt length.
    """
    if prompt_tokens < 0:
        raise CapacityError(f"prompt_tokens must be ≥ 0, got {prompt_tokens}")
    m = inputs.model
    full_pairs = prompt_tokens * prompt_tokens / 2
    w = float(m.sliding_window)
    windowed_pairs = full_pairs if not m.sliding_window or prompt_tokens <= w else w * prompt_tokens - w * w / 2
    windowed_part = m.head_dim * layers_per_stage(inputs, m.sliding_window_layers) * windowed_pairs
    full_part = m.prefill_attention_head_size * layers_per_stage(inputs, m.full_attention_layers) * full_pairs
    return windowed_part + full_part


def recurrent_state_bytes_per_sequence(inputs: CapacityInputs) -> int:
    """Per-GPU bytes of one sequence's recurrent state (conv + SSM state of every Mamba layer on the stage),
    in the compute dtype, sharded over TP (Jamba: 28 layers × (3 × 8192 + 8192 × 16) × 2 B = 8.3 MiB)."""
    m = inputs.model
    if not m.linear_layers:
        return 0
    per_layer = sum(recurrent_state_elements_per_rank(inputs)) * DTYPE_BYTES[inputs.compute_dtype]
    return math.ceil(per_layer * layers_per_stage(inputs, m.linear_layers))


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


GEMMA4_SINCE: Final = (0, 19, 0)
"""First vLLM release with Gemma 4 (``model_executor/models/gemma4.py``; 0.18.0 has none)."""


HYBRID_GROUP_SIZE_MAX_RATIO: Final = (((0, 18), 1.5), ((0, 12), 1.25))
"""(first version, ratio): from that vLLM release on, a hybrid whose largest layer type has fewer than ratio ×
the smallest type's layers is grouped by the largest count (``_get_kv_cache_groups_uniform_page_size``:
``if max_num_layers < min_num_layers * 1.25: group_size = max_num_layers`` at v0.12.0–v0.16.0, ``* 1.5`` at
v0.18.0 and later); before v0.12 the group size is always the smallest count."""


HYBRID_TOKENS_FROM_CONCURRENCY_SINCE: Final = (0, 21)
"""From vLLM 0.21 "GPU KV cache size" is ``int(max_concurrency × max_model_len)`` (``kv_cache_utils.py``
``_report_kv_cache_config``, v0.21.0 line 1708: "Sourcing this from the concurrency calculation handles hybrid
layouts correctly"; ``get_kv_cache_capacity``, v0.22.0 line 1731, v0.24.0); before, ``num_blocks //
len(kv_cache_groups) × min(block_size of the groups)`` (``_report_kv_cache_config``, v0.13.0-v0.20.0;
``_get_kv_cache_config_uniform_page_size``, v0.9.1–v0.11.x)."""


@dataclass(frozen=True)
class HybridKVLayout:
    """How vLLM V1 lays out the KV cache of a sliding-window model (one pipeline stage, one GPU).

    Attributes:
        group_size: layers per KV cache group, the number of shared per-layer tensors; one block of the pool
            is ``group_size`` layer pages.
        full_groups: groups of full-attention layers (the last one padded to ``group_size``).
        sliding_groups: groups of sliding-window layers (the last one padded).
        page_bytes: bytes of one layer's page, the same for every layer (:func:`unified_pages`).
        full_block_size: tokens in a full-attention layer's page.
        sliding_block_size: tokens in a sliding layer's page.

    Where the kinds' pages differ (Gemma 4's 512-wide full-attention heads), vLLM raises the smaller page's block
    size until the pages match (``kv_cache_utils.py`` ``unify_kv_cache_spec_page_size``, 0.21.0: "unify the page
    size by increasing the block size of layers with smaller page size").
    """

    group_size: int
    full_groups: int
    sliding_groups: int
    page_bytes: int
    full_block_size: int
    sliding_block_size: int

    @property
    def groups(self) -> int:
        """All KV cache groups (``len(kv_cache_groups)``)."""
        return self.full_groups + self.sliding_groups

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token takes in every group's layers, padding layers included: ``group_size × (full groups ×
        page ÷ full block + sliding groups × page ÷ sliding block)`` (Gemma-3-1B bf16: 4 × 7 × 2,048 = 57,344)."""
        full = self.full_groups * self.page_bytes // self.full_block_size
        sliding = self.sliding_groups * self.page_bytes // self.sliding_block_size
        return self.group_size * (full + sliding)


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
    sliding = layers_per_stage(inputs, m.kv_sliding_layers)
    full = layers_per_stage(inputs, m.kv_full_layers) if m.kv_full_layers else 0
    pages = unified_pages(inputs)
    if not full:
        return HybridKVLayout(group_size=sliding, full_groups=0, sliding_groups=1, **pages)
    size = min(full, sliding)
    for since, ratio in HYBRID_GROUP_SIZE_MAX_RATIO:
        if (version is None or version >= since) and max(full, sliding) < size * ratio:
            size = max(full, sliding)
            break
    return HybridKVLayout(group_size=size, full_groups=-(-full // size), sliding_groups=-(-sliding // size), **pages)


def unified_pages(inputs: CapacityInputs) -> dict[str, int]:
    """The page every layer gets and each kind's block size, for :class:`HybridKVLayout`: with one shape, the
    configured block of :func:`kv_bytes_per_token_per_layer`; with :attr:`~advisor.capacity.models.ModelArch.
    has_layer_kinds`, the larger kind's page, the smaller kind's block raised by the ratio
    (``unify_kv_cache_spec_page_size``). Gemma-4-E2B bf16, block 16: full 16 × 2,048 = 32 KiB, sliding 16 × 1,024
    = 16 KiB → sliding block 32, page 32 KiB.

    Raises:
        CapacityError: the larger page is no multiple of the smaller (vLLM raises ``NotImplementedError``).
    """
    bs = inputs.block_size
    sliding_page = kv_bytes_per_token_per_layer(inputs) * bs
    if not inputs.model.has_layer_kinds:
        return {"page_bytes": sliding_page, "full_block_size": bs, "sliding_block_size": bs}
    full_page = full_kv_bytes_per_token_per_layer(inputs) * bs
    page = max(full_page, sliding_page)
    if page % full_page or page % sliding_page:
        raise CapacityError(
            f"{inputs.model.name}: KV pages of {full_page:,} and {sliding_page:,} bytes (full-attention layers: "
            f"global_head_dim {inputs.model.full_head_dim}; sliding: head_dim {inputs.model.head_dim}): the larger is "
            "no multiple of the smaller, and vLLM cannot unify them (unify_kv_cache_spec_page_size raises "
            "NotImplementedError)"
        )
    return {
        "page_bytes": page,
        "full_block_size": bs * page // full_page,
        "sliding_block_size": bs * page // sliding_page,
    }


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
    Each kind counts in its own block size (:func:`unified_pages`): Gemma-4-E2B at L = 8,192, 2,048 batched tokens,
    full block 16, sliding 32: 1 × 512 + 4 × (cdiv(511 + 2,048, 32) + 1) = 836 blocks (vLLM 0.21.0 prints 129.66×
    for 9.92 GiB of 96 KiB blocks: 108,396 ÷ 836).
    """
    full = -(-context_tokens // layout.full_block_size)
    window = inputs.model.sliding_window
    sliding = -(-min(window - 1 + inputs.profile_tokens, context_tokens) // layout.sliding_block_size) + 1
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


# --- recurrent hybrids (Mamba / Gated DeltaNet layers beside attention) on vLLM V1 --------------------------------

RECURRENT_PAGE_ALIGN_SINCE: Final = (0, 10, 0)
"""First vLLM release whose V1 engine gives a recurrent hybrid's state layers pages of the attention layers' size
and keeps both in one pool of KV cache groups: ``vllm/model_executor/models/config.py``
``HybridAttentionMambaModelConfig.verify_and_update_config`` (v0.10.0-v0.18.0; from v0.20.0 the same rule is
``vllm/platforms/interface.py`` ``Platform._align_hybrid_block_size``). v0.9.2 has neither: such models ran on V0
(:func:`recurrent_state_bytes_per_sequence` and :func:`max_concurrency` keep that path)."""

RECURRENT_KERNEL_BLOCK_ALIGNMENT: Final = 16
"""Tokens the raised attention block is a multiple of for non-MLA attention: ``kernel_block_alignment_size = 16``
("FlashAttention (FA) requires block size to be multiple of 16", ``HybridAttentionMambaModelConfig``, v0.10.0-
v0.18.0; from v0.20.0 ``max(min(backend.get_supported_kernel_block_sizes()), cache_config.block_size)``, 16 for the
FlashAttention / FlashInfer / Triton backends, so the configured block size when larger:
:data:`RECURRENT_ALIGN_TO_BLOCK_SIZE_SINCE`)."""

RECURRENT_ALIGN_TO_BLOCK_SIZE_SINCE: Final = (0, 20)
"""From this vLLM release the block alignment of :data:`RECURRENT_KERNEL_BLOCK_ALIGNMENT` is at least the
configured ``--block-size`` (``Platform._align_hybrid_block_size``, v0.20.0-v0.34.0; v0.19 not read)."""

MAMBA_CACHE_MODES_SINCE: Final = (0, 16)
"""First vLLM release read with ``--mamba-cache-mode`` (``vllm/config/cache.py`` ``mamba_cache_mode``, v0.16.0;
v0.15 not read): with prefix caching on, a model without Mamba prefix caching (Gated DeltaNet) runs in ``align``
mode and a request holds 2 state pages per recurrent group (``MambaSpec.max_memory_usage_bytes``: ``page_size_bytes
× (2 + num_speculative_blocks)``; ``none``: ``× (1 + ...)``). v0.10.0-v0.14.0 turn prefix caching off for such
models ("Hybrid or mamba-based model detected without support for prefix caching: disabling",
``MambaModelConfig``, v0.12.0) and hold one page (``MambaSpec.max_memory_usage_bytes`` = the page, v0.10.0-v0.11.0;
``cdiv(max_model_len, block_size)`` pages with ``mamba_block_size = max_model_len``, v0.12.0-v0.14.0)."""

VLLM_V1_NULL_BLOCKS: Final = 1
"""Blocks of a vLLM V1 KV pool no request can hold: ``BlockPool`` takes one block off its free queue at start as the
null block (``vllm/v1/core/block_pool.py``, ``self.null_block = self.free_block_queue.popleft()``), so one request
can grow to ``(num_gpu_blocks − 1) × block_size`` tokens while the start-up log's "GPU KV cache size" and
``num_gpu_blocks × block_size`` count it (RBLN-SW/vllm-rbln#957: 13 blocks of 8,192 tokens hold a 98,304-token
prompt, not 106,496; the one longer is admitted and never scheduled)."""

HYBRID_PREFIX_CACHING_DEFAULT_SINCE: Final = (0, 26)
"""From this vLLM release prefix caching is on by default for hybrid models (``vllm/config/model.py``
``ModelConfig.is_prefix_caching_supported``, v0.26.0: "Generative hybrid models support prefix caching."; v0.25.0
and before: "Hybrid models do not support prefix caching", so off unless ``--enable-prefix-caching``)."""

MAMBA_PREFIX_CACHING_TYPES: Final = frozenset({"jamba", "nemotron_h", "granitemoehybrid"})
"""``model_type``s loaded here whose vLLM class implements ``SupportsMambaPrefixCaching`` (``jamba.py``,
``nemotron_h.py``, ``granitemoehybrid.py``; v0.18.0-v0.27.0): with prefix caching on they run the ``all`` Mamba cache
mode (a state page per block of the request, the block aligned to the Mamba chunk size), which
:func:`recurrent_hybrid_layout` does not model, until :data:`MAMBA_ALIGN_MODE_ALWAYS_SINCE`. Gated DeltaNet models
(``qwen3_next.py``, ``qwen3_5.py``) and Bamba do not implement it and run ``align``."""

MAMBA_ALIGN_MODE_ALWAYS_SINCE: Final = (0, 28)
"""From this vLLM release prefix caching runs every hybrid in the ``align`` Mamba cache mode, whatever its class
implements (``MambaModelConfig.verify_and_update_config``, v0.28.0 and v0.34.0; ``all`` for
:data:`MAMBA_PREFIX_CACHING_TYPES` at v0.19.0-v0.27.0)."""

MAMBA2_PREFILL_CHECKPOINT_SINCE: Final = (0, 34)
"""From this vLLM release a Mamba-2 layer in the ``align`` mode holds a third state page per request
(``MambaSpec.max_memory_usage_bytes``: ``2 + num_speculative_blocks + num_prefill_checkpoint_blocks``, and
``MambaMixer2`` sets the last to 1; v0.34.0; v0.28.0: ``2 + num_speculative_blocks``)."""

NEMOTRON_H_SSM_DTYPE_SINCE: Final = ((0, 20), "float32"), ((0, 13), "float16")
"""(first release, default): from v0.13.0 vLLM sets a Nemotron-H's ``mamba_ssm_cache_dtype`` (``auto``) from the
config's ``mamba_ssm_cache_dtype``, else this default (``vllm/model_executor/models/config.py``
``NemotronHForCausalLMConfig.verify_and_update_config``: ``float16`` at v0.13.0-v0.19.0, ``float32`` from v0.20.1,
``DEFAULT_MAMBA_SSM_CACHE_DTYPE``); v0.11.0 has no such hook (the model dtype)."""

QWEN3_5_SSM_DTYPE_ARCHITECTURES: Final = frozenset(
    {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}
)
"""Architectures whose config's ``mamba_ssm_dtype`` sets vLLM's ``mamba_ssm_cache_dtype`` when that is ``auto``
(``vllm/model_executor/models/config.py`` ``Qwen3_5ForConditionalGenerationConfig.verify_and_update_config`` and
``MODELS_CONFIG_MAP``, v0.17.0-v0.34.0; Qwen3.5 first appears in v0.17.0). Qwen3.5's ``float32`` doubles the
temporal state; Qwen3-Next (``Qwen3NextForCausalLM``) keeps it in the model dtype."""


@dataclass(frozen=True)
class RecurrentHybridLayout:
    """How vLLM V1 lays out a recurrent hybrid's KV cache (one pipeline stage, one GPU).

    Attributes:
        block_size: attention tokens per block, raised so one attention page holds a layer's recurrent state.
        page_bytes: one layer's page, bytes (``block_size`` × KV bytes per token per layer); every recurrent
            state is padded to it (``mamba_page_size_padded``).
        state_bytes: one recurrent layer's state before padding, bytes.
        group_size: layers per KV cache group; one pool block is ``group_size`` pages.
        attention_groups: groups of full-attention layers (the last padded to ``group_size``).
        recurrent_groups: groups of recurrent layers (the last padded).
        state_pages: pages one request holds in each recurrent group (1 in ``none`` mode, 2 in ``align``).
        state_block_size: the recurrent spec's ``block_size`` (``mamba_block_size``): ``max_model_len`` in
            ``none`` mode, ``block_size`` in ``align``; the smallest of the two block sizes enters the printed
            token count before v0.21.
    """

    block_size: int
    page_bytes: int
    state_bytes: int
    group_size: int
    attention_groups: int
    recurrent_groups: int
    state_pages: int
    state_block_size: int

    @property
    def groups(self) -> int:
        """All KV cache groups (``len(kv_cache_groups)``)."""
        return self.attention_groups + self.recurrent_groups

    def blocks_per_request(self, context_tokens: int) -> int:
        """Pool blocks one request of ``context_tokens`` tokens may hold: ``attention groups × cdiv(L, block) +
        recurrent groups × state pages`` (``get_max_concurrency_for_kv_cache_config``: the sum over the groups of
        each spec's ``max_memory_usage_bytes`` ÷ the page; every page is the same size)."""
        need = -(-context_tokens // self.block_size)
        return max(1, self.attention_groups * need + self.recurrent_groups * self.state_pages)


def recurrent_state_page_bytes(inputs: CapacityInputs) -> int:
    """One recurrent layer's state on one GPU, bytes: the ``MambaSpec.page_size_bytes`` before padding
    (``vllm/v1/kv_cache_interface.py``: ``sum(prod(shape) × dtype size)`` over the conv and temporal states).

    Shapes (``vllm/model_executor/layers/mamba/mamba_utils.py`` ``MambaStateShapeCalculator``, v0.18.0), each
    divided over TP: Gated DeltaNet conv ``(kernel − 1) × conv_dim`` and temporal ``v_heads × v_dim × k_dim``;
    Mamba-1 conv ``(d_conv − 1) × d_inner``, temporal ``d_inner × d_state``. Dtypes (``MambaStateDtypeCalculator``):
    the conv state in the model dtype (``--mamba-cache-dtype auto``), the temporal state likewise unless
    ``mamba_ssm_cache_dtype`` is set, which Qwen3.5 does from its config (:data:`QWEN3_5_SSM_DTYPE_ARCHITECTURES`).
    The KV cache dtype (``--kv-cache-dtype fp8``) does not apply to these states.

    Qwen3.5-9B bf16 (16 k heads, 32 v heads, dims 128, kernel 4, ``mamba_ssm_dtype`` float32):
    3 × 8,192 × 2 B + 32 × 128 × 128 × 4 B = 49,152 + 2,097,152 = 2,146,304 B.
    """
    m = inputs.model
    element = DTYPE_BYTES[inputs.compute_dtype]
    ssm_element = element
    version = parse_version(inputs.engine_version)
    if (
        m.architecture in QWEN3_5_SSM_DTYPE_ARCHITECTURES
        and m.mamba_ssm_dtype in DTYPE_BYTES
        and (version is None or version >= (0, 17))
    ):
        ssm_element = DTYPE_BYTES[m.mamba_ssm_dtype]
    if m.model_type == "nemotron_h":
        for since, default in NEMOTRON_H_SSM_DTYPE_SINCE:
            if version is None or version >= since:
                ssm_element = DTYPE_BYTES.get(m.mamba_ssm_dtype or default, DTYPE_BYTES[default])
                break
    conv, temporal = recurrent_state_elements_per_rank(inputs)
    return conv * element + temporal * ssm_element


def recurrent_state_elements_per_rank(inputs: CapacityInputs) -> tuple[int, int]:
    """(conv, SSM/temporal) state elements of one recurrent layer per sequence on one TP rank. A Mamba-2 mixer whose
    groups TP does not divide carries ``TP − groups`` more (``extra_groups_for_head_shards``: each rank keeps the one
    group whole, ``mamba_utils.py`` ``mamba2_state_shape``, v0.19.0): Granite-4.0-H-1B at TP 2 holds
    3 × (3,072 + 2 × 2 × 128) ÷ 2 conv elements a rank, not 3 × 3,328 ÷ 2."""
    m = inputs.model
    tp = inputs.tensor_parallel_size
    conv = m.recurrent_conv_elements
    if m.mamba_groups and m.mamba_groups % tp:
        conv += (tp - m.mamba_groups) * m.mamba_group_conv_elements
    return conv // tp, (m.recurrent_state_elements - m.recurrent_conv_elements) // tp


def recurrent_hybrid_layout(inputs: CapacityInputs) -> RecurrentHybridLayout | None:
    """The pool layout vLLM V1 gives a model with recurrent (Gated DeltaNet, Mamba-1, Mamba-2) and full-attention
    layers, or ``None`` where this rule does not apply (no recurrent layers, sliding-window layers as well, MLA, V0,
    V1 before :data:`RECURRENT_PAGE_ALIGN_SINCE`).

    Raises:
        CapacityError: the ``all`` Mamba cache mode of :data:`MAMBA_PREFIX_CACHING_TYPES` (prefix caching on before
            :data:`MAMBA_ALIGN_MODE_ALWAYS_SINCE`), which is not modelled.

    1. Page sizes (``HybridAttentionMambaModelConfig.verify_and_update_config``, v0.10.0-v0.18.0;
       ``Platform._align_hybrid_block_size`` from v0.20.0): the attention block is raised to
       ``align × cdiv(state page, align × attention bytes per token per layer)`` tokens
       (:data:`RECURRENT_KERNEL_BLOCK_ALIGNMENT`; a larger ``--block-size`` is kept) and the state is padded to
       the attention page.
    2. Groups (``vllm/v1/core/kv_cache_utils.py`` ``_get_kv_cache_groups_uniform_page_size``): each spec's layers
       are split into groups of the smallest spec's layer count (:data:`HYBRID_GROUP_SIZE_MAX_RATIO`), the last
       padded. A speculative draft's attention layers join the full-attention spec.
    3. ``get_kv_cache_config_from_groups``: ``num_blocks = available // page // group_size``.

    Qwen3.5-9B (8 full + 24 Gated DeltaNet layers, 4 KV heads × 256, fp8 KV = 2,048 B per token per layer):
    block 16 × cdiv(2,146,304, 16 × 2,048) = 1,056 tokens, page 2,162,688 B, 4 groups of 8.
    Not modelled: ``--mamba-cache-dtype``/``--mamba-ssm-cache-dtype`` other than ``auto``, the speculative rows of
    the conv state and ``num_speculative_blocks``, ``--mamba-block-size``.
    """
    m = inputs.model
    if (
        not m.linear_layers
        or m.sliding_window_layers
        or m.is_mla
        or inputs.overhead_profile != "vllm-v1"
        or inputs.engine != "vllm"
    ):
        return None
    version = parse_version(inputs.engine_version)
    if version is not None and version < RECURRENT_PAGE_ALIGN_SINCE:
        return None
    prefix_caching = inputs.enable_prefix_caching
    if prefix_caching is None:
        prefix_caching = version is None or version >= HYBRID_PREFIX_CACHING_DEFAULT_SINCE
    mode = "none"
    always_align = version is None or version >= MAMBA_ALIGN_MODE_ALWAYS_SINCE
    if prefix_caching and m.model_type in MAMBA_PREFIX_CACHING_TYPES and not always_align:
        # "all" mode: blocks aligned to the Mamba chunk size, a state page per block: not modelled, and the plain
        # path would leave every block's state page out (breaker, 2026-12-06: 1,427 Nemotron-3-Nano sequences at
        # 1,200 tokens where 23 layers of state alone allow 214)
        raise CapacityError(
            f"{m.name}: with prefix caching on, vLLM {inputs.engine_version or ''} keeps a {m.model_type} model's "
            "Mamba state a page per block (the 'all' Mamba cache mode of 0.19-0.27; prefix caching is on by default "
            "for hybrids from 0.26), which the capacity pass does not size: plan it with --no-enable-prefix-caching "
            "(enable_prefix_caching: false), or with the release that runs it (0.28+ runs the 'align' mode)"
        )
    if prefix_caching and (version is None or version >= MAMBA_CACHE_MODES_SINCE):
        mode = "align"
    align_pages = 2
    if m.mamba_groups and (version is None or version >= MAMBA2_PREFILL_CHECKPOINT_SINCE):
        align_pages = 3
    per_token = kv_bytes_per_token_per_layer(inputs)
    state = recurrent_state_page_bytes(inputs)
    align = RECURRENT_KERNEL_BLOCK_ALIGNMENT
    if version is None or version >= RECURRENT_ALIGN_TO_BLOCK_SIZE_SINCE:
        align = max(align, inputs.block_size)
    block = max(inputs.block_size, align * -(-state // (align * per_token)))
    draft = inputs.speculative.draft_layers if inputs.speculative is not None else 0
    full = layers_per_stage(inputs, m.attention_layers) + draft
    recurrent = layers_per_stage(inputs, m.linear_layers)
    size = min(full, recurrent)
    for since, ratio in HYBRID_GROUP_SIZE_MAX_RATIO:
        if (version is None or version >= since) and max(full, recurrent) < size * ratio:
            size = max(full, recurrent)
            break
    return RecurrentHybridLayout(
        block_size=block,
        page_bytes=block * per_token,
        state_bytes=state,
        group_size=size,
        attention_groups=-(-full // size),
        recurrent_groups=-(-recurrent // size),
        state_pages=align_pages if mode == "align" else 1,
        state_block_size=block if mode == "align" else inputs.effective_max_model_len,
    )
