"""No replica count is sized from a queue vLLM holds while it has room (:func:`advisor.rules.replicas.room_withheld`).

Breaker 30, on stand-in vLLM 0.33 pages (Llama-3.1-8B on one H100, ``max_num_seqs`` 256 stated, SLO TTFT 2.5 s /
TPOT 0.1 s): a queue growing 3/s beside 30 running and the pool 7.5 % used paged "arrivals outpace service ×2.0 —
scale replicas 1 → 3" ("one replica completes at most ~2.50/s with its batch full"); 64 running flat under the stated
256 with the queue growing and the pool 16 % used paged "1 → 2"; 111 requests all ``deferred`` (waiting for a LoRA
adapter slot) paged "1 → 3". vLLM admits waiting requests each step while a slot, KV blocks and the step's token
budget remain (``Scheduler.schedule``, ``vllm/v1/core/sched/scheduler.py``): a queue beside free slots and blocks
whose prefills leave the budget unused is held by something else, and a second replica would hold it the same way.

Figures by hand. Window 60 s, 1 completion/s. Prefill per step = prompt tokens/s × running ÷ generated tokens/s:
30 running generating 600 tokens/s take 20 steps/s; 400 prompt tokens/s is 20 tokens a step against a budget of
8,192 − 30 (the H100's default ``max_num_batched_tokens``: 8,192 on ≥ 70 GiB GPUs, ``vllm/engine/arg_utils.py``).
At 120,000 prompt tokens/s it is 6,000 a step: 74 % of the budget, prefill-bound — sized as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.replicas import room_withheld, size_replicas
from tests.rules.helpers import ctx, ev


def _ev(engine: str = "vllm", speculative: bool = False, **kw: Any) -> Any:
    """The breaker's state (module docstring) with ``kw`` changed; ``engine`` and ``speculative`` the deployment's."""
    changes = {k: kw.pop(k) for k in ("queues", "requests_running_mean") if k in kw}
    stats: dict[str, Any] = {
        "requests_finished_per_second": 1.0,
        "requests_running": 30,
        "requests_running_first": 30,
        "requests_waiting_first": 20,
        "requests_waiting": 200,
        "kv_cache_usage_ratio": 0.075,
        "kv_cache_usage_ratio_max": 0.075,
        "prompt_tokens_per_second": 400.0,
        "generation_tokens_per_second": 600.0,
        "span_seconds": 60.0,
        "samples": 31,
    }
    stats.update(kw)
    e = ev(dep=ctx(gpu="h100-sxm", max_num_seqs=256, engine=engine, speculative=speculative), **stats)
    return dataclasses.replace(e, **changes)


def test_a_queue_beside_free_slots_a_free_pool_and_an_unused_budget_sizes_no_replicas() -> None:
    e = _ev()
    why = room_withheld(e)
    assert why is not None and "not admitting work it has room for" in why, why
    assert "30 of max_num_seqs 256" in why and "7.5% used" in why and "~20 of the step's 8,162-token budget" in why
    (p,) = QueueGrowthRule().propose(e)  # the queue grew 3/s: the rule holds, its count is withheld
    assert p.withheld == why


def test_running_flat_under_the_stated_cap_is_named_as_a_cap_in_force() -> None:
    why = room_withheld(_ev(requests_running=64, requests_running_first=64, requests_running_mean=64.0))
    assert why is not None and "running held at 64 a rank all window, as if a cap of 64 were in force" in why


def test_a_prefill_bound_queue_is_capacity_and_is_sized() -> None:
    e = _ev(prompt_tokens_per_second=120_000.0)  # 6,000 prompt tokens a step: 74 % of the budget
    assert room_withheld(e) is None
    sizing = size_replicas(e)
    assert sizing is not None and sizing.withheld is None and sizing.replicas > 1


def test_a_full_pool_or_full_slots_is_capacity() -> None:
    assert room_withheld(_ev(kv_cache_usage_ratio=0.5, kv_cache_usage_ratio_max=0.95)) is None  # filled this window
    assert room_withheld(_ev(requests_running=240, requests_running_first=240)) is None  # ≥ 90 % of 256


def test_deferred_requests_are_not_capacity() -> None:
    why = room_withheld(_ev(queues={"waiting_capacity": 0.0, "waiting_deferred": 200.0}))
    assert why is not None and "none of the 200 waiting waits for capacity" in why and "--max-loras" in why
    # some waiting for capacity: judged on slots, pool and budget as above
    assert room_withheld(_ev(queues={"waiting_capacity": 5.0, "waiting_deferred": 195.0})) is not None
    assert room_withheld(_ev(queues={"waiting_capacity": 5.0}, prompt_tokens_per_second=120_000.0)) is None


def test_unknown_readings_and_other_engines_withhold_nothing() -> None:
    assert room_withheld(_ev(kv_cache_usage_ratio=None, kv_cache_usage_ratio_max=None)) is None
    assert room_withheld(_ev(prompt_tokens_per_second=None)) is None
    assert room_withheld(_ev(requests_waiting=0)) is None
    assert room_withheld(_ev(engine="sglang")) is None


def test_with_speculation_running_the_steps_are_not_counted_so_nothing_is_withheld() -> None:
    # 3 tokens a sequence per step read as a third of the steps: a budget full of prefills would read as a third
    # full and the queue as held with room
    assert room_withheld(_ev(speculative=True)) is None
