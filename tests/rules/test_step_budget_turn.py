"""The step-budget pool turn (:func:`advisor.rules.common.pool_turns`): vLLM profiles its start-up forward pass at
``max_num_batched_tokens`` and charges that activation to the KV pool, so a stated budget above 2,048 turned down to
2,048 gives the pool back (vllm-project/vllm#48322: RTX 4090, Qwen3-8B bf16 at 0.9, 8,192 → 2,048 took the pool from
36,720 to 40,464 tokens at the same throughput).

The capacity pass prices it: with FlashInfer's sampler (no sort, a small warm-up) the forward at 8,192 tokens sets
the profile peak, and the pool grows at 2,048; with the torch sampler's warm-up (sort-based, 256 sequences) above
either forward, the pool is the same and the turn is not offered.
"""

from __future__ import annotations

import pytest

from advisor import conventions as c
from advisor.capacity.kv import capacity_pass
from advisor.capacity.models import get_preset
from advisor.rules.common import SMALL_STEP_BUDGET_TOKENS, pool_turns
from tests.rules.helpers import ctx, ev


def _turns(sampler: str, budget: int | None = 8192, engine: str = "vllm") -> dict[str, object]:
    dep = ctx(
        gpu="rtx4090",
        engine=engine,
        model=get_preset("Qwen/Qwen3-8B"),
        max_model_len=16_384,
        max_num_batched_tokens=budget,
        sampler=sampler,
    )
    return {cand.turn.dial: cand for cand in pool_turns(ev(dep=dep, requests_running=12, requests_waiting=8))}


def test_a_forward_bound_profile_peak_offers_the_smaller_step_budget() -> None:
    turns = _turns("flashinfer")
    cand = turns[c.DIAL_MAX_NUM_BATCHED_TOKENS]
    assert cand.action == "decrease"
    assert cand.turn.after_inputs.max_num_batched_tokens == SMALL_STEP_BUDGET_TOKENS == 2048
    # the pass at each budget, as the turn's before and after
    before = capacity_pass(cand.turn.before_inputs).kv_cache_tokens
    after = capacity_pass(cand.turn.after_inputs).kv_cache_tokens
    assert (cand.turn.before.kv_cache_tokens, cand.turn.after.kv_cache_tokens) == (before, after)
    assert after > before  # 35,456 → 38,592 tokens today (the report: 36,720 → 40,464)


def test_no_offer_where_the_budget_does_not_set_the_peak_or_is_not_stated() -> None:
    assert c.DIAL_MAX_NUM_BATCHED_TOKENS not in _turns("torch")  # the sampler's warm-up sets the peak
    assert c.DIAL_MAX_NUM_BATCHED_TOKENS not in _turns("flashinfer", budget=None)  # the engine's default
    assert c.DIAL_MAX_NUM_BATCHED_TOKENS not in _turns("flashinfer", budget=2048)


def test_tensorrt_llm_s_budget_turn_is_its_free_memory_fraction() -> None:
    """TensorRT-LLM sizes its pool with ``kv_cache_free_gpu_memory_fraction`` of the memory the weights and activations
    leave (``trtllm_capacity``), not with a share of the device: the budget dial turned its ``gpu_memory_utilization``,
    which it never reads, so no budget turn was offered (tensorrtllm_backend#575, field-state round 65: a fraction of
    0.5 on long prompts, raised by the operator and measured faster). The turn now sets the fraction, shown as it is
    (0.5 → 0.9), and the pool grows by 0.9 ÷ 0.5 to the block."""
    import dataclasses

    from advisor.capacity.engines import memory_budget
    from advisor.capacity.inputs import EngineSettings
    from advisor.rules.turns import turn
    from tests.factories import context

    base = context().inputs
    half = dataclasses.replace(base, engine="trtllm", engine_settings=EngineSettings(free_gpu_memory_fraction=0.5))
    assert (
        memory_budget(half) == 0.5 and memory_budget(dataclasses.replace(half, engine_settings=EngineSettings())) == 0.9
    )
    t = turn(half, c.DIAL_GPU_MEMORY_UTILIZATION, 0.9)
    assert t is not None
    assert t.values() == (0.5, 0.9)
    assert t.after_inputs.engine_settings.free_gpu_memory_fraction == 0.9
    assert t.after_inputs.gpu_memory_utilization == base.gpu_memory_utilization
    assert t.after.kv_cache_tokens / t.before.kv_cache_tokens == pytest.approx(0.9 / 0.5, rel=0.01)
    # vLLM's budget is still its share of the device
    assert turn(base, c.DIAL_GPU_MEMORY_UTILIZATION, 0.95).values() == (base.gpu_memory_utilization, 0.95)  # type: ignore[union-attr]
