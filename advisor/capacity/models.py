"""Model architectures: the shapes the capacity pass needs, from a ``config.json`` dict or a preset.

Covered (each the way vLLM stores it; :meth:`ModelArch.from_hf_config` reads the Hugging Face keys):

* dense MHA / GQA / MQA decoders (Llama, Mistral, Qwen2/2.5/3, Phi-3/4, Yi, Gemma): explicit ``head_dim``
  where the config sets it, otherwise hidden ÷ heads;
* mixture-of-experts (Mixtral ``num_local_experts``, Qwen3-MoE ``num_experts``, DeepSeek ``n_routed_experts``
  + ``n_shared_experts`` + ``first_k_dense_replace``, GPT-OSS): *total* parameters size the weights,
  *active* parameters (:meth:`ModelArch.active_parameters`) the FLOPs;
* MLA (DeepSeek-V2/V3/R1, Kimi K2): one latent of ``kv_lora_rank + qk_rope_head_dim`` elements per layer
  per token, no separate V, replicated on every TP rank (vLLM ``MLAAttentionSpec``);
* sliding-window layers (Mistral ``sliding_window``, Gemma 2 alternating, Gemma 3 5-local:1-global,
  GPT-OSS ``layer_types``): :attr:`ModelArch.sliding_window_layers` of the layers keep at most the window;
* hybrid recurrent layers (Jamba Mamba layers, ``layer_types`` with ``mamba``; Gated DeltaNet ``linear_attention``
  of Qwen3-Next/Qwen3.5): only the :attr:`ModelArch.attention_layers` grow with context; each recurrent layer holds
  a fixed state per sequence (:attr:`ModelArch.recurrent_state_elements`). Mamba-2 hybrids with one mixer a layer
  (Nemotron-H, Granite-4.0-H, Bamba: :data:`MAMBA2_HYBRID_TYPES`) likewise; Falcon-H1 and Zamba2
  (:data:`UNMODELLED_HYBRIDS`) are refused, naming the key;
* Gemma 4 (dense): full-attention layers with their own head size and KV heads (``global_head_dim``,
  ``num_global_key_value_heads`` under ``attention_k_eq_v``), the last ``num_kv_shared_layers`` layers reading an
  earlier layer's KV cache, per-layer embeddings (PLE) and double-wide MLPs in the shared layers
  (:func:`_gemma4_reads`); its vision and audio towers are not sized, so a Gemma 4 checkpoint that carries them is
  planned only with them off (:attr:`ModelArch.unsized_towers`);
* refused, naming the architecture and the engine rule not followed (:data:`UNMODELLED_ARCHITECTURES`): Llama 3.2
  Vision (mllama, cross-attention encoder-decoder) and InternVL (``llm_config``, vision tower in the profile run);
* Llama 4 (interleaved MoE with a shared expert) and Qwen's ``shared_expert_intermediate_size``
  (:func:`_family_reads`);
* multimodal wrappers (``text_config`` + ``vision_config``: LLaVA, Qwen-VL, Gemma 3): the language model drives
  the KV cache; :attr:`ModelArch.vision_parameters` adds weights (without ``vision_config``, those of the tower
  transformers' wrapper class builds: :data:`DEFAULT_VISION_CONFIGS`).

Presets live in ``advisor/data/models.json``: each copies its Hugging Face ``config.json`` numbers, cites that
file's URL and the published total parameter count, which the computed count must match within 2 %
(``tests/capacity/test_models.py``). Worked example (Mixtral-8x7B, config.json: hidden 4096, 32 layers, 8
experts of intermediate 14336, top-2, vocab 32000)::

    attention per layer  2 × 4096 × 4096 + 2 × 4096 × 1024        =    41,943,040
    experts per layer    8 × 3 × 4096 × 14336 + router 8 × 4096   = 1,409,318,912
    32 layers + norms, embeddings 2 × 32000 × 4096                → 46,702,792,704 total (published 46.7 B)
    active: 2 of 8 experts                                         → 12,879,921,152 (published 12.9 B)

    >>> get_preset("llama-3.1-8b").num_kv_heads
    8
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Final

from advisor.capacity.data import read_data
from advisor.capacity.mixedprecision import LayerShapes, WeightGroup, mixed_weight_groups, per_layer_width
from advisor.capacity.precision import (
    BNB_4BIT_BYTES,
    DTYPE_BYTES,
    INT_WEIGHT_BITS,
    INT_WEIGHT_METHODS,
    QUANTIZATION_METHODS,
    bnb_8bit_bytes,
    int_weight_bits,
    model_dtype_name,
)
from advisor.errors import CapacityError, UnknownModelError

__all__ = [
    "ModelArch",
    "get_preset",
    "preset_ids",
    "preset_kv_logs",
    "unknown_architecture_warning",
    "vision_config_parameters",
    "vit_parameters",
    "without_unused_vision_tower",
]

_REQUIRED_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "vocab_size",
    "max_position_embeddings",
)


@dataclass(frozen=True)
class ModelArch:
    """The architecture of one decoder-only language model (plus an optional vision tower's weight count).

    Attributes (counts unless stated):
        name: the model id (``meta-llama/Llama-3.1-8B-Instruct``).
        num_layers: decoder layers (``num_hidden_layers``), attention and recurrent together.
        hidden_size: residual width, elements.
        num_attention_heads: query heads.
        num_kv_heads: key/value heads (``num_key_value_heads``; equals ``num_attention_heads`` for MHA,
            1 for MQA). Unused by MLA models (their cache is one latent).
        head_dim: elements per head (``head_dim`` when the config states it, else hidden ÷ heads).
        vocab_size: tokens in the embedding and LM head.
        intermediate_size: dense MLP width (gated MLP: gate, up and down projections).
        max_position_embeddings: the longest context the model supports, tokens.
        torch_dtype: the checkpoint's dtype (``bfloat16``, ``float16``, ``float32``).
        num_parameters: total parameters (published for presets, else :meth:`computed_parameters`).
        tie_word_embeddings: the LM head shares the embedding matrix.
        source: citation, e.g. the Hugging Face ``config.json`` URL.
        attention_bias: q/k/v projections carry a bias (Qwen2, GPT-OSS).
        norms_per_layer: RMSNorm weight vectors per layer (2 for Llama; 4 for Gemma 2/3).
        num_experts: routed experts per MoE layer (0 = dense).
        experts_per_token: routed experts each token uses (top-k).
        moe_intermediate_size: width of one expert's gated MLP.
        num_shared_experts: always-active experts of the same width (DeepSeek, Qwen2-MoE style).
        moe_layers: layers whose MLP is the MoE (the rest use the dense ``intermediate_size``).
        expert_bias: expert projections carry biases (GPT-OSS).
        kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim, q_lora_rank: MLA shapes (0 = not MLA;
            ``q_lora_rank`` 0 means q is projected directly, as DeepSeek-V2-Lite).
        sliding_window: the window of windowed layers, tokens (0 = none).
        sliding_window_layers: how many attention layers are windowed.
        linear_layers: recurrent (Mamba / linear-attention) layers, which keep no per-token KV.
        recurrent_state_elements: state elements per sequence per recurrent layer (conv + SSM state).
        recurrent_conv_elements: the conv-state part of ``recurrent_state_elements`` (the rest is the SSM /
            temporal state, which vLLM may keep in another dtype).
        mamba_ssm_dtype: the config's ``mamba_ssm_dtype`` (Qwen3.5: ``float32``), None when not stated.
        architecture: the first class of ``architectures`` (``""`` when not stated); vLLM picks per-class
            config rules by it.
        linear_layer_parameters: parameters of one recurrent mixer (replaces attention in that layer).
        attention_output_bias: the output projection has a bias (GPT-OSS).
        qk_norm: per-head RMSNorm on q and k (Qwen3, Gemma 3).
        attention_sinks: one learned sink logit per head per layer (GPT-OSS).
        vision_parameters: parameters of the vision tower and projector as vLLM loads them (0 = text only).
        checkpoint_quantization: the method the checkpoint is stored in (``fp8``, ``mxfp4``, ``awq`` …, from
            ``quantization_config.quant_method``), which vLLM applies without ``--quantization``; None = unquantized.
        checkpoint_weight_bits: bits per quantized parameter the checkpoint's ``quantization_config`` states for
            an integer weight-only method (GPTQ/AWQ ``bits`` and ``group_size``: see
            :func:`int_weight_bits`); None: the method's usual width (:mod:`advisor.capacity.precision`).
        gated_mlp: the dense MLP has gate, up and down projections (Llama, Qwen, Mistral, Gemma, Phi-3); False for
            the two-matrix MLPs of :data:`NON_GATED_MLP_TYPES` (Phi-1/2 ``fc1``/``fc2``, GPT-2, OPT …).
        checkpoint_group_size: the GPTQ/AWQ group size the checkpoint states (input rows per scale; -1 = one per
            column); vLLM refuses a layer whose input rows per TP rank it does not divide. None: not such a method.
        position_embeddings: rows of a learned absolute position table, ``hidden`` wide (GPT-2 ``n_positions``;
            OPT ``max_position_embeddings + 2``, its ``OPTLearnedPositionalEmbedding`` offset); 0 = none (rotary).
        word_embed_proj_dim: OPT's embedding width when it differs from ``hidden`` (``project_in``/``project_out``,
            ``word_embed_proj_dim × hidden`` each, no bias); 0 = the hidden size.
        mlp_bias: the dense MLP's up and down projections carry biases (GPT-2, OPT, GPTBigCode).
        norm_bias: the norms are LayerNorms with a bias (GPT-2, OPT, Falcon): two vectors each, the final one too.
        final_norm: a final norm follows the last layer (OPT with ``do_layer_norm_before`` false has none).
        model_type: ``config.json``'s ``model_type`` (a multimodal wrapper's ``text_config`` one), or the type of
            its first known ``architectures`` class (:data:`MODEL_TYPE_OF_ARCHITECTURE`); ``""`` when unknown. The
            engine's model code it selects decides how long activations live (``advisor.capacity.kv``).
        mtp_layers: multi-token-prediction layers the checkpoint ships beside the model (``num_nextn_predict_layers``:
            DeepSeek-V3/R1 1, GLM-4.5, MiMo; ``mtp_num_hidden_layers``: Qwen3-Next/3.5); 0 = none. Not part of
            :attr:`num_parameters`: vLLM loads them only with ``--speculative-config '{"method": "mtp"}'``
            (``vllm/config/speculative.py`` ``hf_config_override`` reads ``num_nextn_predict_layers``, 0.21.0).
        checkpoint_weight_groups: a checkpoint's linear layers by group and stored format where the width is read
            per layer (:func:`~advisor.capacity.mixedprecision.mixed_weight_groups`: ModelOpt ``MIXED_PRECISION``,
            compressed-tensors other than FP8 — several ``config_groups``, or integer/4-bit ones); () otherwise.
        checkpoint_quant_method: ``quantization_config.quant_method`` as written (lower case), the loader vLLM
            prints as ``quantization=`` and accepts as ``--quantization`` (``compressed-tensors`` for a checkpoint
            read as ``fp8``: ``ModelConfig._verify_quantization`` compares these names); None = unquantized or a
            preset.
        attention_output_gate: the query projection also yields a per-head output gate, ``heads × head_dim`` more
            outputs (Qwen3-Next, Qwen3.5: vLLM ``qwen3_next.py`` ``Qwen3NextAttention``, ``attn_output_gate``
            default true).
        bnb_double_quant: a bitsandbytes checkpoint's ``quantization_config`` states ``bnb_4bit_use_double_quant``
            true (its absmax are stored nested; transformers' ``BitsAndBytesConfig`` defaults it to false).
        bnb_skip_modules: a bitsandbytes checkpoint's ``llm_int8_skip_modules`` (vLLM ``BitsAndBytesConfig``), the
            modules it keeps in the compute dtype (:func:`advisor.capacity.weights.bnb_skipped_linear_parameters`).
        global_head_dim: head size of the full-attention layers where it differs from :attr:`head_dim` (Gemma 4
            ``global_head_dim``, 512); 0 = :attr:`head_dim`.
        global_kv_heads: KV heads of the full-attention layers where they differ from :attr:`num_kv_heads` (Gemma 4
            under ``attention_k_eq_v``: ``num_global_key_value_heads``); 0 = :attr:`num_kv_heads`.
        kv_shared_layers: the last layers that read an earlier layer's KV cache and keep none of their own (Gemma 4
            ``num_kv_shared_layers``: vLLM ``gpu_model_runner.py`` ``get_kv_cache_spec`` gives a layer with a
            ``kv_sharing_target_layer_name`` no spec, "doesn't allocate KV cache for the layer", 0.21.0).
        kv_shared_sliding_layers: how many of :attr:`kv_shared_layers` are windowed.
        double_wide_mlp: the KV-shared layers' MLP is ``2 × intermediate_size`` wide (Gemma 4 ``use_double_wide_mlp``;
            vLLM ``gemma4.py`` ``Gemma4DecoderLayer``).
        per_layer_input_size: width of each layer's per-layer embedding (Gemma 4 PLE, ``hidden_size_per_layer_input``);
            0 = none.
        per_layer_vocab_size: rows of the per-layer embedding table (``vocab_size_per_layer_input``).
        unsized_towers: encoder towers (``"vision"``, ``"audio"``) the checkpoint carries that the capacity pass
            does not size (Gemma 4's); the pass refuses the model while one is on (:func:`without_unused_vision_tower`
            turns them off for ``--limit-mm-per-prompt`` zeros or ``--language-model-only``).
        vision_tower_width: hidden size of a Qwen-VL vision tower (``vision_config.hidden_size``, Qwen2-VL's
            ``embed_dim``), which sizes its run in vLLM V1's memory profile (:mod:`advisor.capacity.encoder`); 0 =
            none, or a tower whose profile is not sized.
        vision_modalities: the modalities of :attr:`vision_tower_width`'s tower whose ``--limit-mm-per-prompt`` is
            not 0 (:func:`without_unused_vision_tower`): the items the profile may run.
        vision_tower_type: the wrapper ``model_type`` of :attr:`vision_tower_width`'s tower (``qwen2_5_vl`` …).
        vision_item_limits: ``--limit-mm-per-prompt`` counts stated for :attr:`vision_modalities` (modality, items per
            prompt); a modality left out keeps vLLM's default.
        vision_heads: attention heads of :attr:`vision_tower_width`'s tower (``vision_config.num_heads``), which vLLM
            splits over the TP ranks; 0 = not read.
        mlp_free_layers: layers with no MLP (Nemotron-H's mixers beyond its MLP and MoE layers, folded by
            :func:`_nemotron_h_reads`); the dense MLPs are ``num_layers − moe_layers − mlp_free_layers``.
        gated_experts: an expert is a gated MLP (3 matrices); False for Nemotron-H's ReLU² experts (up, down).
        mamba_groups: a Mamba-2 mixer's B/C groups (``n_groups``), which vLLM pads to the TP size when TP does not
            divide them (``extra_groups_for_head_shards``); 0 = not Mamba-2.
        mamba_group_conv_elements: conv-state elements one such group adds per sequence per layer (``(kernel − 1) ×
            2 × state size``), the padding's cost.
        mamba_heads: a Mamba-2 mixer's heads, which TP must divide (0 = not Mamba-2).
        rotary_cache_positions: positions the model's rotary cos/sin caches hold together, over its distinct ropes
            (:func:`rotary_cache_positions`); 0 = one cache of :attr:`max_position_embeddings`.
        derived_max_model_len: the context vLLM derives from the config when a rope scaling extends it
            (:func:`derived_max_model_len`), tokens; 0 = :attr:`max_position_embeddings` (:attr:`context_tokens`).
    """

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    torch_dtype: str
    num_parameters: int
    tie_word_embeddings: bool = False
    source: str = ""
    attention_bias: bool = False
    norms_per_layer: int = 2
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_shared_experts: int = 0
    moe_layers: int = 0
    expert_bias: bool = False
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int = 0
    sliding_window: int = 0
    sliding_window_layers: int = 0
    linear_layers: int = 0
    recurrent_state_elements: int = 0
    linear_layer_parameters: int = 0
    recurrent_conv_elements: int = 0
    mamba_ssm_dtype: str | None = None
    architecture: str = ""
    attention_output_bias: bool = False
    qk_norm: bool = False
    attention_sinks: bool = False
    vision_parameters: int = 0
    checkpoint_quantization: str | None = None
    checkpoint_weight_bits: float | None = None
    gated_mlp: bool = True
    checkpoint_group_size: int | None = None
    position_embeddings: int = 0
    word_embed_proj_dim: int = 0
    mlp_bias: bool = False
    norm_bias: bool = False
    final_norm: bool = True
    model_type: str = ""
    mtp_layers: int = 0
    attention_output_gate: bool = False
    checkpoint_weight_groups: tuple[WeightGroup, ...] = ()
    checkpoint_quant_method: str | None = None
    bnb_double_quant: bool = False
    bnb_skip_modules: tuple[str, ...] = ()
    global_head_dim: int = 0
    global_kv_heads: int = 0
    kv_shared_layers: int = 0
    kv_shared_sliding_layers: int = 0
    double_wide_mlp: bool = False
    per_layer_input_size: int = 0
    per_layer_vocab_size: int = 0
    unsized_towers: tuple[str, ...] = ()
    vision_tower_width: int = 0
    vision_modalities: tuple[str, ...] = ()
    vision_tower_type: str = ""
    vision_item_limits: tuple[tuple[str, int], ...] = ()
    vision_heads: int = 0
    mlp_free_layers: int = 0
    gated_experts: bool = True
    mamba_groups: int = 0
    mamba_group_conv_elements: int = 0
    mamba_heads: int = 0
    rotary_cache_positions: int = 0
    derived_max_model_len: int = 0

    @property
    def context_tokens(self) -> int:
        """The longest ``max_model_len`` vLLM accepts without ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` and takes when none
        is given, tokens: :attr:`derived_max_model_len` (the rope scaling's extension) or, without one,
        :attr:`max_position_embeddings`."""
        return self.derived_max_model_len or self.max_position_embeddings

    @property
    def context_words(self) -> str:
        """Where :attr:`context_tokens` comes from, for a message: ``max_position_embeddings``, or ``max_position_
        embeddings 32,768 extended by its rope scaling``."""
        if not self.derived_max_model_len:
            return "max_position_embeddings"
        return f"max_position_embeddings {self.max_position_embeddings:,} extended by its rope scaling"

    def __post_init__(self) -> None:
        for field_name in (
            "num_layers",
            "hidden_size",
            "num_attention_heads",
            "num_kv_heads",
            "head_dim",
            "vocab_size",
            "intermediate_size",
            "max_position_embeddings",
            "num_parameters",
        ):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise CapacityError(f"{self.name}: {field_name} must be a positive integer, got {value!r}")
        if self.num_attention_heads % self.num_kv_heads != 0:
            raise CapacityError(
                f"{self.name}: num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise CapacityError(f"{self.name}: experts_per_token must be in 1..{self.num_experts}")
        if not 0 <= self.mlp_free_layers <= self.num_layers - self.moe_layers:
            raise CapacityError(f"{self.name}: mlp_free_layers out of range for {self.num_layers} layers")
        if not 0 <= self.moe_layers <= self.num_layers or not 0 <= self.linear_layers < self.num_layers:
            raise CapacityError(f"{self.name}: moe_layers/linear_layers out of range for {self.num_layers} layers")
        if self.sliding_window_layers > self.attention_layers:
            raise CapacityError(f"{self.name}: more sliding-window layers than attention layers")
        if not 0 <= self.kv_shared_layers < self.attention_layers:
            raise CapacityError(f"{self.name}: kv_shared_layers must be in 0..{self.attention_layers - 1}")
        if self.kv_sliding_layers < 0 or self.kv_full_layers < 0:
            raise CapacityError(f"{self.name}: more KV-shared layers of a kind than layers of that kind")
        if self.global_kv_heads and self.num_attention_heads % self.global_kv_heads != 0:
            raise CapacityError(
                f"{self.name}: num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_global_key_value_heads ({self.global_kv_heads})"
            )

    # --- shape helpers --------------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """Whether any layer's MLP is a mixture of experts."""
        return self.num_experts > 0 and self.moe_layers > 0

    @property
    def is_mla(self) -> bool:
        """Whether attention is DeepSeek's multi-head latent attention."""
        return self.kv_lora_rank > 0

    @property
    def attention_layers(self) -> int:
        """Layers whose KV grows with context (all but the recurrent ones)."""
        return self.num_layers - self.linear_layers

    @property
    def full_attention_layers(self) -> int:
        """Attention layers without a window."""
        return self.attention_layers - self.sliding_window_layers

    @property
    def full_head_dim(self) -> int:
        """Head size of the full-attention layers (:attr:`global_head_dim` when set, else :attr:`head_dim`)."""
        return self.global_head_dim or self.head_dim

    @property
    def full_kv_heads(self) -> int:
        """KV heads of the full-attention layers (:attr:`global_kv_heads` when set, else :attr:`num_kv_heads`)."""
        return self.global_kv_heads or self.num_kv_heads

    @property
    def has_layer_kinds(self) -> bool:
        """Whether layers differ in more than their window: full-attention layers with their own head size or KV
        heads, or layers keeping no KV of their own (Gemma 4). Such models are sized per layer kind."""
        return bool(self.global_head_dim or self.global_kv_heads or self.kv_shared_layers)

    @property
    def kv_sliding_layers(self) -> int:
        """Windowed layers that keep a KV cache of their own (:attr:`sliding_window_layers` less the shared)."""
        return self.sliding_window_layers - self.kv_shared_sliding_layers

    @property
    def kv_full_layers(self) -> int:
        """Full-attention layers that keep a KV cache of their own (:attr:`full_attention_layers` less the shared)."""
        return self.full_attention_layers - (self.kv_shared_layers - self.kv_shared_sliding_layers)

    @property
    def decode_attention_head_size(self) -> float:
        """Elements a full-attention decode query head computes over per attended token, the mean of its QKᵀ and
        PV widths (decode attention's FLOPs are ``4 × heads × this × tokens``): :attr:`full_head_dim`, except MLA,
        which decodes in the latent with the up-projections absorbed into the query and output (vLLM
        ``v1/attention/backends/mla/common.py`` ``_forward_decode``; FlashMLA; SGLang's and TensorRT-LLM's MLA
        decode kernels): QKᵀ over ``kv_lora_rank + qk_rope_head_dim`` (576 on DeepSeek-V3), PV over
        ``kv_lora_rank`` (512), so 544 where ``hidden ÷ heads`` is 56."""
        if self.is_mla:
            return (2 * self.kv_lora_rank + self.qk_rope_head_dim) / 2
        return float(self.full_head_dim)

    @property
    def prefill_attention_head_size(self) -> float:
        """As :attr:`decode_attention_head_size` for prefill: MLA prefills with K and V expanded per head (vLLM
        ``_forward_prefill``: QKᵀ over ``qk_nope_head_dim + qk_rope_head_dim`` = 192, PV over ``v_head_dim`` = 128
        on DeepSeek-V3), so 160."""
        if self.is_mla:
            return (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim) / 2
        return float(self.full_head_dim)

    @property
    def mla_latent_elements(self) -> int:
        """Elements cached per token per MLA layer: ``kv_lora_rank + qk_rope_head_dim`` (512 + 64 = 576)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    # --- parameter bookkeeping (counts of parameters, not bytes) ---------------------------------------
    def embedding_parameters(self) -> int:
        """Parameters of the input embedding plus the LM head (once if tied): vocab × hidden × (1 or 2), plus a
        learned position table (``position_embeddings × hidden``) and OPT's ``project_in``/``project_out``
        (``2 × word_embed_proj_dim × hidden``, the embedding then ``vocab × word_embed_proj_dim``). OPT-350m
        (vocab 50,272, proj 512, hidden 1024, 2,050 positions): 25,739,264 + 2,099,200 + 1,048,576."""
        width = self.word_embed_proj_dim or self.hidden_size
        projections = 2 * width * self.hidden_size if width != self.hidden_size else 0
        table = self.vocab_size * width * (1 if self.tie_word_embeddings else 2)
        per_layer = self.per_layer_vocab_size * self.num_layers * self.per_layer_input_size  # Gemma 4's PLE table
        return table + self.position_embeddings * self.hidden_size + projections + per_layer

    def norm_parameters(self) -> int:
        """RMSNorm weights: (norms_per_layer × layers + 1 final) × hidden (+ q/k norms, MLA latent norms).
        Replicated on every TP rank."""
        extra = self.per_layer_input_size  # Gemma 4's per_layer_projection_norm (0 without PLE)
        if self.qk_norm:
            extra += 2 * (self.head_dim * self.sliding_window_layers + self.full_head_dim * self.full_attention_layers)
        if self.is_mla:
            extra += (self.kv_lora_rank + self.q_lora_rank) * self.num_layers
        vectors = (self.norms_per_layer * self.num_layers + (1 if self.final_norm else 0)) * self.hidden_size
        return vectors * (2 if self.norm_bias else 1) + extra

    def kv_projection_parameters_per_layer(self, full: bool = False) -> int:
        """Parameters of the k and v projections of one layer: 2 × hidden × kv_heads × head_dim (+ bias); of a
        full-attention layer (:attr:`full_kv_heads`, :attr:`full_head_dim`) when ``full``. Gemma 4's ``k_eq_v``
        layers load K into both slots of vLLM's ``QKVParallelLinear``, so they hold V's too."""
        kv_heads, head_dim = (self.full_kv_heads, self.full_head_dim) if full else (self.num_kv_heads, self.head_dim)
        bias = 2 * kv_heads * head_dim if self.attention_bias else 0
        return 2 * self.hidden_size * kv_heads * head_dim + bias

    def attention_parameters_per_layer(self, full: bool = False) -> int:
        """Parameters of one attention block (projections, biases, sinks; norms excluded); of a full-attention
        layer when ``full`` (its own head size and KV heads: :attr:`full_head_dim`, :attr:`full_kv_heads`).

        GQA: ``q + o = 2 × hidden × heads × head_dim`` plus k and v. MLA (DeepSeek-V3: hidden 7168, 128
        heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128): ``q_a 7168×1536 + q_b 1536×128×192 +
        kv_a 7168×576 + kv_b 512×128×256 + o 128×128×7168 = 187,105,280``.
        """
        h, n = self.hidden_size, self.num_attention_heads
        if self.is_mla:
            qk_head = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * n * qk_head if self.q_lora_rank else h * n * qk_head
            kv_a = h * self.mla_latent_elements
            kv_b = self.kv_lora_rank * n * (self.qk_nope_head_dim + self.v_head_dim)
            return q + kv_a + kv_b + n * self.v_head_dim * h
        head_dim = self.full_head_dim if full else self.head_dim
        q_and_o = 2 * h * n * head_dim
        q_bias = n * head_dim if self.attention_bias else 0
        o_bias = h if self.attention_output_bias else 0
        sinks = n if self.attention_sinks else 0
        if self.attention_output_gate:
            q_and_o += h * n * head_dim
        return q_and_o + q_bias + o_bias + sinks + self.kv_projection_parameters_per_layer(full)

    def dense_mlp_parameters(self) -> int:
        """One dense MLP: ``3 × hidden × intermediate`` gated (gate, up, down), ``2 ×`` otherwise (up, down:
        Phi-2 2560 × 10240 × 2 = 52,428,800 per layer; :attr:`gated_mlp`), plus ``intermediate + hidden`` biases
        when :attr:`mlp_bias` (GPT-2's ``c_fc``/``c_proj``)."""
        bias = self.intermediate_size + self.hidden_size if self.mlp_bias else 0
        return (3 if self.gated_mlp else 2) * self.hidden_size * self.intermediate_size + bias

    def expert_parameters(self) -> int:
        """One expert: ``3 × hidden × moe_intermediate`` (``2 ×`` when not :attr:`gated_experts`) (+ biases ``2 ×
        moe_intermediate + hidden``)."""
        bias = 2 * self.moe_intermediate_size + self.hidden_size if self.expert_bias else 0
        return (3 if self.gated_experts else 2) * self.hidden_size * self.moe_intermediate_size + bias

    def router_parameters(self) -> int:
        """The router of one MoE layer: ``num_experts × hidden`` (+ a bias per expert when experts have biases)."""
        return self.num_experts * (self.hidden_size + (1 if self.expert_bias else 0))

    def moe_layer_parameters(self, experts: int | None = None) -> int:
        """One MoE MLP with ``experts`` routed experts (default all), the shared ones and the router."""
        routed = self.num_experts if experts is None else experts
        return (routed + self.num_shared_experts) * self.expert_parameters() + self.router_parameters()

    def per_layer_input_parameters(self) -> tuple[int, int]:
        """(sharded, replicated) parameters of Gemma 4's per-layer embedding path beside its table: the
        ``per_layer_model_projection`` (``hidden × layers × ple``, a ``ColumnParallelLinear``) and each layer's
        ``per_layer_input_gate`` and ``per_layer_projection`` (``2 × hidden × ple``, ``ReplicatedLinear``: whole on
        every TP rank); vLLM ``gemma4.py`` ``Gemma4Model``, ``Gemma4DecoderLayer`` (0.21.0). (0, 0) without PLE."""
        ple = self.per_layer_input_size * self.num_layers
        return self.hidden_size * ple, 2 * self.hidden_size * ple

    def _body_parameters(self, experts: int | None) -> int:
        if self.has_layer_kinds:
            attention = self.sliding_window_layers * self.attention_parameters_per_layer() + (
                self.full_attention_layers * self.attention_parameters_per_layer(full=True)
            )
        else:
            attention = self.attention_layers * self.attention_parameters_per_layer()
        recurrent = self.linear_layers * self.linear_layer_parameters
        moe = self.moe_layers * self.moe_layer_parameters(experts) if self.is_moe else 0
        dense_layers = self.num_layers - (self.moe_layers if self.is_moe else 0) - self.mlp_free_layers
        dense = dense_layers * self.dense_mlp_parameters()
        if self.double_wide_mlp:  # the KV-shared layers' MLP is twice as wide
            dense += self.kv_shared_layers * self.dense_mlp_parameters()
        return attention + recurrent + moe + dense + sum(self.per_layer_input_parameters())

    def computed_parameters(self) -> int:
        """Total parameters from the shapes alone (language model + :attr:`vision_parameters`).

        Attention (GQA or MLA) per attention layer, the recurrent mixer per recurrent layer, a dense gated
        MLP or the MoE (all experts + shared + router) per layer, norms, embeddings and LM head. Reproduces
        the published counts of the dense presets exactly (Llama-3.1-8B: 8,030,261,248) and every preset
        within 2 % (the tests check each).
        """
        return (
            self._body_parameters(None) + self.norm_parameters() + self.embedding_parameters() + self.vision_parameters
        )

    def active_parameters(self) -> int:
        """Parameters one token passes through: ``experts_per_token`` of the routed experts (all of a dense
        model), embeddings once and the LM head, no vision tower. Mixtral-8x7B: 12.9 B of 46.7 B."""
        if not self.is_moe:
            return self.num_parameters - self.vision_parameters
        body = self._body_parameters(self.experts_per_token)
        return body + self.norm_parameters() + self.embedding_parameters()

    def linear_parameters(self) -> int:
        """Parameters that weight quantization (fp8/int8/AWQ/GPTQ/FP4) applies to: all but embeddings/LM head,
        norms and the vision tower, which vLLM keeps in the model dtype by default."""
        return max(
            0, self.num_parameters - self.embedding_parameters() - self.norm_parameters() - self.vision_parameters
        )

    def expert_weight_parameters(self) -> int:
        """Parameters in the routed experts (what expert parallelism shards by expert)."""
        return self.moe_layers * self.num_experts * self.expert_parameters() if self.is_moe else 0

    @classmethod
    def from_hf_config(cls, config: Mapping[str, Any], name: str, source: str | None = None) -> ModelArch:
        """Build an architecture named ``name`` from a Hugging Face ``config.json`` already parsed into a dict, read
        from the file ``source`` (its path, which the error messages name; None: they name ``<name>: config.json``).

        ``head_dim`` is taken when the config states it (Gemma, Llama 3.2), else ``hidden_size //
        num_attention_heads`` (the transformers convention). A key left out takes the default of the transformers
        config class of its ``model_type`` (:data:`TRANSFORMERS_DEFAULTS`, but for the shapes a top-level file must
        state, :data:`_TRUNCATION_KEYS`: a Mixtral, Qwen2-MoE or Qwen3-MoE file without its expert keys is that
        class's mixture of experts); ``num_key_value_heads`` not stated there
        defaults to ``num_attention_heads`` (MHA, as ``LlamaConfig`` does when the key is absent). A multimodal
        wrapper's ``text_config`` is merged over the top level. MoE, MLA, sliding-window and Mamba keys are read as
        listed in the module docstring. ``num_parameters`` is taken from a ``num_parameters`` key if present,
        else computed (:meth:`computed_parameters`). ``torch_dtype`` (or ``dtype``) defaults to ``bfloat16`` and is
        refused when vLLM does not load it (:func:`_model_dtype`).

        Every key read is validated; a key set to ``null`` counts as absent. Counts are JSON integers (not
        ``true``, ``4096.0``, ``"4096"``, NaN or Infinity); sizes and counts that cannot be zero (widths,
        heads, experts, MLA ranks, periods) are ≥ 1, layer indices and layer-pattern keys lie within
        ``num_hidden_layers``, lists hold such integers (``mlp_only_layers``) or strings (``layer_types``, one
        per layer), flags are booleans, names are strings and ``text_config``, ``vision_config`` and
        ``quantization_config`` are objects. Without ``head_dim`` the hidden size is a multiple of the heads, and
        the head size is even where rotary embeddings apply (:func:`_head_dim`); ``rope_scaling.factor`` is a
        number > 0 (:func:`_rope_scaling`); ``quantization_config`` names its ``quant_method``
        (:func:`_checkpoint_quantization`); a bitsandbytes checkpoint is 4-bit or 8-bit, not both.

        Raises:
            CapacityError: a required key is missing, any key read has a value of the wrong type or out of
                range, or keys contradict each other (the hidden size and the heads, bitsandbytes 4- and 8-bit);
                the message names the file (``source``, else the model's config.json) and the key.
        """
        where = source or f"{name}: config.json"
        if not isinstance(config, Mapping):
            raise CapacityError(f"{where} must be a JSON object, got {_show(config)}")
        text = _optional_mapping(config, "text_config", where)
        vision = _optional_mapping(config, "vision_config", where)
        _refuse_unmodelled_architecture(config, text, where)
        wrapper = _optional_str(config, "model_type", where) or _model_type_of(config, where)
        if vision is None and wrapper in DEFAULT_VISION_CONFIGS:
            vision = dict(DEFAULT_VISION_CONFIGS[wrapper])  # the tower transformers builds when absent or null
        top = {k: v for k, v in config.items() if k != "text_config"}
        cfg = {**top, **dict(text or {})}
        top_type = _optional_str(top, "model_type", where) or _model_type_of(top, where)
        if top_type in TEXT_CONFIG_CLASS_OF_WRAPPER and text is None:
            raise CapacityError(
                f"{where} has no text_config, where a {top_type} config.json keeps its language model's keys "
                "(transformers would build a default model, not this one)"
            )
        if text is not None:  # transformers builds the text model's config from text_config alone
            cfg["model_type"] = TEXT_CONFIG_CLASS_OF_WRAPPER.get(top_type) or (
                _optional_str(text, "model_type", where, "text_config.model_type")
                or TEXT_MODEL_TYPE_OF_WRAPPER.get(top_type, "")
            )
        for key in (
            "torch_dtype",
            "_vision_width",
            "_source",
            "num_parameters",
            "_norms_per_layer",
            "_vision_parameters",
            "_checkpoint_quantization",
            "quantization_config",
        ):
            if key in top and top[key] is not None:
                cfg[key] = top[key]
        if not cfg.get("model_type"):  # what the class vLLM loads says (architectures), as transformers would
            cfg["model_type"] = _model_type_of(cfg, where)
        cfg = _as_transformers_reads(cfg, str(cfg.get("model_type") or ""), text is not None, where)
        cfg = _family_reads(cfg, str(cfg.get("model_type") or ""), where)
        for key in _REQUIRED_KEYS:
            if key not in cfg or cfg[key] is None:
                raise CapacityError(f"{where} has no {key!r} (needed for the capacity pass)")
        heads = _positive_int(cfg, "num_attention_heads", where)
        hidden = _positive_int(cfg, "hidden_size", where)
        layers = _positive_int(cfg, "num_hidden_layers", where)
        kv_heads = _optional_positive_int(cfg, "num_key_value_heads", where, heads)
        head_dim = _head_dim(cfg, hidden, heads, where)
        _rope_scaling(cfg, where)
        for scope, prefix in ((top, ""), (text or {}, "text_config.")):  # names, shadowed or not, are strings
            for key in ("model_type", "torch_dtype", "dtype"):
                _optional_str(scope, key, where, prefix + key)
        dtype = _model_dtype(top, text, where)
        model_type: str = cfg.get("model_type") or ""
        experts, experts_per_token = _experts(cfg, where)
        stated_intermediate = _optional_positive_int(cfg, "intermediate_size", where, 0)
        moe_width = _optional_positive_int(cfg, "moe_intermediate_size", where, 0) or stated_intermediate
        intermediate = stated_intermediate or moe_width
        if intermediate <= 0:
            raise CapacityError(f"{where} has no 'intermediate_size' (needed for the capacity pass)")
        _str_list(cfg, "layer_types", where, layers)
        _str_list(cfg, "layers_block_type", where, None)
        linear, state, linear_params, attention_layers, conv_state = _recurrent_layers(cfg, layers, hidden, where)
        architectures = _str_list(cfg, "architectures", where, None) or []
        kv_lora_rank = _optional_positive_int(cfg, "kv_lora_rank", where, 0)
        mla_minimum = 1 if kv_lora_rank else 0  # an MLA model needs a rope part and a V head
        window = _sliding_window(cfg, where)
        pattern = _optional_positive_int(cfg, "sliding_window_pattern", where, 0)
        moe_layers = _int_in(cfg, "_moe_layer_count", where, 0, layers, default=-1)
        moe_layers = moe_layers if moe_layers >= 0 else _moe_layers(cfg, layers, where)
        mamba2 = cfg.get("_mamba2")
        method = _checkpoint_quantization(cfg, where)
        arch = cls(
            name=name,
            num_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=_positive_int(cfg, "vocab_size", where),
            intermediate_size=intermediate,
            max_position_embeddings=_positive_int(cfg, "max_position_embeddings", where),
            rotary_cache_positions=rotary_cache_positions(cfg, model_type),
            derived_max_model_len=derived_max_model_len(cfg, model_type),
            torch_dtype=dtype,
            num_parameters=1,  # replaced below
            tie_word_embeddings=_tied(cfg, model_type, where),
            source=_optional_str(cfg, "_source", where) or "",
            attention_bias=_optional_bool(cfg, "attention_bias", where) or bool(cfg.get("_linear_bias")),
            norms_per_layer=_int_in(
                cfg, "_norms_per_layer", where, 0, default=4 if model_type.startswith("gemma") else 2
            ),
            num_experts=experts,
            experts_per_token=experts_per_token,
            moe_intermediate_size=moe_width if experts else 0,
            num_shared_experts=_int_in(cfg, "n_shared_experts", where, 0, default=0),
            moe_layers=moe_layers if experts else 0,
            expert_bias=model_type == "gpt_oss",
            kv_lora_rank=kv_lora_rank,
            qk_rope_head_dim=_int_in(cfg, "qk_rope_head_dim", where, mla_minimum, default=0),
            qk_nope_head_dim=_int_in(cfg, "qk_nope_head_dim", where, 0, default=0),
            v_head_dim=_int_in(cfg, "v_head_dim", where, mla_minimum, default=0),
            q_lora_rank=_int_in(cfg, "q_lora_rank", where, 0, default=0),
            sliding_window=window,
            sliding_window_layers=_sliding_layers(cfg, attention_layers, pattern) if window else 0,
            linear_layers=linear,
            recurrent_state_elements=state,
            linear_layer_parameters=linear_params,
            recurrent_conv_elements=conv_state,
            mamba_ssm_dtype=_optional_str(cfg, "mamba_ssm_dtype", where),
            architecture=architectures[0] if architectures else "",
            attention_output_bias=model_type == "gpt_oss" or bool(cfg.get("_linear_bias")),
            qk_norm=model_type
            in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "gemma4_text", *GATED_DELTA_NET_TYPES),
            attention_sinks=model_type == "gpt_oss",
            vision_parameters=_int_in(cfg, "_vision_parameters", where, 0, default=-1),
            checkpoint_quantization=method,
            checkpoint_quant_method=_quant_method_as_written(cfg),
            checkpoint_weight_bits=_checkpoint_weight_bits(cfg, where, method),
            bnb_double_quant=_bnb_double_quant(cfg, where, method),
            bnb_skip_modules=_bnb_skip_modules(cfg, where, method),
            gated_mlp=model_type not in NON_GATED_MLP_TYPES,
            checkpoint_group_size=_checkpoint_group_size(cfg, where, method),
            position_embeddings=int(cfg.get("_position_embeddings", 0)),
            word_embed_proj_dim=int(cfg.get("_word_embed_proj_dim", 0)),
            mlp_bias=bool(cfg.get("_linear_bias")),
            norm_bias=bool(cfg.get("_norm_bias")),
            final_norm=bool(cfg.get("_final_norm", True)),
            model_type=model_type,
            mtp_layers=_int_in(cfg, "num_nextn_predict_layers", where, 0, default=0)
            or _int_in(cfg, "mtp_num_hidden_layers", where, 0, default=0),
            attention_output_gate=bool(cfg.get("_attention_output_gate")),
            global_head_dim=int(cfg.get("_global_head_dim", 0)),
            global_kv_heads=int(cfg.get("_global_kv_heads", 0)),
            kv_shared_layers=int(cfg.get("_kv_shared_layers", 0)),
            kv_shared_sliding_layers=int(cfg.get("_kv_shared_sliding_layers", 0)),
            double_wide_mlp=bool(cfg.get("_double_wide_mlp")),
            per_layer_input_size=int(cfg.get("_per_layer_input_size", 0)),
            per_layer_vocab_size=int(cfg.get("_per_layer_vocab_size", 0)),
            unsized_towers=_unsized_towers(top, where),
            mlp_free_layers=int(cfg.get("_mlp_free_layers", 0)),
            gated_experts=bool(cfg.get("_gated_experts", True)),
            mamba_groups=mamba2[2] if mamba2 else 0,
            mamba_group_conv_elements=(mamba2[4] - 1) * 2 * mamba2[3] if mamba2 else 0,
            mamba_heads=mamba2[0] if mamba2 else 0,
        )
        if arch.vision_parameters < 0:  # not given by a preset: counted from vision_config, when it says how
            top_type = _optional_str(top, "model_type", where) or ""
            layer = top.get("vision_feature_layer")
            layer = layer if isinstance(layer, int) and not isinstance(layer, bool) else -2
            counted = vision_config_parameters(top_type, vision, hidden, where, layer) if vision is not None else 0
            arch = replace(arch, vision_parameters=counted)
        width = _int_in(cfg, "_vision_width", where, 0, default=0) or _vision_tower_width(top_type, vision, where)
        if width and arch.vision_parameters:
            modalities = VISION_TOWER_MODALITIES.get(top_type) or VISION_TOWER_MODALITIES.get(model_type) or ()
            heads = _int_in(vision or {}, "num_heads", f"{where} vision_config", 1, default=16)
            arch = replace(
                arch,
                vision_tower_width=width,
                vision_modalities=modalities,
                vision_tower_type=top_type,
                vision_heads=heads,
            )
        stated = _optional_positive_int(cfg, "num_parameters", where, 0)
        arch = replace(arch, num_parameters=stated or arch.computed_parameters())
        return replace(arch, checkpoint_weight_groups=_mixed_groups(cfg, arch, where))


VISION_TOWER_MODALITIES: Final = dict.fromkeys(
    (
        *("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"),
        *("qwen2_5_vl_text", "qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_5_text", "qwen3_5_moe_text"),
    ),
    ("image", "video"),
)
"""(Wrapper or text ``model_type`` →) the modalities whose ``--limit-mm-per-prompt`` all at 0 skip the vision
tower (vLLM 0.24.0 ``qwen2_vl.py``, ``qwen2_5_vl.py``, ``qwen3_vl.py``, ``qwen3_vl_moe.py``, ``qwen3_5.py``:
``self._mark_tower_model(vllm_config, {"image", "video"})``); other wrappers' towers (``llava.py``,
``gemma3_mm.py``) are marked with ``"image"`` alone."""


UNSIZED_TOWER_MODALITIES: Final[dict[str, tuple[str, ...]]] = {"vision": ("image", "video"), "audio": ("audio",)}
"""The modalities each tower of :attr:`ModelArch.unsized_towers` serves: vLLM 0.21.0 ``gemma4_mm.py``
``Gemma4ForConditionalGeneration.__init__`` builds ``vision_tower`` under ``_mark_tower_model(vllm_config, {"image",
"video"})`` and ``audio_tower`` under ``_mark_tower_model(vllm_config, "audio")``: with every modality of a tower at 0
the tower is not built and loads no weights."""

UNSIZED_TOWER_TYPES: Final = frozenset({"gemma4"})
"""Wrapper ``model_type``s whose ``vision_config`` / ``audio_config`` towers are not sized here (Gemma 4: its vision
encoder and its conformer audio encoder, and their runs in the profile pass), so :func:`_unsized_towers` names them."""


def _unsized_towers(top: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The towers of a :data:`UNSIZED_TOWER_TYPES` wrapper its config.json carries (``vision_config`` /
    ``audio_config`` objects, not null), in :data:`UNSIZED_TOWER_MODALITIES` order; () for any other model."""
    if (_optional_str(top, "model_type", name) or _model_type_of(top, name)) not in UNSIZED_TOWER_TYPES:
        return ()
    # an empty object is a tower too: transformers builds the default one from it
    return tuple(
        tower for tower in UNSIZED_TOWER_MODALITIES if _optional_mapping(top, f"{tower}_config", name) is not None
    )


MM_LIMIT_MODALITIES: Final = ("image", "video", "audio")
"""The modality keys of vLLM's ``--limit-mm-per-prompt`` the capacity pass reads (``MultiModalConfig.limit_per_prompt``
of the models it sizes: Qwen-VL image and video, Gemma 4 and the Omni models' audio); another key is refused."""


def mm_limit_problems(limits: Mapping[str, object]) -> list[str]:
    """Why ``limits`` (modality → items per prompt) is not a ``--limit-mm-per-prompt`` the pass can read: a key outside
    :data:`MM_LIMIT_MODALITIES` (they are lowercase) or a count that is not a whole number ≥ 0; [] when it is."""
    problems = []
    for modality, count in limits.items():
        if modality not in MM_LIMIT_MODALITIES:
            problems.append(
                f"{modality!r}: not a modality vLLM limits (one of {', '.join(MM_LIMIT_MODALITIES)}; the keys are "
                "lowercase)"
            )
        elif isinstance(count, bool) or not isinstance(count, int) or count < 0:
            problems.append(f"{modality}: items per prompt must be an integer >= 0, got {count!r}")
    return problems


def language_model_only_limits() -> dict[str, int]:
    """vLLM's ``--language-model-only`` as ``--limit-mm-per-prompt`` limits: every modality at 0 ("disables all
    multimodal inputs by setting all modality limits to 0", ``vllm/config/multimodal.py`` ``MultiModalConfig``,
    0.21.0)."""
    modalities = {m for tower in UNSIZED_TOWER_MODALITIES.values() for m in tower}
    for tower in VISION_TOWER_MODALITIES.values():
        modalities.update(tower)
    return dict.fromkeys(sorted(modalities), 0)


def without_unused_vision_tower(model: ModelArch, limits: Mapping[str, int] | None) -> ModelArch:
    """``model`` without its vision tower when ``--limit-mm-per-prompt`` (``limits``, modality → items) sets every
    modality of the tower to 0: vLLM then builds it as ``StageMissingLayer`` and loads none of its weights
    (``model_executor/models/interfaces.py`` ``SupportsMultiModal._mark_tower_model``, 0.24.0: "Tower model
    components are automatically skipped when `--limit-mm-per-prompt` is set to zero for all of their
    modalities"; a modality left out keeps its default limit, not 0). Otherwise ``model`` unchanged: the encoder
    profiling a non-zero limit adds (``gpu_model_runner.py`` ``profile_run``: the encoder run on the modality's
    dummy batch, its outputs kept in the encoder cache) is not modelled."""
    if limits and model.unsized_towers:
        kept = tuple(
            tower for tower in model.unsized_towers if any(limits.get(m) != 0 for m in UNSIZED_TOWER_MODALITIES[tower])
        )
        model = replace(model, unsized_towers=kept)
    if not limits or not model.vision_parameters:
        return model
    modalities = VISION_TOWER_MODALITIES.get(
        model.vision_tower_type, VISION_TOWER_MODALITIES.get(model.model_type, ("image",))
    )
    if any(limits.get(m) != 0 for m in modalities):
        on = tuple(m for m in model.vision_modalities if limits.get(m) != 0)
        counts = tuple((m, limits[m]) for m in on if m in limits)
        return replace(model, vision_modalities=on, vision_item_limits=counts)
    return replace(model, num_parameters=model.num_parameters - model.vision_parameters, vision_parameters=0)


def vit_parameters(vision: Mapping[str, Any], layers_loaded: int | None = None, projector_out: int = 0) -> int:
    """Parameters of a CLIP/SigLIP-style vision transformer plus a 2-layer MLP projector.

    Per layer: q, k, v, o with biases ``4 × (h² + h)``, MLP ``2 × h × i + i + h``, two LayerNorms ``4 × h``;
    patch embedding ``channels × patch² × h`` (+ ``h`` bias when ``patch_bias``), a class token ``h`` and
    ``(patches + 1) × h`` positions (CLIP), pre/post LayerNorms. ``layers_loaded`` counts the layers vLLM
    instantiates (LLaVA stops at ``vision_feature_layer`` −2, so 23 of CLIP-L's 24). The projector is
    ``h × out + out + out² + out``. CLIP ViT-L/14-336 (h 1024, i 4096, 24 layers): 303,507,456.
    """
    h = int(vision["hidden_size"])
    i = int(vision["intermediate_size"])
    layers = int(vision["num_hidden_layers"]) if layers_loaded is None else layers_loaded
    patch = int(vision["patch_size"])
    patches = (int(vision["image_size"]) // patch) ** 2
    per_layer = 4 * (h * h + h) + 2 * h * i + i + h + 4 * h
    embed = int(vision.get("num_channels", 3)) * patch * patch * h + h + (patches + 1) * h + 2 * h
    if layers == int(vision["num_hidden_layers"]):
        embed += 2 * h  # post-LayerNorm is loaded only with the last layer
    projector = (
        h * projector_out + projector_out + projector_out * projector_out + projector_out if projector_out else 0
    )
    return layers * per_layer + embed + projector


MODEL_TYPE_OF_ARCHITECTURE: Final[dict[str, str]] = {
    # transformers' model classes and the model_type of their config class (models/<type>/modeling_<type>.py)
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "PhiForCausalLM": "phi",
    "Phi3ForCausalLM": "phi3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "GptOssForCausalLM": "gpt_oss",
    "GPT2LMHeadModel": "gpt2",
    "OPTForCausalLM": "opt",
    "BloomForCausalLM": "bloom",
    "FalconForCausalLM": "falcon",
    "GPTNeoXForCausalLM": "gpt_neox",
    "GPTBigCodeForCausalLM": "gpt_bigcode",
    "Starcoder2ForCausalLM": "starcoder2",
    "LlavaForConditionalGeneration": "llava",
    "LlavaNextForConditionalGeneration": "llava_next",
    "Gemma4ForConditionalGeneration": "gemma4",
    "Gemma4ForCausalLM": "gemma4_text",
    "MllamaForConditionalGeneration": "mllama",
    "InternVLChatModel": "internvl_chat",
}
"""The ``model_type`` of a ``config.json`` that states only ``architectures`` (vLLM picks the model class from
``architectures``): the first listed class found here; unlisted classes leave it unknown."""


KNOWN_ARCHITECTURES: Final = frozenset(
    {
        *MODEL_TYPE_OF_ARCHITECTURE,
        # the families this module reads beside those (module docstring; tests/capacity/test_real_configs.py and
        # the truth table load their published config.json files), and vLLM's llama.py aliases
        *("AquilaForCausalLM", "InternLMForCausalLM", "InternLM3ForCausalLM", "XverseForCausalLM"),
        *("JambaForCausalLM", "BambaForCausalLM", "GraniteMoeHybridForCausalLM", "NemotronHForCausalLM"),
        *("Llama4ForCausalLM", "Llama4ForConditionalGeneration", "Qwen3NextForCausalLM"),
        *("Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration"),
        *("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
        *("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
        *("Glm4MoeForCausalLM", "MiniMaxM2ForCausalLM", "SeedOssForCausalLM"),
    }
)
"""``architectures`` classes whose shapes :meth:`ModelArch.from_hf_config` reads as their engine builds them; any
other class is sized from its keys as a Llama-style decoder, with :func:`unknown_architecture_warning`."""


def unknown_architecture_warning(model: ModelArch) -> str | None:
    """What to tell the operator when ``model``'s ``architectures`` class is not one of
    :data:`KNOWN_ARCHITECTURES`: it is still sized (many custom classes are Llama-shaped), as the dense decoder its
    keys describe, which may not be what the engine builds. None for a known class or a config without
    ``architectures`` (presets)."""
    if not model.architecture or model.architecture in KNOWN_ARCHITECTURES:
        return None
    experts = f", its MLPs {model.num_experts} experts as its keys state" if model.is_moe else ""
    return (
        f"architecture {model.architecture} is not one the capacity pass models; it is sized as a dense decoder "
        f"(Llama-style attention and gated MLP{experts}) from the config.json keys, which may not be what the "
        "engine builds"
    )


UNMODELLED_ARCHITECTURES: Final[dict[str, str]] = {
    # model_type (a wrapper's, or its text_config's) → what the engine does that the capacity pass does not model
    "mllama": "Llama 3.2 Vision (mllama)",
    "internvl_chat": "InternVL (InternVLChatModel)",
}
"""Architectures the capacity pass refuses rather than read as a dense decoder, each for a rule of the engine it does
not follow (the reason is :data:`UNMODELLED_ARCHITECTURE_REASONS`)."""

UNMODELLED_ARCHITECTURE_REASONS: Final[dict[str, str]] = {
    "Llama 3.2 Vision (mllama)": (
        "an encoder-decoder: the cross_attention_layers attend to the vision encoder's output, V0 allocates KV "
        "blocks for them as for the self-attention layers, and the profile run puts max_num_seqs dummy images "
        "through the vision encoder (vLLM 0.6.6 worker/enc_dec_model_runner.py profile_run, "
        "model_executor/models/mllama.py); neither the encoder's activation peak nor the cross-attention cache "
        "is modelled"
    ),
    "InternVL (InternVLChatModel)": (
        "its language model is in llm_config and the InternViT tower runs in the profile run on dummy images "
        "(vLLM 0.6.6 worker/model_runner.py profile_run: max_num_batched_tokens // (num_image_token × "
        "(max_dynamic_patch + 1)) sequences with one largest image each, model_executor/models/internvl.py "
        "get_max_internvl_image_tokens); the vision tower's part of the activation peak is not modelled"
    ),
}
"""Why each of :data:`UNMODELLED_ARCHITECTURES` is refused, naming the engine files whose rule is not followed."""


def _refuse_unmodelled_architecture(config: Mapping[str, Any], text: Mapping[str, Any] | None, name: str) -> None:
    """Raise for a config.json of :data:`UNMODELLED_ARCHITECTURES` (by ``model_type``, the ``text_config``'s, or
    the first known ``architectures`` class), naming the architecture and the engine rule not modelled."""
    types = [
        _optional_str(config, "model_type", name),
        _optional_str(text, "model_type", name, "text_config.model_type") if text is not None else None,
        _model_type_of(config, name),
    ]
    for model_type in types:
        if model_type in UNMODELLED_ARCHITECTURES:
            arch = UNMODELLED_ARCHITECTURES[model_type]
            raise CapacityError(
                f"{name}: {arch} (model_type {model_type!r}) is not modelled: "
                f"{UNMODELLED_ARCHITECTURE_REASONS[arch]}, so the capacity pass cannot plan this model"
            )


def _model_type_of(cfg: Mapping[str, Any], name: str) -> str:
    """:data:`MODEL_TYPE_OF_ARCHITECTURE` of the first listed class of ``architectures`` it knows, else ``""``."""
    for arch in _str_list(cfg, "architectures", name, None) or []:
        if arch in MODEL_TYPE_OF_ARCHITECTURE:
            return MODEL_TYPE_OF_ARCHITECTURE[arch]
    return ""


NON_GATED_MLP_TYPES: Final = frozenset(
    {"phi", "gpt2", "opt", "bloom", "falcon", "gpt_neox", "gpt_bigcode", "starcoder2", "nemotron_h"}
)
"""``model_type``s whose dense MLP is two matrices, up and down, with no gate (transformers and vLLM:
``PhiMLP`` ``fc1``/``fc2``, ``GPT2MLP`` and ``GPTBigCodeMLP`` and ``Starcoder2MLP`` ``c_fc``/``c_proj``, OPT's
``fc1``/``fc2``, BLOOM's, Falcon's and GPT-NeoX's ``dense_h_to_4h``/``dense_4h_to_h``, Nemotron-H's ReLU²
``NemotronHMLP`` ``up_proj``/``down_proj``). Phi-3 (``phi3``) is gated."""


TIED_BY_DEFAULT: Final[dict[str, bool]] = {
    # transformers' config classes: configuration_<model>.py ``__init__(..., tie_word_embeddings=…)``; a class
    # that does not name it takes PretrainedConfig's (configuration_utils.py: ``kwargs.pop("tie_word_embeddings",
    # True)``): GPT-2, OPT, BLOOM, GPTBigCode and Starcoder2 (configuration_starcoder2.py's __init__ has no such
    # argument). A model_type not listed here is taken as untied, as before, whatever its class does
    "gemma": True,
    "gemma2": True,
    "gemma3": True,
    "gemma3_text": True,
    "gemma4": True,
    "gemma4_text": True,
    "gpt2": True,
    "opt": True,
    "bloom": True,
    "falcon": True,
    "gpt_bigcode": True,
    "starcoder2": True,
    "llama": False,
    "mistral": False,
    "mixtral": False,
    "qwen2": False,
    "qwen2_moe": False,
    "qwen3": False,
    "qwen3_moe": False,
    "phi": False,
    "phi3": False,
    "deepseek_v2": False,
    "deepseek_v3": False,
    "gpt_neox": False,
}
"""Whether the LM head shares the embedding matrix when ``config.json`` does not say, by ``model_type``: what
transformers' config class for that type defaults to (vLLM reads the loaded config object). Gemma's configs omit the
key and tie (google/gemma-2b: 2.51 G parameters with one shared 256,000 × 2,048 matrix, not 3.03 G)."""


def _tied(cfg: Mapping[str, Any], model_type: str, name: str) -> bool:
    """``tie_word_embeddings`` as stated, else :data:`TIED_BY_DEFAULT` for ``model_type`` (``False`` for a type
    not listed, as before)."""
    if cfg.get("tie_word_embeddings") is None:
        return TIED_BY_DEFAULT.get(model_type, False)
    return _optional_bool(cfg, "tie_word_embeddings", name)


def _checkpoint_quantization(cfg: Mapping[str, Any], name: str) -> str | None:
    """:attr:`ModelArch.checkpoint_quantization`: the method ``quantization_config.quant_method`` names (vLLM's
    name for it), None without a ``quantization_config``.

    A ``quantization_config`` without ``quant_method`` (or with an empty one) is refused: the weights' format is
    unknown (vLLM takes the method from that key), and reading them as unquantized would size bf16 weights. The one
    exception is the form transformers wrote before it stored the key, a bitsandbytes config with ``load_in_4bit``
    or ``load_in_8bit`` true, which its ``AutoHfQuantizer.from_config`` still reads as bitsandbytes: read here as
    ``bitsandbytes`` too.

    Raises:
        CapacityError: ``quantization_config`` is not an object, states no ``quant_method`` (and is no such
            bitsandbytes config) or one the capacity pass has no width for (not one of
            :data:`~advisor.capacity.precision.QUANTIZATION_METHODS` nor read as one); the message names the file and
            ``quantization_config.quant_method``.
    """
    stated = _optional_str(cfg, "_checkpoint_quantization", name)
    if stated:
        return stated
    qc = _optional_mapping(cfg, "quantization_config", name)
    if qc is None:
        return None
    method = _optional_str(qc, "quant_method", name, "quantization_config.quant_method")
    if not (method or "").strip():
        if _bnb_flag(qc, "load_in_4bit", name) or _bnb_flag(qc, "load_in_8bit", name):
            return "bitsandbytes"
        raise CapacityError(
            f"{name}'s quantization_config states no quantization_config.quant_method, so the format "
            "of the checkpoint's weights is unknown (vLLM reads the method from it); state quant_method (fp8, awq, "
            "gptq, bitsandbytes …) or remove quantization_config"
        )
    if method:
        method = method.strip().lower()
        algo = _optional_str(qc, "quant_algo", name, "quantization_config.quant_algo") or ""
        if method == "modelopt" and algo.upper() == "MIXED_PRECISION":
            return "modelopt_mixed"  # vLLM's name (ModelOptMixedPrecisionConfig.get_name, 0.24.0)
        if method == "modelopt" and "fp4" in algo.lower():
            return "nvfp4"
        if method == "compressed-tensors" and per_layer_width(qc):
            return method
        read_as = _LOADERS_READ_AS.get(method, method)
        if read_as not in QUANTIZATION_METHODS:
            known = sorted({*QUANTIZATION_METHODS, *_LOADERS_READ_AS})
            raise CapacityError(
                f"{name}: quantization_config.quant_method {method!r} is not a method the capacity pass sizes; "
                f"known: {', '.join(known)}"
            )
        return read_as
    return None


_LOADERS_READ_AS: Final = {"compressed-tensors": "fp8", "modelopt": "fp8"}
"""``quant_method``s whose single-format checkpoints are sized as another method (the mixed ones, read per layer, are
:data:`~advisor.capacity.precision.CHECKPOINT_ONLY_METHODS`): compressed-tensors FP8 and ModelOpt FP8."""


def _model_dtype(top: Mapping[str, Any], text: Mapping[str, Any] | None, where: str) -> str:
    """The checkpoint's dtype: the first stated of ``torch_dtype`` (top level, then ``text_config``) and ``dtype``
    (transformers 5's name; ``text_config``'s, then the top level's), ``bfloat16`` when none is (types checked by the
    caller).

    Raises:
        CapacityError: a dtype vLLM does not load (not one of :data:`~advisor.capacity.precision.DTYPE_BYTES`,
            :func:`~advisor.capacity.precision.model_dtype_name`), naming the file and the key."""
    inner: Mapping[str, Any] = text or {}
    scopes: list[tuple[Mapping[str, Any], str, str]] = [
        (top, "torch_dtype", ""),
        (inner, "torch_dtype", "text_config."),
        (inner, "dtype", "text_config."),
        (top, "dtype", ""),
    ]
    for scope, key, prefix in scopes:
        value = scope.get(key)
        if isinstance(value, str) and value:
            if model_dtype_name(value) is None:
                raise CapacityError(
                    f"{where}: {prefix}{key} {value!r} is not a dtype vLLM loads; known: "
                    f"{', '.join(sorted(DTYPE_BYTES))}"
                )
            return value
    return "bfloat16"


def _quant_method_as_written(cfg: Mapping[str, Any]) -> str | None:
    """``quantization_config.quant_method`` stripped and lower-cased (validated by :func:`_checkpoint_quantization`,
    which runs first), or None without one."""
    qc = cfg.get("quantization_config")
    method = qc.get("quant_method") if isinstance(qc, Mapping) else None
    if not isinstance(method, str):
        return None
    return method.strip().lower() or None


def _checkpoint_group_size(cfg: Mapping[str, Any], name: str, method: str | None) -> int | None:
    """The group size of a GPTQ/AWQ checkpoint (validated by :func:`_checkpoint_weight_bits`); None otherwise."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping) or method not in INT_WEIGHT_METHODS:
        return None
    _, group = _first_stated(qc, ("q_group_size", "group_size") if method.startswith("awq") else ("group_size",))
    return int(group)


def _bnb_weight_bits(cfg: Mapping[str, Any], qc: Mapping[str, Any], name: str) -> float:
    """Bits per quantized parameter of a bitsandbytes checkpoint: 8-bit (``load_in_8bit`` true) ``8 × (1 + 4 /
    hidden)`` (int8 weights and an fp32 scale per output row, the input width taken as the hidden size), else 4-bit
    4.5 (``BitsAndBytesConfig.from_config`` in vLLM's ``bitsandbytes.py``: ``load_in_4bit`` defaults to true).

    Raises:
        CapacityError: ``load_in_4bit`` or ``load_in_8bit`` is not a boolean, or both are true (transformers'
            ``BitsAndBytesConfig`` refuses that: "load_in_4bit and load_in_8bit are both True")."""
    four, eight = _bnb_flag(qc, "load_in_4bit", name), _bnb_flag(qc, "load_in_8bit", name)
    if four and eight:
        raise CapacityError(
            f"{name}'s quantization_config.load_in_4bit and quantization_config.load_in_8bit are both "
            "true; a bitsandbytes checkpoint is stored in one width (transformers' BitsAndBytesConfig refuses both)"
        )
    if eight:
        return 8 * bnb_8bit_bytes(_positive_int(cfg, "hidden_size", name))
    return 8 * BNB_4BIT_BYTES


def _bnb_flag(qc: Mapping[str, Any], key: str, name: str) -> bool:
    """``quantization_config[key]`` (a bitsandbytes width flag) as a boolean; absent or null: false."""
    return _optional_bool(qc, key, name, f"quantization_config.{key}")


def _bnb_double_quant(cfg: Mapping[str, Any], name: str, method: str | None) -> bool:
    """:attr:`ModelArch.bnb_double_quant`: ``quantization_config.bnb_4bit_use_double_quant`` of a bitsandbytes
    checkpoint (absent or null: false, transformers' ``BitsAndBytesConfig`` default); false for other methods."""
    qc = cfg.get("quantization_config")
    if method != "bitsandbytes" or not isinstance(qc, Mapping) or qc.get("bnb_4bit_use_double_quant") is None:
        return False
    return _optional_bool(qc, "bnb_4bit_use_double_quant", name)


def _bnb_skip_modules(cfg: Mapping[str, Any], name: str, method: str | None) -> tuple[str, ...]:
    """:attr:`ModelArch.bnb_skip_modules`: ``quantization_config.llm_int8_skip_modules`` of a bitsandbytes
    checkpoint, a list of module names (null: none, as vLLM's ``BitsAndBytesConfig`` takes ``or []``).

    Raises:
        CapacityError: the key is neither null nor a list of strings."""
    qc = cfg.get("quantization_config")
    if method != "bitsandbytes" or not isinstance(qc, Mapping) or qc.get("llm_int8_skip_modules") is None:
        return ()
    names = qc["llm_int8_skip_modules"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _bad_value(name, "quantization_config.llm_int8_skip_modules", "a list of module names", names)
    return tuple(names)


def _checkpoint_weight_bits(cfg: Mapping[str, Any], name: str, method: str | None) -> float | None:
    """:attr:`ModelArch.checkpoint_weight_bits` from ``quantization_config``, when ``method`` (the checkpoint's
    method, :func:`_checkpoint_quantization`) is one of :data:`INT_WEIGHT_METHODS`; None for other methods or when
    no width is stated (a null key counts as absent).

    The keys are read in vLLM's order (the first one present and not null): GPTQ ``bits`` and ``group_size``
    (``gptq.py`` ``GPTQConfig.from_config``); AWQ ``w_bit`` then ``bits``, ``q_group_size`` then ``group_size``
    (``awq.py`` ``AWQConfig.from_config``). Both are required: vLLM reads them with ``get_from_keys``, which raises
    when none of the keys is there (and a null width fails its width check). A bitsandbytes checkpoint: see
    :func:`_bnb_weight_bits`.

    Raises:
        CapacityError: a width or group size not stated, a width outside :data:`INT_WEIGHT_BITS` (AWQ: not 4) or a
            group size that is neither -1 nor a positive integer; the message names the key."""
    qc = cfg.get("quantization_config")
    if isinstance(qc, Mapping) and method == "bitsandbytes":
        return _bnb_weight_bits(cfg, qc, name)
    if not isinstance(qc, Mapping) or method not in INT_WEIGHT_METHODS:
        return None
    awq = method.startswith("awq")
    bits_key, bits = _first_stated(qc, ("w_bit", "bits") if awq else ("bits",))
    group_key, group = _first_stated(qc, ("q_group_size", "group_size") if awq else ("group_size",))
    for key, value in ((bits_key, bits), (group_key, group)):
        if value is None:
            raise CapacityError(
                f"{name}'s quantization_config has no {key!r}; vLLM's {method} loader requires it "
                "(QuantizationConfig.get_from_keys raises without it)"
            )
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in INT_WEIGHT_BITS:
        raise _bad_value(name, f"quantization_config.{bits_key}", "2, 3, 4 or 8", bits)
    if awq and bits != 4:
        raise _bad_value(
            name, f"quantization_config.{bits_key}", "4 for AWQ (vLLM's awq.py loads 4-bit weights only)", bits
        )
    if isinstance(group, bool) or not isinstance(group, int) or not (group == -1 or 1 <= group <= _MAX_CONFIG_INT):
        raise _bad_value(name, f"quantization_config.{group_key}", "-1 or a positive integer", group)
    return int_weight_bits(bits, group)


def _first_stated(qc: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, Any]:
    """The first of ``keys`` that ``qc`` holds with a value other than null, and that value; ``(keys[0], None)``
    when none is."""
    for key in keys:
        if qc.get(key) is not None:
            return key, qc[key]
    return keys[0], None


def _experts(cfg: Mapping[str, Any], name: str) -> tuple[int, int]:
    """(routed experts, experts per token): the first stated of Mixtral's, Qwen's and DeepSeek's expert keys."""
    stated = [
        _optional_positive_int(cfg, key, name, 0) for key in ("num_local_experts", "num_experts", "n_routed_experts")
    ]
    experts = next((count for count in stated if count), 0)
    # top-k of a mixture of experts is 1..experts; a dense model keeps what the config states (unused)
    low, high = (1, experts) if experts else (0, None)
    top_k = [_int_in(cfg, key, name, low, high, default=0) for key in ("num_experts_per_tok", "experts_per_token")]
    per_token = next((k for k in top_k if k), 0)
    if experts and not per_token:
        raise CapacityError(f"{name} has no 'num_experts_per_tok' (needed for a mixture-of-experts model)")
    return experts, per_token


def _moe_layers(cfg: Mapping[str, Any], layers: int, name: str) -> int:
    """Layers whose MLP is the MoE, from DeepSeek's, Jamba's or Qwen's layer-pattern keys (all validated, the first
    stated of these three used)."""
    first_dense = _int_in(cfg, "first_k_dense_replace", name, 0, layers, default=-1)
    period, offset = _layer_period(cfg, "expert_layer_period", "expert_layer_offset", layers, name)
    mlp_only = set(_int_list(cfg, "mlp_only_layers", name, 0, layers - 1))
    step = _int_in(cfg, "decoder_sparse_step", name, 1, layers, default=1)
    if first_dense >= 0:
        return layers - first_dense
    if period:
        return (layers - 1 - offset) // period + 1  # layers i with i % period == offset
    return layers // step - sum(1 for i in mlp_only if (i + 1) % step == 0)  # every step-th layer, less mlp-only


def _layer_period(cfg: Mapping[str, Any], period_key: str, offset_key: str, layers: int, name: str) -> tuple[int, int]:
    """(period, offset) of a Jamba-style layer pattern: period ≥ 1 (0 when absent), 0 ≤ offset < period and
    < layers (default 0)."""
    period = _optional_positive_int(cfg, period_key, name, 0)
    return period, _int_in(cfg, offset_key, name, 0, min(period or layers, layers) - 1, default=0)


def _sliding_window(cfg: Mapping[str, Any], name: str) -> int:
    if cfg.get("use_sliding_window") is not None and not _optional_bool(cfg, "use_sliding_window", name):
        return 0
    return _int_in(cfg, "sliding_window", name, 0, default=0)  # 0 = no window


NO_ROTARY_TYPES: Final = frozenset({"gpt2", "gpt_bigcode", "opt", "bloom", "jamba", "nemotron_h"})
"""``model_type``s whose attention has no rotary position embedding (learned absolute positions: GPT-2, GPTBigCode,
OPT; ALiBi: BLOOM; none: Jamba's and Nemotron-H's attention layers), so their head size need not be even."""

NO_ROTARY_POSITIONS: Final = frozenset({"nope", "alibi", "absolute", "learned", "none"})
"""``position_embedding_type`` values that are no rotary embedding (Granite-4.0-H ``nope``)."""


def _rotary(cfg: Mapping[str, Any]) -> bool:
    """Whether attention rotates q and k (RoPE): all but :data:`NO_ROTARY_TYPES`, Falcon with ``alibi`` true and a
    ``position_embedding_type`` of :data:`NO_ROTARY_POSITIONS`."""
    if str(cfg.get("model_type") or "") in NO_ROTARY_TYPES or cfg.get("alibi") is True:
        return False
    position = cfg.get("position_embedding_type")
    return not (isinstance(position, str) and position.strip().lower() in NO_ROTARY_POSITIONS)


def _head_dim(cfg: Mapping[str, Any], hidden: int, heads: int, name: str) -> int:
    """Elements per attention head: ``head_dim`` when stated, else ``hidden_size ÷ num_attention_heads``.

    Without ``head_dim`` the hidden size must be a multiple of the heads (transformers' attention splits it in
    ``heads`` equal parts; 4,100 over 32 was truncated to 128 and the remainder dropped). Where rotary embeddings
    apply (:func:`_rotary`) the head size must be even: RoPE turns pairs of elements (``rotate_half``), which real
    models' 64, 80, 96, 112, 120, 128, 192 and 256 all are. MLA models (``kv_lora_rank``) are not checked: their
    heads are sized by ``qk_nope_head_dim``, ``qk_rope_head_dim`` and ``v_head_dim``.

    Raises:
        CapacityError: ``head_dim`` not a positive integer; the hidden size no multiple of the heads without
            ``head_dim``; an odd head size with rotary embeddings. The message names the key.
    """
    stated = _optional_positive_int(cfg, "head_dim", name, 0)
    if _optional_positive_int(cfg, "kv_lora_rank", name, 0):
        return stated or hidden // heads
    if not stated and hidden % heads:
        wanted = f"a multiple of num_attention_heads ({heads}) when head_dim is not stated"
        raise _bad_value(name, "hidden_size", wanted, hidden)
    head_dim = stated or hidden // heads
    if head_dim % 2 and _rotary(cfg):
        wanted = "an even number (rotary position embeddings turn pairs of elements)"
        if stated:
            raise _bad_value(name, "head_dim", wanted, head_dim)
        raise CapacityError(
            f"{name} states no head_dim, and hidden_size ÷ num_attention_heads ({hidden} ÷ {heads} = "
            f"{head_dim}) is odd; the head size must be {wanted}"
        )
    return head_dim


def _rope_scaling(cfg: Mapping[str, Any], name: str) -> None:
    """Check ``rope_scaling`` (and transformers 5's ``rope_parameters``, per layer kind or not): an object, whose
    ``factor``, when stated, is a finite number > 0 (vLLM's rotary embeddings divide or multiply positions by it).

    Raises:
        CapacityError: not an object, or a ``factor`` that is no finite number > 0; the message names the key
            (``rope_scaling.factor``).
    """
    for key in ("rope_scaling", "rope_parameters"):
        scaling = _optional_mapping(cfg, key, name)
        if scaling is None:
            continue
        scopes = [(key, scaling)] + [
            (f"{key}.{kind}", sub) for kind, sub in scaling.items() if isinstance(sub, Mapping)
        ]
        for where, scope in scopes:
            factor = scope.get("factor")
            if factor is None:
                continue
            if (
                isinstance(factor, bool)
                or not isinstance(factor, int | float)
                or not math.isfinite(factor)
                or factor <= 0
            ):
                raise _bad_value(name, f"{where}.factor", "a number > 0", factor)


ROTARY_CACHE_LOCAL_AND_GLOBAL: Final = frozenset({"gemma3", "gemma3_text"})
"""Model types whose windowed and full-attention layers build two rotary embeddings: vLLM ``gemma3.py``
``Gemma3Attention`` gives a sliding layer ``rope_local_base_freq`` and ``{"rope_type": "default"}``, a global one
``rope_theta`` and the config's ``rope_scaling``, and ``get_rope`` caches one cos/sin table per distinct setting."""


def _rope_table_positions(scope: Mapping[str, Any] | None, max_position: int) -> int:
    """Positions one rotary embedding's cos/sin table holds in vLLM for a ``rope_scaling`` object ``scope`` (None:
    none), ``max_position`` the model's ``max_position_embeddings`` (what the model code passes ``get_rope``):

    * ``linear`` and ``dynamic`` (with ``factor``): ``max_position × factor`` (``linear_scaling_rope.py``
      ``LinearScalingRotaryEmbedding._compute_cos_sin_cache``: "the maximum length after applying the rope scaling
      is self.max_position_embeddings * self.scaling_factor"; ``dynamic_ntk_scaling_rope.py`` alike);
    * ``yarn``, ``deepseek_yarn``: ``⌈original_max_position_embeddings × factor⌉`` (``get_rope`` passes the original
      length, ``YaRNScalingRotaryEmbedding`` / ``DeepseekScalingRotaryEmbedding`` extend it by the factor);
    * ``longrope``: the short table over ``original_max_position_embeddings`` and the long one over
      ``max_position`` (``Phi3LongRoPEScaledRotaryEmbedding``);
    * anything else (``default``, ``llama3``, multimodal ``mrope``): ``max_position``.

    The type is ``rope_type`` or the older ``type`` (vLLM's ``patch_rope_scaling`` renames it)."""
    if not scope:
        return max_position
    kind = str(scope.get("rope_type") or scope.get("type") or "default").lower()
    stated_factor = scope.get("factor")
    stated_original = scope.get("original_max_position_embeddings")
    factor = (
        float(stated_factor)
        if isinstance(stated_factor, int | float) and not isinstance(stated_factor, bool) and stated_factor > 0
        else None
    )
    original = (
        stated_original
        if isinstance(stated_original, int) and not isinstance(stated_original, bool) and stated_original > 0
        else None
    )
    if kind in ("linear", "dynamic") and factor is not None and "alpha" not in scope:
        return math.ceil(max_position * factor)
    if kind in ("yarn", "deepseek_yarn") and factor is not None and original is not None:
        return math.ceil(original * factor)
    if kind == "longrope" and original is not None:
        return original + max_position
    return max_position


ROPE_TYPES_NOT_EXTENDING: Final = frozenset({"su", "longrope", "llama3"})
"""Rope scalings whose ``max_position_embeddings`` already is the extended context: vLLM's
``_get_and_verify_max_len`` (``vllm/config.py``, later ``vllm/config/model.py``) multiplies by ``factor`` for every
other type (``linear``, ``dynamic``, ``yarn`` — from ``original_max_position_embeddings`` —; ``default`` and
``mrope`` have no factor, 1.0)."""


def derived_max_model_len(cfg: Mapping[str, Any], model_type: str) -> int:
    """:attr:`ModelArch.derived_max_model_len`: the context vLLM derives when ``rope_scaling`` extends the model's
    positions (``_get_and_verify_max_len``): ``yarn`` → ``original_max_position_embeddings × factor``, ``linear`` /
    ``dynamic`` → ``max_position_embeddings × factor``; 0 where nothing extends it — no rope scaling, a type of
    :data:`ROPE_TYPES_NOT_EXTENDING`, no factor, or Gemma 3 (vLLM skips the scaling for ``gemma3`` model types, whose
    ``max_position_embeddings`` is the scaled context already).

    Example: Qwen2.5-7B's documented 128K set-up, ``max_position_embeddings`` 32,768 and ``rope_scaling {"type":
    "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`` → 131,072 (vLLM serves ``--max-model-len
    131072`` without the long-context override)."""
    scope = cfg.get("rope_scaling")
    if not isinstance(scope, Mapping) or "gemma3" in model_type:
        return 0
    kind = str(scope.get("rope_type") or scope.get("type") or "default").lower()
    factor = scope.get("factor")
    if kind in ROPE_TYPES_NOT_EXTENDING or isinstance(factor, bool) or not isinstance(factor, int | float):
        return 0
    base = cfg.get("max_position_embeddings")
    if kind == "yarn":
        base = scope.get("original_max_position_embeddings", base)
    if isinstance(base, bool) or not isinstance(base, int) or base <= 0 or not factor > 0:
        return 0
    derived = int(base * factor)
    return 0 if derived == cfg.get("max_position_embeddings") else derived


def rotary_cache_positions(cfg: Mapping[str, Any], model_type: str) -> int:
    """:attr:`ModelArch.rotary_cache_positions`: the positions of every rotary cos/sin table vLLM builds for the
    model, summed (each is ``positions × rotary_dim`` elements of the compute dtype, a buffer of every rank that
    "Model loading took" counts). One table unless the model type keeps two (:data:`ROTARY_CACHE_LOCAL_AND_GLOBAL`:
    the unscaled local one beside the scaled global one); its length by :func:`_rope_table_positions`. 0 when it is
    the default single table of ``max_position_embeddings`` (or the config has none), and for layouts priced
    elsewhere (transformers 5's per-layer-kind ``rope_parameters``: Gemma 4's second table is its
    ``global_head_dim``'s).

    Example: Gemma-3-12B (``max_position_embeddings`` 131,072, ``rope_scaling`` linear × 8): 131,072 local +
    1,048,576 global = 1,179,648 positions, × 256 head dims × 2 B = 576 MiB, where one unscaled table is 64 MiB
    (llm-d-planner's vLLM 0.19.0 log loads 23.31 GiB, 0.52 GiB above the parameters at 2 bytes)."""
    max_position = cfg.get("max_position_embeddings")
    if not isinstance(max_position, int) or isinstance(max_position, bool) or max_position <= 0:
        return 0
    scope = cfg.get("rope_scaling")
    if not isinstance(scope, Mapping):
        params = cfg.get("rope_parameters")
        if isinstance(params, Mapping) and any(isinstance(v, Mapping) for v in params.values()):
            return 0  # per layer kind (transformers 5): priced by the layer kinds' own fields
        scope = params if isinstance(params, Mapping) else None
    positions = _rope_table_positions(scope, max_position)
    if model_type in ROTARY_CACHE_LOCAL_AND_GLOBAL:
        positions += max_position
    return 0 if positions == max_position else positions


def _sliding_layers(cfg: Mapping[str, Any], attention_layers: int, pattern: int) -> int:
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t == "sliding_attention")
    model_type = str(cfg.get("model_type") or "")
    if model_type == "gemma2":
        return attention_layers // 2  # even layers local (vLLM gemma2.py: layer_idx % 2 == 0)
    if model_type.startswith("gemma3") or pattern:
        every = pattern or 6
        return attention_layers - attention_layers // every  # layers i with (i + 1) % every != 0
    return attention_layers


def _recurrent_layers(cfg: Mapping[str, Any], layers: int, hidden: int, name: str) -> tuple[int, int, int, int, int]:
    """(recurrent layers, state elements per sequence per such layer, mixer parameters, attention layers, the
    conv-state part of those state elements)."""
    count = 0
    period, offset = _layer_period(cfg, "attn_layer_period", "attn_layer_offset", layers, name)
    expand = _optional_positive_int(cfg, "mamba_expand", name, 2)
    d_state = _optional_positive_int(cfg, "mamba_d_state", name, 16)
    d_conv = _optional_positive_int(cfg, "mamba_d_conv", name, 4)
    auto_rank = -(-hidden // 16)  # transformers' "auto": ceil(hidden / 16)
    stated_rank = "auto" if cfg.get("mamba_dt_rank") == "auto" else _int_in(cfg, "mamba_dt_rank", name, 1, default=0)
    if cfg.get("_mamba2"):
        return _mamba2_layers(cfg, layers, hidden)
    if period:  # Jamba
        count = layers - ((layers - 1 - offset) // period + 1)  # all but layers i with i % period == offset
    elif isinstance(cfg.get("layer_types"), list):
        count = sum(1 for t in cfg["layer_types"] if t in ("mamba", "linear_attention"))
        if "linear_attention" in cfg["layer_types"]:
            return _gated_delta_net_layers(cfg, count, layers, hidden, name)
    elif isinstance(cfg.get("layers_block_type"), list):
        count = sum(1 for t in cfg["layers_block_type"] if t == "mamba")
    if not count:
        return 0, 0, 0, layers, 0
    d_inner = expand * hidden
    dt_rank = stated_rank if isinstance(stated_rank, int) and stated_rank else auto_rank
    # Mamba-1 mixer (Jamba): in_proj h×2d, conv d×conv + d, x_proj d×(dt+2n), dt_proj dt×d + d, A d×n, D d,
    # out_proj d×h, and Jamba's dt/B/C RMSNorms.
    params = (
        hidden * 2 * d_inner
        + d_inner * d_conv
        + d_inner
        + d_inner * (dt_rank + 2 * d_state)
        + dt_rank * d_inner
        + d_inner
        + d_inner * d_state
        + d_inner
        + d_inner * hidden
        + dt_rank
        + 2 * d_state
    )
    # MambaStateShapeCalculator.mamba1_state_shape: conv (d_inner, d_conv - 1), temporal (d_inner, d_state)
    state = (d_conv - 1) * d_inner + d_inner * d_state
    return count, state, params, layers - count, (d_conv - 1) * d_inner


def _mamba2_layers(cfg: Mapping[str, Any], layers: int, hidden: int) -> tuple[int, int, int, int, int]:
    """(Mamba-2 layers, state elements per sequence per layer, mixer parameters, attention layers, conv part) of a
    :data:`MAMBA2_HYBRID_TYPES` model (its ``_mamba2`` shapes from :func:`_mamba2_reads`; its Mamba layers are the
    ``mamba`` entries of ``layer_types`` or ``layers_block_type``).

    State (vLLM ``mamba_utils.py`` ``MambaStateShapeCalculator.mamba2_state_shape``, 0.19.0): conv ``(kernel − 1) ×
    conv_dim``, ``conv_dim = intermediate + 2 × groups × state``, and the SSM state ``heads × head_dim × state``
    (over TP: :func:`advisor.capacity.kvlayout.recurrent_state_page_bytes`, which also pads the groups). Mixer
    (``mamba_mixer2.py`` ``MambaMixer2``): ``in_proj`` hidden × (intermediate + conv_dim + heads) (+ bias),
    ``conv1d`` conv_dim × kernel (+ conv_dim bias), ``A``, ``D``, ``dt_bias`` heads each, the gated norm
    intermediate, ``out_proj`` intermediate × hidden. Granite-4.0-H-1B (hidden 1536, 48 heads × 64, 1 group, state
    128, kernel 4): conv 3 × 3,328 + SSM 48 × 64 × 128 = 403,200 elements, 806,400 B in bf16."""
    heads, head_dim, groups, state_size, kernel, intermediate, proj_bias, conv_bias = cfg["_mamba2"]
    types = cfg.get("layer_types") if isinstance(cfg.get("layer_types"), list) else cfg.get("layers_block_type")
    count = sum(1 for t in types if t == "mamba") if isinstance(types, list) else 0
    conv_dim = intermediate + 2 * groups * state_size
    state = (kernel - 1) * conv_dim + heads * head_dim * state_size
    projected = intermediate + conv_dim + heads
    params = hidden * projected + (projected if proj_bias else 0) + conv_dim * kernel + (conv_dim if conv_bias else 0)
    params += 3 * heads + intermediate + intermediate * hidden
    return count, state, params, layers - count, (kernel - 1) * conv_dim


def _gated_delta_net_layers(
    cfg: Mapping[str, Any], count: int, layers: int, hidden: int, name: str
) -> tuple[int, int, int, int, int]:
    """(linear layers, state elements per sequence per layer, mixer parameters, attention layers, conv part) of Gated
    DeltaNet ``linear_attention`` layers; other ``linear_attention`` kinds are refused (naming ``layer_types``).

    State (vLLM ``mamba_utils.py`` ``MambaStateShapeCalculator.gated_delta_net_state_shape``): conv
    ``(kernel − 1) × conv_dim``, ``conv_dim = 2 × k_heads × k_dim + v_heads × v_dim``, and the temporal state
    ``v_heads × k_dim × v_dim``. Qwen3-Next-80B (16 k heads, 32 v heads, dims 128, kernel 4): 3 × 8,192 + 32 × 128 ×
    128 = 548,864. Mixer (``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz`` hidden × (2 × key_dim + 2 × value_dim),
    ``in_proj_ba`` hidden × 2 × v_heads, ``conv1d`` conv_dim × kernel, ``dt_bias`` and ``A_log`` v_heads each, the
    gated RMSNorm v_dim, ``out_proj`` value_dim × hidden (no biases). Defaults: ``Qwen3NextConfig``."""
    if cfg.get("model_type") not in GATED_DELTA_NET_TYPES and cfg.get("linear_num_value_heads") is None:
        raise _bad_value(
            name,
            "layer_types",
            "attention or Gated DeltaNet layers (linear_attention of another kind is not sized)",
            "linear_attention",
        )
    k_heads, v_heads, k_dim, v_dim, kernel = _gated_delta_net_dims(cfg, name)
    key, value = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key + value
    state = (kernel - 1) * conv_dim + v_heads * k_dim * v_dim
    params = hidden * (2 * key + 2 * value) + hidden * 2 * v_heads + conv_dim * kernel + 2 * v_heads + v_dim
    params += value * hidden
    return count, state, params, layers - count, (kernel - 1) * conv_dim


def _gated_delta_net_dims(cfg: Mapping[str, Any], name: str) -> tuple[int, int, int, int, int]:
    """(key heads, value heads, key head dim, value head dim, conv kernel) of a Gated DeltaNet layer, with
    ``Qwen3NextConfig``'s defaults (16, 32, 128, 128, 4)."""
    return (
        _optional_positive_int(cfg, "linear_num_key_heads", name, 16),
        _optional_positive_int(cfg, "linear_num_value_heads", name, 32),
        _optional_positive_int(cfg, "linear_key_head_dim", name, 128),
        _optional_positive_int(cfg, "linear_value_head_dim", name, 128),
        _optional_positive_int(cfg, "linear_conv_kernel_dim", name, 4),
    )


def _mixed_groups(cfg: Mapping[str, Any], arch: ModelArch, name: str) -> tuple[WeightGroup, ...]:
    """:attr:`ModelArch.checkpoint_weight_groups` of a checkpoint whose width is read per layer
    (:func:`~advisor.capacity.mixedprecision.per_layer_width`),
    each layer group's parameters per layer taken from the shapes: attention (:meth:`ModelArch.
    attention_parameters_per_layer`), the Gated-DeltaNet ``in_proj_qkvz`` (``hidden × (2 × key + 2 × value)``) +
    ``out_proj`` (``value × hidden``) and ``in_proj_ba`` (``hidden × 2 × v_heads``), all routed experts, the shared
    experts, the router, the dense MLP and an untied LM head (``vocab × hidden``); () otherwise."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping) or not per_layer_width(qc):
        return ()
    h = arch.hidden_size
    recurrent = gates = 0
    if arch.linear_layers and "linear_attention" in (cfg.get("layer_types") or []):
        k_heads, v_heads, k_dim, v_dim, _ = _gated_delta_net_dims(cfg, name)
        recurrent = h * (2 * k_heads * k_dim + 2 * v_heads * v_dim) + v_heads * v_dim * h
        gates = h * 2 * v_heads
    moe = arch.moe_layers if arch.is_moe else 0
    shapes = LayerShapes(
        groups={
            "attention": (arch.attention_parameters_per_layer(), arch.attention_layers),
            "recurrent": (recurrent, arch.linear_layers),
            "recurrent_gates": (gates, arch.linear_layers),
            "experts": (arch.num_experts * arch.expert_parameters(), moe),
            "shared_experts": (arch.num_shared_experts * arch.expert_parameters(), moe),
            "router": (arch.router_parameters(), moe),
            "dense_mlp": (arch.dense_mlp_parameters(), arch.num_layers - moe),
            "lm_head": (0 if arch.tie_word_embeddings else arch.vocab_size * h, 1),
        },
        moe_prefix="block_sparse_moe" if arch.model_type in ("mixtral", "minimax_m2") else "mlp",
    )
    return mixed_weight_groups(qc, shapes, name)


# --- config.json value checks: each names the file and the key, and treats a missing or null key as absent. ``name``
# is the file as the messages name it: its path, or "<model>: config.json" (ModelArch.from_hf_config's ``where``) ---
_MAX_CONFIG_INT = 2**53  # JSON's exact-integer limit; larger shapes would overflow the float arithmetic downstream


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad_value(name: str, key: str, wanted: str, value: object) -> CapacityError:
    return CapacityError(f"{name} key {key!r} must be {wanted}, got {_show(value)}")


def _int_wanted(low: int, high: int | None) -> str:
    if high is not None:
        return f"an integer in {low}..{high}"
    return {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer ≥ {low}")


def _int_in(
    cfg: Mapping[str, Any], key: str, name: str, low: int, high: int | None = None, *, default: int | None = None
) -> int:
    """``cfg[key]`` as an int in ``low..high`` (``high`` None: up to :data:`_MAX_CONFIG_INT`); ``default`` when the
    key is missing or null (required when ``default`` is None). Rejects bools, floats (even ``4096.0``) and strings."""
    value = cfg.get(key)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise _bad_value(name, key, _int_wanted(low, high), value)
    if value > _MAX_CONFIG_INT:
        raise _bad_value(name, key, f"{_int_wanted(low, high)} no larger than 2**53", value)
    return value


def _positive_int(cfg: Mapping[str, Any], key: str, name: str) -> int:
    return _int_in(cfg, key, name, 1)


def _optional_positive_int(cfg: Mapping[str, Any], key: str, name: str, default: int) -> int:
    return _int_in(cfg, key, name, 1, default=default)


def _int_list(cfg: Mapping[str, Any], key: str, name: str, low: int, high: int) -> list[int]:
    """A list of ints in ``low..high`` (layer indices); empty when the key is missing or null."""
    value = cfg.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise _bad_value(name, key, "a list of integers", value)
    for v in value:
        if not low <= v <= high:
            raise _bad_value(name, key, f"a list of integers in {low}..{high}", value)
    return value


def _str_list(cfg: Mapping[str, Any], key: str, name: str, length: int | None) -> list[str] | None:
    """A list of strings (of ``length`` entries, one per layer, unless empty or ``length`` is None); None when the
    key is missing or null."""
    value = cfg.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad_value(name, key, "a list of strings", value)
    if length is not None and value and len(value) != length:
        raise _bad_value(name, key, f"a list of {length} entries (one per layer, num_hidden_layers)", value)
    return value


def _optional_str(cfg: Mapping[str, Any], key: str, name: str, label: str | None = None) -> str | None:
    value = cfg.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad_value(name, label or key, "a string", value)
    return value


def _optional_bool(cfg: Mapping[str, Any], key: str, name: str, label: str | None = None) -> bool:
    value = cfg.get(key)
    if value is not None and not isinstance(value, bool):
        raise _bad_value(name, label or key, "true or false", value)
    return bool(value)


def _optional_mapping(cfg: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any] | None:
    value = cfg.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise _bad_value(name, key, "a JSON object", value)
    return value


def _norm_alias(text: str) -> str:
    return text.strip().lower().replace("_", "-")


@cache
def _presets() -> tuple[dict[str, ModelArch], dict[str, str]]:
    raw = json.loads(read_data("models.json"))
    by_id: dict[str, ModelArch] = {}
    aliases: dict[str, str] = {}
    for entry in raw["models"]:
        cfg = dict(entry["config"])
        cfg["_source"] = entry["source"]
        cfg["attention_bias"] = entry.get("attention_bias", False)
        cfg["_norms_per_layer"] = entry.get("norms_per_layer", 2)
        if entry.get("num_parameters"):
            cfg["num_parameters"] = entry["num_parameters"]
        if entry.get("checkpoint_quantization"):
            cfg["_checkpoint_quantization"] = entry["checkpoint_quantization"]
        vision = entry.get("vision")
        if vision and vision.get("parameters"):
            cfg["_vision_parameters"] = int(vision["parameters"])
            if vision.get("tower_width"):
                cfg["_vision_width"] = int(vision["tower_width"])
        elif vision:
            cfg["_vision_parameters"] = vit_parameters(
                vision["config"], vision.get("layers_loaded"), int(vision.get("projector_out", 0))
            ) + int(vision.get("extra_parameters", 0))
        arch = ModelArch.from_hf_config(cfg, entry["id"])
        by_id[entry["id"]] = arch
        for alias in [entry["id"], *entry.get("aliases", [])]:
            aliases[_norm_alias(alias)] = entry["id"]
    return by_id, aliases


@cache
def _preset_kv_logs() -> dict[str, tuple[str, ...]]:
    raw = json.loads(read_data("models.json"))
    return {entry["id"]: tuple(entry.get("kv_logs", ())) for entry in raw["models"]}


def preset_kv_logs(model_id: str) -> tuple[str, ...] | None:
    """The published engine start-up logs (URLs) whose KV cache size the capacity pass of preset ``model_id`` (a
    preset id exactly as :attr:`ModelArch.name` gives it) is checked against (``kv_logs`` in
    ``advisor/data/models.json``; the cases in tests/capacity/truth, measured in docs/truth-table.md): ``()``
    when none is, so the figures follow the architecture's rules unchecked; None when ``model_id`` is not a
    preset (a config.json the operator gives)."""
    return _preset_kv_logs().get(model_id)


def preset_ids() -> list[str]:
    """The ids of every bundled preset (Hugging Face repo ids), sorted."""
    return sorted(_presets()[0])


def _name_tokens(text: str) -> list[str]:
    """A model name's words, lower case: split at ``/ - _`` and spaces, and where letters meet a version
    (``Qwen2.5`` → ``qwen``, ``2.5``); a size stays whole (``70B`` → ``70b``, ``8x7B`` → ``8x7b``)."""
    out: list[str] = []
    for word in re.split(r"[/\s_-]+", text.lower()):
        out += [t for t in re.split(r"(?<=[a-z])(?=\d)", word) if t]
    return out


def _version(tokens: list[str]) -> tuple[int, ...]:
    """The first version-like word (``3.3`` → ``(3, 3)``), ``()`` when none."""
    for t in tokens:
        if re.fullmatch(r"\d+(\.\d+)*", t):
            return tuple(int(x) for x in t.split("."))
    return ()


def suggest_presets(query: str, ids: list[str], limit: int = 4) -> list[str]:
    """The preset ids to suggest for an unknown ``query``, best first, at most ``limit``.

    The ids holding every word of the query (a version word also matches its minor versions: ``3`` matches
    ``3.1``): those whose repo name starts with the query's first word before the rest (``Llama-…`` before
    ``…-Distill-Llama-…``), newest version first. When no id holds them all, :func:`difflib.get_close_matches` on
    the whole id, else on the repo name (typos). ``llama-70b`` → ``meta-llama/Llama-3.3-70B-Instruct``,
    ``meta-llama/Llama-3.1-70B-Instruct``, ``meta-llama/Llama-2-70b-hf``.

    Args:
        query: the model name asked for.
        ids: the preset ids to choose from.
        limit: how many to return at most.
    """
    words = _name_tokens(query)

    def has(word: str, tokens: list[str]) -> bool:
        return any(t == word or (word[:1].isdigit() and t.startswith(word + ".")) for t in tokens)

    matched = []
    for mid in ids:
        name = _name_tokens(mid.split("/", 1)[-1])
        if words and all(has(w, [*_name_tokens(mid.split("/", 1)[0]), *name]) for w in words):
            newest = tuple(-v for v in (*_version(name), 0, 0, 0, 0)[:4])  # 3.3 before 3.1 before 3 before 2
            matched.append((name[:1] != words[:1], newest, mid))
    if matched:
        return [mid for *_, mid in sorted(matched)][:limit]
    out: list[str] = []
    short = {m.split("/", 1)[-1]: m for m in ids}
    close = difflib.get_close_matches(query, ids, n=3, cutoff=0.6) or [
        short[n] for n in difflib.get_close_matches(query.split("/")[-1], list(short), n=3, cutoff=0.6)
    ]
    out += [m for m in close if m not in out]
    return out[:limit]


def get_preset(model_id: str) -> ModelArch:
    """The bundled architecture for a Hugging Face id or a short alias, case-insensitive.

    ``"meta-llama/Llama-3.1-8B-Instruct"``, ``"llama-3.1-8b"`` and ``"LLAMA-3.1-8B"`` are the same preset.
    A bare repo name without the owner (``"Llama-3.1-8B-Instruct"``) also matches.

    Raises:
        UnknownModelError: no preset matches; the message lists the known ids.
    """
    by_id, aliases = _presets()
    key = _norm_alias(model_id)
    found = aliases.get(key)
    if found is None and "/" not in key:
        matches = [mid for mid in by_id if _norm_alias(mid.split("/", 1)[1]) == key]
        found = matches[0] if len(matches) == 1 else None
    if found is None:
        public = [mid for mid in preset_ids() if not mid.startswith("advisor/")]  # advisor/…: test fixtures
        close = suggest_presets(model_id, public)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise UnknownModelError(
            f"no preset for model {model_id!r}; {hint}known ids: {', '.join(public)} "
            "(or give a path to the model's config.json: --model path/to/config.json, or model: in the config)"
        )
    return by_id[found]


TEXT_MODEL_TYPE_OF_WRAPPER: Final[dict[str, str]] = {
    # configuration_llava.py / configuration_llava_next.py: ``text_config.get("model_type", "llama")``
    "llava": "llama",
    "llava_next": "llama",
    # configuration_gemma4.py: Gemma4Config builds text_config as Gemma4TextConfig (model_type "gemma4_text")
    "gemma4": "gemma4_text",
}
"""The ``model_type`` transformers gives a multimodal wrapper's ``text_config`` that does not state one."""

TEXT_CONFIG_CLASS_OF_WRAPPER: Final[dict[str, str]] = {"gemma4": "gemma4_text"}
"""Wrappers whose ``text_config`` transformers always builds as one class, whatever ``model_type`` it states
(``Gemma4Config.__post_init__``: ``Gemma4TextConfig(**self.text_config)``)."""

TRANSFORMERS_DEFAULTS: Final[dict[str, dict[str, int]]] = {
    # each transformers config class's __init__ defaults (src/transformers/models/<type>/configuration_<type>.py)
    "llama": {  # LlamaConfig
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "max_position_embeddings": 2048,
    },
    "mistral": {  # MistralConfig
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
    },
    "gpt2": {  # GPT2Config: n_embd, n_layer, n_head, n_positions (attribute_map gives the usual names)
        "vocab_size": 50257,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
    },
    "gpt_bigcode": {  # GPTBigCodeConfig: the GPT-2 keys, multi_query=True
        "vocab_size": 50257,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "max_position_embeddings": 1024,
    },
    "opt": {  # OPTConfig: hidden_size 768, ffn_dim 3072, word_embed_proj_dim None (= hidden_size)
        "vocab_size": 50272,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 2048,
    },
    "falcon": {  # FalconConfig: no max_position_embeddings in most checkpoints; 2048 by default
        "vocab_size": 65024,
        "hidden_size": 4544,
        "num_hidden_layers": 32,
        "num_attention_heads": 71,
        "max_position_embeddings": 2048,
    },
    "gemma4_text": {  # Gemma4TextConfig (transformers configuration_gemma4.py, 2026)
        "vocab_size": 262144,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 30,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
    },
    "starcoder2": {  # Starcoder2Config
        "vocab_size": 49152,
        "hidden_size": 3072,
        "intermediate_size": 12288,
        "num_hidden_layers": 30,
        "num_attention_heads": 24,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
    },
    "mixtral": {  # MixtralConfig (configuration_mixtral.py); attribute_map: num_experts → num_local_experts
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 4096 * 32,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    },
    "qwen2_moe": {  # Qwen2MoeConfig (configuration_qwen2_moe.py)
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "max_position_embeddings": 32768,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
    },
    "qwen3_moe": {  # Qwen3MoeConfig (configuration_qwen3_moe.py)
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "max_position_embeddings": 32768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
    },
}
"""Keys a config.json may leave out and the value transformers' config class then holds (what vLLM reads), from
each class's defaults (transformers ``src/transformers/models/<type>/configuration_<type>.py``, read at commit
008e574391258935f3ecc3035c882e73bbcac419 for Mixtral, Qwen2-MoE and Qwen3-MoE). The shape keys
(:data:`_TRUNCATION_KEYS`) are filled in a multimodal wrapper's ``text_config`` (a real LLaVA ``text_config`` states
only what differs from ``LlamaConfig``) and for the types whose keys have other names (GPT-2, GPTBigCode, OPT,
Falcon, Starcoder2); a top-level Llama-style config.json without its shapes is still refused, naming the key (a
truncated file). Every other key is filled wherever it is missing: a Mixtral, Qwen2-MoE or Qwen3-MoE config.json
without its expert keys is the class's mixture of experts (8 experts top-2; 60 top-4 of 1,408 with a 5,632-wide
shared expert; 128 top-8 of 768), not a dense model."""

_TRUNCATION_KEYS: Final = frozenset({*_REQUIRED_KEYS, "intermediate_size"})
"""Shape keys of :data:`TRANSFORMERS_DEFAULTS` whose absence from a top-level config.json of a type without renamed
keys is taken as a truncated file and refused, naming the key, rather than filled with the class's default."""

_SHAPES_FILLED_TYPES: Final = frozenset({"gpt2", "gpt_bigcode", "opt", "falcon", "starcoder2"})
"""Types whose config.json files leave shape keys out as a rule (their keys have other names, or their classes'
defaults are the published model's): :data:`_TRUNCATION_KEYS` are filled from :data:`TRANSFORMERS_DEFAULTS` even at
the top level."""

_RENAMED_KEYS: Final[dict[str, dict[str, str]]] = {
    # transformers' attribute_map: the usual name → the key these configs write
    "gpt2": {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
        "intermediate_size": "n_inner",
    },
    "gpt_bigcode": {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
        "intermediate_size": "n_inner",
    },
    "falcon": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head", "intermediate_size": "ffn_hidden_size"},
    "opt": {"intermediate_size": "ffn_dim"},
    "mixtral": {"num_local_experts": "num_experts"},  # MixtralConfig.attribute_map
}


def _as_transformers_reads(cfg: dict[str, Any], model_type: str, in_text_config: bool, name: str) -> dict[str, Any]:
    """``cfg`` with the keys of GPT-2, GPTBigCode, OPT and Falcon configs under the names the capacity pass reads, the
    transformers defaults of :data:`TRANSFORMERS_DEFAULTS` filled in, and the shape facts their model code implies
    (``_``-prefixed keys: learned positions, biases, LayerNorms).

    * GPT-2 / GPTBigCode (``configuration_gpt2.py``, ``configuration_gpt_bigcode.py``): ``n_embd``, ``n_layer``,
      ``n_head``, ``n_positions``; ``n_inner`` None → ``4 × n_embd``; learned positions (``wpe``,
      ``n_positions`` rows); biases on every linear layer; LayerNorms with bias. GPTBigCode's ``multi_query``
      (default true) keeps one KV head.
    * OPT (``configuration_opt.py``, vLLM ``opt.py``): ``ffn_dim``; ``word_embed_proj_dim`` (None → hidden) with
      ``project_in``/``project_out``; ``max_position_embeddings + 2`` learned positions
      (``OPTLearnedPositionalEmbedding``'s offset); ``enable_bias`` (true); LayerNorms with bias; a final LayerNorm
      only when ``do_layer_norm_before`` (true) and not ``_remove_final_layer_norm``.
    * Falcon (``configuration_falcon.py``, vLLM ``falcon.py``): ``n_layer``/``n_head`` aliases; ``ffn_hidden_size``
      None → ``4 × hidden``; KV heads ``num_kv_heads`` with ``new_decoder_architecture``, else 1 when
      ``multi_query`` (true), else all heads; ``bias`` (false) on every linear layer; one LayerNorm per layer
      with ``parallel_attn`` (true), two otherwise or with the new architecture (``num_ln_in_parallel_attn``).
    * Starcoder2 (``configuration_starcoder2.py``): ``use_bias`` (true) on every linear layer, LayerNorms.
    """
    out = dict(cfg)
    for usual, written in _RENAMED_KEYS.get(model_type, {}).items():
        if out.get(usual) is None and out.get(written) is not None:
            out[usual] = out[written]
    fill_shapes = in_text_config or model_type in _SHAPES_FILLED_TYPES
    for key, value in TRANSFORMERS_DEFAULTS.get(model_type, {}).items():
        if out.get(key) is None and (fill_shapes or key not in _TRUNCATION_KEYS):
            out[key] = value
    hidden = out.get("hidden_size")
    if model_type in ("gpt2", "gpt_bigcode", "falcon") and out.get("intermediate_size") is None:
        out["intermediate_size"] = 4 * hidden if isinstance(hidden, int) and not isinstance(hidden, bool) else None
    if model_type in ("gpt2", "gpt_bigcode"):
        out.update(_linear_bias=True, _norm_bias=True)
        out["_position_embeddings"] = _positive_int(out, "max_position_embeddings", name)
        if model_type == "gpt_bigcode" and (out.get("multi_query") is None or _optional_bool(out, "multi_query", name)):
            out["num_key_value_heads"] = 1
    elif model_type == "opt":
        enable_bias = out.get("enable_bias") is None or _optional_bool(out, "enable_bias", name)
        before = out.get("do_layer_norm_before") is None or _optional_bool(out, "do_layer_norm_before", name)
        out.update(_linear_bias=enable_bias, _norm_bias=True)
        out["_final_norm"] = before and not _optional_bool(out, "_remove_final_layer_norm", name)
        out["_position_embeddings"] = _positive_int(out, "max_position_embeddings", name) + 2
        proj = _optional_positive_int(out, "word_embed_proj_dim", name, 0)
        out["_word_embed_proj_dim"] = proj if proj and proj != hidden else 0
    elif model_type == "falcon":
        heads = _positive_int(out, "num_attention_heads", name)
        new_arch = _optional_bool(out, "new_decoder_architecture", name)
        multi_query = out.get("multi_query") is None or _optional_bool(out, "multi_query", name)
        parallel = out.get("parallel_attn") is None or _optional_bool(out, "parallel_attn", name)
        if new_arch:
            out["num_key_value_heads"] = _optional_positive_int(out, "num_kv_heads", name, heads)
            out.setdefault("_norms_per_layer", _int_in(out, "num_ln_in_parallel_attn", name, 1, 2, default=2))
        else:
            out["num_key_value_heads"] = 1 if multi_query else heads
            out.setdefault("_norms_per_layer", 1 if parallel else 2)
        out.update(_linear_bias=_optional_bool(out, "bias", name), _norm_bias=True)
    elif model_type == "starcoder2":
        out.update(_linear_bias=out.get("use_bias") is None or _optional_bool(out, "use_bias", name), _norm_bias=True)
    return out


GATED_DELTA_NET_TYPES: Final = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
"""``model_type``s whose ``linear_attention`` layers are Gated DeltaNet (vLLM ``qwen3_next.py``/``qwen3_5.py``
``Qwen3NextGatedDeltaNet``; the ``linear_*`` keys): they also gate the attention output and norm q and k."""

UNMODELLED_HYBRIDS: Final[dict[str, str]] = {
    # model_type → the key that lays out its Mamba-2 layers, which this module does not size: Falcon-H1 runs an
    # attention and a Mamba-2 mixer side by side in every layer (vLLM falcon_h1.py FalconH1ParallelHybrid), Zamba2
    # shares one attention block across its "hybrid" layers (zamba2.py); refused rather than read as dense
    "falcon_h1": "mamba_d_ssm",
    "zamba2": "layers_block_type",
}
"""Hybrid Mamba-2 families the capacity pass refuses, naming the key (vLLM ``falcon_h1.py``, ``zamba2.py``)."""

MAMBA2_HYBRID_TYPES: Final = frozenset({"nemotron_h", "granitemoehybrid", "bamba"})
"""``model_type``s whose recurrent layers are Mamba-2 mixers (vLLM ``mamba_mixer2.py`` ``MambaMixer2``), one mixer
per layer in place of attention: Nemotron-H (``hybrid_override_pattern``, :func:`_nemotron_h_reads`), Granite-4.0-H
(``layer_types`` ``mamba``/``attention``, every layer with its MLP) and Bamba (``layers_block_type``)."""

NEMOTRON_H_LAYER_CHARS: Final = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
"""``hybrid_override_pattern`` characters (vLLM ``nemotron_h.py`` ``ALL_DECODER_LAYER_TYPES``, 0.19.0): each is one
layer holding only that block (its own pre-norm): a Mamba-2 mixer, an attention block (no rotary), a non-gated
ReLU² MLP, or a mixture of experts."""


def _mamba2_reads(out: dict[str, Any], model_type: str, name: str) -> None:
    """Put a Mamba-2 family's mixer shapes under ``_mamba2`` (heads, head dim, groups, state size, conv kernel,
    intermediate, in_proj bias, conv bias), as vLLM passes them to ``MambaMixer2``: Nemotron-H ``mamba_num_heads``,
    ``mamba_head_dim``, ``n_groups``, ``ssm_state_size``, ``conv_kernel``, intermediate = heads × head dim
    (``nemotron_h.py`` ``NemotronHMambaDecoderLayer``); Granite-4.0-H and Bamba ``mamba_n_heads``, ``mamba_d_head``,
    ``mamba_n_groups``, ``mamba_d_state``, ``mamba_d_conv``, intermediate = ``mamba_expand`` × hidden
    (``granitemoehybrid.py``/``bamba.py`` ``*MambaDecoderLayer``). Defaults: the transformers config classes
    (``NemotronHConfig``, ``GraniteMoeHybridConfig``, ``BambaConfig``)."""
    hidden = _optional_positive_int(out, "hidden_size", name, 0)
    if model_type == "nemotron_h":
        heads = _optional_positive_int(out, "mamba_num_heads", name, 128)
        head_dim = _optional_positive_int(out, "mamba_head_dim", name, 64)
        groups = _optional_positive_int(out, "n_groups", name, 8)
        state = _optional_positive_int(out, "ssm_state_size", name, 128)
        kernel = _optional_positive_int(out, "conv_kernel", name, 4)
        intermediate = heads * head_dim
        proj_bias = bool(out.get("use_bias")) and _optional_bool(out, "use_bias", name)
        conv_bias = out.get("use_conv_bias") is None or _optional_bool(out, "use_conv_bias", name)
    else:
        heads = _optional_positive_int(out, "mamba_n_heads", name, 128)
        groups = _optional_positive_int(out, "mamba_n_groups", name, 1)
        state = _optional_positive_int(out, "mamba_d_state", name, 256)
        kernel = _optional_positive_int(out, "mamba_d_conv", name, 4)
        intermediate = _optional_positive_int(out, "mamba_expand", name, 2) * hidden
        auto = out.get("mamba_d_head") == "auto"  # transformers: "auto" (the default) = intermediate ÷ heads
        head_dim = (0 if auto else _optional_positive_int(out, "mamba_d_head", name, 0)) or intermediate // heads
        proj_bias = bool(out.get("mamba_proj_bias")) and _optional_bool(out, "mamba_proj_bias", name)
        conv_bias = out.get("mamba_conv_bias") is None or _optional_bool(out, "mamba_conv_bias", name)
    if heads * head_dim != intermediate:
        wanted = f"the Mamba-2 intermediate size {intermediate}"
        raise _bad_value(name, "mamba heads × head dim", wanted, heads * head_dim)
    out["_mamba2"] = (heads, head_dim, groups, state, kernel, intermediate, proj_bias, conv_bias)


MAMBA_SSM_CACHE_DTYPES: Final = ("auto", "float32", "float16", "bfloat16")
"""Values a Nemotron-H config's ``mamba_ssm_cache_dtype`` may take (vLLM ``vllm/config/cache.py`` ``MambaDType``:
auto, float32, float16; the configs also state the model dtype)."""


def _mamba2_layer_types(out: dict[str, Any], model_type: str, name: str) -> None:
    """Check and complete a Granite-4.0-H or Bamba layer layout: Granite's ``layer_types`` entries are ``mamba`` or
    ``attention`` (``GraniteMoeHybridConfig`` refuses others); a Bamba config states ``attn_layer_indices`` (its
    ``layers_block_type`` is a transformers property, never in the file: ``attention`` at those indices, ``mamba``
    elsewhere). At least one attention layer (the KV pool's)."""
    layers = out.get("num_hidden_layers")
    types = out.get("layer_types") if model_type == "granitemoehybrid" else out.get("layers_block_type")
    if model_type == "bamba" and types is None:
        indices = _int_list(out, "attn_layer_indices", name, 0, (layers if isinstance(layers, int) else 1) - 1)
        if isinstance(layers, int) and not isinstance(layers, bool):
            types = ["attention" if i in set(indices) else "mamba" for i in range(layers)]
            out["layers_block_type"] = types
    key = "layer_types" if model_type == "granitemoehybrid" else "layers_block_type or attn_layer_indices"
    if not isinstance(types, list):
        return
    odd = sorted({str(t) for t in types} - {"mamba", "attention"})
    if odd:
        raise _bad_value(name, key, "entries 'mamba' or 'attention'", odd)
    if "attention" not in types:
        raise CapacityError(
            f"{name}: {key} has no attention layer: the capacity pass sizes hybrids whose attention layers hold the "
            "KV pool, not pure Mamba-2 stacks"
        )


def _nemotron_h_reads(out: dict[str, Any], name: str) -> None:
    """Nemotron-H (``nemotron_h``): fold ``hybrid_override_pattern`` (:data:`NEMOTRON_H_LAYER_CHARS`, one block per
    layer) into the generic reader's layers, each a mixer (Mamba-2 or attention) with at most one MLP: the mixers
    are the layers (``layer_types``), the ``E`` layers their MoE MLPs (``_moe_layer_count``), the ``-`` layers their
    dense non-gated MLPs, and the mixers left without one ``_mlp_free_layers``. Only the mixers keep KV or state
    (vLLM ``get_kv_cache_spec``: attention and Mamba layers), so the pool is sized as for the folded stack.
    Experts and the shared expert are non-gated ReLU² MLPs (``NemotronHMoE``: ``up_proj``/``down_proj``); the shared
    expert is ``moe_shared_expert_intermediate_size`` × ``n_shared_experts`` wide. A pattern with more MLP than
    mixer layers, or a per-layer ``intermediate_size`` list, is refused (not folded). Not counted: the layers' norms
    beyond two per folded layer (``hidden`` each) and the router's score-correction bias."""
    pattern = out.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or not pattern or set(pattern) - NEMOTRON_H_LAYER_CHARS.keys():
        raise _bad_value(name, "hybrid_override_pattern", "a string of the layer characters M * - E", pattern)
    layers = out.get("num_hidden_layers")
    if layers is not None and layers != len(pattern):
        raise _bad_value(name, "num_hidden_layers", f"the pattern's length {len(pattern)}", layers)
    mamba, attention, mlp, moe = (pattern.count(c) for c in "M*-E")
    mixers = mamba + attention
    if not attention or mlp + moe > mixers:
        raise CapacityError(
            f"{name}: hybrid_override_pattern {pattern!r} has {attention} attention, {mamba} Mamba-2, {mlp} MLP "
            f"and {moe} MoE layers; the capacity pass sizes stacks with attention and no more MLP than mixer layers"
        )
    ssm_dtype = _optional_str(out, "mamba_ssm_cache_dtype", name)
    if ssm_dtype is not None and ssm_dtype not in MAMBA_SSM_CACHE_DTYPES:
        raise _bad_value(name, "mamba_ssm_cache_dtype", " or ".join(MAMBA_SSM_CACHE_DTYPES), ssm_dtype)
    out.update(
        num_hidden_layers=mixers,
        layer_types=["mamba"] * mamba + ["attention"] * attention,
        _moe_layer_count=moe,
        _mlp_free_layers=mixers - mlp - moe,
        _gated_experts=False,
        mamba_ssm_dtype=None if ssm_dtype == "auto" else ssm_dtype,
    )
    if moe:
        if out.get("n_routed_experts") is None:
            raise CapacityError(
                f"{name} has no 'n_routed_experts' though hybrid_override_pattern has {moe} MoE ('E') "
                "layers (needed to size their experts)"
            )
        width = _optional_positive_int(out, "moe_intermediate_size", name, 0)
        shared = _optional_positive_int(out, "moe_shared_expert_intermediate_size", name, 0)
        shared *= _int_in(out, "n_shared_experts", name, 0, default=1)
        if not width or shared % width:
            raise _bad_value(
                name, "moe_shared_expert_intermediate_size", f"a multiple of moe_intermediate_size ({width})", shared
            )
        out["n_shared_experts"] = shared // width


def _family_reads(cfg: dict[str, Any], model_type: str, name: str) -> dict[str, Any]:
    """``cfg`` with each family's own keys put under the names the generic reader uses (one rule per family):

    * Llama 4 (``llama4_text``; transformers ``configuration_llama4.py``, vLLM ``llama4.py`` ``Llama4MoE``): an
      expert and the always-on shared expert are ``intermediate_size`` wide, a dense layer ``intermediate_size_mlp``
      (default 16384); layer ``i`` is MoE when ``interleave_moe_layer_step > 0`` and ``(i + 1) % step == 0``
      (Qwen's ``decoder_sparse_step`` rule); ``interleave_moe_layer_step`` 0: no MoE layer.
    * ``shared_expert_intermediate_size`` (Qwen2-MoE, Qwen3-Next, Qwen3.5-MoE: one shared gated MLP of that width,
      vLLM ``qwen2_moe.py`` ``Qwen2MoeSparseMoeBlock.shared_expert``): counted as that width ÷
      ``moe_intermediate_size`` shared experts; a width that is no multiple of the expert width is refused. Its
      ``shared_expert_gate`` (``hidden`` weights per layer) is not counted.
    * Gated DeltaNet types (:data:`GATED_DELTA_NET_TYPES`): without ``layer_types`` every
      ``full_attention_interval``-th layer (default 4) is full attention, the rest ``linear_attention``
      (``Qwen3NextConfig.__init__``); the attention output gate (``attn_output_gate``, default true).
    * :data:`UNMODELLED_HYBRIDS`: refused. Nemotron-H: :func:`_nemotron_h_reads`; Granite-4.0 (``granitemoehybrid``):
      with ``num_local_experts`` 0 the layer's MLP is its ``shared_mlp``, else the experts plus that MLP as
      ``shared_intermediate_size`` ÷ ``intermediate_size`` shared experts; the Mamba-2 mixers of
      :data:`MAMBA2_HYBRID_TYPES`: :func:`_mamba2_reads`.
    * Gemma 4 (``gemma4_text``): :func:`_gemma4_reads`.
    """
    out = dict(cfg)
    if model_type in UNMODELLED_HYBRIDS:
        key = UNMODELLED_HYBRIDS[model_type]
        raise CapacityError(
            f"{name}: model_type {model_type!r} mixes Mamba-2 layers ({key!r}) with attention in a way the capacity "
            "pass does not size (their weights and per-sequence state), so it cannot plan this model"
        )
    if model_type == "nemotron_h":
        _nemotron_h_reads(out, name)
    types = out.get("layer_types")
    if model_type == "granitemoehybrid":
        experts = out.get("num_local_experts")
        if experts == 0:
            # vLLM granitemoehybrid.py (v0.11.0) GraniteMoeHybrid*DecoderLayer: no MoE unless num_local_experts > 0;
            # the layer's MLP is shared_mlp, shared_intermediate_size wide
            out.update(num_local_experts=None, num_experts_per_tok=None)
            if out.get("shared_intermediate_size") is not None:
                out["intermediate_size"] = out["shared_intermediate_size"]
        elif out.get("shared_intermediate_size") is not None:
            # every layer: block_sparse_moe (experts intermediate_size wide) + shared_mlp, a gated MLP
            # shared_intermediate_size wide, counted as that many expert widths of always-on shared experts
            width = _optional_positive_int(out, "intermediate_size", name, 0)
            shared = _optional_positive_int(out, "shared_intermediate_size", name, 0)
            if not width or shared % width:
                raise _bad_value(name, "shared_intermediate_size", f"a multiple of intermediate_size ({width})", shared)
            out.update(moe_intermediate_size=width, n_shared_experts=shared // width)
    if model_type in ("granitemoehybrid", "bamba"):
        _mamba2_layer_types(out, model_type, name)
        types = out.get("layer_types")
    if model_type in MAMBA2_HYBRID_TYPES and (
        model_type != "granitemoehybrid" or (isinstance(types, list) and "mamba" in types)
    ):
        _mamba2_reads(out, model_type, name)
    if model_type in ("llama4", "llama4_text"):
        expert = _optional_positive_int(out, "intermediate_size", name, 8192)
        step = _int_in(out, "interleave_moe_layer_step", name, 0, default=1)
        out["moe_intermediate_size"] = expert
        out["intermediate_size"] = _optional_positive_int(out, "intermediate_size_mlp", name, 16384)
        if step:
            out.update(decoder_sparse_step=step, n_shared_experts=1)
        else:
            out["num_local_experts"] = None
    shared = _optional_positive_int(out, "shared_expert_intermediate_size", name, 0)
    if shared and out.get("n_shared_experts") is None:
        width = _optional_positive_int(out, "moe_intermediate_size", name, 0)
        if not width or shared % width:
            raise _bad_value(
                name, "shared_expert_intermediate_size", f"a multiple of moe_intermediate_size ({width})", shared
            )
        out["n_shared_experts"] = shared // width
    if model_type == "gemma4_text":
        out = _gemma4_reads(out, name)
    if model_type in GATED_DELTA_NET_TYPES:
        layers = out.get("num_hidden_layers")
        if out.get("layer_types") is None and isinstance(layers, int) and not isinstance(layers, bool):
            every = _optional_positive_int(out, "full_attention_interval", name, 4)
            out["layer_types"] = [
                "full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)
            ]
        out["_attention_output_gate"] = out.get("attn_output_gate") is None or _optional_bool(
            out, "attn_output_gate", name
        )
    return out


GEMMA4_DEFAULTS: Final[dict[str, int | bool]] = {
    # transformers configuration_gemma4.py Gemma4TextConfig (2026): fields and __post_init__'s kwargs.pop defaults
    "sliding_window": 512,
    "global_head_dim": 512,
    "attention_k_eq_v": False,
    "num_kv_shared_layers": 0,
    "use_double_wide_mlp": False,
    "enable_moe_block": False,
    "hidden_size_per_layer_input": 256,
    "vocab_size_per_layer_input": 262144,
}
"""What a Gemma 4 ``text_config`` that leaves a key out holds (the value vLLM then reads from the config object)."""

GEMMA4_LAYER_TYPES: Final = ("sliding_attention", "full_attention")
"""The ``layer_types`` a Gemma 4 ``text_config`` may list (vLLM 0.21.0 ``gemma4.py`` takes any other as full
attention; none exists in the published checkpoints, so another is refused as a mistake)."""

GEMMA4_SLIDING_PATTERN: Final = 6
"""Without ``layer_types`` Gemma4TextConfig makes every 6th layer full attention, the rest sliding ("by default 5:1"),
and it always forces the last layer to ``full_attention`` (transformers ``configuration_gemma4.py``)."""


def _gemma4_reads(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """A Gemma 4 ``text_config`` read as transformers' ``Gemma4TextConfig`` holds it and vLLM 0.21.0's ``gemma4.py``
    builds it, into the ``_``-prefixed keys :meth:`ModelArch.from_hf_config` reads:

    * ``layer_types`` (default 5 sliding : 1 full), the last layer forced to full attention; ``sliding_window``
      (default 512);
    * full-attention layers: head size ``global_head_dim`` (default 512); under ``attention_k_eq_v`` (default
      false) ``num_global_key_value_heads`` KV heads (default ``num_key_value_heads``) — ``Gemma4DecoderLayer``;
    * ``num_kv_shared_layers`` (default 0): the last layers, each reading the KV of the last earlier layer of its
      type (``Gemma4Attention``: ``kv_sharing_target_layer_name``), so they keep no cache; their MLP is
      ``2 × intermediate_size`` under ``use_double_wide_mlp``;
    * PLE: ``hidden_size_per_layer_input`` (default 256; 0 = none) × ``num_hidden_layers`` columns of a
      ``vocab_size_per_layer_input``-row table, with a fifth norm per layer (``post_per_layer_input_norm``);
    * ``enable_moe_block``: refused — its router and experts run beside the dense MLP in every layer, which
      :class:`ModelArch` does not hold.

    Raises:
        CapacityError: a key of the wrong type or out of range, or ``enable_moe_block`` true.
    """
    out = dict(cfg)
    for key, value in GEMMA4_DEFAULTS.items():
        if out.get(key) is None:
            out[key] = value
    if _optional_bool(out, "enable_moe_block", name):
        raise CapacityError(
            f"{name}: Gemma 4 with enable_moe_block (26B-A4B) is not modelled: vLLM runs a router and "
            "top_k_experts experts beside the dense MLP in every layer (gemma4.py Gemma4MoE), which the capacity "
            "pass does not size, so it cannot plan this model"
        )
    layers = _positive_int(out, "num_hidden_layers", name)
    _int_in(out, "sliding_window", name, 1, default=512)
    types = _str_list(out, "layer_types", name, layers)
    if types is None:
        types = ["sliding_attention" if (i + 1) % GEMMA4_SLIDING_PATTERN else "full_attention" for i in range(layers)]
    elif len(types) != layers or not set(types) <= set(GEMMA4_LAYER_TYPES):
        wanted = f"a list of {layers} entries (num_hidden_layers), each {' or '.join(GEMMA4_LAYER_TYPES)}"
        raise _bad_value(name, "layer_types", wanted, types)
    types = [*types[:-1], "full_attention"]  # Gemma4TextConfig forces it ("Last layer must use `full_attention`")
    if "sliding_attention" not in types:
        raise _bad_value(name, "layer_types", "a list with sliding_attention layers (Gemma 4 interleaves them)", types)
    out["layer_types"] = types
    shared = _int_in(out, "num_kv_shared_layers", name, 0, layers - 1, default=0)
    first_shared = layers - shared
    for kind in set(types[first_shared:]):
        if kind not in types[:first_shared]:
            raise _bad_value(
                name, "num_kv_shared_layers", f"a count leaving a {kind} layer before the shared ones", shared
            )
    out["_kv_shared_layers"] = shared
    out["_kv_shared_sliding_layers"] = sum(1 for t in types[first_shared:] if t == "sliding_attention")
    head_dim = _optional_positive_int(out, "head_dim", name, 0)
    global_head_dim = _optional_positive_int(out, "global_head_dim", name, 512)
    out["_global_head_dim"] = global_head_dim if global_head_dim != head_dim else 0
    if _optional_bool(out, "attention_k_eq_v", name):
        kv = _optional_positive_int(out, "num_key_value_heads", name, 0)
        out["_global_kv_heads"] = _optional_positive_int(out, "num_global_key_value_heads", name, kv) or 0
    out["_double_wide_mlp"] = _optional_bool(out, "use_double_wide_mlp", name) and shared > 0
    ple = _int_in(out, "hidden_size_per_layer_input", name, 0, default=0)
    if ple:
        out["_per_layer_input_size"] = ple
        out["_per_layer_vocab_size"] = _positive_int(out, "vocab_size_per_layer_input", name)
        out.setdefault("_norms_per_layer", 5)
    return out


_CLIP_VISION_DEFAULTS: Final[dict[str, int]] = {
    # CLIPVisionConfig (configuration_clip.py) and SiglipVisionConfig (configuration_siglip.py) __init__ defaults
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_channels": 3,
}
_VISION_IMAGE_DEFAULTS: Final[dict[str, tuple[int, int]]] = {
    "clip_vision_model": (224, 32),  # (image_size, patch_size)
    "siglip_vision_model": (224, 16),
}


def vision_config_parameters(
    model_type: str, vision: Mapping[str, Any], text_hidden: int, name: str, feature_layer: int = -2
) -> int:
    """Parameters of the vision tower and projector a multimodal ``config.json`` describes, as vLLM loads them
    (``model_type`` is the wrapper's), with the vision config class's defaults for keys left out; 0 for a wrapper
    not modelled here (Llama-4, Mllama, InternVL …: their towers are not counted).

    * ``llava`` / ``llava_next``: a CLIP tower (:func:`vit_parameters`) of ``num_hidden_layers +
      vision_feature_layer + 1`` layers (LlavaConfig ``vision_feature_layer`` -2; vLLM ``llava.py``
      ``_get_num_hidden_layers``: 23 of CLIP-L's 24, no post-LayerNorm), the 2-layer projector to the text hidden
      size; LLaVA-NeXt adds ``image_newline`` (``text_hidden``).
    * ``gemma3``: the SigLIP tower, all layers, and ``multi_modal_projector`` (``vision_hidden × text_hidden`` and
      its RMSNorm, ``vision_hidden``).
    * ``qwen2_vl``: ``depth`` blocks of ``embed_dim`` (qkv and proj with bias, MLP ``embed_dim × mlp_ratio`` twice
      with bias, two LayerNorms), a Conv3d patch embed ``in_chans × temporal_patch_size × patch_size² ×
      embed_dim`` and the merger (LayerNorm, ``d·m² × d·m²`` and ``d·m² × hidden_size`` with biases, ``m`` the
      ``spatial_merge_size``). ``qwen2_5_vl``: the same with a gated MLP of ``intermediate_size``, RMSNorms and
      ``out_hidden_size``.
    * ``qwen3_vl`` / ``qwen3_vl_moe`` / ``qwen3_5`` / ``qwen3_5_moe`` (vLLM 0.24.0 ``qwen3_vl.py``
      ``Qwen3_VisionTransformer``, which ``qwen3_5.py`` reuses): a Conv3d patch embed with bias, a learned
      ``num_position_embeddings × d`` table, ``depth`` blocks (two LayerNorms, ``qkv`` and ``proj`` with bias, an
      MLP ``d × intermediate`` up and down with biases), the merger (LayerNorm of ``d``, ``d·m² × d·m²`` and ``d·m² ×
      out_hidden_size`` with biases) and one merger per ``deepstack_visual_indexes`` entry (its LayerNorm over
      ``d·m²``). Defaults: transformers ``Qwen3VLVisionConfig``. Qwen3.6-35B-A3B (d 1152, i 4304, 27 blocks,
      patch 16, 2,304 positions, out 2048, no deepstack): 446,571,248.
    """
    if model_type in _QWEN3_VISION_TYPES:
        return _qwen3_vision_parameters(vision, name)
    if model_type in ("llava", "llava_next"):
        vc = _vision_defaults(vision, "clip_vision_model", name)
        layers = vc["num_hidden_layers"] + feature_layer + 1 if feature_layer < 0 else feature_layer
        extra = text_hidden if model_type == "llava_next" else 0
        return vit_parameters(vc, layers, text_hidden) + extra
    if model_type == "gemma3":
        vc = _vision_defaults(vision, "siglip_vision_model", name)
        h = vc["hidden_size"]
        return vit_parameters(vc) + h * text_hidden + h
    if model_type in ("qwen2_vl", "qwen2_5_vl"):
        gated = model_type == "qwen2_5_vl"
        d = _int_in(vision, "hidden_size" if gated else "embed_dim", f"{name} vision_config", 1, default=1280)
        depth = _int_in(vision, "depth", f"{name} vision_config", 1, default=32)
        patch = _int_in(vision, "patch_size", f"{name} vision_config", 1, default=14)
        temporal = _int_in(vision, "temporal_patch_size", f"{name} vision_config", 1, default=2)
        merge = _int_in(vision, "spatial_merge_size", f"{name} vision_config", 1, default=2)
        channels = _int_in(vision, "in_chans" if not gated else "in_channels", f"{name} vision_config", 1, default=3)
        out = _int_in(vision, "out_hidden_size" if gated else "hidden_size", f"{name} vision_config", 1, default=3584)
        if gated:
            i = _int_in(vision, "intermediate_size", f"{name} vision_config", 1, default=3420)
            mlp, norms = 3 * d * i + 2 * i + d, 2 * d
        else:
            i = d * _int_in(vision, "mlp_ratio", f"{name} vision_config", 1, default=4)
            mlp, norms = 2 * d * i + i + d, 4 * d
        block = 3 * d * d + 3 * d + d * d + d + mlp + norms
        merged = d * merge * merge
        merger = (d if gated else 2 * d) + merged * merged + merged + merged * out + out
        return depth * block + channels * temporal * patch * patch * d + merger
    return 0


_QWEN3_VISION_TYPES: Final = ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe")
"""Wrappers whose vision tower is vLLM's ``Qwen3_VisionTransformer`` (:func:`vision_config_parameters`)."""

_LLAVA_DEFAULT_TOWER: Final[dict[str, int | str]] = {
    # LlavaConfig.__init__ (transformers src/transformers/models/llava/configuration_llava.py) and LlavaNextConfig's
    # (llava_next/configuration_llava_next.py): vision_config None → CONFIG_MAPPING["clip_vision_model"](…), CLIP
    # ViT-L/14 at 336 px
    "model_type": "clip_vision_model",
    "intermediate_size": 4096,
    "hidden_size": 1024,
    "patch_size": 14,
    "image_size": 336,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "vocab_size": 32000,
    "projection_dim": 768,
}

DEFAULT_VISION_CONFIGS: Final[dict[str, Mapping[str, int | str]]] = {
    "llava": _LLAVA_DEFAULT_TOWER,
    "llava_next": _LLAVA_DEFAULT_TOWER,
    # Gemma3Config.__init__ (gemma3/configuration_gemma3.py): vision_config None → SiglipVisionConfig(), whose
    # defaults :func:`_vision_defaults` holds
    "gemma3": {},
    # Qwen2VLConfig, Qwen2_5_VLConfig, Qwen3VLConfig, Qwen3VLMoeConfig, Qwen3_5Config, Qwen3_5MoeConfig: their own
    # vision config class with its defaults (read by vision_config_parameters and _vision_tower_width)
    **{wrapper: {} for wrapper in ("qwen2_vl", "qwen2_5_vl", *_QWEN3_VISION_TYPES)},
}
"""The ``vision_config`` transformers' wrapper config class builds when a config.json leaves the key out or sets it
to null, by wrapper ``model_type`` (the vision tower vLLM then loads): every wrapper whose tower
:func:`vision_config_parameters` sizes has one. Gemma 4 has none (``Gemma4Config.__post_init__``: "vision_config is
None. Gemma4Model.vision_tower will not be initialized"), so its file without the key carries no tower."""


def _vision_tower_width(wrapper_type: str, vision: Mapping[str, Any] | None, name: str) -> int:
    """The hidden size of a Qwen-VL wrapper's vision tower (:attr:`ModelArch.vision_tower_width`), with its config
    class's default when ``vision_config`` leaves it out (transformers ``Qwen2VLVisionConfig.embed_dim`` 1280,
    ``Qwen2_5_VLVisionConfig.hidden_size`` 1280, ``Qwen3VLVisionConfig.hidden_size`` 1152); 0 for any other wrapper
    or no ``vision_config``."""
    where = f"{name} vision_config"
    if vision is None:
        return 0
    if wrapper_type == "qwen2_vl":
        return _int_in(vision, "embed_dim", where, 1, default=1280)
    if wrapper_type == "qwen2_5_vl":
        return _int_in(vision, "hidden_size", where, 1, default=1280)
    if wrapper_type in _QWEN3_VISION_TYPES:
        return _int_in(vision, "hidden_size", where, 1, default=1152)
    return 0


def _qwen3_vision_parameters(vision: Mapping[str, Any], name: str) -> int:
    """Parameters of a ``Qwen3_VisionTransformer`` (see :func:`vision_config_parameters`)."""
    where = f"{name} vision_config"
    d = _int_in(vision, "hidden_size", where, 1, default=1152)
    i = _int_in(vision, "intermediate_size", where, 1, default=4304)
    depth = _int_in(vision, "depth", where, 1, default=27)
    patch = _int_in(vision, "patch_size", where, 1, default=16)
    temporal = _int_in(vision, "temporal_patch_size", where, 1, default=2)
    merge = _int_in(vision, "spatial_merge_size", where, 1, default=2)
    channels = _int_in(vision, "in_channels", where, 1, default=3)
    out = _int_in(vision, "out_hidden_size", where, 1, default=3584)
    positions = _int_in(vision, "num_position_embeddings", where, 1, default=2304)
    # transformers' Qwen3VLVisionConfig default [8, 16, 24]; each entry a block whose output gets its own merger
    deepstack = _int_list(vision, "deepstack_visual_indexes", where, 0, depth - 1)
    stacks = len(deepstack) if vision.get("deepstack_visual_indexes") is not None else 3
    block = 4 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * i + i) + (i * d + d)
    merged = d * merge * merge
    merger = merged * merged + merged + merged * out + out
    embed = channels * temporal * patch * patch * d + d + positions * d
    return embed + depth * block + (2 * d + merger) + stacks * (2 * merged + merger)


def _vision_defaults(vision: Mapping[str, Any], default_type: str, name: str) -> dict[str, int]:
    """A CLIP/SigLIP vision config with its class's defaults for the keys :func:`vit_parameters` reads (``name``: the
    config.json, as the messages name it)."""
    kind = str(vision.get("model_type") or default_type)
    image, patch = _VISION_IMAGE_DEFAULTS.get(kind, _VISION_IMAGE_DEFAULTS[default_type])
    out = {**_CLIP_VISION_DEFAULTS, "image_size": image, "patch_size": patch}
    for key in out:
        out[key] = _int_in(vision, key, f"{name} vision_config", 1, default=out[key])
    return out
