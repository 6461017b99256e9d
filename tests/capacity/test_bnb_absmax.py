"""Issue 16, kind E: bitsandbytes 4-bit absmax width by vLLM release and double quantization, and the modules a
checkpoint's ``llm_int8_skip_modules`` keeps in the compute dtype.

Sources (read in the vLLM wheels): 0.7.2-0.9.1 keep a double-quantized (nested) absmax as uint8 with one fp32 absmax
per 256 of them (``BitsAndBytesModelLoader``, ``QuantState.from_dict``; bitsandbytes 0.45.3 ``quantize_4bit``:
``compress_statistics`` → ``quantize_blockwise(absmax, blocksize=256)``); 0.9.2 adds ``dequantize_dq``
(``model_loader/bitsandbytes_loader.py``), which makes them fp32 again. In-flight quantization
(``_unquantized_generator``) always passes ``compress_statistics=True``. ``is_layer_skipped_bnb``
(``layers/quantization/bitsandbytes.py``) matches name components, and dotted prefixes from 0.7.3.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.capacity.hardware import GIB
from advisor.capacity.kv import CapacityInputs, weights_bytes_per_gpu, weights_bytes_total
from advisor.capacity.models import ModelArch, get_preset

LLAMA31_8B_LINEAR = 6_979_321_856  # 32 × (4096 × (4096 + 2 × 1024 + 4096) + 3 × 4096 × 14336)
LLAMA31_8B_REST_BYTES = (2 * 128_256 * 4096 + 65 * 4096) * 2  # embedding, LM head, RMSNorms in fp16
LLAMA31_8B_ROTARY_BYTES = 131_072 * 128 * 2  # RotaryEmbedding cos/sin cache, fp16


def _nested(params: int) -> float:
    """Two weights per byte, a uint8 absmax per 64, an fp32 absmax per 64 × 256."""
    return params / 2 + params / 64 + params / 64 / 256 * 4


def _fp32_absmax(params: int) -> float:
    return params / 2 + params / 64 * 4


def _llama(version: str, **kw: Any) -> CapacityInputs:
    return CapacityInputs(
        model=get_preset("meta-llama/Llama-3.1-8B-Instruct"),
        gpu_memory_bytes=15 * GIB,
        dtype="float16",
        quantization="bitsandbytes",
        engine_version=version,
        **kw,
    )


def test_in_flight_4bit_keeps_nested_absmax_before_vllm_0_9_2() -> None:
    # 0.7.2: 3,489,660,928 + 109,051,904 + 1,703,936 + 2,101,878,784 = 5,702,295,552 (was costed at 0.5625 B/param)
    assert weights_bytes_total(_llama("0.7.2")) == 5_702_295_552
    assert _nested(LLAMA31_8B_LINEAR) + LLAMA31_8B_REST_BYTES == 5_702_295_552
    assert weights_bytes_total(_llama("0.9.1")) == 5_702_295_552
    # 0.9.2's dequantize_dq: fp32 absmax, 3,925,868,544 + 2,101,878,784
    assert weights_bytes_total(_llama("0.9.2")) == 6_027_747_328 == _fp32_absmax(LLAMA31_8B_LINEAR) + 2_101_878_784


def test_llama31_8b_bnb4_on_vllm_072_matches_the_logged_weights() -> None:
    # tests/capacity/truth/vllm_v0.yaml llama31-8b-bnb4-t4-v072-unsloth-lora: "Loading model weights took 5.3541 GB"
    # (GiB); nested + fp16 rest + rotary cache = 5,735,849,984 B = 5.3419 GiB (fp32 absmax gave 5.6138 GiB, +4.9 %)
    ours = weights_bytes_per_gpu(_llama("0.7.2"))
    assert ours == 5_702_295_552 + LLAMA31_8B_ROTARY_BYTES
    assert abs(ours / (5.3541 * GIB) - 1) < 0.005


LLAMA3_8B = {  # meta-llama/Meta-Llama-3-8B config.json (huggingface.co/meta-llama/Meta-Llama-3-8B)
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def _prequantized(double_quant: bool, version: str) -> int:
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": double_quant}
    model = ModelArch.from_hf_config({**LLAMA3_8B, "quantization_config": qc}, "m")
    return weights_bytes_total(CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, engine_version=version))


@pytest.mark.parametrize(
    ("double_quant", "version", "nested"),
    [(True, "0.8.5.post1", True), (True, "0.9.1", True), (True, "0.9.2", False), (False, "0.8.5.post1", False)],
)
def test_a_prequantized_checkpoint_is_nested_only_when_its_config_says_double_quant(
    double_quant: bool, version: str, nested: bool
) -> None:
    linear = LLAMA31_8B_LINEAR  # Llama-3-8B has the same linear layers
    rest = (2 * 128_256 * 4096 + 65 * 4096) * 2
    expected = (_nested(linear) if nested else _fp32_absmax(linear)) + rest
    assert _prequantized(double_quant, version) == expected


QWEN25_05B_UNSLOTH = {  # tests/fixtures/truth_models/unsloth__qwen2.5-0.5b-instruct-unsloth-bnb-4bit.json
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": True,
    "attention_bias": True,  # vLLM qwen2.py: QKVParallelLinear(bias=True)
    "quantization_config": {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_use_double_quant": True,
        "llm_int8_skip_modules": [
            "lm_head",
            "multi_modal_projector",
            "merger",
            "modality_projection",
            "model.layers.0.self_attn",
            "model.layers.0.mlp",
            "model.layers.2.mlp",
            "model.layers.3.mlp",
            "model.layers.21.mlp",
            "model.layers.0.self_attn.q_proj",
        ],
    },
}
QWEN_LINEAR = 24 * (896 * 896 * 2 + 896 + 2 * (896 * 128 + 128) + 3 * 896 * 4864)  # 357,854,208 with q/k/v biases
QWEN_REST = 151_936 * 896 + 49 * 896  # tied embedding, 49 RMSNorms


def _qwen(version: str, **overrides: Any) -> int:
    cfg = {**QWEN25_05B_UNSLOTH, **overrides}
    model = ModelArch.from_hf_config(cfg, "unsloth/qwen2.5-0.5b-instruct-unsloth-bnb-4bit")
    inputs = CapacityInputs(model=model, gpu_memory_bytes=24 * GIB, quantization="bitsandbytes", engine_version=version)
    return weights_bytes_total(inputs)


def test_llm_int8_skip_modules_keep_layers_in_the_compute_dtype() -> None:
    # layer 0's attention (q 896², o 896², k and v 896 × 128, biases 896 + 2 × 128) and the MLPs of layers 0, 2, 3
    # and 21 (3 × 896 × 4864 each) stay bf16; the rest is nested (0.8.5.post1: before dequantize_dq)
    skipped = 1_836_160 + 4 * 13_074_432
    assert skipped == 54_133_888
    expected = _nested(QWEN_LINEAR - skipped) + (QWEN_REST + skipped) * 2
    assert _qwen("0.8.5.post1") == pytest.approx(expected, abs=1)
    assert _qwen("0.8.5.post1") == 537_304_837


def test_vllm_072_matches_skip_modules_by_name_component_only() -> None:
    # 0.7.2's is_layer_skipped_bnb: ``module_name in prefix.split('.')``: the dotted names skip nothing, a bare
    # component such as "mlp" skips every MLP
    assert _qwen("0.7.2") == pytest.approx(_nested(QWEN_LINEAR) + QWEN_REST * 2, abs=1)
    qc = {**QWEN25_05B_UNSLOTH["quantization_config"], "llm_int8_skip_modules": ["mlp"]}
    mlps = 24 * 3 * 896 * 4864
    assert _qwen("0.7.2", quantization_config=qc) == pytest.approx(
        _nested(QWEN_LINEAR - mlps) + (QWEN_REST + mlps) * 2, abs=1
    )
