"""A pool pinned by vLLM's ``--kv-cache-memory-bytes`` is grown by that setting, not by the utilization it overrides.

Field state ``vllm-qwen25-7b-gb200-pool-pinned-by-kv-cache-memory-bytes`` (vllm-project/vllm PR #44594): the advisor
dropped the inert ``gpu_memory_utilization`` turn and, with nothing in its place, proposed fp8 KV and TP 2 on a GPU
with ~170 GB idle.

Hand-computed figures (Llama-3.1-8B-Instruct bf16 on one H100-SXM, :mod:`tests.rules.helpers`): without the pin, at
0.9, the pool is 84,986,665,370 × 0.9 − weights 16,094,076,928 − overhead 1,420,094,341 = 58,973,827,564 B, whole
MiB ⌊÷ 1,048,576⌋ = 56,241 MiB = 58,972,962,816 B → ⌊÷ 2,097,152 B per block⌋ = 28,120 blocks = 449,920 tokens.
Pinned at 16 GiB: 17,179,869,184 ÷ 2,097,152 = 8,192 blocks = 131,072 tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.capacity.kv import capacity_pass
from advisor.engines.flags import FLAGS
from advisor.errors import CapacityError
from advisor.rules.common import _shown, pool_turns
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.lifecycle import rank_key
from tests.rules.helpers import ctx, ev

GIB = 2**30
PINNED = 16 * GIB
ROOM = 58_972_962_816


def _ev(pinned: int = PINNED, **kw: Any) -> Any:
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.99,
        "requests_running": 40,
        "requests_waiting": 30,
        "preemptions_increase": 3,
        "kv_capacity_tokens": None,
    }
    stats.update(kw)
    return ev(dep=ctx(gpu="h100-sxm", kv_cache_memory_bytes=pinned), **stats)


def _by_dial(e: Any) -> dict[str, Any]:
    return {cand.turn.dial: cand for cand in pool_turns(e)}


def test_a_pinned_pool_is_grown_to_what_the_budget_would_give() -> None:
    turns = _by_dial(_ev())
    cand = turns[c.DIAL_KV_CACHE_MEMORY_BYTES]
    assert cand.turn.after_inputs.kv_cache_memory_bytes == ROOM
    assert (cand.turn.before.kv_cache_tokens, cand.turn.after.kv_cache_tokens) == (131_072, 449_920)
    # the utilization is inert while the pin holds: no turn of it
    assert c.DIAL_GPU_MEMORY_UTILIZATION not in turns


def test_kv_saturation_proposes_the_byte_budget_first_with_its_flag() -> None:
    ranked = sorted(KVSaturationRule(usage_threshold=0.9).propose(_ev()), key=rank_key)
    # both close the gap (70 wanted of 40 held) without a GPU; the byte budget is the lower stated risk than fp8 KV
    assert [q.dial for q in ranked[:2]] == [c.DIAL_KV_CACHE_MEMORY_BYTES, c.DIAL_KV_CACHE_DTYPE]
    p = ranked[0]
    assert (p.dial, p.current, p.suggested) == (c.DIAL_KV_CACHE_MEMORY_BYTES, PINNED, ROOM)
    assert p.flag == f"--kv-cache-memory-bytes {ROOM}"
    assert "16.0 GiB (17,179,869,184 bytes) → 54.9 GiB (58,972,962,816 bytes)" in p.summary
    assert "nothing else shares the GPU" in p.description


def test_no_byte_turn_when_the_pin_already_holds_the_room() -> None:
    assert c.DIAL_KV_CACHE_MEMORY_BYTES not in _by_dial(_ev(pinned=ROOM))
    assert c.DIAL_KV_CACHE_MEMORY_BYTES not in _by_dial(_ev(pinned=56 * GIB))


def test_no_byte_turn_without_a_pin() -> None:
    e = ev(dep=ctx(gpu="h100-sxm"), kv_cache_usage_ratio=0.99, requests_running=40, requests_waiting=30)
    assert c.DIAL_KV_CACHE_MEMORY_BYTES not in _by_dial(e)


def test_no_byte_turn_when_the_engine_reports_a_budget_it_cannot_use() -> None:
    e = ev(
        dep=ctx(gpu="h100-sxm", kv_cache_memory_bytes=PINNED),
        engine_config={"kv_cache_memory_bytes": "1" + "0" * 30},
        kv_cache_usage_ratio=0.99,
        requests_running=40,
        requests_waiting=30,
    )
    assert "kv_cache_memory_bytes" in e.config_unmodelled
    assert c.DIAL_KV_CACHE_MEMORY_BYTES not in _by_dial(e)


def test_every_engine_says_how_its_pool_is_pinned() -> None:
    assert FLAGS["vllm"][c.DIAL_KV_CACHE_MEMORY_BYTES] == "--kv-cache-memory-bytes {value}"
    for engine in ("sglang", "tgi", "trtllm", "llamacpp"):
        assert "{value}" in FLAGS[engine][c.DIAL_KV_CACHE_MEMORY_BYTES], engine


def test_on_a_shared_gpu_the_operators_own_budget_sizes_the_turn() -> None:
    # 10 GiB held by another process: at 0.9 the unpinned deployment would not start (vLLM's start-up check wants
    # 0.9 × 79.15 GiB free), at the operator's 0.8 it does; the turn is sized there (found by a breaker: the byte
    # turn vanished and fp8 KV / TP 2 came back on a GPU with ~30 GiB idle).
    others = 10 * GIB
    dep = ctx(
        gpu="h100-sxm", kv_cache_memory_bytes=PINNED, gpu_memory_utilization=0.8, gpu_memory_used_by_others_bytes=others
    )
    e = ev(dep=dep, kv_cache_usage_ratio=0.99, requests_running=40, requests_waiting=30, kv_capacity_tokens=None)
    unpinned = dataclasses.replace(dep.inputs, kv_cache_memory_bytes=None)
    with pytest.raises(CapacityError):
        capacity_pass(dataclasses.replace(unpinned, gpu_memory_utilization=0.9))
    expected = capacity_pass(unpinned).kv_pool_bytes_per_gpu // 2**20 * 2**20
    cand = _by_dial(e)[c.DIAL_KV_CACHE_MEMORY_BYTES]
    assert cand.turn.after_inputs.kv_cache_memory_bytes == expected > PINNED
    assert "a 0.80 budget" in cand.why


def test_a_tiny_pin_reads_in_mib_fractions_not_zero() -> None:
    assert _shown(c.DIAL_KV_CACHE_MEMORY_BYTES, 2 * 2**20) == "0.002 GiB (2,097,152 bytes)"
    assert _shown(c.DIAL_KV_CACHE_MEMORY_BYTES, PINNED) == "16.0 GiB (17,179,869,184 bytes)"
