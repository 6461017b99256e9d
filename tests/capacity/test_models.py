"""Architectures: presets, config.json parsing, parameter counts against published figures."""

from __future__ import annotations

import pytest

from advisor.capacity.models import ModelArch, get_preset, preset_ids
from advisor.errors import CapacityError, UnknownModelError

# Published totals (Hugging Face safetensors metadata / model cards), independent of our code.
PUBLISHED_PARAMETERS = {
    "meta-llama/Llama-3.1-8B-Instruct": 8_030_261_248,
    "meta-llama/Llama-3.1-70B-Instruct": 70_553_706_496,
    "meta-llama/Llama-3.2-1B-Instruct": 1_235_814_400,
    "Qwen/Qwen2.5-0.5B": 494_032_768,
    "Qwen/Qwen2.5-7B-Instruct": 7_615_616_512,
    "microsoft/Phi-3-mini-4k-instruct": 3_821_079_552,
    "google/gemma-2-9b-it": 9_241_705_984,
}

REQUIRED_PRESETS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.2-3B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "Qwen/Qwen2.5-0.5B",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "microsoft/Phi-3-mini-4k-instruct",
    "google/gemma-2-9b-it",
]

LLAMA_31_8B_CONFIG = {  # https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}


def test_every_required_preset_is_bundled_with_a_config_json_source() -> None:
    ids = preset_ids()
    for model_id in REQUIRED_PRESETS:
        assert model_id in ids
        arch = get_preset(model_id)
        assert arch.source == f"https://huggingface.co/{model_id}/blob/main/config.json"
    assert any("tiny" in i for i in ids)


@pytest.mark.parametrize(("model_id", "published"), sorted(PUBLISHED_PARAMETERS.items()))
def test_parameters_computed_from_the_shapes_match_the_published_count(model_id: str, published: int) -> None:
    arch = get_preset(model_id)
    assert arch.num_parameters == published
    assert arch.computed_parameters() == published


def test_llama_3_1_8b_preset_has_its_config_json_numbers() -> None:
    arch = get_preset("meta-llama/Llama-3.1-8B-Instruct")
    assert (arch.num_layers, arch.hidden_size, arch.num_attention_heads, arch.num_kv_heads) == (
        32,
        4096,
        32,
        8,
    )
    assert (arch.head_dim, arch.vocab_size, arch.max_position_embeddings) == (128, 128256, 131072)


@pytest.mark.parametrize("alias", ["llama-3.1-8b", "LLAMA-3.1-8B", "Llama-3.1-8B-Instruct", "llama3.1-8b"])
def test_short_aliases_find_the_preset_case_insensitively(alias: str) -> None:
    assert get_preset(alias).name == "meta-llama/Llama-3.1-8B-Instruct"


def test_an_unknown_model_raises_and_lists_the_known_ids() -> None:
    with pytest.raises(UnknownModelError) as err:
        get_preset("acme/not-a-model")
    assert "meta-llama/Llama-3.1-8B-Instruct" in str(err.value)
    assert "Qwen/Qwen2.5-7B-Instruct" in str(err.value)


def test_from_hf_config_without_head_dim_derives_it_from_hidden_over_heads() -> None:
    arch = ModelArch.from_hf_config(LLAMA_31_8B_CONFIG, "meta-llama/Llama-3.1-8B-Instruct")
    assert arch.head_dim == 4096 // 32 == 128
    assert arch.num_kv_heads == 8
    assert arch.num_parameters == 8_030_261_248


def test_from_hf_config_takes_an_explicit_head_dim_over_hidden_over_heads() -> None:
    # gemma-2-9b: hidden 3584, 16 heads, head_dim 256 (3584 / 16 would be 224).
    config = {
        "hidden_size": 3584,
        "intermediate_size": 14336,
        "max_position_embeddings": 8192,
        "num_attention_heads": 16,
        "num_hidden_layers": 42,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "vocab_size": 256000,
        "torch_dtype": "float32",
        "tie_word_embeddings": True,
    }
    arch = ModelArch.from_hf_config(config, "google/gemma-2-9b-it")
    assert arch.head_dim == 256
    assert arch.torch_dtype == "float32"


def test_from_hf_config_without_kv_heads_is_multi_head_attention() -> None:
    config = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != "num_key_value_heads"}
    assert ModelArch.from_hf_config(config, "mha").num_kv_heads == 32


@pytest.mark.parametrize("missing", ["num_hidden_layers", "hidden_size", "vocab_size", "num_attention_heads"])
def test_a_missing_config_key_raises_an_error_naming_the_key(missing: str) -> None:
    config = {k: v for k, v in LLAMA_31_8B_CONFIG.items() if k != missing}
    with pytest.raises(CapacityError, match=missing):
        ModelArch.from_hf_config(config, "broken")


def test_a_non_integer_config_value_is_refused_with_its_key() -> None:
    with pytest.raises(CapacityError, match="num_hidden_layers"):
        ModelArch.from_hf_config({**LLAMA_31_8B_CONFIG, "num_hidden_layers": "32"}, "broken")


# Acceptance 3: published totals, copied from each model card / Hugging Face page (cited in models.json).
PUBLISHED_TOTALS = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 46.7e9,
    "Qwen/Qwen3-30B-A3B": 30.5e9,
    "Qwen/Qwen3-235B-A22B": 235e9,
    "deepseek-ai/DeepSeek-V3": 671e9,
    "deepseek-ai/DeepSeek-V2-Lite": 15.7e9,
    "openai/gpt-oss-20b": 20.9e9,
    "openai/gpt-oss-120b": 116.8e9,
    "google/gemma-3-27b-it": 27.4e9,
    "ai21labs/Jamba-v0.1": 51.6e9,
    "llava-hf/llava-v1.6-mistral-7b-hf": 7.57e9,
    "Qwen/Qwen2-VL-7B-Instruct": 8.29e9,
    "Qwen/Qwen3-0.6B": 0.6e9,
    "mistralai/Mistral-Nemo-Instruct-2407": 12.2e9,
    # issue 19: the presets operators asked about, each total as its Hugging Face page or model card states it
    "google/gemma-3-1b-it": 1.0e9,  # huggingface.co/google/gemma-3-1b-it: 1,000M params
    "google/gemma-3-4b-it": 4.3e9,  # huggingface.co/google/gemma-3-4b-it: 4.3B params
    "google/gemma-3-12b-it": 12.2e9,  # huggingface.co/google/gemma-3-12b-it: 12.2B params
    "mistralai/Mistral-Small-24B-Instruct-2501": 23.6e9,  # huggingface.co/mistralai/…-2501: 23.6B params
    "Qwen/Qwen2.5-Coder-7B-Instruct": 7.62e9,  # huggingface.co/Qwen/Qwen2.5-Coder-7B-Instruct: 7.62B params
    "Qwen/Qwen2.5-Coder-32B-Instruct": 32.8e9,  # huggingface.co/Qwen/Qwen2.5-Coder-32B-Instruct: 32.8B params
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": 7.62e9,  # huggingface.co/deepseek-ai/…-Qwen-7B: 7.62B params
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": 32.8e9,  # huggingface.co/deepseek-ai/…-Qwen-32B: 32.8B params
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": 8.03e9,  # huggingface.co/deepseek-ai/…-Llama-8B: 8.03B params
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": 70.6e9,  # huggingface.co/deepseek-ai/…-Llama-70B: 70.6B params
    # model card: "17B activated, 109B total" / "17B activated, 400B total" (vision encoder included, not counted)
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": 109e9,
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": 400e9,
    "Qwen/Qwen3-Next-80B-A3B-Instruct": 80e9,  # model card: 80B in total and 3B activated
}

PUBLISHED_ACTIVE = {  # "activated" counts from the model cards
    "mistralai/Mixtral-8x7B-Instruct-v0.1": 12.9e9,
    "Qwen/Qwen3-30B-A3B": 3.3e9,
    "Qwen/Qwen3-235B-A22B": 22e9,
    "deepseek-ai/DeepSeek-V3": 37e9,
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": 17e9,
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": 17e9,
}


def test_there_are_at_least_thirty_presets_each_citing_its_config_json() -> None:
    ids = [i for i in preset_ids() if not i.startswith("advisor/")]
    assert len(ids) >= 30
    for model_id in ids:
        assert get_preset(model_id).source == f"https://huggingface.co/{model_id}/blob/main/config.json"


@pytest.mark.parametrize("model_id", [i for i in preset_ids() if not i.startswith("advisor/")])
def test_every_presets_computed_parameter_count_is_within_two_percent_of_its_published_count(model_id: str) -> None:
    arch = get_preset(model_id)
    assert arch.computed_parameters() == pytest.approx(arch.num_parameters, rel=0.02)


@pytest.mark.parametrize(("model_id", "published"), sorted(PUBLISHED_TOTALS.items()))
def test_architectures_beyond_dense_match_their_model_cards(model_id: str, published: float) -> None:
    assert get_preset(model_id).computed_parameters() == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(("model_id", "published"), sorted(PUBLISHED_ACTIVE.items()))
def test_moe_active_parameters_match_their_model_cards(model_id: str, published: float) -> None:
    assert get_preset(model_id).active_parameters() == pytest.approx(published, rel=0.03)


def test_mla_caches_one_latent_per_layer_and_sliding_and_mamba_layers_are_counted() -> None:
    r1 = get_preset("deepseek-r1")
    assert (r1.kv_lora_rank + r1.qk_rope_head_dim, r1.attention_layers) == (576, 61)
    assert get_preset("gemma-2-9b-it").sliding_window_layers == 21  # every other of 42 layers
    assert get_preset("gemma-3-27b").sliding_window_layers == 52  # 5 local : 1 global over 62 layers
    assert get_preset("gpt-oss-20b").sliding_window_layers == 12
    jamba = get_preset("jamba")
    assert (jamba.attention_layers, jamba.linear_layers) == (4, 28)  # attention every 8th layer, offset 4


# google/gemma-3-1b-it's config.json (huggingface.co/google/gemma-3-1b-it), the keys the capacity pass reads: like
# every Gemma config it does not state tie_word_embeddings, and transformers' Gemma3TextConfig defaults it to True
GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "vocab_size": 262144,
    "max_position_embeddings": 32768,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
}


def test_a_config_that_does_not_state_tie_word_embeddings_takes_its_transformers_class_default() -> None:
    # issue 16 kind F: the default was False for every model, so Gemma's 262,144 × 1,152 embedding was counted
    # twice (its LM head is the embedding): the model card says 1B parameters (huggingface.co/google/gemma-3-1b-it,
    # "1,000M params"), not 1.3 B
    gemma = ModelArch.from_hf_config(GEMMA3_1B, "gemma-3-1b")
    assert gemma.tie_word_embeddings is True
    assert gemma.num_parameters == pytest.approx(1.0e9, rel=0.005)
    assert gemma == ModelArch.from_hf_config({**GEMMA3_1B, "tie_word_embeddings": True}, "gemma-3-1b")
    # a stated value wins; a Llama config without the key is untied (LlamaConfig defaults it to False)
    untied = ModelArch.from_hf_config({**GEMMA3_1B, "tie_word_embeddings": False}, "gemma-3-1b")
    assert untied.num_parameters - gemma.num_parameters == 262144 * 1152
    llama = {**GEMMA3_1B, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    assert ModelArch.from_hf_config(llama, "llama-shaped").tie_word_embeddings is False


# google/gemma-2-2b's config.json (huggingface.co/google/gemma-2-2b), with its model_type left out: vLLM still loads
# Gemma2ForCausalLM from `architectures` (every other layer sliding, gemma2.py; the LM head tied)
GEMMA2_2B_NO_TYPE = {
    "architectures": ["Gemma2ForCausalLM"],
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "vocab_size": 256000,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "torch_dtype": "float32",
}


def test_a_config_without_model_type_is_read_as_the_class_its_architectures_name() -> None:
    # issue 16 kind F: without model_type every layer of a Gemma 2 was taken as sliding and its head as untied
    got = ModelArch.from_hf_config(GEMMA2_2B_NO_TYPE, "gemma-2-2b")
    assert got.sliding_window_layers == 13  # layers 0, 2, …, 24: half of 26
    assert got.tie_word_embeddings is True
    assert got == ModelArch.from_hf_config({**GEMMA2_2B_NO_TYPE, "model_type": "gemma2"}, "gemma-2-2b")
    # a class it does not know leaves the model as before: every windowed layer sliding, untied
    other = ModelArch.from_hf_config({**GEMMA2_2B_NO_TYPE, "architectures": ["SomeNewForCausalLM"]}, "new")
    assert other.sliding_window_layers == 26 and other.tie_word_embeddings is False


def test_a_two_matrix_mlp_is_costed_as_two_matrices() -> None:
    # issue 16 kind F: microsoft/phi-2 (huggingface.co/microsoft/phi-2, config.json) has fc1/fc2, no gate; its
    # checkpoint holds 2,779,683,840 parameters (32 layers × (4 × 2560² attention + 2 × 2560 × 10240 MLP + biases
    # and a LayerNorm) + a 51,200 × 2560 embedding and LM head). Costed as gated it came to 3.62 B (+30 %)
    phi2 = {
        "architectures": ["PhiForCausalLM"],
        "model_type": "phi",
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 51200,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    }
    got = ModelArch.from_hf_config(phi2, "phi-2")
    assert got.num_parameters == pytest.approx(2_779_683_840, rel=0.001)
    assert ModelArch.from_hf_config({**phi2, "model_type": "phi3"}, "phi-3-shaped").gated_mlp is True
