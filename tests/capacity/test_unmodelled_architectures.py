"""Issue 16, kind F: architectures whose engine rules the capacity pass does not follow are refused by name, not
read as a dense decoder (which gave a number for each of them before).

Each config below is a trimmed stand-in holding the keys that select the architecture (the shapes quoted from the
model cards: Gemma 4 E2B 35 layers, 20 sharing KV, sliding head 256, global head 512, per-layer input 256;
Llama-3.2-11B-Vision 40 text layers of which 8 cross-attention; InternVL3-78B an ``llm_config`` of Qwen2.5-72B),
not a published config.json.

What the engine does with them, and so why a dense-decoder reading is wrong:

* Gemma 4 on vLLM 0.21.0 (``model_executor/models/gemma4.py`` ``Gemma4Attention``): layers 15-34 of E2B pass
  ``kv_sharing_target_layer_name`` and get no KV pages (``v1/worker/gpu_model_runner.py`` ``get_kv_cache_spec``
  skips them); of the 15 layers left, 3 full-attention layers cache 512-wide heads, 12 sliding ones 256-wide, and
  ``unify_kv_cache_spec_page_size`` doubles the sliding block size. Read as dense: 35 layers × 256-wide heads.
* mllama on vLLM 0.6.6 (``worker/enc_dec_model_runner.py`` ``profile_run``): the profile puts ``max_num_seqs``
  dummy images through the vision encoder; PR vllm-project/vllm#12126 logs 36.63 GiB of activation for it on an
  H100 against a text-only forward pass of a few GiB.
* InternVL on vLLM 0.6.6 (``worker/model_runner.py`` ``profile_run``): the vision tower runs on dummy images in
  the profile; the language model is under ``llm_config``, not ``text_config``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.models import ModelArch
from advisor.cli import main
from advisor.errors import CapacityError

GEMMA4_E2B: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "text_config": {
        "model_type": "gemma4_text",
        "hidden_size": 1536,
        "intermediate_size": 6144,
        "num_hidden_layers": 35,
        "num_attention_heads": 8,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "global_head_dim": 512,
        "num_kv_shared_layers": 20,
        "hidden_size_per_layer_input": 256,
        "vocab_size_per_layer_input": 262144,
        "use_double_wide_mlp": True,
        "sliding_window": 512,
        "layer_types": ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(35)],
        "vocab_size": 262144,
        "max_position_embeddings": 131072,
    },
    "vision_config": {"model_type": "gemma4_vision", "hidden_size": 768, "num_hidden_layers": 16},
}

MLLAMA_11B: dict[str, Any] = {
    "architectures": ["MllamaForConditionalGeneration"],
    "model_type": "mllama",
    "text_config": {
        "model_type": "mllama_text_model",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
    },
    "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 1280, "num_hidden_layers": 32},
}

INTERNVL3_78B: dict[str, Any] = {
    "architectures": ["InternVLChatModel"],
    "model_type": "internvl_chat",
    "llm_config": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 151674,
        "max_position_embeddings": 32768,
    },
    "vision_config": {"model_type": "intern_vit_6b", "hidden_size": 3200, "num_hidden_layers": 45},
}

CASES = [
    pytest.param(GEMMA4_E2B, "Gemma 4", "num_kv_shared_layers", id="gemma4"),
    pytest.param(MLLAMA_11B, "mllama", "cross_attention_layers", id="mllama"),
    pytest.param(INTERNVL3_78B, "InternVL", "llm_config", id="internvl"),
]


@pytest.mark.parametrize(("config", "architecture", "rule"), CASES)
def test_the_loader_refuses_the_architecture_naming_it_and_the_rule(
    config: dict[str, Any], architecture: str, rule: str
) -> None:
    with pytest.raises(CapacityError) as err:
        ModelArch.from_hf_config(config, name="case")
    assert architecture in str(err.value)
    assert rule in str(err.value)


@pytest.mark.parametrize(("config", "architecture", "rule"), CASES)
def test_an_architectures_only_config_is_refused_too(config: dict[str, Any], architecture: str, rule: str) -> None:
    # vLLM picks the model class from `architectures`; a config.json stating only that is the same model
    bare = {k: v for k, v in config.items() if k != "model_type"}
    if "text_config" in bare:
        bare["text_config"] = {k: v for k, v in bare["text_config"].items() if k != "model_type"}
    with pytest.raises(CapacityError, match=architecture):
        ModelArch.from_hf_config(bare, name="case")


def test_plan_answers_no_number_for_gemma4_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the truth-table row gemma-4-e2b-l4-v0210 (vLLM 0.21.0, L4): read as a dense Gemma the plan printed a token
    # count for 35 layers of 256-wide KV; the engine caches 15 layers (3 of them 512 wide)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA4_E2B), encoding="utf-8")
    code = main(
        ["plan", "--model", str(path), "--gpu", "l4", "--engine-version", "0.21.0", "--max-model-len", "8192", "--json"]
    )
    assert code != 0
    assert "Gemma 4" in capsys.readouterr().err
