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
* hybrid recurrent layers (Jamba Mamba layers, ``layer_types`` with ``mamba``/``linear_attention``): only
  the :attr:`ModelArch.attention_layers` grow with context; each recurrent layer holds a fixed state per
  sequence (:attr:`ModelArch.recurrent_state_elements`);
* multimodal wrappers (``text_config`` + ``vision_config``: LLaVA, Qwen-VL, Gemma 3): the language model drives
  the KV cache; :attr:`ModelArch.vision_parameters` adds weights.

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

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from advisor.errors import CapacityError, UnknownModelError

__all__ = ["ModelArch", "get_preset", "preset_ids", "vit_parameters"]

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
        linear_layer_parameters: parameters of one recurrent mixer (replaces attention in that layer).
        attention_output_bias: the output projection has a bias (GPT-OSS).
        qk_norm: per-head RMSNorm on q and k (Qwen3, Gemma 3).
        attention_sinks: one learned sink logit per head per layer (GPT-OSS).
        vision_parameters: parameters of the vision tower and projector as vLLM loads them (0 = text only).
        checkpoint_quantization: the method the checkpoint is stored in (``fp8``, ``mxfp4``, ``awq`` …, from
            ``quantization_config.quant_method``), which vLLM applies without ``--quantization``; None = unquantized.
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
    attention_output_bias: bool = False
    qk_norm: bool = False
    attention_sinks: bool = False
    vision_parameters: int = 0
    checkpoint_quantization: str | None = None

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
        if not 0 <= self.moe_layers <= self.num_layers or not 0 <= self.linear_layers < self.num_layers:
            raise CapacityError(f"{self.name}: moe_layers/linear_layers out of range for {self.num_layers} layers")
        if self.sliding_window_layers > self.attention_layers:
            raise CapacityError(f"{self.name}: more sliding-window layers than attention layers")

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
    def mla_latent_elements(self) -> int:
        """Elements cached per token per MLA layer: ``kv_lora_rank + qk_rope_head_dim`` (512 + 64 = 576)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    # --- parameter bookkeeping (counts of parameters, not bytes) ---------------------------------------
    def embedding_parameters(self) -> int:
        """Parameters of the input embedding plus the LM head (once if tied): vocab × hidden × (1 or 2)."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_word_embeddings else 2)

    def norm_parameters(self) -> int:
        """RMSNorm weights: (norms_per_layer × layers + 1 final) × hidden (+ q/k norms, MLA latent norms).
        Replicated on every TP rank."""
        extra = 0
        if self.qk_norm:
            extra += 2 * self.head_dim * self.attention_layers
        if self.is_mla:
            extra += (self.kv_lora_rank + self.q_lora_rank) * self.num_layers
        return (self.norms_per_layer * self.num_layers + 1) * self.hidden_size + extra

    def kv_projection_parameters_per_layer(self) -> int:
        """Parameters of the k and v projections of one layer: 2 × hidden × kv_heads × head_dim (+ bias)."""
        bias = 2 * self.num_kv_heads * self.head_dim if self.attention_bias else 0
        return 2 * self.hidden_size * self.num_kv_heads * self.head_dim + bias

    def attention_parameters_per_layer(self) -> int:
        """Parameters of one attention block (projections, biases, sinks; norms excluded).

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
        q_and_o = 2 * h * n * self.head_dim
        q_bias = n * self.head_dim if self.attention_bias else 0
        o_bias = h if self.attention_output_bias else 0
        sinks = n if self.attention_sinks else 0
        return q_and_o + q_bias + o_bias + sinks + self.kv_projection_parameters_per_layer()

    def dense_mlp_parameters(self) -> int:
        """One dense gated MLP: ``3 × hidden × intermediate``."""
        return 3 * self.hidden_size * self.intermediate_size

    def expert_parameters(self) -> int:
        """One expert: ``3 × hidden × moe_intermediate`` (+ biases ``2 × moe_intermediate + hidden``)."""
        bias = 2 * self.moe_intermediate_size + self.hidden_size if self.expert_bias else 0
        return 3 * self.hidden_size * self.moe_intermediate_size + bias

    def router_parameters(self) -> int:
        """The router of one MoE layer: ``num_experts × hidden`` (+ a bias per expert when experts have biases)."""
        return self.num_experts * (self.hidden_size + (1 if self.expert_bias else 0))

    def moe_layer_parameters(self, experts: int | None = None) -> int:
        """One MoE MLP with ``experts`` routed experts (default all), the shared ones and the router."""
        routed = self.num_experts if experts is None else experts
        return (routed + self.num_shared_experts) * self.expert_parameters() + self.router_parameters()

    def _body_parameters(self, experts: int | None) -> int:
        attention = self.attention_layers * self.attention_parameters_per_layer()
        recurrent = self.linear_layers * self.linear_layer_parameters
        moe = self.moe_layers * self.moe_layer_parameters(experts) if self.is_moe else 0
        dense = (self.num_layers - (self.moe_layers if self.is_moe else 0)) * self.dense_mlp_parameters()
        return attention + recurrent + moe + dense

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
    def from_hf_config(cls, config: Mapping[str, Any], name: str) -> ModelArch:
        """Build an architecture from a Hugging Face ``config.json`` already parsed into a dict.

        ``head_dim`` is taken when the config states it (Gemma, Llama 3.2), else ``hidden_size //
        num_attention_heads`` (the transformers convention). ``num_key_value_heads`` defaults to
        ``num_attention_heads`` (MHA, as transformers does when the key is absent). A multimodal wrapper's
        ``text_config`` is merged over the top level. MoE, MLA, sliding-window and Mamba keys are read as
        listed in the module docstring. ``num_parameters`` is taken from a ``num_parameters`` key if present,
        else computed (:meth:`computed_parameters`). ``torch_dtype`` (or ``dtype``) defaults to ``bfloat16``.

        Raises:
            CapacityError: a required key is missing or not a positive integer; the message names it.
        """
        top = {k: v for k, v in config.items() if k != "text_config"}
        cfg = {**top, **dict(config.get("text_config") or {})}
        for key in (
            "torch_dtype",
            "_source",
            "num_parameters",
            "_norms_per_layer",
            "_vision_parameters",
            "_checkpoint_quantization",
            "quantization_config",
        ):
            if key in top and top[key] is not None:
                cfg[key] = top[key]
        for key in _REQUIRED_KEYS:
            if key not in cfg or cfg[key] is None:
                raise CapacityError(f"{name}: config.json has no {key!r} (needed for the capacity pass)")
        heads = _positive_int(cfg, "num_attention_heads", name)
        hidden = _positive_int(cfg, "hidden_size", name)
        layers = _positive_int(cfg, "num_hidden_layers", name)
        kv_heads = _positive_int(cfg, "num_key_value_heads", name) if cfg.get("num_key_value_heads") else heads
        head_dim = _positive_int(cfg, "head_dim", name) if cfg.get("head_dim") else hidden // heads
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts") or 0)
        moe_width = int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0)
        intermediate = int(cfg.get("intermediate_size") or moe_width or 0)
        if intermediate <= 0:
            raise CapacityError(f"{name}: config.json has no 'intermediate_size' (needed for the capacity pass)")
        model_type = str(cfg.get("model_type", ""))
        linear, state, linear_params, attention_layers = _recurrent_layers(cfg, layers, hidden)
        arch = cls(
            name=name,
            num_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=_positive_int(cfg, "vocab_size", name),
            intermediate_size=intermediate,
            max_position_embeddings=_positive_int(cfg, "max_position_embeddings", name),
            torch_dtype=dtype,
            num_parameters=1,  # replaced below
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            source=str(cfg.get("_source", "")),
            attention_bias=bool(cfg.get("attention_bias", False)),
            norms_per_layer=int(cfg.get("_norms_per_layer", 4 if model_type.startswith("gemma") else 2)),
            num_experts=experts,
            experts_per_token=int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0),
            moe_intermediate_size=moe_width if experts else 0,
            num_shared_experts=int(cfg.get("n_shared_experts") or 0),
            moe_layers=_moe_layers(cfg, layers) if experts else 0,
            expert_bias=model_type == "gpt_oss",
            kv_lora_rank=int(cfg.get("kv_lora_rank") or 0),
            qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
            qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0),
            v_head_dim=int(cfg.get("v_head_dim") or 0),
            q_lora_rank=int(cfg.get("q_lora_rank") or 0),
            sliding_window=_sliding_window(cfg),
            sliding_window_layers=_sliding_layers(cfg, attention_layers) if _sliding_window(cfg) else 0,
            linear_layers=linear,
            recurrent_state_elements=state,
            linear_layer_parameters=linear_params,
            attention_output_bias=model_type == "gpt_oss",
            qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"),
            attention_sinks=model_type == "gpt_oss",
            vision_parameters=int(cfg.get("_vision_parameters") or 0),
            checkpoint_quantization=_checkpoint_quantization(cfg),
        )
        stated = cfg.get("num_parameters")
        total = int(stated) if stated else arch.computed_parameters()
        return replace(arch, num_parameters=total)


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


def _checkpoint_quantization(cfg: Mapping[str, Any]) -> str | None:
    if cfg.get("_checkpoint_quantization"):
        return str(cfg["_checkpoint_quantization"])
    qc = cfg.get("quantization_config")
    if isinstance(qc, Mapping) and qc.get("quant_method"):
        method = str(qc["quant_method"]).lower()
        if method == "modelopt" and "fp4" in str(qc.get("quant_algo", "")).lower():
            return "nvfp4"
        return {"compressed-tensors": "fp8", "modelopt": "fp8"}.get(method, method)
    return None


def _moe_layers(cfg: Mapping[str, Any], layers: int) -> int:
    if cfg.get("first_k_dense_replace") is not None:
        return layers - int(cfg["first_k_dense_replace"])
    if cfg.get("expert_layer_period"):
        period, offset = int(cfg["expert_layer_period"]), int(cfg.get("expert_layer_offset", 0))
        return sum(1 for i in range(layers) if i % period == offset)
    mlp_only = cfg.get("mlp_only_layers") or []
    step = int(cfg.get("decoder_sparse_step") or 1)
    return sum(1 for i in range(layers) if i not in mlp_only and (i + 1) % step == 0)


def _sliding_window(cfg: Mapping[str, Any]) -> int:
    if cfg.get("use_sliding_window") is False:
        return 0
    window = cfg.get("sliding_window")
    return int(window) if isinstance(window, int) and not isinstance(window, bool) and window > 0 else 0


def _sliding_layers(cfg: Mapping[str, Any], attention_layers: int) -> int:
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t == "sliding_attention")
    model_type = str(cfg.get("model_type", ""))
    if model_type == "gemma2":
        return attention_layers // 2  # even layers local (vLLM gemma2.py: layer_idx % 2 == 0)
    pattern = cfg.get("sliding_window_pattern")
    if model_type.startswith("gemma3") or pattern:
        every = int(pattern or 6)
        return sum(1 for i in range(attention_layers) if (i + 1) % every != 0)
    return attention_layers


def _recurrent_layers(cfg: Mapping[str, Any], layers: int, hidden: int) -> tuple[int, int, int, int]:
    """(recurrent layers, state elements per sequence per such layer, mixer parameters, attention layers)."""
    count = 0
    if cfg.get("attn_layer_period"):  # Jamba
        period, offset = int(cfg["attn_layer_period"]), int(cfg.get("attn_layer_offset", 0))
        count = sum(1 for i in range(layers) if i % period != offset)
    elif isinstance(cfg.get("layer_types"), list):
        count = sum(1 for t in cfg["layer_types"] if t in ("mamba", "linear_attention"))
    elif isinstance(cfg.get("layers_block_type"), list):
        count = sum(1 for t in cfg["layers_block_type"] if t == "mamba")
    if not count:
        return 0, 0, 0, layers
    expand = int(cfg.get("mamba_expand", 2))
    d_state = int(cfg.get("mamba_d_state", 16))
    d_conv = int(cfg.get("mamba_d_conv", 4))
    d_inner = expand * hidden
    dt_rank = int(cfg.get("mamba_dt_rank") or -(-hidden // 16))
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
    state = (d_conv - 1) * d_inner + d_inner * d_state
    return count, state, params, layers - count


def _positive_int(cfg: Mapping[str, Any], key: str, name: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CapacityError(f"{name}: config.json key {key!r} must be a positive integer, got {value!r}")
    return value


def _norm_alias(text: str) -> str:
    return text.strip().lower().replace("_", "-")


@cache
def _presets() -> tuple[dict[str, ModelArch], dict[str, str]]:
    raw = json.loads(resources.files("advisor").joinpath("data/models.json").read_text(encoding="utf-8"))
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
        elif vision:
            cfg["_vision_parameters"] = vit_parameters(
                vision["config"], vision.get("layers_loaded"), int(vision.get("projector_out", 0))
            ) + int(vision.get("extra_parameters", 0))
        arch = ModelArch.from_hf_config(cfg, entry["id"])
        by_id[entry["id"]] = arch
        for alias in [entry["id"], *entry.get("aliases", [])]:
            aliases[_norm_alias(alias)] = entry["id"]
    return by_id, aliases


def preset_ids() -> list[str]:
    """The ids of every bundled preset (Hugging Face repo ids), sorted."""
    return sorted(_presets()[0])


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
        raise UnknownModelError(
            f"no preset for model {model_id!r}; known ids: {', '.join(preset_ids())} "
            "(or give a path to the model's config.json: --model path/to/config.json, or model: in the config)"
        )
    return by_id[found]
