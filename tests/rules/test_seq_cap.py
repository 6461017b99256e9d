"""Rule ``seq_cap``: requests wait for a sequence slot while the pool has room (field state
``vllm-max-num-seqs-1-serializes-second-request``, MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7: one slot, the second
request's TTFT is the first one's whole generation, the pool 2 % used; the fix the report measured is 2-4 slots).

Figures by hand: Llama-3.1-8B on one H100 with a 432,000-token pool (the helpers' default); at 10 % usage with 4
running, each running request holds 0.1 × 432,000 ÷ 4 = 10,800 tokens, so 90 % of the pool holds 36 of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.capacity.kv import capacity_pass
from advisor.rules.base import SLOTargets
from advisor.rules.pool_context import PoolContextRule
from advisor.rules.seq_cap import SeqCapRule
from advisor.rules.stalled import StalledRule
from tests.rules.helpers import ctx, ev

POOL = 432_000


def _ev(running: float = 4, waiting: float = 6, usage: float | None = 0.1, cap: int = 4, **kw: Any) -> Any:
    dep_kw = {k: kw.pop(k) for k in ("engine", "slo") if k in kw}
    return ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=cap, **dep_kw),
        requests_running=running,
        requests_waiting=waiting,
        kv_cache_usage_ratio=usage,
        kv_capacity_tokens=POOL,
        **kw,
    )


def _proposal(e: Any) -> Any:
    (p,) = SeqCapRule().propose(e)
    return p


def test_at_the_cap_with_a_queue_and_room_it_raises_the_cap_to_hold_running_and_waiting() -> None:
    e = _ev()
    assert SeqCapRule().fires(e).holds is True
    p = _proposal(e)
    # 4 running + 6 waiting = 10 slots: within the 36 the pool holds and far below the TPOT knee (0.1 s target)
    assert (p.dial, p.action, p.current, p.suggested) == (c.DIAL_MAX_NUM_SEQS, "increase", 4, 10)
    assert p.flag == "--max-num-seqs 10"
    assert p.predicted_effect["kv_cache_usage_ratio"] == {"before": 0.1, "after": 0.25}  # 0.1 × 10 ÷ 4


def test_the_pool_at_the_observed_request_size_bounds_the_raise() -> None:
    # 40 % used by 4 running: 43,200 tokens each; 90 % of the pool (× the pool the raised cap leaves: vLLM's sampler
    # warm-up grows with max_num_seqs) holds ⌊0.9 × pool_after ÷ 43,200⌋ of them, though 104 are in the system.
    e = _ev(running=4, waiting=100, usage=0.4)
    inputs = e.ctx.inputs
    before = capacity_pass(inputs).kv_cache_tokens
    after = capacity_pass(dataclasses.replace(inputs, max_num_seqs=104)).kv_cache_tokens
    expected = int(0.9 * POOL * (after / before) // 43_200)
    assert expected in (8, 9)
    assert _proposal(e).suggested == expected


def test_a_tpot_target_no_batch_meets_leaves_the_cap_alone() -> None:
    # 1 ms a token: no batch of an 8B model on one H100 decodes that fast (the weights alone take ~5 ms to read)
    e = _ev(slo=SLOTargets(ttft_seconds=2.5, tpot_seconds=0.001, target_ratio=0.95))
    assert SeqCapRule().fires(e).holds is True
    assert SeqCapRule().propose(e) == []


@pytest.mark.parametrize(
    ("kw", "holds"),
    [
        ({"running": 3}, False),  # below the cap: the queue is not the cap's
        ({"waiting": 0}, False),  # nothing waits
        ({"usage": 0.6}, False),  # the pool binds: kv_saturation's
        ({"usage": None}, None),  # unknown usage: cannot tell
        ({"engine": "llamacpp"}, None),  # --parallel not stated: its slots are unknown
        ({"engine": "tgi"}, False),  # a token-bounded batch
        ({"counter_deltas": {"generation_tokens": 0.0}}, False),  # nothing generated: a hang is stalled's
    ],
)
def test_it_holds_only_at_the_cap_with_a_queue_room_and_tokens_flowing(kw: dict[str, Any], holds: bool | None) -> None:
    counter_deltas = kw.pop("counter_deltas", None)
    e = _ev(**kw)
    if counter_deltas is not None:
        e = dataclasses.replace(e, counter_deltas=counter_deltas)
    assert SeqCapRule().fires(e).holds is holds


def test_below_the_cap_the_queue_is_not_said_to_wait_for_a_slot() -> None:
    # 3 running of a cap of 4 with 6 waiting: a slot is free, so the queue waits for KV blocks or the prefill
    # budget; the reason said "6 waiting for a slot" (fresh user, session 41)
    fire = SeqCapRule().fires(_ev(running=3))
    assert fire.holds is False
    assert fire.reason == "3 running of a cap of 4, 6 waiting", fire.reason


def test_data_parallel_ranks_multiply_the_cap() -> None:
    # 2 ranks of max_num_seqs 4: 8 running is the cap; 8 + 4 waiting = 12 → 6 a rank
    e = ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=4, data_parallel_size=2),
        requests_running=8,
        requests_waiting=4,
        kv_cache_usage_ratio=0.1,
        kv_capacity_tokens=POOL,
    )
    assert SeqCapRule().fires(e).holds is True
    assert _proposal(e).suggested == 6
    assert (
        SeqCapRule().fires(dataclasses.replace(e, stats=dataclasses.replace(e.stats, requests_running=4))).holds
        is False
    )


def test_a_hang_and_a_pool_smaller_than_a_request_supersede_it() -> None:
    assert c.RULE_SEQ_CAP in StalledRule.supersedes
    assert c.RULE_SEQ_CAP in PoolContextRule.supersedes


def test_an_engine_whose_cap_is_assumed_cannot_tell_and_a_stated_one_can() -> None:
    # SGLang derives --max-running-requests from its pool: the 256 the capacity pass assumes is not the cap it queues at
    assumed = _ev(running=256, waiting=10, cap=256, engine="sglang")
    assert SeqCapRule().fires(assumed).holds is None
    assert "not stated" in SeqCapRule().fires(assumed).reason
    stated = dataclasses.replace(assumed, ctx=dataclasses.replace(assumed.ctx, max_num_seqs_stated=True))
    assert SeqCapRule().fires(stated).holds is True


def test_a_saturated_state_pool_holds_the_queue_not_the_cap() -> None:
    e = dataclasses.replace(_ev(), pool_usage={"mamba": 0.98})
    fire = SeqCapRule().fires(e)
    assert fire.holds is False and "mamba pool is saturated" in fire.reason


def test_sglang_binds_one_below_its_cap_and_the_raise_counts_the_idle_slot() -> None:
    """sgl-project/sglang#35537: ``--max-running-requests 4``, 4 concurrent prompts, 3 run and the 4th waits with the
    pools nearly empty (SGLang's chunked prefill counts the in-flight chunk's slot twice and the batch-full flag sticks:
    #30294, #38118). The cap binds at 4 − 1 = 3; holding the 3 running and the 1 waiting needs 4 + 1 = 5 (it runs one
    below). vLLM runs to its cap: 3 of 4 with one waiting is not its cap binding."""
    sglang = _ev(running=3, waiting=1, cap=4, engine="sglang")
    sglang = dataclasses.replace(sglang, ctx=dataclasses.replace(sglang.ctx, max_num_seqs_stated=True))
    fire = SeqCapRule().fires(sglang)
    assert fire.holds is True and "sglang#30294" in fire.reason
    p = _proposal(sglang)
    assert (p.current, p.suggested) == (4, 5)
    assert SeqCapRule().fires(_ev(running=3, waiting=1, cap=4)).holds is False
    # two below the cap is not the slack: a free slot the engine would fill
    below = _ev(running=2, waiting=1, cap=4, engine="sglang")
    below = dataclasses.replace(below, ctx=dataclasses.replace(below.ctx, max_num_seqs_stated=True))
    assert SeqCapRule().fires(below).holds is False


def test_a_raise_that_leaves_the_arrivals_above_what_the_replica_completes_does_not_claim_to_close_the_gap() -> None:
    """Daemon breaker: 64 slots full, the pool 41 % used, 4.9 requests/s completing while 6.9 arrive (the in-flight
    population grew 600 over the 300 s window). The raised cap serves at most 4.9 × new ÷ 64 ÷ (TPOT(new) ÷ TPOT(64))
    requests/s: at the ~140 slots the pool holds that is about 1.3× today's, below the 6.9 arriving, so the slot queue
    grows without bound, the turn is not ``sufficient`` and says replicas close the gap (it said "Replicas and pool
    turns would not help" and "closes the gap", and the simulator at 7 requests/s gave 0 % goodput at 133 slots).
    A modest queue (5.0/s arriving) against the ~5.6/s the raised cap completes waits a fraction of a second for one
    of its ~94 slots (M/M/c): within the TTFT target, so the raise does close that gap."""
    base = _ev(
        running=64,
        waiting=600,
        usage=0.41,
        cap=64,
        requests_finished_per_second=4.9,
        requests_running_first=64,
        requests_waiting_first=0,
        window_seconds=300.0,
        span_seconds=300.0,
    )
    p = _proposal(base)
    assert p.sufficient is False
    served = p.evidence["completions_per_second_at_new_cap"]
    assert p.evidence["arrival_rate_per_second"] == pytest.approx(4.9 + 600 / 300, rel=1e-3)
    assert served < 6.9
    assert "more replicas do" in p.description and "Replicas and pool" not in p.description
    # a modest queue (4.9 + 30 ÷ 300 = 5.0/s arriving): the raised cap's slots wait well within the TTFT target
    calm = dataclasses.replace(base, stats=dataclasses.replace(base.stats, requests_waiting=30))
    q = _proposal(calm)
    assert q.sufficient is True and "more replicas" not in q.description


def test_a_slot_freed_between_steps_does_not_clear_it_while_requests_wait() -> None:
    """Breaker 23: 2 replicas at max_num_seqs 4 with 29 waiting; one scrape read 7 of the 8 slots busy (a request had
    finished, the next not yet admitted), the rule cleared, and the incident switched from "max_num_seqs 4 → 19" to
    "replicas 2 → 6" for good. With requests waiting and the window's peak at the cap, it is not yet clear; once the
    queue is gone, or the peak too is below the cap, it clears."""
    rule = SeqCapRule()
    blip = dataclasses.replace(_ev(running=7, waiting=29, replicas_up=2), requests_running_max=8.0)
    assert rule.fires(blip).holds is False  # the newest gauge alone does not show the cap binding
    assert rule.clears(blip).holds is False and "at the window's peak" in rule.clears(blip).reason
    # and its turn stays proposed (the lifecycle switches at once from a turn no longer proposed: breaker 23's rerun
    # went "max_num_seqs 4 → 13" → "replicas 2 → 5" on such a scrape), sized as at the peak
    (turned,) = rule.propose(blip)
    at_peak = dataclasses.replace(blip, stats=dataclasses.replace(blip.stats, requests_running=8.0))
    assert (turned.dial, turned.suggested) == ("max_num_seqs", _proposal(at_peak).suggested)
    gone = dataclasses.replace(_ev(running=7, waiting=0, replicas_up=2), requests_running_max=8.0)
    assert rule.clears(gone).holds is True
    low = dataclasses.replace(_ev(running=5, waiting=29, replicas_up=2), requests_running_max=6.0)
    assert rule.clears(low).holds is True


def test_a_growing_queue_sizes_the_slots_to_the_arrivals_not_to_one_scrape_of_the_backlog() -> None:
    """Breaker 23: at 6 requests/s of ~3-second requests on 2 replicas capped at 4, the raise followed the backlog
    of each scrape — 4 → 19, 22, 27, … 210 — where ~10 a replica serve the load. By hand: λ = 2.4 completions/s +
    (29 − 10) waiting ÷ 5 s = 6.2/s, 3.1 a replica; a request holds a slot W = 8 running ÷ 2.4/s = 3.33 s (Little);
    m = λW = 10.33 per replica, m + 2√m = 16.76 → 17 slots, below the backlog's 4 + 29 ÷ 2 → 19. A standing queue
    (clients that re-send: 10 waiting at both ends) keeps the backlog's count."""
    rule = SeqCapRule()
    rates = {"requests_finished_per_second": 2.4, "span_seconds": 5.0, "requests_running_first": 8}
    growing = dataclasses.replace(
        _ev(running=8, waiting=29, requests_waiting_first=10, replicas_up=2, **rates), requests_running_mean=8.0
    )
    new, bounds = rule._raised(growing)
    assert bounds["steady_slots_per_rank"] == 17 and bounds["demand_per_rank"] == 19
    assert new == 17
    standing = dataclasses.replace(
        _ev(running=8, waiting=29, requests_waiting_first=29, replicas_up=2, **rates), requests_running_mean=8.0
    )
    new_standing, bounds = rule._raised(standing)
    assert "steady_slots_per_rank" not in bounds and new_standing == 19
    # a backlog draining after the burst (breaker 23's rerun read "4 → 203" from it): the arrivals size it too —
    # λ = 2.4 + (29 − 40) ÷ 5 = 0.2/s, 0.1 a replica, m = 0.33, m + 2√m = 1.49 → 2 slots, so one more than the cap
    draining = dataclasses.replace(
        _ev(running=8, waiting=29, requests_waiting_first=40, replicas_up=2, **rates), requests_running_mean=8.0
    )
    new_draining, bounds = rule._raised(draining)
    assert bounds["steady_slots_per_rank"] == 2 and new_draining == 5


def test_a_growing_queue_with_no_rate_measured_sizes_the_slots_to_what_the_window_held() -> None:
    """The same kind where no arrival rate is measured (no completions counter in the window): 2 replicas capped
    at 4, 8 running and the queue 10 → 29 over the window. The window held (8 + 10) ÷ 2 = 9 in flight a replica at
    both ends, so 9 slots — not the 4 + 29 ÷ 2 → 19 of the last scrape's backlog."""
    grew = _ev(running=8, waiting=29, requests_waiting_first=10, requests_running_first=8, replicas_up=2)
    assert grew.stats.requests_finished_per_second is None
    new, bounds = SeqCapRule()._raised(grew)
    assert bounds["in_flight_held_per_rank"] == 9 and bounds["demand_per_rank"] == 19
    assert new == 9
