"""Bytes per weight and per KV element."""

from __future__ import annotations

import pytest

from advisor.capacity.precision import kv_bytes_per_element, resolve_dtype, weight_bytes_per_param
from advisor.errors import CapacityError


@pytest.mark.parametrize(
    ("dtype", "quantization", "expected"),
    [
        ("bfloat16", None, 2.0),
        ("float16", None, 2.0),
        ("float32", None, 4.0),
        ("bfloat16", "fp8", 1 + 4 / 16384),  # one fp32 scale per 128×128 block
        ("bfloat16", "int8", 1.0),
        ("bfloat16", "awq", (4 + 20 / 128) / 8),  # 4 bits + 16-bit scale and 4-bit zero per 128 weights
        ("float16", "gptq", (4 + 20 / 128) / 8),
        ("bfloat16", "mxfp4", (4 + 8 / 32) / 8),  # E2M1 + one E8M0 scale per 32
        ("bfloat16", "nvfp4", (4 + 8 / 16) / 8),  # E2M1 + one E4M3 scale per 16
    ],
)
def test_weight_bytes_per_param(dtype: str, quantization: str | None, expected: float) -> None:
    assert weight_bytes_per_param(dtype, quantization) == pytest.approx(expected)


def test_auto_dtype_uses_the_checkpoint_dtype_and_serves_float32_checkpoints_in_bfloat16() -> None:
    assert weight_bytes_per_param("auto", None, model_dtype="bfloat16") == 2.0
    assert weight_bytes_per_param("auto", None, model_dtype="float32") == 2.0
    assert resolve_dtype("auto", "float32") == "bfloat16"
    with pytest.raises(CapacityError, match="model_dtype"):
        weight_bytes_per_param("auto", None)


@pytest.mark.parametrize(
    ("kv_dtype", "model_dtype", "expected"),
    [
        ("auto", "bfloat16", 2),
        ("auto", "float16", 2),
        ("fp8", "bfloat16", 1),
        ("fp8_e4m3", "bfloat16", 1),
        ("fp8_e5m2", "float16", 1),
        ("bfloat16", "float32", 2),
        ("float16", "bfloat16", 2),
    ],
)
def test_kv_bytes_per_element(kv_dtype: str, model_dtype: str, expected: int) -> None:
    assert kv_bytes_per_element(kv_dtype, model_dtype) == expected


def test_unknown_precisions_raise_and_list_the_known_names() -> None:
    with pytest.raises(CapacityError, match="fp8_e4m3"):
        kv_bytes_per_element("int3", "bfloat16")
    with pytest.raises(CapacityError, match="awq"):
        weight_bytes_per_param("bfloat16", "nf4")
    with pytest.raises(CapacityError, match="bfloat16"):
        weight_bytes_per_param("float8", None)


# Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8's config.json (huggingface.co/Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8), the keys the
# capacity pass reads; its quantization_config states GPTQ, 8 bits, groups of 128
QWEN_GPTQ_INT8 = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "quantization_config": {"bits": 8, "group_size": 128, "desc_act": False, "sym": True, "quant_method": "gptq"},
}


def _gptq_layer_bytes(rows: int, cols: int, bits: int, group: int) -> int:
    """Bytes vLLM's gptq.py allocates for one ``rows × cols`` linear layer (input rows, output columns): ``qweight``
    [rows × bits / 32, cols] int32, ``scales`` [rows / group, cols] float16, ``qzeros`` [rows / group,
    cols × bits / 32] int32."""
    qweight = rows * bits // 32 * cols * 4
    scales = rows // group * cols * 2
    qzeros = rows // group * (cols * bits // 32) * 4
    return qweight + scales + qzeros


def _weights(config: dict[str, object]) -> int:
    from advisor.capacity.kv import CapacityInputs, weights_bytes_total
    from advisor.capacity.models import ModelArch

    model = ModelArch.from_hf_config(config, "qwen-gptq")
    return weights_bytes_total(CapacityInputs(model=model, gpu_memory_bytes=80 << 30))


def test_a_gptq_int8_checkpoint_is_costed_at_the_width_its_quantization_config_states() -> None:
    # issue 16 kind E: GPTQ/AWQ int8 checkpoints were costed as int4. The expected difference between the int8
    # checkpoint and the same model at int4 is the difference of the tensors vLLM allocates for each linear layer
    # (q, k, v, o, gate, up, down per decoder layer; embeddings, LM head and norms stay float16 in both)
    h, i, kv = 3584, 18944, 4 * 128
    layers = [(h, h), (h, kv), (h, kv), (h, h), (h, i), (h, i), (i, h)]
    int8 = sum(_gptq_layer_bytes(r, c, 8, 128) for r, c in layers) * 28
    int4 = sum(_gptq_layer_bytes(r, c, 4, 128) for r, c in layers) * 28
    as_int4 = {**QWEN_GPTQ_INT8, "quantization_config": {**QWEN_GPTQ_INT8["quantization_config"], "bits": 4}}  # type: ignore[dict-item]
    assert _weights(QWEN_GPTQ_INT8) - _weights(as_int4) == pytest.approx(int8 - int4, abs=2)
    # a quantization_config that states no width is refused (below), as vLLM's GPTQConfig.from_config refuses it


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("bits", 5, "quantization_config.bits"),
        ("bits", "8", "quantization_config.bits"),
        ("group_size", 0, "group_size"),
    ],
)
def test_a_gptq_width_or_group_vllm_cannot_load_is_refused_naming_the_key(key: str, value: object, says: str) -> None:
    bad = {**QWEN_GPTQ_INT8, "quantization_config": {**QWEN_GPTQ_INT8["quantization_config"], key: value}}  # type: ignore[dict-item]
    with pytest.raises(CapacityError, match=says):
        _weights(bad)


def test_an_awq_checkpoint_of_another_width_than_4_bits_is_refused_as_vllm_refuses_it() -> None:
    awq8 = {**QWEN_GPTQ_INT8, "quantization_config": {"quant_method": "awq", "bits": 8, "group_size": 128}}
    with pytest.raises(CapacityError, match="4 for AWQ"):
        _weights(awq8)
    awq4 = {**QWEN_GPTQ_INT8, "quantization_config": {"quant_method": "awq", "w_bit": 4, "q_group_size": 128}}
    gptq4 = {**QWEN_GPTQ_INT8, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128}}
    assert _weights(awq4) == _weights(gptq4)  # the same tensors: qweight, scales, qzeros


def test_awq_keys_are_read_in_vllms_order_and_a_null_key_counts_as_absent() -> None:
    # awq.py AWQConfig.from_config: w_bit before bits, q_group_size before group_size (the first present)
    def awq(**qc: object) -> dict[str, object]:
        return {**QWEN_GPTQ_INT8, "quantization_config": {"quant_method": "awq", **qc}}

    assert _weights(awq(w_bit=4, bits=8, group_size=128)) == _weights(awq(w_bit=4, group_size=128))
    group64 = _weights(awq(w_bit=4, q_group_size=64, group_size=128))
    assert group64 == _weights(awq(bits=4, group_size=64)) != _weights(awq(bits=4, group_size=128))
    # a null group size counts as absent, and vLLM's get_from_keys has no default for it: refused, naming the key
    with pytest.raises(CapacityError, match="q_group_size"):
        _weights(awq(bits=4, group_size=None, q_group_size=None))
    # a method name with spaces around it keeps its stated width (it was read as int4 while the width was dropped)
    spaced = {**QWEN_GPTQ_INT8, "quantization_config": {"quant_method": " gptq ", "bits": 8, "group_size": 128}}
    assert _weights(spaced) == _weights(QWEN_GPTQ_INT8)
