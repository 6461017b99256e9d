"""kv_saturation on an engine that reserves a request's whole length at admission (TensorRT-LLM's default
GUARANTEED_NO_EVICT), and the capacity scheduler turned back when the engine pauses requests (MAX_UTILIZATION).

Every number below is chosen by hand; the expected answers follow from the rule's arithmetic as its docstring states
it: full when the engine held requests back for capacity with a slot free, or when usage exceeds r ÷ (r + 1) with r
running per replica (the free blocks hold less than one running request's share of the written ones).
"""

from __future__ import annotations

import dataclasses

from advisor.rules.base import Evaluation
from advisor.rules.kv_saturation import KVSaturationRule, admission_full
from tests.factories import context, evaluation


def _ev(
    engine: str,
    *,
    paused: float | None = None,
    held: float | None = None,
    seqs: int = 8,
    max_length_requests: float = 5.5,
    **stats: object,
) -> Evaluation:
    """``max_length_requests``: the pool per replica in requests of max-model-len (a reserving pool sized so that
    the running requests' whole-length reservations can fill it, unless a test says otherwise)."""
    ctx = dataclasses.replace(context(max_num_seqs=seqs), engine=engine)
    ev = evaluation(ctx=ctx, **stats)
    pool = max_length_requests * (ctx.inputs.max_model_len or 0)
    return dataclasses.replace(ev, requests_paused_max=paused, waiting_capacity_min=held, kv_capacity_tokens=pool)


def test_five_running_with_seven_eighths_written_fill_a_reserving_pool() -> None:
    # 5 running in a pool of 5.5 max-length requests: the threshold is 5/6 = 0.833; 0.875 written leaves 0.125 free,
    # less than one request's 0.175
    assert admission_full(_ev("trtllm", requests_running=5, requests_waiting=71, kv_cache_usage_ratio=0.875))
    assert not admission_full(_ev("trtllm", requests_running=5, requests_waiting=71, kv_cache_usage_ratio=0.8))
    # vLLM admits by the blocks a prompt needs: 87.5 % is not full there
    assert not admission_full(_ev("vllm", requests_running=5, requests_waiting=71, kv_cache_usage_ratio=0.875))


def test_requests_held_back_for_capacity_with_a_slot_free_fill_it() -> None:
    # 1 running of 8 slots, 42.5 % written (under 1/2), 7 held back at every scrape, a pool of 1.5 max-length
    # requests (the running one's reservation may leave less than one more): the engine says the pool refused
    ev = _ev("triton-trtllm", held=7, max_length_requests=1.5, requests_running=1, kv_cache_usage_ratio=0.425)
    assert admission_full(ev)
    assert not admission_full(dataclasses.replace(ev, waiting_capacity_min=0.0))
    # every slot taken: the batch cap binds, not the pool
    assert not admission_full(
        _ev("triton-trtllm", held=7, seqs=1, max_length_requests=1.5, requests_running=1, kv_cache_usage_ratio=0.425)
    )


def test_requests_held_back_beside_room_for_a_whole_max_length_request_are_not_the_pool() -> None:
    """Round 57 (triton-inference-server/tensorrtllm_backend#189): 16 active, one scheduled, 18 of 1,700 blocks of 64
    written at max-model-len 4,096 — a pool of 26.6 max-length requests. However the running one is reserved, 25 more
    fit: the held-back requests wait for something else than blocks, and fp8 KV was proposed at 1 % usage."""
    ev = _ev("triton-trtllm", held=15, seqs=64, max_length_requests=26.6, requests_running=1, kv_cache_usage_ratio=0.01)
    assert not admission_full(ev)
    assert KVSaturationRule().fires(ev).holds is False
    # 24 running reserved whole leave room for 2.6 more: still not full; 26 running leave 0.6: full (held back)
    assert not admission_full(dataclasses.replace(ev, stats=dataclasses.replace(ev.stats, requests_running=24)))
    assert admission_full(dataclasses.replace(ev, stats=dataclasses.replace(ev.stats, requests_running=26)))


def test_paused_requests_say_max_utilization_runs() -> None:
    """MAX_UTILIZATION admits by the blocks free: the written blocks are what holds the pool, and the 90 % threshold
    judges it; the reservation reading does not apply."""
    assert not admission_full(
        _ev("trtllm", paused=3, held=7, requests_running=5, requests_waiting=71, kv_cache_usage_ratio=0.875)
    )


def test_paused_requests_turn_the_scheduler_back_and_none_do_not() -> None:
    rule = KVSaturationRule()
    stats = {"requests_running": 24, "requests_waiting": 100, "kv_cache_usage_ratio": 0.97}
    paused = rule.propose(_ev("trtllm", paused=3, seqs=2048, **stats))
    policy = [p for p in paused if p.dial == "admission_policy"]
    assert len(policy) == 1 and policy[0].suggested == "GUARANTEED_NO_EVICT"
    assert "capacity_scheduler_policy: GUARANTEED_NO_EVICT" in policy[0].flag
    assert not [p for p in rule.propose(_ev("trtllm", paused=0.0, seqs=2048, **stats)) if p.dial == "admission_policy"]
    assert not [p for p in rule.propose(_ev("trtllm", paused=None, seqs=2048, **stats)) if p.dial == "admission_policy"]


def test_an_idle_replica_beside_a_full_one_does_not_hide_its_queue() -> None:
    """Breaker 16: the bound took the mean per replica — 4 scheduled on one replica (a pool of 4 max-length
    requests), 2 on the other, 8 held back: a mean of 3 read as room for one more, and nothing fired. The busiest
    replica (4) against the smallest pool leaves none."""
    ev = _ev("triton-trtllm", held=8, seqs=64, max_length_requests=4.0, requests_running=6, kv_cache_usage_ratio=0.44)
    two = dataclasses.replace(
        ev, replicas_up=2, requests_running_by_target=(("http://a/metrics", 4.0), ("http://b/metrics", 2.0))
    )
    assert admission_full(two)
    # both replicas at 1 running in pools of 4 max-length requests: room for more on either, held back or not
    light = dataclasses.replace(
        two,
        stats=dataclasses.replace(two.stats, requests_running=2),
        requests_running_by_target=(("http://a/metrics", 1.0), ("http://b/metrics", 1.0)),
    )
    assert not admission_full(light)


def test_a_replica_that_filled_during_the_window_is_judged_at_its_peak() -> None:
    """Breaker 17: replica A ran 3 then 7 in a pool of 6 max-length requests (3 held back), B ran 1: the bound read
    A's window mean (5) as room for one more and nothing fired. At its peak (7) A's pool is full by reservation."""
    ev = _ev("triton-trtllm", held=3, seqs=64, max_length_requests=6.0, requests_running=8, kv_cache_usage_ratio=0.5)
    mean_only = dataclasses.replace(
        ev, replicas_up=2, requests_running_by_target=(("http://a/metrics", 5.0), ("http://b/metrics", 1.0))
    )
    assert not admission_full(mean_only)  # what the window means alone say
