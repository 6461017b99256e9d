"""llama.cpp splits whole layers over its GPUs (``--split-mode layer``, the default), never heads: any GPU count
serves any model, and a token passes through the GPUs one after another, so the step is what one GPU streaming every
layer takes — not a tensor-parallel step over the GPU count, and no all-reduce (``advisor.capacity.perf.timed_inputs``).
"""

from __future__ import annotations

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import decode_step_seconds, mixed_step_seconds, prefill_seconds
from advisor.errors import CapacityError

LLAMA_8B = get_preset("llama-3.1-8b")
RTX3090 = get_gpu("rtx3090")


def _inputs(engine: str, gpus: int) -> CapacityInputs:
    return CapacityInputs(
        model=LLAMA_8B,
        gpu_memory_bytes=RTX3090.memory_bytes,
        max_model_len=8192,
        tensor_parallel_size=gpus,
        engine=engine,
    )


def test_any_gpu_count_serves_any_model_under_llama_cpp() -> None:
    # 32 attention heads and 8 KV heads over 3 GPUs: vLLM cannot split them; llama.cpp puts 11/11/10 layers on them
    _inputs("llamacpp", 3)
    with pytest.raises(CapacityError, match="not divisible by tensor_parallel_size 3"):
        _inputs("vllm", 3)


@pytest.mark.parametrize("gpus", [2, 3, 4])
def test_a_layer_split_step_streams_every_layer_at_one_gpu_s_bandwidth(gpus: int) -> None:
    one = decode_step_seconds(_inputs("llamacpp", 1), RTX3090, batch=1, mean_context_tokens=1000)
    split = decode_step_seconds(_inputs("llamacpp", gpus), RTX3090, batch=1, mean_context_tokens=1000)
    assert split == pytest.approx(one)
    # at least the bf16 weights (8.03 G parameters × 2 B) over the card's 936 GB/s: never a fraction of it
    assert split >= 8_030_261_248 * 2 / 936e9
    assert prefill_seconds(_inputs("llamacpp", gpus), RTX3090, 1000) == pytest.approx(
        prefill_seconds(_inputs("llamacpp", 1), RTX3090, 1000)
    )
    mixed = mixed_step_seconds(_inputs("llamacpp", gpus), RTX3090, 4, 1000, 0.5, 1000)
    assert mixed == pytest.approx(mixed_step_seconds(_inputs("llamacpp", 1), RTX3090, 4, 1000, 0.5, 1000))


def test_tensor_parallel_engines_still_split_the_step() -> None:
    # vLLM at TP 2 streams half the weights a GPU (plus its all-reduces): well under the TP 1 step
    one = decode_step_seconds(_inputs("vllm", 1), RTX3090, batch=1, mean_context_tokens=1000)
    two = decode_step_seconds(_inputs("vllm", 2), RTX3090, batch=1, mean_context_tokens=1000)
    assert two < 0.7 * one
