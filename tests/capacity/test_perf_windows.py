"""Decode and prefill read and attend what each layer kind keeps: a windowed layer at most its window, a recurrent
layer its state (issue 17: the roofline counted every layer at the whole context, so gpt-oss-120b's 8k-token TPOT
came out 1.4x slow in sample). Expected values are hand arithmetic from the presets' config figures."""

from __future__ import annotations

import pytest

from advisor.capacity import perf
from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.kvlayout import (
    attended_head_tokens,
    attended_kv_bytes_per_gpu,
    kv_bytes_per_token_per_gpu,
    prefill_attended_head_pairs,
)
from advisor.capacity.models import get_preset
from advisor.errors import CapacityError

GIB = 2**30


def _inputs(model: str, tp: int = 1) -> CapacityInputs:
    return CapacityInputs(model=get_preset(model), gpu_memory_bytes=80 * GIB, tensor_parallel_size=tp)


def test_gpt_oss_windowed_layers_read_their_window_not_the_context() -> None:
    # gpt-oss-120b: 36 layers, 18 of them windowed at 128 tokens; 8 KV heads × 64, bf16: 2 × 8 × 64 × 2 = 2,048 B
    # per token per layer. At 8,192 tokens: 18 × 2,048 × 8,192 + 18 × 2,048 × 128 = 306,708,480 B.
    inputs = _inputs("openai/gpt-oss-120b")
    assert attended_kv_bytes_per_gpu(inputs, 8192) == 18 * 2048 * 8192 + 18 * 2048 * 128 == 306_708_480
    # Below the window every layer reads the whole context.
    assert attended_kv_bytes_per_gpu(inputs, 100) == 36 * 2048 * 100


def test_tp_splits_the_read_by_kv_heads() -> None:
    # TP 8: one KV head per GPU, 256 B per token per layer.
    inputs = _inputs("openai/gpt-oss-120b", tp=8)
    assert attended_kv_bytes_per_gpu(inputs, 8192) == 18 * 256 * 8192 + 18 * 256 * 128


def test_a_model_without_windows_reads_its_whole_cache() -> None:
    inputs = _inputs("meta-llama/Llama-3.1-8B-Instruct")
    assert attended_kv_bytes_per_gpu(inputs, 1000) == kv_bytes_per_token_per_gpu(inputs) * 1000 == 131_072_000
    assert attended_head_tokens(inputs, 1000) == 128 * 32 * 1000


def test_recurrent_layers_read_and_write_their_state_and_attend_nothing() -> None:
    # Jamba-v0.1: 4 attention layers (8 KV heads × 128, bf16: 4,096 B per token per layer) and 28 Mamba layers of
    # 155,648 state elements in bf16, read and written back each step: 2 × 28 × 155,648 × 2 B.
    inputs = _inputs("ai21labs/Jamba-v0.1")
    assert attended_kv_bytes_per_gpu(inputs, 1000) == 4 * 4096 * 1000 + 2 * 28 * 155_648 * 2
    assert attended_head_tokens(inputs, 1000) == 128 * 4 * 1000


def test_windowed_prefill_attends_w_keys_per_query_beyond_the_window() -> None:
    # gpt-oss-120b, P = 1,000: full layers P²/2 = 500,000 pairs; windowed (W = 128) 128 × 1,000 − 128²/2 = 119,808.
    inputs = _inputs("openai/gpt-oss-120b")
    assert prefill_attended_head_pairs(inputs, 1000) == 64 * 18 * 500_000 + 64 * 18 * 119_808
    # A prompt inside the window is fully causal on every layer.
    assert prefill_attended_head_pairs(inputs, 100) == 64 * 36 * 5_000


def test_the_decode_step_reads_the_attended_bytes() -> None:
    # H100-SXM 3.35 TB/s; with every efficiency 1 and the attention its own kernel, the per-sequence attention
    # memory time is the attended bytes ÷ 3.35 TB/s: 306,708,480 ÷ 3.35e12 = 91.55 µs at 8,192 tokens.
    inputs = _inputs("openai/gpt-oss-120b")
    a = perf.PerfAssumptions(
        memory_bandwidth_efficiency=1.0, kv_bandwidth_efficiency=1.0, attention_serial_fraction=1.0
    )
    step = perf.decode_step_model(inputs, get_gpu("h100-sxm"), 8192, a)
    assert step.attention_memory_per_seq == pytest.approx(306_708_480 / 3.35e12, rel=1e-9)


@pytest.mark.parametrize("fn", [attended_kv_bytes_per_gpu, attended_head_tokens, prefill_attended_head_pairs])
def test_a_negative_context_is_refused(fn: object) -> None:
    with pytest.raises(CapacityError, match="must be ≥ 0"):
        fn(_inputs("openai/gpt-oss-120b"), -1)  # type: ignore[operator]
