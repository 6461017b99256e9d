"""Roofline estimates, checked against hand arithmetic from spec-sheet figures."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import (
    PerfAssumptions,
    decode_step_seconds,
    decode_tokens_per_second,
    prefill_seconds,
    tpot_seconds,
)
from advisor.errors import CapacityError

LLAMA_8B = get_preset("llama-3.1-8b")
H100 = get_gpu("h100-sxm")
BASE = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192)


def test_batch_one_decode_is_weight_streaming_time() -> None:
    # (8.03 G params × 2 B + 32 MiB rotary + 1000 tokens × 128 KiB) ÷ (3.35 TB/s × 0.8) ≈ 6.05 ms
    expected = (8_030_261_248 * 2 + 131072 * 128 * 2 + 1000 * 131072) / (3.35e12 * 0.8)
    assert decode_step_seconds(BASE, H100, batch=1, mean_context_tokens=1000) == pytest.approx(expected, rel=1e-3)
    assert tpot_seconds(BASE, H100, 1, 1000) == decode_step_seconds(BASE, H100, 1, 1000)


def test_small_batches_are_memory_bound_so_throughput_grows_with_batch() -> None:
    one = decode_step_seconds(BASE, H100, 1, 1000)
    two = decode_step_seconds(BASE, H100, 2, 1000)
    assert two / one < 1.02
    rates = [decode_tokens_per_second(BASE, H100, b, 1000) for b in (1, 8, 64, 256)]
    assert rates == sorted(rates)
    assert rates[0] == pytest.approx(1 / one)


def test_tensor_parallel_shortens_the_memory_bound_step() -> None:
    tp2 = dataclasses.replace(BASE, tensor_parallel_size=2)
    assert decode_step_seconds(tp2, H100, 1, 1000) < decode_step_seconds(BASE, H100, 1, 1000)


def test_prefill_is_compute_bound_at_dense_bf16_peak() -> None:
    # body matmuls 6.979 G params: 2 × 2000 × 6.979e9 + LM head 2 × 525e6 + causal attention
    # 2 × 32 layers × 32 heads × 128 × 2000² ≈ 28.97 TFLOP ÷ (989.5 TFLOP/s × 0.6) ≈ 48.8 ms
    body = 8_030_261_248 - 65 * 4096 - 2 * 128256 * 4096
    flops = 2 * 2000 * body + 2 * 128256 * 4096 + 2 * 32 * 32 * 128 * 2000**2
    assert prefill_seconds(BASE, H100, 2000) == pytest.approx(flops / (989.5e12 * 0.6), rel=1e-3)


def test_fp8_weights_use_the_fp8_tensor_peak() -> None:
    fp8 = dataclasses.replace(BASE, quantization="fp8")
    assert prefill_seconds(fp8, H100, 4000) == pytest.approx(prefill_seconds(BASE, H100, 4000) / 2, rel=0.01)


def test_efficiency_factors_are_injectable() -> None:
    slower = PerfAssumptions(memory_bandwidth_efficiency=0.4)
    assert decode_step_seconds(BASE, H100, 1, 0, slower) == pytest.approx(
        2 * decode_step_seconds(BASE, H100, 1, 0), rel=1e-9
    )


def test_a_gpu_without_a_published_tensor_rate_cannot_estimate_compute() -> None:
    with pytest.raises(CapacityError, match="A10G"):
        prefill_seconds(BASE, get_gpu("a10g"), 1000)


def test_nonsense_arguments_are_refused() -> None:
    with pytest.raises(CapacityError, match="batch"):
        decode_step_seconds(BASE, H100, 0, 100)
    with pytest.raises(CapacityError, match="prompt_tokens"):
        prefill_seconds(BASE, H100, 0)


def test_batch_one_decode_matches_a_published_a100_measurement() -> None:
    # johnmusgrave.com "vLLM throughput-latency sweep on NVIDIA A100": vLLM 0.23.0, Llama-3.1-8B-Instruct bf16,
    # one A100 40GB, 1,024 + 128 tokens, concurrency 1: about 75 output tokens/s. Mean context while decoding:
    # 1,024 + 64 tokens. Within 5 %.
    a100 = get_gpu("a100-40gb")
    inputs = dataclasses.replace(BASE, gpu_memory_bytes=a100.memory_bytes)
    assert decode_tokens_per_second(inputs, a100, 1, 1024 + 64) == pytest.approx(75, rel=0.05)
