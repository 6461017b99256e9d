"""A config.json that leaves a key out is read with transformers' default for its ``model_type``, "not ours" (the
issue's rule): what vLLM reads from the config object transformers builds.

Mixture-of-experts defaults (transformers ``src/transformers/models/<type>/configuration_<type>.py``): MixtralConfig
``num_local_experts`` 8, ``num_experts_per_tok`` 2 (``attribute_map``: ``num_experts`` → ``num_local_experts``);
Qwen2MoeConfig ``num_experts`` 60, top-4, ``moe_intermediate_size`` 1408, ``shared_expert_intermediate_size`` 5632;
Qwen3MoeConfig ``num_experts`` 128, top-8, ``moe_intermediate_size`` 768. Without them such a file was sized as a
dense model (a Mixtral-8x7B-shaped file: 7.2 B parameters, 13.5 GiB, exit 0).

Every expected count below is hand arithmetic from the shapes (written out beside each), not the code's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from advisor.capacity.models import ModelArch
from advisor.modelfile import resolve_model
from tests.inprocess import run_cli

# Mixtral-8x7B's shapes (mistralai/Mixtral-8x7B-v0.1 config.json) without its expert keys
MIXTRAL_SHAPES: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}

# Mixtral-8x7B with 8 experts of 14336, top-2 (the module docstring of advisor.capacity.models and the model card's
# 46.7 B): per layer attention 2 × 4096 × 4096 + 2 × 4096 × 1024 = 41,943,040; experts 8 × 3 × 4096 × 14336 =
# 1,409,286,144 + router 8 × 4096 = 32,768; two norms 8,192 → 1,451,270,144; × 32 = 46,440,644,608; final norm
# 4,096; embedding and LM head 2 × 32000 × 4096 = 262,144,000 → 46,702,792,704.
MIXTRAL_8X7B_PARAMETERS = 46_702_792_704

# a small Qwen-MoE shape: hidden 256, 2 layers, 4 heads of 64 (4 KV heads), vocab 1000
SMALL_SHAPES: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}


def _load(tmp_path: Path, config: dict[str, Any], name: str = "config.json") -> ModelArch:
    path = tmp_path / name
    path.write_text(json.dumps(config), encoding="utf-8")
    return resolve_model(str(path))


def test_a_mixtral_config_without_its_expert_keys_is_mixtrals_eight_experts_top_two(tmp_path: Path) -> None:
    arch = _load(tmp_path, MIXTRAL_SHAPES)
    assert (arch.num_experts, arch.experts_per_token) == (8, 2)
    assert arch.moe_intermediate_size == 14336  # Mixtral's experts are intermediate_size wide
    assert arch.num_parameters == MIXTRAL_8X7B_PARAMETERS


def test_a_mixtral_config_known_only_by_its_architectures_takes_the_same_defaults(tmp_path: Path) -> None:
    config = {k: v for k, v in MIXTRAL_SHAPES.items() if k != "model_type"}
    arch = _load(tmp_path, config)
    assert (arch.num_experts, arch.experts_per_token, arch.num_parameters) == (8, 2, MIXTRAL_8X7B_PARAMETERS)


def test_a_mixtral_config_without_a_top_k_takes_two(tmp_path: Path) -> None:
    arch = _load(tmp_path, {**MIXTRAL_SHAPES, "num_local_experts": 8})  # exited 2 naming num_experts_per_tok
    assert arch.experts_per_token == 2
    assert arch.num_parameters == MIXTRAL_8X7B_PARAMETERS


def test_a_mixtral_config_stating_num_experts_keeps_that_count(tmp_path: Path) -> None:
    # MixtralConfig.attribute_map reads num_experts as num_local_experts: 4 experts, not the default 8.
    # Per layer 41,943,040 + 4 × 3 × 4096 × 14336 = 704,643,072 + router 4 × 4096 = 16,384 + norms 8,192 =
    # 746,610,688; × 32 = 23,891,542,016; + 4,096 + 262,144,000 = 24,153,690,112
    arch = _load(tmp_path, {**MIXTRAL_SHAPES, "num_experts": 4})
    assert (arch.num_experts, arch.experts_per_token) == (4, 2)
    assert arch.num_parameters == 24_153_690_112


def test_a_qwen2_moe_config_without_its_expert_keys_is_qwen2_moes_sixty_experts(tmp_path: Path) -> None:
    config = {**SMALL_SHAPES, "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe"}
    arch = _load(tmp_path, config)
    assert (arch.num_experts, arch.experts_per_token, arch.moe_intermediate_size) == (60, 4, 1408)
    assert arch.num_shared_experts == 4  # the shared expert 5632 wide = 4 × 1408
    # per layer: attention 4 × 256 × 256 = 262,144; experts (60 + 4 shared) × 3 × 256 × 1408 = 69,206,016;
    # router 60 × 256 = 15,360; two norms 512 → 69,484,032; × 2 layers = 138,968,064; final norm 256;
    # embedding and LM head (untied) 2 × 1000 × 256 = 512,000 → 139,480,320
    assert arch.num_parameters == 139_480_320


def test_a_qwen3_moe_config_without_its_expert_keys_is_qwen3_moes_128_experts(tmp_path: Path) -> None:
    config = {**SMALL_SHAPES, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"}
    arch = _load(tmp_path, config)
    assert (arch.num_experts, arch.experts_per_token, arch.moe_intermediate_size) == (128, 8, 768)
    assert arch.num_shared_experts == 0
    # per layer: attention 262,144; experts 128 × 3 × 256 × 768 = 75,497,472; router 128 × 256 = 32,768; two
    # norms 512 → 75,792,896; × 2 = 151,585,792; final norm 256; q/k norms 2 × 64 × 2 layers = 256;
    # embedding and LM head 512,000 → 152,098,304
    assert arch.num_parameters == 152_098_304


def test_the_plan_of_a_mixtral_config_without_its_expert_keys_does_not_fit_one_h100(tmp_path: Path) -> None:
    # 46,702,792,704 × 2 B = 93.4 GB = 87.0 GiB of bf16 weights > 0.9 × 79.15 GiB: refused (it printed 13.50 GiB
    # and exit 0 as a dense 7.2 B model)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL_SHAPES), encoding="utf-8")
    r = run_cli("plan", "--model", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192")
    assert r.returncode == 3, r.stderr
    assert re.search(r"weights need 8[67]\.\d\d GiB", r.stdout + r.stderr), r.stdout


# --- a multimodal wrapper without vision_config: the tower transformers builds ------------------------------------
# LlavaConfig / LlavaNextConfig with vision_config None build CLIP ViT-L/14-336 (hidden 1024, intermediate 4096, 24
# layers, patch 14, image 336); Gemma3Config builds SiglipVisionConfig() (hidden 768, intermediate 3072, 12 layers,
# patch 16, image 224). vLLM loads the tower from that config.
LLAMA_31_8B_TEXT: dict[str, Any] = {  # Llama-3.1-8B's published config.json as a text_config
    k: v
    for k, v in json.loads(
        (Path(__file__).parents[1] / "fixtures" / "hf_configs" / "meta-llama__Meta-Llama-3.1-8B.json").read_text()
    ).items()
    if k not in ("_source", "architectures", "torch_dtype")
}
LLAVA: dict[str, Any] = {
    "architectures": ["LlavaForConditionalGeneration"],
    "model_type": "llava",
    "text_config": LLAMA_31_8B_TEXT,
    "torch_dtype": "bfloat16",
}
LLAVA_DEFAULT_TOWER: dict[str, Any] = {
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
# CLIP-L/336 as vLLM's llava.py loads it (vision_feature_layer -2: 23 of 24 layers, no post-LayerNorm), the
# projector to the text hidden size 4096:
#   per layer  q, k, v, o with biases 4 × (1024² + 1024) = 4,198,400; MLP 2 × 1024 × 4096 + 4096 + 1024 = 8,393,728;
#              two LayerNorms 4 × 1024 = 4,096 → 12,596,224; × 23 = 289,713,152
#   embedding  patch 3 × 14² × 1024 = 602,112, class token 1,024, positions (24² + 1) × 1024 = 590,848,
#              pre-LayerNorm 2,048 → 1,196,032
#   projector  1024 × 4096 + 4096 + 4096² + 4096 = 20,979,712
#   total      311,888,896
LLAVA_TOWER_PARAMETERS = 311_888_896


def test_a_llava_config_without_vision_config_counts_transformers_default_clip_tower(tmp_path: Path) -> None:
    absent = _load(tmp_path, LLAVA, "absent.json")
    null = _load(tmp_path, {**LLAVA, "vision_config": None}, "null.json")
    explicit = _load(tmp_path, {**LLAVA, "vision_config": LLAVA_DEFAULT_TOWER}, "explicit.json")
    assert absent.vision_parameters == null.vision_parameters == LLAVA_TOWER_PARAMETERS
    assert absent.num_parameters == null.num_parameters == explicit.num_parameters
    assert absent.num_parameters - LLAVA_TOWER_PARAMETERS == explicit.num_parameters - explicit.vision_parameters


def test_the_plan_of_a_llava_config_without_vision_config_holds_the_tower_weights(tmp_path: Path) -> None:
    runs = {}
    for label, config in (("absent", LLAVA), ("explicit", {**LLAVA, "vision_config": LLAVA_DEFAULT_TOWER})):
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        r = run_cli("plan", "--model", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
        assert r.returncode == 0, r.stderr
        runs[label] = json.loads(r.stdout)
    assert runs["absent"]["weights_bytes_per_gpu"] == runs["explicit"]["weights_bytes_per_gpu"]
    assert runs["absent"]["kv_cache_tokens"] == runs["explicit"]["kv_cache_tokens"]
    # the text model alone (a text-only file of the same text_config) plus 311,888,896 × 2 B of bf16 tower
    text_only = tmp_path / "text.json"
    text_only.write_text(json.dumps({**LLAMA_31_8B_TEXT, "architectures": ["LlamaForCausalLM"]}), encoding="utf-8")
    r = run_cli("plan", "--model", str(text_only), "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    assert r.returncode == 0, r.stderr
    text_weights = json.loads(r.stdout)["weights_bytes_per_gpu"]
    assert runs["absent"]["weights_bytes_per_gpu"] == text_weights + 2 * LLAVA_TOWER_PARAMETERS


def test_a_llava_next_config_without_vision_config_counts_the_same_tower_and_its_image_newline(
    tmp_path: Path,
) -> None:
    config = {**LLAVA, "architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next"}
    arch = _load(tmp_path, config)
    assert arch.vision_parameters == LLAVA_TOWER_PARAMETERS + 4096  # image_newline: one text-hidden vector


def test_a_gemma3_config_without_vision_config_counts_the_default_siglip_tower(tmp_path: Path) -> None:
    text = {**LLAMA_31_8B_TEXT, "model_type": "gemma3_text", "head_dim": 128}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": text}
    absent = _load(tmp_path, config, "absent.json")
    empty = _load(tmp_path, {**config, "vision_config": {}}, "empty.json")  # SiglipVisionConfig() as well
    assert absent.vision_parameters == empty.vision_parameters > 0
    assert absent.num_parameters == empty.num_parameters


def test_a_gemma4_config_without_vision_config_carries_no_tower(tmp_path: Path) -> None:
    # Gemma4Config: "vision_config is None. Gemma4Model.vision_tower will not be initialized"
    config = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": {"model_type": "gemma4_text"},
    }
    arch = _load(tmp_path, config)
    assert arch.unsized_towers == ()
    assert arch.vision_parameters == 0
