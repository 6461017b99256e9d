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
