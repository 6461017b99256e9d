"""config.json validation: a malformed value of any key :meth:`ModelArch.from_hf_config` reads is refused with a
:class:`CapacityError` naming the model and the key, never a Python traceback; valid configs load as before.

Each case takes a bundled preset's ``config.json`` numbers (``advisor/data/models.json``), corrupts one key and
expects the refusal.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

import pytest

from advisor.capacity.models import ModelArch, get_preset
from advisor.errors import CapacityError

NAME = "acme/corrupt-model"

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MIXTRAL = "mistralai/Mixtral-8x7B-Instruct-v0.1"
QWEN_MOE = "Qwen/Qwen3-30B-A3B"
DEEPSEEK = "deepseek-ai/DeepSeek-R1"
JAMBA = "ai21labs/Jamba-v0.1"
GPT_OSS = "openai/gpt-oss-20b"
GEMMA_3 = "google/gemma-3-27b-it"
LLAVA = "llava-hf/llava-v1.6-mistral-7b-hf"
PRESETS = [LLAMA, MIXTRAL, QWEN_MOE, DEEPSEEK, JAMBA, GPT_OSS, GEMMA_3, LLAVA]

# Not an integer at all: JSON's Infinity/NaN, a fraction, an integral float (refused like the core keys always
# were), a bool, a string, a list, an object, and a value past JSON's exact-integer range.
NOT_AN_INTEGER: list[Any] = [math.inf, -math.inf, math.nan, 2.5, 4096.0, True, False, "4096", [1], {}, 2**53 + 1]
POSITIVE_BAD: list[Any] = [*NOT_AN_INTEGER, -5, 0]  # counts and widths that cannot be zero
NON_NEGATIVE_BAD: list[Any] = [*NOT_AN_INTEGER, -5]  # counts where 0 means "none"
NOT_A_STRING: list[Any] = [math.inf, math.nan, 5, True, [1], {}]
NOT_A_BOOL: list[Any] = [math.inf, math.nan, 1, 0, "false", "true", [1], {}]
NOT_AN_OBJECT: list[Any] = [math.inf, math.nan, 5, True, "x", [1], []]
NOT_AN_INDEX_LIST: list[Any] = [math.inf, math.nan, 5, True, "1", {}, [True], [2.5], [1.0], ["1"], [math.inf], [-1]]
NOT_A_NAME_LIST: list[Any] = [math.inf, math.nan, 5, True, "sliding_attention", {}, [1], [None], [math.nan]]


@cache
def _bundled_models() -> tuple[dict[str, Any], ...]:
    text = resources.files("advisor").joinpath("data/models.json").read_text(encoding="utf-8")
    return tuple(json.loads(text)["models"])


def preset_config(model_id: str) -> dict[str, Any]:
    """A fresh copy of the preset's ``config.json`` numbers, as bundled (``text_config`` nested)."""
    entry = next(e for e in _bundled_models() if e["id"] == model_id)
    config: dict[str, Any] = copy.deepcopy(entry["config"])
    return config


def corrupted(model_id: str, key: str, value: Any) -> dict[str, Any]:
    """The preset's config with ``key`` set to ``value`` (inside ``text_config`` when the key lives there)."""
    config = preset_config(model_id)
    scope = config["text_config"] if key in config.get("text_config", {}) else config
    scope[key] = value
    return config


def _layers(model_id: str) -> int:
    config = preset_config(model_id)
    layers: int = config.get("text_config", config)["num_hidden_layers"]
    return layers


# (preset, key, bad values): every key the reader uses, on a preset where the key matters.
TABLE: list[tuple[str, str, list[Any]]] = [
    *[
        (LLAMA, key, POSITIVE_BAD)
        for key in (
            "num_hidden_layers",
            "hidden_size",
            "num_attention_heads",
            "vocab_size",
            "max_position_embeddings",
            "intermediate_size",
            "num_key_value_heads",
            "head_dim",  # absent in Llama's config.json: refused when present and bad
            "num_parameters",
        )
    ],
    (LLAMA, "torch_dtype", NOT_A_STRING),
    (LLAMA, "dtype", NOT_A_STRING),
    (LLAMA, "model_type", NOT_A_STRING),
    (LLAMA, "tie_word_embeddings", NOT_A_BOOL),
    (LLAMA, "attention_bias", NOT_A_BOOL),
    (LLAMA, "use_sliding_window", NOT_A_BOOL),
    (LLAMA, "quantization_config", NOT_AN_OBJECT),
    (LLAMA, "vision_config", NOT_AN_OBJECT),
    (LLAMA, "sliding_window_pattern", POSITIVE_BAD),
    (LLAMA, "layer_types", [*NOT_A_NAME_LIST, ["full_attention"] * (_layers(LLAMA) - 1)]),
    (MIXTRAL, "num_local_experts", POSITIVE_BAD),
    (MIXTRAL, "num_experts_per_tok", [*POSITIVE_BAD, 9]),  # top-2 of 8: 9 is more than there are
    (MIXTRAL, "sliding_window", NON_NEGATIVE_BAD),
    (QWEN_MOE, "num_experts", POSITIVE_BAD),
    (QWEN_MOE, "moe_intermediate_size", POSITIVE_BAD),
    (QWEN_MOE, "num_experts_per_tok", [*POSITIVE_BAD, 129]),
    (QWEN_MOE, "decoder_sparse_step", [*POSITIVE_BAD, _layers(QWEN_MOE) + 1]),
    (QWEN_MOE, "mlp_only_layers", [*NOT_AN_INDEX_LIST, [_layers(QWEN_MOE)]]),
    (DEEPSEEK, "n_routed_experts", POSITIVE_BAD),
    (DEEPSEEK, "num_experts_per_tok", [*POSITIVE_BAD, 257]),
    (DEEPSEEK, "moe_intermediate_size", POSITIVE_BAD),
    (DEEPSEEK, "kv_lora_rank", POSITIVE_BAD),
    (DEEPSEEK, "qk_rope_head_dim", POSITIVE_BAD),
    (DEEPSEEK, "v_head_dim", POSITIVE_BAD),
    (DEEPSEEK, "n_shared_experts", NON_NEGATIVE_BAD),
    (DEEPSEEK, "q_lora_rank", NON_NEGATIVE_BAD),
    (DEEPSEEK, "qk_nope_head_dim", NON_NEGATIVE_BAD),
    (DEEPSEEK, "first_k_dense_replace", [*NON_NEGATIVE_BAD, _layers(DEEPSEEK) + 1]),
    (JAMBA, "num_experts", POSITIVE_BAD),
    (JAMBA, "attn_layer_period", POSITIVE_BAD),
    (JAMBA, "attn_layer_offset", [*NON_NEGATIVE_BAD, 8]),  # offset must be below the period (8)
    (JAMBA, "expert_layer_period", POSITIVE_BAD),
    (JAMBA, "expert_layer_offset", [*NON_NEGATIVE_BAD, 2]),  # below the period (2)
    (JAMBA, "mamba_expand", POSITIVE_BAD),
    (JAMBA, "mamba_d_state", POSITIVE_BAD),
    (JAMBA, "mamba_d_conv", POSITIVE_BAD),
    (JAMBA, "mamba_dt_rank", POSITIVE_BAD),
    (JAMBA, "layers_block_type", NOT_A_NAME_LIST),
    (GPT_OSS, "num_local_experts", POSITIVE_BAD),
    (GPT_OSS, "experts_per_token", [*POSITIVE_BAD, 33]),
    (GPT_OSS, "sliding_window", NON_NEGATIVE_BAD),
    (GPT_OSS, "layer_types", [*NOT_A_NAME_LIST, ["sliding_attention"] * (_layers(GPT_OSS) + 1)]),  # one per layer
    (GEMMA_3, "text_config", NOT_AN_OBJECT),
    (GEMMA_3, "vision_config", NOT_AN_OBJECT),
    (GEMMA_3, "hidden_size", POSITIVE_BAD),  # inside text_config
    (GEMMA_3, "num_hidden_layers", POSITIVE_BAD),
    (GEMMA_3, "sliding_window", NON_NEGATIVE_BAD),
    (GEMMA_3, "sliding_window_pattern", POSITIVE_BAD),
    (GEMMA_3, "torch_dtype", NOT_A_STRING),
    (LLAVA, "text_config", NOT_AN_OBJECT),
    (LLAVA, "intermediate_size", POSITIVE_BAD),
]

CASES = [
    pytest.param(model_id, key, value, id=f"{model_id.split('/')[1]}-{key}-{value!r:.30}")
    for model_id, key, values in TABLE
    for value in values
]


@pytest.mark.parametrize(("model_id", "key", "value"), CASES)
def test_a_malformed_value_is_refused_with_the_model_and_the_key_named(model_id: str, key: str, value: Any) -> None:
    with pytest.raises(CapacityError) as err:
        ModelArch.from_hf_config(corrupted(model_id, key, value), NAME)
    assert NAME in str(err.value)
    assert key in str(err.value)


def test_the_message_says_what_was_wanted_and_what_was_found() -> None:
    with pytest.raises(CapacityError) as err:
        ModelArch.from_hf_config(corrupted(LLAMA, "intermediate_size", math.inf), NAME)
    assert str(err.value) == f"{NAME}: config.json key 'intermediate_size' must be a positive integer, got inf"
    with pytest.raises(CapacityError, match=r"'first_k_dense_replace' must be an integer in 0\.\.61, got 62"):
        ModelArch.from_hf_config(corrupted(DEEPSEEK, "first_k_dense_replace", 62), NAME)


def test_a_bad_shadowed_text_config_value_is_named_with_its_path() -> None:
    # LLaVA's top-level torch_dtype wins over text_config's, but a malformed one is still refused.
    config = preset_config(LLAVA)
    config["text_config"]["torch_dtype"] = 16
    with pytest.raises(CapacityError, match=r"'text_config\.torch_dtype' must be a string"):
        ModelArch.from_hf_config(config, NAME)


def test_a_checkpoint_quant_method_must_be_a_string() -> None:
    config = {**preset_config(LLAMA), "quantization_config": {"quant_method": 8}}
    with pytest.raises(CapacityError, match=r"quantization_config\.quant_method"):
        ModelArch.from_hf_config(config, NAME)


@pytest.mark.parametrize("config", [[1, 2], "config", 5, None])
def test_a_config_that_is_not_an_object_is_refused(config: Any) -> None:
    with pytest.raises(CapacityError, match=NAME):
        ModelArch.from_hf_config(config, NAME)


def test_a_mixture_of_experts_without_a_top_k_is_refused_naming_the_key() -> None:
    # no model_type nor architectures: no transformers class whose default top-k to take (a Mixtral config.json
    # without the key takes MixtralConfig's 2: tests/capacity/test_config_json_defaults.py)
    dropped = ("num_experts_per_tok", "model_type", "architectures")
    config = {k: v for k, v in preset_config(MIXTRAL).items() if k not in dropped}
    with pytest.raises(CapacityError, match="num_experts_per_tok"):
        ModelArch.from_hf_config(config, NAME)


# --- valid configs load unchanged --------------------------------------------------------------------------
@pytest.mark.parametrize("model_id", PRESETS)
def test_an_uncorrupted_preset_config_loads_the_same_every_time_and_as_the_preset(model_id: str) -> None:
    first = ModelArch.from_hf_config(preset_config(model_id), model_id)
    again = ModelArch.from_hf_config(preset_config(model_id), model_id)
    assert first == again
    preset = get_preset(model_id)  # adds the published count, citation and vision tower on top of config.json
    assert (
        replace(
            first,
            num_parameters=preset.num_parameters,
            source=preset.source,
            attention_bias=preset.attention_bias,
            norms_per_layer=preset.norms_per_layer,
            vision_parameters=preset.vision_parameters,
            checkpoint_quantization=preset.checkpoint_quantization,
        )
        == preset
    )


def test_llama_shapes_follow_from_its_config_json() -> None:
    c = preset_config(LLAMA)
    arch = ModelArch.from_hf_config(c, LLAMA)
    assert arch.head_dim == c["hidden_size"] // c["num_attention_heads"]
    assert arch.num_kv_heads == c["num_key_value_heads"]
    assert arch.kv_projection_parameters_per_layer() == 2 * c["hidden_size"] * c["num_key_value_heads"] * (
        c["hidden_size"] // c["num_attention_heads"]
    )
    assert not arch.is_moe
    assert not arch.is_mla


def test_deepseek_mla_and_moe_shapes_follow_from_its_config_json() -> None:
    c = preset_config(DEEPSEEK)
    arch = ModelArch.from_hf_config(c, DEEPSEEK)
    assert arch.mla_latent_elements == c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert arch.moe_layers == c["num_hidden_layers"] - c["first_k_dense_replace"]
    assert (arch.num_experts, arch.experts_per_token) == (c["n_routed_experts"], c["num_experts_per_tok"])
    assert arch.moe_intermediate_size == c["moe_intermediate_size"]


def test_qwen_moe_layers_follow_from_its_sparse_step_and_mlp_only_layers() -> None:
    c = preset_config(QWEN_MOE)
    expected = sum(
        1
        for i in range(c["num_hidden_layers"])
        if i not in c["mlp_only_layers"] and (i + 1) % c["decoder_sparse_step"] == 0
    )
    assert ModelArch.from_hf_config(c, QWEN_MOE).moe_layers == expected
    # A sparser pattern, counted by hand the same way: every 3rd layer, minus two listed as dense.
    c.update(decoder_sparse_step=3, mlp_only_layers=[2, 3, 5])
    expected = sum(1 for i in range(c["num_hidden_layers"]) if i not in (2, 3, 5) and (i + 1) % 3 == 0)
    assert ModelArch.from_hf_config(c, QWEN_MOE).moe_layers == expected


def test_jamba_layer_patterns_follow_from_its_periods_and_offsets() -> None:
    c = preset_config(JAMBA)
    arch = ModelArch.from_hf_config(c, JAMBA)
    layers = c["num_hidden_layers"]
    assert arch.linear_layers == sum(1 for i in range(layers) if i % c["attn_layer_period"] != c["attn_layer_offset"])
    assert arch.moe_layers == sum(1 for i in range(layers) if i % c["expert_layer_period"] == c["expert_layer_offset"])
    d_inner = c["mamba_expand"] * c["hidden_size"]
    assert arch.recurrent_state_elements == (c["mamba_d_conv"] - 1) * d_inner + d_inner * c["mamba_d_state"]


def test_a_sliding_window_pattern_counts_the_windowed_layers() -> None:
    gpt = preset_config(GPT_OSS)
    assert ModelArch.from_hf_config(gpt, GPT_OSS).sliding_window_layers == gpt["layer_types"].count("sliding_attention")
    gemma = preset_config(GEMMA_3)["text_config"]
    every = gemma["sliding_window_pattern"]
    expected = sum(1 for i in range(gemma["num_hidden_layers"]) if (i + 1) % every != 0)
    assert ModelArch.from_hf_config(preset_config(GEMMA_3), GEMMA_3).sliding_window_layers == expected


@pytest.mark.parametrize(
    ("model_id", "key"),
    [
        (LLAMA, "num_key_value_heads"),
        (LLAMA, "head_dim"),
        (LLAMA, "torch_dtype"),
        (LLAMA, "tie_word_embeddings"),
        (DEEPSEEK, "q_lora_rank"),
        (DEEPSEEK, "n_shared_experts"),
        (JAMBA, "mamba_dt_rank"),
        (JAMBA, "attn_layer_offset"),
        (QWEN_MOE, "mlp_only_layers"),
        (QWEN_MOE, "decoder_sparse_step"),
        (GPT_OSS, "layer_types"),
    ],
)
def test_a_null_optional_key_counts_as_absent(model_id: str, key: str) -> None:
    absent = {k: v for k, v in preset_config(model_id).items() if k != key}
    assert ModelArch.from_hf_config(corrupted(model_id, key, None), NAME) == ModelArch.from_hf_config(absent, NAME)


def test_a_null_required_key_is_still_missing() -> None:
    # A dense model has no moe_intermediate_size to fall back on.
    with pytest.raises(CapacityError, match="no 'intermediate_size'"):
        ModelArch.from_hf_config(corrupted(LLAMA, "intermediate_size", None), NAME)
    with pytest.raises(CapacityError, match="no 'vocab_size'"):
        ModelArch.from_hf_config(corrupted(LLAMA, "vocab_size", None), NAME)


def test_defaults_of_absent_keys_are_the_transformers_ones() -> None:
    c = {k: v for k, v in preset_config(LLAMA).items() if k not in ("num_key_value_heads", "torch_dtype")}
    arch = ModelArch.from_hf_config(c, NAME)
    assert arch.num_kv_heads == c["num_attention_heads"]
    assert arch.torch_dtype == "bfloat16"


def test_jamba_dt_rank_auto_is_hidden_over_16_rounded_up() -> None:
    c = preset_config(JAMBA)
    auto = ModelArch.from_hf_config({**c, "mamba_dt_rank": "auto"}, NAME)
    explicit = ModelArch.from_hf_config({**c, "mamba_dt_rank": -(-c["hidden_size"] // 16)}, NAME)
    assert auto.linear_layer_parameters == explicit.linear_layer_parameters


def test_zero_is_none_where_the_config_uses_it_so() -> None:
    c = preset_config(DEEPSEEK)
    direct_q = ModelArch.from_hf_config({**c, "q_lora_rank": 0}, NAME)
    assert direct_q.q_lora_rank == 0
    all_moe = ModelArch.from_hf_config({**c, "first_k_dense_replace": 0}, NAME)
    assert all_moe.moe_layers == c["num_hidden_layers"]
    no_window = ModelArch.from_hf_config({**preset_config(MIXTRAL), "sliding_window": 0}, NAME)
    assert no_window.sliding_window == 0
