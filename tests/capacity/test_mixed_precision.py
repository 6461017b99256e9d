"""Mixed-precision checkpoints (issue 16, kind E): each layer group sized in the format its
``quantization_config`` names (vLLM 0.24.0 ``modelopt.py`` ``ModelOptMixedPrecisionConfig``, 0.14
``compressed_tensors.py`` ``get_scheme``). Every expected figure is hand arithmetic from the config's shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import ModelArch
from advisor.capacity.weights import weights_bytes_total
from advisor.errors import CapacityError

QWEN36 = Path(__file__).resolve().parents[1] / "fixtures" / "truth_models" / "nvidia__Qwen3.6-35B-A3B-NVFP4.json"
GIB = 1 << 30
NVFP4 = (4 + 8 / 16) / 8  # E2M1 nibbles + one fp8 scale per 16 inputs: 0.5625 B
BF16 = 2


def _qwen36() -> ModelArch:
    return ModelArch.from_hf_config(json.loads(QWEN36.read_text()), "nvidia/Qwen3.6-35B-A3B-NVFP4")


def test_qwen36_nvfp4_mixed_checkpoint_is_sized_per_layer_group() -> None:
    # config.json: hidden 2048, 40 layers (10 full attention, 30 Gated DeltaNet), 256 experts of 512 + one shared
    # expert of 512, vocab 248,320 untied; quantized_layers: experts, shared experts and lm_head W4A16_NVFP4
    # (group 16), self_attn q/k/v/o and linear_attn in_proj_qkv/in_proj_z/out_proj FP8; the rest bf16.
    h, vocab = 2048, 248_320
    experts = 40 * 256 * 3 * h * 512
    shared = 40 * 3 * h * 512
    lm_head = vocab * h
    attention = 10 * (h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h)  # q with its output gate, k, v, o
    gdn_proj = 30 * (h * (2 * 16 * 128 + 2 * 32 * 128) + 32 * 128 * h)  # in_proj_qkvz + out_proj
    embedding = vocab * h
    gdn_rest = 30 * (h * 2 * 32 + (2 * 16 * 128 + 32 * 128) * 4 + 2 * 32 + 128)  # in_proj_ba, conv1d, dt/A, norm
    routers = 40 * 256 * h
    norms = (2 * 40 + 1) * h + 2 * 256 * 10  # layer norms + final + q/k norms of the attention layers
    d, i, merged = 1152, 4304, 1152 * 4  # vision tower: 27 blocks, patch 16, 2,304 positions, out 2048
    block = 4 * d + 3 * d * d + 3 * d + d * d + d + d * i + i + i * d + d
    vision = 3 * 2 * 16 * 16 * d + d + 2304 * d + 27 * block + 2 * d + merged * merged + merged + merged * 2048 + 2048
    assert vision == 446_571_248
    m = _qwen36()
    assert m.checkpoint_quantization == "modelopt_mixed"
    assert m.vision_parameters == vision
    expected = (
        (experts + shared + lm_head) * NVFP4
        + (attention + gdn_proj) * 1
        + (embedding + gdn_rest + routers + norms + vision) * BF16
    )
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=32 * GIB, dtype="bfloat16"))
    assert got == pytest.approx(expected, abs=1)  # 21.73 GB where all-FP8 came to 35.7 GB


@pytest.mark.parametrize("flag", ["modelopt", "modelopt_fp4", "modelopt_mixed"])
def test_a_modelopt_flag_loads_the_mixed_checkpoint_as_vllm_overrides_it(flag: str) -> None:
    # vllm/config/model.py _verify_quantization (0.24.0): ModelOptMixedPrecisionConfig.override_quantization_method
    # returns "modelopt_mixed" for quant_algo MIXED_PRECISION whatever --quantization says, so
    # `--quantization modelopt` (the club-3090 log's) starts; it used to be refused as contradicting "fp8".
    inputs = CapacityInputs(model=_qwen36(), gpu_memory_bytes=32 * GIB, dtype="bfloat16", quantization=flag)
    assert inputs.effective_quantization == "modelopt_mixed"
    assert weights_bytes_total(inputs) == weights_bytes_total(
        CapacityInputs(model=_qwen36(), gpu_memory_bytes=32 * GIB, dtype="bfloat16")
    )


def test_another_method_still_contradicts_the_mixed_checkpoint() -> None:
    with pytest.raises(CapacityError, match="contradicts"):
        CapacityInputs(model=_qwen36(), gpu_memory_bytes=32 * GIB, quantization="awq")


def _mixtral_like(quantization_config: dict[str, Any]) -> ModelArch:
    return ModelArch.from_hf_config(
        {
            "model_type": "mixtral",
            "hidden_size": 4096,
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "num_local_experts": 8,
            "num_experts_per_tok": 2,
            "vocab_size": 32000,
            "max_position_embeddings": 4096,
            "torch_dtype": "bfloat16",
            "quantization_config": quantization_config,
        },
        "mixtral-like",
    )


FP8_BLOCK = {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128], "symmetric": True}
W4_G32 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}


def test_compressed_tensors_config_groups_size_fp8_attention_and_int4_experts() -> None:
    # The MiniMax-M2.1-FP8-INT4-AWQ layout its card describes: attention FP8 with 128×128 blocks (an fp32 scale per
    # block), experts W4A16 in groups of 32 (a bf16 scale per 32: 4 + 16/32 = 4.5 bits; the fused-MoE WNA16
    # method holds no zero points), router and lm_head ignored.
    m = _mixtral_like(
        {
            "quant_method": "compressed-tensors",
            "format": "mixed-precision",
            "config_groups": {
                "group_0": {"targets": ["re:.*self_attn.*"], "weights": FP8_BLOCK},
                "group_1": {"targets": ["re:.*block_sparse_moe.experts.*"], "weights": W4_G32},
            },
            "ignore": ["lm_head", "re:.*block_sparse_moe.gate$"],
        }
    )
    attention = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024)
    experts = 2 * 8 * 3 * 4096 * 14336
    rest = 2 * 32000 * 4096 + 2 * 8 * 4096 + (2 * 2 + 1) * 4096  # embed + lm_head, routers, norms
    expected = attention * (1 + 4 / (128 * 128)) + experts * (4 + 16 / 32) / 8 + rest * BF16
    assert m.checkpoint_quantization == "compressed-tensors"
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    assert got == pytest.approx(expected, abs=1)


def test_a_class_target_covers_every_linear_layer_not_ignored_nor_named_first() -> None:
    # find_matched_target: a layer-name match (group_0's regex) wins over the class name "Linear" (group_1), which
    # then covers the experts (FusedMoE takes the Linear scheme) and the router unless ignored.
    m = _mixtral_like(
        {
            "quant_method": "compressed-tensors",
            "config_groups": {
                "group_0": {"targets": ["re:.*self_attn.*"], "weights": {**FP8_BLOCK, "strategy": "channel"}},
                "group_1": {"targets": ["Linear"], "weights": W4_G32},
            },
            "ignore": ["lm_head"],
        }
    )
    attention = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024)
    experts_and_routers = 2 * 8 * 3 * 4096 * 14336 + 2 * 8 * 4096
    rest = 2 * 32000 * 4096 + (2 * 2 + 1) * 4096
    expected = attention * 1 + experts_and_routers * (4 + 16 / 32) / 8 + rest * BF16
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    assert got == pytest.approx(expected, abs=1)


def test_a_layer_the_mixed_list_leaves_out_stays_in_the_compute_dtype() -> None:
    # ModelOptMixedPrecisionConfig.get_quant_method: a layer not in quantized_layers gets UnquantizedLinearMethod
    # (and a RoutedExperts layer no quant method): layer 1's experts stay bf16.
    m = _mixtral_like(
        {
            "quant_method": "modelopt",
            "quant_algo": "MIXED_PRECISION",
            "quantized_layers": {
                "model.layers.0.block_sparse_moe.experts": {"quant_algo": "NVFP4", "group_size": 16},
                "model.layers.1.self_attn.q_proj": {"quant_algo": "FP8"},
                "model.layers.1.self_attn.k_proj": {"quant_algo": "FP8"},
                "model.layers.1.self_attn.v_proj": {"quant_algo": "FP8"},
                "model.layers.1.self_attn.o_proj": {"quant_algo": "FP8"},
            },
        }
    )
    layer_experts = 8 * 3 * 4096 * 14336
    layer_attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    rest = 2 * 32000 * 4096 + 2 * 8 * 4096 + (2 * 2 + 1) * 4096
    expected = layer_experts * NVFP4 + layer_attention * 1 + (layer_experts + layer_attention + rest) * BF16
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    assert got == pytest.approx(expected, abs=1)


def _plan_weights(*extra: str) -> int:
    from tests.inprocess import run_cli

    r = run_cli(
        "plan", "--model", str(QWEN36), "--gpu", "rtx5090", "--dtype", "bfloat16", "--quantization", "modelopt",
        "--kv-cache-dtype", "fp8", "--max-model-len", "131072", "--engine-version", "0.24.0", "--json", *extra,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return int(json.loads(r.stdout)["weights_bytes_per_gpu"])


def test_limit_mm_per_prompt_zero_for_image_and_video_leaves_the_vision_tower_unloaded() -> None:
    # vLLM 0.24.0 interfaces.py _mark_tower_model: Qwen3.5's tower (marked {"image", "video"}) is skipped when both
    # limits are 0; its 446,571,248 bf16 parameters (hand count above) leave the weights. A modality left out keeps
    # its default limit, so {"image": 0} alone still loads the tower; the club-3090 log's {"image": 2} loads it.
    loaded = _plan_weights()
    assert loaded - _plan_weights("--limit-mm-per-prompt", '{"image": 0, "video": 0}') == 446_571_248 * BF16
    assert _plan_weights("--limit-mm-per-prompt", '{"image": 0}') == loaded
    assert _plan_weights("--limit-mm-per-prompt", '{"image": 2, "audio": 0}') == loaded


# One-format compressed-tensors checkpoints (truth round 72): llm-compressor writes quant_method
# "compressed-tensors" for FP8 and integer W4A16/W8A16 alike; vLLM picks the kernel from weights.num_bits/type
# (compressed_tensors.py get_scheme) and prints quantization=compressed-tensors for both.


_LLAMA_CFG: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "num_hidden_layers": 2,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def _llama_like(quantization_config: dict[str, Any]) -> ModelArch:
    return ModelArch.from_hf_config({**_LLAMA_CFG, "quantization_config": quantization_config}, "llama-like")


FP8_CHANNEL = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
W4_G128 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}
LLAMA_LINEAR = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)  # q, o, k, v and the gated MLP
LLAMA_REST = 2 * 32000 * 4096 + (2 * 2 + 1) * 4096  # embedding + untied lm_head, norms


def _one_group(weights: dict[str, Any]) -> dict[str, Any]:
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized" if weights["type"] == "int" else "float-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ["lm_head"],
    }


def test_a_one_group_int4_compressed_tensors_checkpoint_is_sized_at_its_width_not_as_fp8() -> None:
    # W4A16 in groups of 128, symmetric: 4 bits + a bf16 scale per 128 inputs = 4.125 bits = 0.515625 B a weight on
    # the decoder's linear layers; it was read as "fp8" (1 B a weight), nearly twice its size
    m = _llama_like(_one_group(W4_G128))
    assert m.checkpoint_quantization == "compressed-tensors"
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    assert got == pytest.approx(LLAMA_LINEAR * (4 + 16 / 128) / 8 + LLAMA_REST * BF16, abs=1)


def test_a_one_group_fp8_compressed_tensors_checkpoint_stays_fp8() -> None:
    m = _llama_like(_one_group(FP8_CHANNEL))
    assert m.checkpoint_quantization == "fp8" and m.checkpoint_quant_method == "compressed-tensors"
    got = weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    assert got == pytest.approx(LLAMA_LINEAR * 1 + LLAMA_REST * BF16, rel=1e-3)


@pytest.mark.parametrize("weights", [FP8_CHANNEL, W4_G128], ids=["fp8", "w4a16"])
def test_quantization_compressed_tensors_names_the_checkpoints_own_loader(weights: dict[str, Any]) -> None:
    # llm-d-planner's vLLM 0.19.0 log of RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic at TP 4 prints
    # quantization=compressed-tensors (the loader vLLM names); `--quantization compressed-tensors` was refused as
    # contradicting a checkpoint "stored as 'fp8'", so that log got no answer
    m = _llama_like(_one_group(weights))
    named = CapacityInputs(model=m, gpu_memory_bytes=80 * GIB, quantization="compressed-tensors")
    assert named.effective_quantization == m.checkpoint_quantization
    assert weights_bytes_total(named) == weights_bytes_total(CapacityInputs(model=m, gpu_memory_bytes=80 * GIB))
    # another method still contradicts it, and the message names the loader vLLM prints
    with pytest.raises(CapacityError, match="stored as 'compressed-tensors'"):
        CapacityInputs(model=m, gpu_memory_bytes=80 * GIB, quantization="awq")


def test_quantization_fp8_on_a_compressed_tensors_fp8_checkpoint_is_refused_as_vllm_refuses_it() -> None:
    # walkthrough 2026-12-07: vLLM's _verify_quantization compares the loader names (compressed-tensors ≠ fp8, and
    # no override claims it), so `--quantization fp8` on such a checkpoint does not start; it was accepted because
    # the plan reads the checkpoint as fp8
    m = _llama_like(_one_group(FP8_CHANNEL))
    with pytest.raises(CapacityError, match="stored as 'compressed-tensors'"):
        CapacityInputs(model=m, gpu_memory_bytes=80 * GIB, quantization="fp8")


def test_compressed_tensors_on_an_unquantized_checkpoint_says_it_is_a_checkpoint_format() -> None:
    # it was "unknown quantization 'compressed-tensors'", though the same name is accepted for a quantized checkpoint
    m = _llama_like(_one_group(FP8_CHANNEL))
    plain = ModelArch.from_hf_config(dict(_LLAMA_CFG), "plain")
    assert plain.checkpoint_quantization is None and m.checkpoint_quantization == "fp8"
    with pytest.raises(CapacityError, match="names a checkpoint's format"):
        weights_bytes_total(CapacityInputs(model=plain, gpu_memory_bytes=80 * GIB, quantization="compressed-tensors"))
