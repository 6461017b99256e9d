"""Invariants of the capacity model (hypothesis)."""

from __future__ import annotations

import dataclasses

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from advisor.capacity.hardware import GIB
from advisor.capacity.kv import CapacityInputs, CapacityResult, capacity_pass
from advisor.capacity.models import get_preset
from advisor.errors import CapacityError

MODELS = [get_preset(m) for m in ("llama-3.1-8b", "qwen2.5-0.5b", "phi-3-mini", "llama-3.2-1b", "tiny")]

inputs_strategy = st.builds(
    CapacityInputs,
    model=st.sampled_from(MODELS),
    gpu_memory_bytes=st.integers(min_value=4 * GIB, max_value=200 * GIB),
    gpu_memory_utilization=st.floats(min_value=0.5, max_value=0.98),
    max_model_len=st.integers(min_value=1, max_value=131072),
    block_size=st.sampled_from([8, 16, 32]),
)


def _run(inputs: CapacityInputs) -> CapacityResult:
    try:
        return capacity_pass(inputs)
    except CapacityError:
        assume(False)
        raise


@settings(max_examples=200, deadline=None)
@given(inputs=inputs_strategy, extra=st.integers(min_value=1, max_value=80 * GIB))
def test_more_memory_never_lowers_the_ceiling(inputs: CapacityInputs, extra: int) -> None:
    small = _run(inputs)
    big = capacity_pass(dataclasses.replace(inputs, gpu_memory_bytes=inputs.gpu_memory_bytes + extra))
    assert big.kv_cache_tokens >= small.kv_cache_tokens
    assert big.max_concurrency >= small.max_concurrency


@settings(max_examples=200, deadline=None)
@given(inputs=inputs_strategy, longer=st.integers(min_value=1, max_value=65536))
def test_a_longer_context_never_raises_the_ceiling(inputs: CapacityInputs, longer: int) -> None:
    short = _run(inputs)
    assert inputs.max_model_len is not None
    long_ = _run(dataclasses.replace(inputs, max_model_len=inputs.max_model_len + longer))
    assert long_.max_concurrency <= short.max_concurrency
    assert short.concurrency_at(inputs.max_model_len + longer) <= short.concurrency_at(inputs.max_model_len)


@settings(max_examples=200, deadline=None)
@given(inputs=inputs_strategy)
def test_fp8_kv_cache_about_doubles_the_tokens(inputs: CapacityInputs) -> None:
    bf16 = _run(inputs)
    assume(bf16.kv_cache_blocks >= 50)
    fp8 = capacity_pass(dataclasses.replace(inputs, kv_cache_dtype="fp8"))
    # Same pool, half the bytes per token: floor(2x) ≥ 2·floor(x) and ≤ 2·floor(x) + 1 blocks.
    assert 2 * bf16.kv_cache_blocks <= fp8.kv_cache_blocks <= 2 * bf16.kv_cache_blocks + 1
    assert 1.9 <= fp8.kv_cache_tokens / bf16.kv_cache_tokens <= 2.1
