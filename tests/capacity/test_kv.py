"""The capacity pass against independently known figures (config.json arithmetic and vLLM logs)."""

from __future__ import annotations

import json
import math

import pytest

from advisor.capacity.hardware import GIB, get_gpu
from advisor.capacity.kv import CapacityInputs, capacity_pass, kv_bytes_per_token_per_gpu
from advisor.capacity.models import get_preset
from advisor.errors import CapacityError

LLAMA_8B = get_preset("meta-llama/Llama-3.1-8B-Instruct")
LLAMA_70B = get_preset("meta-llama/Llama-3.1-70B-Instruct")
H100 = get_gpu("h100-sxm")


def test_llama_3_1_8b_kv_is_131072_bytes_per_token() -> None:
    # 2 (K, V) × 32 layers × 8 KV heads × 128 head_dim × 2 bytes (bf16)
    result = capacity_pass(CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192))
    assert result.kv_cache_bytes_per_token == 131072 == 2 * 32 * 8 * 128 * 2
    assert result.kv_cache_bytes_per_token_per_gpu == 131072


def test_fp8_kv_cache_halves_bytes_per_token() -> None:
    inputs = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, kv_cache_dtype="fp8")
    assert kv_bytes_per_token_per_gpu(inputs) == 65536


def test_per_gpu_kv_stops_shrinking_once_tp_exceeds_the_kv_heads() -> None:
    # Llama-3.1-70B: 80 layers, 8 KV heads, head_dim 128, bf16 → 327,680 bytes/token for the whole model.
    per_gpu = {}
    per_replica = {}
    for tp in (1, 2, 4, 8, 16):
        inputs = CapacityInputs(model=LLAMA_70B, gpu_memory_bytes=H100.memory_bytes, tensor_parallel_size=tp)
        per_gpu[tp] = kv_bytes_per_token_per_gpu(inputs)
        per_replica[tp] = per_gpu[tp] * tp
    assert per_gpu[1] == 2 * 80 * 8 * 128 * 2 == 327_680
    assert per_gpu[2] == 327_680 // 2
    assert per_gpu[8] == 2 * 80 * 1 * 128 * 2 == 40_960
    assert per_gpu[16] == per_gpu[8]  # one KV head per rank, replicated
    assert per_replica[8] == 327_680
    assert per_replica[16] == 2 * 327_680  # replicated heads are stored twice


def test_tp2_halves_per_gpu_weights() -> None:
    one = capacity_pass(
        CapacityInputs(
            model=LLAMA_70B,
            gpu_memory_bytes=get_gpu("h200").memory_bytes,
            tensor_parallel_size=2,
            max_model_len=8192,
        )
    )
    four = capacity_pass(
        CapacityInputs(model=LLAMA_70B, gpu_memory_bytes=H100.memory_bytes, tensor_parallel_size=4, max_model_len=8192)
    )
    published_bytes = 70_553_706_496 * 2
    assert one.weights_bytes_per_gpu == pytest.approx(published_bytes / 2, rel=0.002)
    assert four.weights_bytes_per_gpu == pytest.approx(published_bytes / 4, rel=0.002)
    assert four.weights_bytes_per_gpu == pytest.approx(one.weights_bytes_per_gpu / 2, rel=0.002)


def test_weights_match_what_vllm_logs_for_llama_3_1_8b() -> None:
    # vLLM V1 logs "Model loading took 14.9888 GiB" for this model in bf16 (params + rotary cache).
    result = capacity_pass(CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192))
    assert result.weights_bytes_per_gpu / GIB == pytest.approx(14.9888, abs=0.0005)


def test_vllm_v1_h100_llama_3_1_8b_pool_within_two_percent() -> None:
    # V1 output printed as representative: total 79.11 GiB × 0.90, KV 54.62 GiB, 447,088 tokens at 8k.
    result = capacity_pass(CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=round(79.11 * GIB), max_model_len=8192))
    assert result.kv_pool_bytes_per_gpu / GIB == pytest.approx(54.62, rel=0.02)
    assert result.kv_cache_tokens == pytest.approx(447_088, rel=0.02)


def test_blocks_tokens_and_concurrency_follow_vllm_with_a_given_pool() -> None:
    # With the pool fixed to exactly 5691 blocks, vLLM prints "Maximum concurrency for 8192 tokens: 11.12x".
    pool = 5691 * 16 * 131072
    result = capacity_pass(
        CapacityInputs(
            model=get_preset("Meta-Llama-3-8B"),
            gpu_memory_bytes=get_gpu("a100-40gb").memory_bytes,
            max_model_len=8192,
            kv_cache_memory_bytes=pool + 131071,
        )
    )
    assert result.kv_cache_blocks == 5691
    assert result.kv_cache_tokens == 5691 * 16
    assert f"{result.max_concurrency:.2f}" == "11.12"


def test_concurrency_uses_whole_blocks_per_sequence() -> None:
    result = capacity_pass(
        CapacityInputs(
            model=LLAMA_8B,
            gpu_memory_bytes=H100.memory_bytes,
            max_model_len=8200,
            kv_cache_memory_bytes=1000 * 16 * 131072,
        )
    )
    assert result.kv_cache_blocks == 1000
    assert result.max_concurrency == pytest.approx(1000 / 513)  # ceil(8200 / 16) = 513 blocks
    assert result.concurrency_at(17) == pytest.approx(500)  # 17 tokens occupy 2 blocks
    assert result.concurrency_at(16) == pytest.approx(1000)
    assert result.concurrency_at(0) == pytest.approx(1000)
    with pytest.raises(CapacityError):
        result.concurrency_at(-1)


def test_max_model_len_defaults_to_the_models_max_position_embeddings() -> None:
    result = capacity_pass(CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes))
    assert result.max_model_len == 131072
    assert result.max_concurrency == pytest.approx(result.kv_cache_blocks / (131072 / 16))


def test_weights_that_do_not_fit_raise_with_the_gib_figures() -> None:
    # 70.55 B parameters × 2 bytes = 131.4 GiB, far above 79.15 GiB × 0.9 = 71.2 GiB.
    with pytest.raises(CapacityError) as err:
        capacity_pass(CapacityInputs(model=LLAMA_70B, gpu_memory_bytes=H100.memory_bytes))
    message = str(err.value)
    assert "131.4" in message
    assert "79.15 GiB" in message
    assert "71.2" in message
    assert "GiB" in message


def test_a_replica_without_room_for_the_kv_cache_raises() -> None:
    # Llama-3.1-8B weights (~15 GiB) fit under 16 GiB × 0.95 but nothing is left after the overhead.
    with pytest.raises(CapacityError, match="leave no KV cache"):
        capacity_pass(CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=16 * GIB, gpu_memory_utilization=0.95))


def test_quantized_weights_leave_a_bigger_pool() -> None:
    base = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=get_gpu("l4").memory_bytes, max_model_len=8192)
    bf16 = capacity_pass(base)
    awq = capacity_pass(CapacityInputs(**{**base.__dict__, "quantization": "awq"}))
    # AWQ int4: 6,979,321,856 linear params × 4.15625 bits (4 + 16-bit scale and 4-bit zero per 128) = 3.626 GB;
    # embeddings, LM head and norms 1,050,939,392 × 2 B = 2.102 GB; rotary 32 MiB → 5.366 GiB.
    assert awq.weights_bytes_per_gpu / GIB == pytest.approx(5.366, abs=0.002)
    assert awq.kv_cache_blocks > bf16.kv_cache_blocks


@pytest.mark.parametrize(
    ("tp", "why"),
    [(3, "attention heads"), (0, "tensor_parallel_size")],
)
def test_invalid_inputs_are_refused_at_construction(tp: int, why: str) -> None:
    with pytest.raises(CapacityError, match=why):
        CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, tensor_parallel_size=tp)


def test_as_dict_is_json_ready_and_summarises_the_inputs() -> None:
    result = capacity_pass(
        CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192, kv_cache_dtype="fp8")
    )
    data = json.loads(json.dumps(result.as_dict()))
    for key in (
        "weights_bytes_per_gpu",
        "kv_cache_bytes_per_token",
        "kv_cache_bytes_per_token_per_gpu",
        "overhead_bytes_per_gpu",
        "kv_pool_bytes_per_gpu",
        "kv_cache_blocks",
        "kv_cache_tokens",
        "max_concurrency",
        "max_model_len",
        "block_size",
        "tensor_parallel_size",
        "gpu_memory_bytes",
        "gpu_memory_utilization",
    ):
        assert key in data
    assert data["inputs"] == {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "dtype": "bfloat16",
        "quantization": None,
        "kv_cache_dtype": "fp8",
        "overhead_profile": "vllm-v1",
    }
    assert math.isclose(data["max_concurrency"], result.max_concurrency)


def test_a_kv_cache_memory_larger_than_what_the_weights_leave_will_not_start() -> None:
    """Breaker, 2026-12-04: ``kv_cache_memory_bytes: 10000000000000`` on one H100 was "valid" with a 9,313 GiB pool.
    Llama-3.1-8B bf16: 8,030,261,248 params × 2 B = 16,060,522,496 B (14.96 GiB) of weights (+ rotary); the
    H100-SXM's 79.15 GiB leave ~64 GiB, so 65 GiB of cache cannot be allocated and 60 GiB can."""
    from advisor.errors import WontStartError

    with pytest.raises(WontStartError, match=r"exceed the GPU's 79\.15 GiB") as err:
        capacity_pass(
            CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, kv_cache_memory_bytes=65 * GIB)
        )
    assert "lower kv_cache_memory_bytes below 64." in str(err.value)
    fits = capacity_pass(
        CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, kv_cache_memory_bytes=60 * GIB)
    )
    assert fits.kv_cache_blocks == 60 * GIB // (16 * 131072)
