"""Issue 16, kind F: architectures whose engine rules the capacity pass does not follow are refused by name, not
read as a dense decoder (which gave a number for each of them before).

Each config below is a trimmed stand-in holding the keys that select the architecture (the shapes quoted from the
model cards: Llama-3.2-11B-Vision 40 text layers of which 8 cross-attention; InternVL3-78B an ``llm_config`` of
Qwen2.5-72B), not a published config.json. (Gemma 4, refused here before, is sized since: ``test_gemma4.py``.)

What the engine does with them, and so why a dense-decoder reading is wrong:

* mllama on vLLM 0.6.6 (``worker/enc_dec_model_runner.py`` ``profile_run``): the profile puts ``max_num_seqs``
  dummy images through the vision encoder; PR vllm-project/vllm#12126 logs 36.63 GiB of activation for it on an
  H100 against a text-only forward pass of a few GiB.
* InternVL on vLLM 0.6.6 (``worker/model_runner.py`` ``profile_run``): the vision tower runs on dummy images in
  the profile; the language model is under ``llm_config``, not ``text_config``.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError

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
