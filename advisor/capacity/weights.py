"""Weight bytes on each GPU of a replica, as vLLM's "Model loading took" counts them.

The whole model (:func:`weights_bytes_total`) split over TP ranks and pipeline stages with what every rank holds
whole, and what the engine adds or removes at load: V0's absorbed MLA matrices, the MXFP4 kernel's padding, a
speculative draft's weights, the ``--enable-lora`` adapter slots and what ``--cpu-offload-gb`` moves to host memory;
per stage under pipeline parallelism (:func:`pipeline_stage_weights_bytes`). Each function cites the vLLM file it
follows. The pass that subtracts them from the budget: :mod:`advisor.capacity.kv`.
"""

from __future__ import annotations

import math
from typing import Final

from advisor.capacity.generation import parse_version
from advisor.capacity.inputs import CapacityInputs
from advisor.capacity.kvlayout import (
    kv_heads_per_gpu,
    layers_per_stage,
    pipeline_stage_layers,
    vllm_mha_fallback_head_size,
)
from advisor.capacity.lora import lora_bytes, lora_counted
from advisor.capacity.models import ModelArch
from advisor.capacity.precision import (
    DTYPE_BYTES,
    EXPERTS_ONLY,
    MXFP4_BITS,
    mxfp4_moe_backend,
    mxfp4_padded_expert_shape,
)
from advisor.capacity.profiles import OVERHEAD_PROFILES
from advisor.errors import CapacityError

BNB_SKIP_PREFIX_SINCE: Final = (0, 7, 3)
"""First vLLM release whose ``is_layer_skipped_bnb`` (``layers/quantization/bitsandbytes.py``) also skips a layer
when an ``llm_int8_skip_modules`` entry equals a dotted prefix of its name (``model.layers.0.mlp``); 0.7.2 matches
single name components only (``lm_head``, ``mlp``)."""


def bnb_skipped_linear_parameters(inputs: CapacityInputs) -> int:
    """Linear parameters a bitsandbytes checkpoint keeps in the compute dtype (``llm_int8_skip_modules``).

    vLLM's ``BitsAndBytesConfig.get_quant_method`` gives a linear layer ``UnquantizedLinearMethod`` when
    ``is_layer_skipped_bnb(prefix, llm_int8_skip_modules)``: an entry equals one dot-separated component of the
    layer's name or, from :data:`BNB_SKIP_PREFIX_SINCE`, one of its dotted prefixes (0.7.3-0.10.0 wheels). The
    names are vLLM's fused modules of a decoder layer, ``model.layers.{i}.self_attn.qkv_proj`` / ``o_proj`` and
    ``model.layers.{i}.mlp.gate_up_proj`` / ``down_proj`` (``llama.py``, ``qwen2.py``), so an entry naming an
    unfused checkpoint tensor (``…self_attn.q_proj``) skips nothing, and the LM head and embeddings are never
    quantized. Unsloth's qwen2.5-0.5b-instruct-unsloth-bnb-4bit skips ``model.layers.0.self_attn`` and the MLPs of
    layers 0, 2, 3 and 21: 1,836,160 + 4 × 13,074,432 = 54,133,888 parameters. Only dense decoders with a gated
    MLP and GQA attention are modelled; an entry that would name a layer of another architecture is refused.

    Raises:
        CapacityError: ``llm_int8_skip_modules`` names a decoder-layer module of an architecture not modelled here.
    """
    m = inputs.model
    q = inputs.effective_quantization
    if not m.bnb_skip_modules or q is None or q.strip().lower() != "bitsandbytes":
        return 0
    if m.checkpoint_quantization != "bitsandbytes":  # in flight: vLLM builds the config from {} (nothing skipped)
        return 0
    release = parse_version(inputs.engine_version)
    by_prefix = release is None or release >= BNB_SKIP_PREFIX_SINCE
    h, d = m.hidden_size, m.head_dim
    o_proj = m.num_attention_heads * d * h + (h if m.attention_output_bias else 0)
    down = m.intermediate_size * h + (h if m.mlp_bias else 0)
    modules = {
        ("self_attn", "qkv_proj"): m.attention_parameters_per_layer() - o_proj,
        ("self_attn", "o_proj"): o_proj,
        ("mlp", "gate_up_proj"): m.dense_mlp_parameters() - down,
        ("mlp", "down_proj"): down,
    }
    names = set(m.bnb_skip_modules)
    skipped = 0
    for layer in range(m.num_layers):
        for (block, proj), params in modules.items():
            parts = ["model", "layers", str(layer), block, proj]
            prefixes = {".".join(parts[: k + 1]) for k in range(len(parts))} if by_prefix else set()
            if names & (set(parts) | prefixes):
                skipped += params
    modelled = m.gated_mlp and not (m.is_moe or m.is_mla or m.linear_layers or m.vision_parameters)
    if skipped and not modelled:
        raise CapacityError(
            f"{m.name}: quantization_config.llm_int8_skip_modules {list(m.bnb_skip_modules)} keeps decoder-layer "
            "modules unquantized; that is modelled only for dense decoders with a gated MLP"
        )
    return skipped


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
    skipped = bnb_skipped_linear_parameters(inputs)
    return linear - routers - skipped, routers + skipped


def weights_bytes_total(inputs: CapacityInputs) -> int:
    """Bytes of all weights of one copy of the model (before sharding).

    ``quantized params × weight_bytes_per_param(quantization) + everything else × dtype bytes``: quantization
    methods leave embeddings, LM head, norms, MoE routers and the vision tower in the compute dtype, and
    MXFP4 checkpoints quantize only the experts. The checkpoint's own method applies when ``quantization``
    is None. Qwen3-235B-A22B FP8: 233.80 G × 1.000244 + (1.245 G embeddings + 49 M routers) × 2 = 236.4 GB.
    """
    m = inputs.model
    compute = inputs.compute_dtype
    if m.checkpoint_weight_groups and inputs.effective_quantization == m.checkpoint_quantization:
        return _mixed_weights_bytes_total(inputs)
    quantized, plain_linear = _quantized_split(inputs)
    q_bytes = inputs.quantized_weight_bytes
    unquantized = m.num_parameters - m.linear_parameters() + plain_linear
    return math.ceil(quantized * q_bytes + unquantized * DTYPE_BYTES[compute])


def _mixed_weights_bytes_total(inputs: CapacityInputs) -> int:
    """Bytes of all weights of a mixed-precision checkpoint loaded as stored: each layer group in its own format
    (:attr:`ModelArch.checkpoint_weight_groups`, :mod:`advisor.capacity.mixedprecision`), everything no group holds
    (embedding, norms, vision tower, conv and decay vectors) and the unquantized groups in the compute dtype.

    nvidia/Qwen3.6-35B-A3B-NVFP4 in bf16: experts 32,212,254,720 + shared 125,829,120 + LM head 508,559,360 at
    0.5625 B (NVFP4), attention 272,629,760 + Gated-DeltaNet projections 1,006,632,960 at 1 B (FP8), the rest
    (34,660,528,768 − 34,126,835,200 + in_proj_ba 3,932,160 + routers 20,971,520) at 2 B."""
    m = inputs.model
    act = DTYPE_BYTES[inputs.compute_dtype]
    grouped = sum(g.parameters for g in m.checkpoint_weight_groups)
    stored = sum(
        g.parameters * (act if g.bytes_per_parameter is None else g.bytes_per_parameter)
        for g in m.checkpoint_weight_groups
    )
    return math.ceil(stored + (m.num_parameters - grouped) * act)


def _replicated_parameters(m: ModelArch) -> tuple[int, int]:
    """(replicated linear parameters, of which quantized) that every TP rank holds whole: MoE routers
    (``ReplicatedLinear``, unquantized), MLA's q_a / kv_a projections and Gemma 4's per-layer input gate and
    projection (``ReplicatedLinear``)."""
    routers = m.moe_layers * m.router_parameters() if m.is_moe else 0
    mla = 0
    if m.is_mla:
        mla = m.num_layers * m.hidden_size * (m.q_lora_rank + m.mla_latent_elements)
    _, per_layer_input = m.per_layer_input_parameters()  # Gemma 4's per-layer gate and projection
    return routers + mla + per_layer_input, mla + per_layer_input


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
    dtype, a buffer of ``RotaryEmbedding`` on every rank, over the positions of every distinct rope,
    :attr:`~advisor.capacity.models.ModelArch.rotary_cache_positions`: a linear × 8 scaling holds 8 × the positions,
    and Gemma 3 keeps a local table beside it; one more of ``global_head_dim`` for Gemma 4's full-attention
    layers) is what "Model loading took" adds to the
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
    if m.global_head_dim:
        # a second cache for the full-attention layers' heads: Gemma 4's "proportional" rope caches the whole
        # head (vLLM rotary_embedding/gemma4_rope.py Gemma4RotaryEmbedding: "set rotary_dim = head_size")
        rotary_dim += m.global_head_dim
    rotary = (m.rotary_cache_positions or m.max_position_embeddings) * rotary_dim * act
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
    layers = layers_per_stage(inputs, m.moe_layers)
    if mxfp4_moe_backend(inputs.compute_capability, inputs.engine_version) == "triton":
        return layers * experts * _triton_mxfp4_extra_bytes(m.hidden_size, math.ceil(width), inputs.engine_version)
    hidden_pad, width_pad = mxfp4_padded_expert_shape(
        m.hidden_size, math.ceil(width), inputs.compute_capability, inputs.engine_version
    )
    extra_elements = 3 * (hidden_pad * width_pad - m.hidden_size * width)
    return layers * experts * extra_elements * MXFP4_BITS / 8


MXFP4_SCALES_KEPT_UNTIL: Final = (0, 25)
"""Before this release the Triton path on Hopper keeps each expert's original E8M0 scales beside their rearranged copy
(``mxfp4.py`` ``process_weights_after_loading``, 0.14.1 lines 746-785, the 0.19.0 MoE oracle lines 721-745); 0.25.0
deletes them (vllm-project/vllm#46549; 0.25.1 ``mxfp4.py`` lines 1150-1156). gpt-oss-120b on an H100 loads 64.38 GiB
on 0.14.1 (vllm-project/vllm#33155) and 61.29 GiB on 0.25.1 (github.com/JaminJeong/CodingAgent at 46559ab)."""

MXFP4_TRITON_K_PAD_RELEASES: Final = ((0, 17), (0, 22))
"""``[first, end)`` of the releases bundling triton_kernels v3.6.0 (vllm-project/vllm#30525 in 0.17.0; back to
v3.5.1 in 0.22.0 for speed, vllm-project/vllm#39236), whose Hopper weight layout pads the packed K bytes to a
multiple of 64 (1,440 → 1,472 for gpt-oss): gpt-oss-20b loads 13.64 GiB on 0.19.0 (llm-d-incubation/llm-d-planner
at d3121e05), 13.40 without it."""


def _triton_mxfp4_extra_bytes(hidden: int, width: int, engine_version: str | None) -> float:
    """Bytes one expert's MXFP4 tensors take beyond the checkpoint's on Hopper's Triton path (``TRITON`` backend,
    triton_kernels' swizzled layout): ``w13`` is ``2·width × hidden`` and ``w2`` ``hidden × width`` (N × K), E2M1
    packed two to a byte with one E8M0 scale per 32 along K.

    * the rearranged scales pad N to a multiple of 256 (5,760 → 5,888 and 2,880 → 3,072 for gpt-oss);
    * the original scales stay beside them before :data:`MXFP4_SCALES_KEPT_UNTIL`;
    * the biases are held in fp32 (2 bytes more per output row);
    * with triton_kernels v3.6.0 (:data:`MXFP4_TRITON_K_PAD_RELEASES`) the packed K bytes pad to a multiple of 64.

    gpt-oss-120b (hidden 2,880, width 2,880, 128 experts × 36 layers) at TP 1: 0.12-0.16 and 0.22-0.24 +3.56 GiB
    (64.30 GiB in all, 64.38 logged on 0.14.1), 0.17-0.21 +4.75 GiB, from 0.25 +0.19 GiB (60.97; 61.29 logged on
    0.25.1). Source: the release packages' ``mxfp4.py`` and ``cmake/external_projects/triton_kernels.cmake``.
    """
    parsed = parse_version(engine_version)
    rows = (2 * width, hidden)  # N of w13 and w2
    ks = (hidden, width)  # K of w13 and w2
    extra = 0.0
    for n, k in zip(rows, ks, strict=True):
        groups = math.ceil(k / 32)
        extra += (math.ceil(n / 256) * 256 - n) * groups  # the rearranged scales' padded rows
        if parsed is None or parsed < MXFP4_SCALES_KEPT_UNTIL:
            extra += n * groups  # the original scales kept
        extra += 2 * n  # bias bf16 → fp32
        first, end = MXFP4_TRITON_K_PAD_RELEASES
        if parsed is not None and first <= parsed < end:
            packed = k // 2
            extra += n * (math.ceil(packed / 64) * 64 - packed)
    return extra


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
    get_pp_group().is_last_rank)``, ``llama.py`` 0.6.6), each ``vocab × hidden ÷ TP`` in the compute dtype (in its
    own group's width where a mixed-precision or GGUF checkpoint stores it quantized).

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
    rows = m.vocab_size * (m.word_embed_proj_dim or m.hidden_size) / tp
    embedding = rows * _table_bytes_per_parameter(inputs, "embedding")
    if m.tie_word_embeddings:
        absent += (1 - (stage == 0) - (stage == pp - 1)) * embedding
    else:
        absent += (stage != 0) * embedding + (stage != pp - 1) * rows * _table_bytes_per_parameter(inputs, "lm_head")
    return math.ceil(even - (sharded / (tp * pp) + replicated / pp) + whole - absent)


def llamacpp_weights_bytes_per_gpu(inputs: CapacityInputs) -> int:
    """Weight bytes llama.cpp puts on each GPU (bytes): the model's tensors split evenly over the GPUs by layer
    (``inputs.pipeline_parallel_size`` of them, ``--tensor-split``), less the input embedding, which llama.cpp keeps
    in host memory (``src/llama-model.cpp`` ``load_tensors``: "there is very little benefit to offloading the input
    layer, so always keep it on the CPU"; a tied model's table is loaded again as the output layer, so it stays on
    the GPU), and with no rotary cache (RoPE is computed in the kernel). Llama-3.1-8B Q4_K_M: 4,911,833,088 B of
    matrices − 295,501,824 B of Q4_K embedding + norms."""
    m = inputs.model
    total = float(weights_bytes_total(inputs))
    if not m.tie_word_embeddings:
        rows = m.vocab_size * (m.word_embed_proj_dim or m.hidden_size)
        total -= rows * _table_bytes_per_parameter(inputs, "embedding")
    return math.ceil(total / max(1, inputs.pipeline_parallel_size))


def _table_bytes_per_parameter(inputs: CapacityInputs, name: str) -> float:
    """Bytes per parameter of the vocabulary table ``name`` (``embedding``, ``lm_head``): its own group's width in a
    mixed-precision or GGUF checkpoint loaded as stored (:attr:`ModelArch.checkpoint_weight_groups`), else the
    compute dtype's (quantization methods leave the tables unquantized)."""
    m = inputs.model
    act = float(DTYPE_BYTES[inputs.compute_dtype])
    if m.checkpoint_weight_groups and inputs.effective_quantization == m.checkpoint_quantization:
        for g in m.checkpoint_weight_groups:
            if g.name == name:
                return act if g.bytes_per_parameter is None else g.bytes_per_parameter
    return act


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
