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


# --- tensor parallelism ----------------------------------------------------------------------------------------

from advisor.capacity.kv import kv_bytes_per_token_per_gpu, weights_bytes_per_gpu  # noqa: E402
from advisor.capacity.models import ModelArch  # noqa: E402

DENSE = [
    get_preset(m)
    for m in (
        "meta-llama/Llama-3.1-8B-Instruct",
        "meta-llama/Llama-3.1-70B-Instruct",
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
        "mistralai/Mistral-7B-Instruct-v0.3",
        "microsoft/Phi-3-mini-4k-instruct",
        "meta-llama/Llama-2-13b-hf",
        "Qwen/Qwen3-8B",
    )
]
GQA = [m for m in DENSE if m.num_kv_heads < m.num_attention_heads]


@settings(max_examples=100, deadline=None)
@given(
    model=st.sampled_from(DENSE),
    quantization=st.sampled_from([None, "fp8", "awq"]),
    memory=st.integers(min_value=16 * GIB, max_value=200 * GIB),
)
def test_tp_2_halves_the_per_gpu_weights_of_a_dense_model(
    model: ModelArch, quantization: str | None, memory: int
) -> None:
    one = CapacityInputs(model=model, gpu_memory_bytes=memory, quantization=quantization)
    two = dataclasses.replace(one, tensor_parallel_size=2)
    w1, w2 = weights_bytes_per_gpu(one), weights_bytes_per_gpu(two)
    # Only the norms and the rotary cos/sin cache are replicated on every rank (a fraction of a percent).
    assert w1 / 2 <= w2 <= w1 / 2 * 1.01


@settings(max_examples=100, deadline=None)
@given(model=st.sampled_from(GQA), log2_tp=st.integers(min_value=0, max_value=5))
def test_above_the_kv_head_count_tp_no_longer_shrinks_kv_per_token(model: ModelArch, log2_tp: int) -> None:
    tp = 2**log2_tp
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    assume(heads % tp == 0 and heads % (2 * tp) == 0)
    assume(kv_heads % tp == 0 or tp % kv_heads == 0)
    base = CapacityInputs(model=model, gpu_memory_bytes=80 * GIB, tensor_parallel_size=tp)
    doubled = dataclasses.replace(base, tensor_parallel_size=2 * tp)
    now, then = kv_bytes_per_token_per_gpu(base), kv_bytes_per_token_per_gpu(doubled)
    if 2 * tp <= kv_heads:
        assert then * 2 == now  # each rank holds half as many KV heads
    elif tp >= kv_heads:
        assert then == now  # one (replicated) KV head per rank: stuck
