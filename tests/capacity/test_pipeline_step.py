"""The decode step of a pipeline-parallel replica (``advisor.capacity.perf.decode_step_model``): the engine keeps PP
micro-batches in flight (vLLM V1 ``max_concurrent_batches`` = PP) and a sequence's next token needs its micro-batch
to pass every stage in turn, so the time between tokens is ``PP × stage(B ÷ PP)``. At batch 1 that is one GPU's
time to stream the whole model; at a compute-bound batch the stages work in parallel and serve PP times the
tokens. Before, the step was one stage's weights at the model's FLOPs: PP 2 decoded twice as fast as it does at
batch 1, and no faster than PP 1 when compute-bound."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import decode_step_seconds, decode_tokens_per_second, mixed_step_seconds

LLAMA_8B = get_preset("llama-3.1-8b")
H100 = get_gpu("h100-sxm")
ONE = CapacityInputs(model=LLAMA_8B, gpu_memory_bytes=H100.memory_bytes, max_model_len=8192)
PP2 = dataclasses.replace(ONE, pipeline_parallel_size=2)


def test_at_batch_one_a_token_streams_the_whole_model_once() -> None:
    # the two stages read 16.06 GB + 2 × the 32 MiB rotary cache (each stage keeps one) in turn: the PP 1 step plus
    # one more rotary cache, at the same bandwidth; never half of it
    one = decode_step_seconds(ONE, H100, batch=1, mean_context_tokens=1000)
    two = decode_step_seconds(PP2, H100, batch=1, mean_context_tokens=1000)
    rotary = 131072 * 128 * 2 / (3.35e12 * 0.8)
    assert two == pytest.approx(one + rotary, rel=0.02)
    assert two > 0.95 * one


def test_a_compute_bound_batch_is_served_by_both_stages_at_once() -> None:
    # at 4,096 sequences of 100 tokens the step is the GEMMs: each stage computes half the model for its half of the
    # batch while the other computes the other micro-batch, so PP 2 serves nearly twice the tokens of PP 1
    one = decode_tokens_per_second(ONE, H100, 4096, 100)
    two = decode_tokens_per_second(PP2, H100, 4096, 100)
    assert 1.8 < two / one <= 2.0


def test_the_mixed_step_is_the_decode_step_without_prompts() -> None:
    for inputs in (ONE, PP2):
        assert mixed_step_seconds(inputs, H100, 64, 1000, 0.0, 1000) == pytest.approx(
            decode_step_seconds(inputs, H100, 64, 1000)
        )
    # and a prompt's GEMMs share the stages as the decode's do: its added time at PP 2 is at most PP 1's
    added_one = mixed_step_seconds(ONE, H100, 64, 1000, 1.0, 4000) - decode_step_seconds(ONE, H100, 64, 1000)
    added_two = mixed_step_seconds(PP2, H100, 64, 1000, 1.0, 4000) - decode_step_seconds(PP2, H100, 64, 1000)
    assert 0 < added_two <= added_one
