"""admission_thrash: a full pool held by a few long requests, with a queue or preemptions.

With one replica up, each running request holds usage × pool ÷ running tokens, so its share of the pool is
usage ÷ running (independent of the pool size).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.rules.admission import AdmissionThrashRule
from tests.rules.helpers import ctx, ev, opens_after

RULE = AdmissionThrashRule(usage_threshold=0.9, max_running_per_replica=8, min_pool_share=0.1, target_concurrency=8)
CTX = ctx(max_model_len=32_768)


def _ev(**kw: Any) -> Any:
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.95,
        "requests_running": 4,
        "requests_waiting": 3,
        "preemptions_increase": 0,
        "generation_tokens_per_second": 30.0,
        "prompt_tokens_per_second": 4_000.0,
    }
    stats.update(kw)
    stats.setdefault("kv_capacity_tokens", 100_000)
    return ev(dep=CTX, **stats)


@pytest.mark.parametrize(
    ("rule", "stats", "fires"),
    [
        (RULE, {}, True),  # 95 %, 4 running each ~24 % of the pool, 3 waiting
        (RULE, {"kv_cache_usage_ratio": 0.9}, True),  # at the usage threshold
        (RULE, {"kv_cache_usage_ratio": 0.8999}, False),  # just under it
        (RULE, {"requests_running": 8}, True),  # 8 per replica = the limit; share 0.95 ÷ 8 = 0.119
        (RULE, {"requests_running": 9}, False),  # 9 > 8 per replica: concurrency, not context
        (RULE, {"requests_running": 16, "replicas_up": 2}, True),  # 16 over 2 replicas = 8 each
        (RULE, {"requests_running": 18, "replicas_up": 2}, False),  # 9 each
        (RULE, {"requests_running": 0}, False),  # nothing runs: no request holds the pool
        (AdmissionThrashRule(min_pool_share=0.25), {"kv_cache_usage_ratio": 1.0}, True),  # 1.0 ÷ 4 = 0.25
        (AdmissionThrashRule(min_pool_share=0.26), {"kv_cache_usage_ratio": 1.0}, False),  # 0.25 < 0.26
        (RULE, {"requests_waiting": 0, "preemptions_increase": 0}, False),  # no pressure
        (RULE, {"requests_waiting": 0, "preemptions_increase": 2}, True),  # preemptions alone
    ],
    ids=[
        "full pool held by four requests with a queue fires",
        "usage at the threshold fires",
        "usage just under the threshold does not fire",
        "running at max_running_per_replica fires",
        "one more running than max_running_per_replica does not fire",
        "the running limit is per replica (at it)",
        "the running limit is per replica (over it)",
        "nothing running does not fire",
        "share at min_pool_share fires",
        "share just under min_pool_share does not fire",
        "without a queue or preemptions it does not fire",
        "preemptions without a queue fire",
    ],
)
def test_fire_table(rule: AdmissionThrashRule, stats: dict[str, Any], fires: bool) -> None:
    e = _ev(**stats)
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (not fires)


@pytest.mark.parametrize(
    "stats",
    [{"kv_cache_usage_ratio": None}, {"requests_running": None}, {"kv_capacity_tokens": None}],
    ids=["usage unknown", "running unknown", "pool unknown"],
)
def test_cannot_tell_without_usage_running_or_pool(stats: dict[str, Any]) -> None:
    e = _ev(**stats)
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None
    assert RULE.propose(e) == []


def test_cannot_tell_when_queue_and_preemptions_are_both_unknown() -> None:
    e = _ev(requests_waiting=None, preemptions_increase=None)
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None


def test_proposes_cap_then_whole_request_admission_then_a_long_context_replica() -> None:
    props = RULE.propose(_ev(preemptions_increase=5))
    assert [p.dial for p in props[:3]] == ["max_model_len", "admission_policy", "replicas"]
    cap, admit, long_ctx = props[:3]
    # 100,000 ÷ 8 = 12,500 → ⌊12,500 ÷ 1,024⌋ = 12 → 12,288 tokens
    assert (cap.current, cap.suggested, cap.flag) == (32_768, 12_288, "--max-model-len 12288")
    # max-model-len does not change the pool (the V1 profile batch on an H100 is 8,192 tokens either way):
    # ceiling 28,120 blocks ÷ 2,048 = 13.73 → 28,120 ÷ 768 = 36.61
    # anchored on the engine's 100,000-token pool (issue 13): × 100,000 ÷ 449,920 → 3.0518 and 8.1380
    assert cap.predicted_effect["max_concurrency"] == {
        "before": 3.0518,
        "after": 8.138,
        "model_before": 13.7305,
        "model_after": 36.6146,
    }
    assert cap.predicted_effect["max_model_len"] == {"before": 32_768, "after": 12_288}
    assert cap.severity == "critical"
    # vLLM's --scheduling-policy (fcfs | priority) only orders the queue: no flag admits whole requests, so the turn
    # says so and names what does work instead of emitting a flag that would not do it
    assert admit.flag.startswith("vLLM has no whole-request admission flag") and not admit.sufficient
    assert "--max-num-seqs" in admit.flag and "--scheduling-policy priority" not in admit.flag
    assert admit.predicted_effect["preemptions_increase"] == {"before": 5.0, "after": 0.0}
    # one dedicated long-context replica: 1 → 2, twice the GPUs
    assert (long_ctx.current, long_ctx.suggested, long_ctx.cost) == (1, 2, 2.0)
    assert long_ctx.flag.startswith("add one dedicated long-context replica")


def test_no_cap_when_max_model_len_already_fits_target_concurrency() -> None:
    # 100,000 ÷ 8 → 12,288 is not below max-model-len 8,192: no cap, the other two remain
    props = RULE.propose(ev(dep=ctx(max_model_len=8_192), kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95,
                            requests_running=4, requests_waiting=3))  # fmt: skip
    assert [p.dial for p in props[:2]] == ["admission_policy", "replicas"]
    assert "max_model_len" not in {p.dial for p in props}


def test_sglang_s_admission_turn_is_its_schedule_conservativeness() -> None:
    # SGLang reserves each running request's remaining output (new_token_ratio = 0.7 × the conservativeness) before
    # admitting more; its server arguments say to raise the conservativeness when requests are retracted often
    sglang = ctx(engine="sglang", max_model_len=32_768)
    props = RULE.propose(ev(dep=sglang, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=4,
                            requests_waiting=3, preemptions_increase=5))  # fmt: skip
    admit = next(p for p in props if p.dial == "admission_policy")
    assert admit.flag.startswith("--schedule-conservativeness 1.3") and "--schedule-policy" not in admit.flag


def test_without_a_context_cap_preempted_long_requests_get_fewer_sequences() -> None:
    # max-model-len 8,192 already fits 8 requests in the 100,000-token pool, so no cap is offered; 4 run at 95 %:
    # 23,750 tokens each, 90 % of the pool holds ⌊90,000 ÷ 23,750⌋ = 3 of them, and 2 were preempted → 16 → 3
    dep = ctx(max_model_len=8_192, max_num_seqs=16)
    props = RULE.propose(ev(dep=dep, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=4,
                            requests_waiting=3, preemptions_increase=2))  # fmt: skip
    assert [p.dial for p in props[:3]] == ["max_num_seqs", "admission_policy", "replicas"]
    fewer = props[0]
    assert (fewer.action, fewer.current, fewer.suggested, fewer.flag) == ("decrease", 16, 3, "--max-num-seqs 3")
    assert fewer.evidence["kv_tokens_held_per_request"] == 23_750
    # no preemption: the queue alone is not a reason to run fewer
    calm = RULE.propose(ev(dep=dep, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=4,
                           requests_waiting=3, preemptions_increase=0))  # fmt: skip
    assert all(p.dial != "max_num_seqs" for p in calm)


def test_fewer_sequences_are_counted_per_data_parallel_rank() -> None:
    # DP 4 over a 400,000-token replica pool the engine does not report per rank: each rank holds 100,000; 8 running
    # at 95 % hold 47,500 each, so 90,000 ÷ 47,500 → 1 per rank (max_num_seqs binds each DP engine), not 7
    dep = ctx(max_model_len=8_192, max_num_seqs=4, data_parallel_size=4)
    props = RULE.propose(ev(dep=dep, kv_capacity_tokens=400_000, kv_cache_usage_ratio=0.95, requests_running=8,
                            requests_waiting=3, preemptions_increase=2))  # fmt: skip
    fewer = next(p for p in props if p.dial == "max_num_seqs")
    assert (fewer.current, fewer.suggested) == (4, 1)


def test_share_and_cap_are_one_data_parallel_rank_s_without_per_rank_pools() -> None:
    # DP 4 behind a 400,000-token replica pool the engine does not report per rank: 32 running at 95 % hold 11,875
    # tokens each — 3 % of the replica's pool but 11.9 % of a rank's 100,000, where the 8 requests of each rank
    # compete (a request lives on one rank). Counted per replica (32 > 8 running, 3 % share) it never fired.
    dep = ctx(max_model_len=32_768, data_parallel_size=4)
    reading = ev(dep=dep, kv_capacity_tokens=400_000, kv_cache_usage_ratio=0.95, requests_running=32,
                 requests_waiting=5)  # fmt: skip
    holds, reason, evidence = RULE._reading(reading)
    assert holds is True, reason
    assert evidence["pool_share_per_request"] == pytest.approx(11_875 / 100_000, abs=1e-4)
    cap = next(p for p in RULE.propose(reading) if p.dial == "max_model_len")
    # a rank's pool ÷ the target concurrency 8, rounded down to 1,024: 12,500 → 12,288 (the replica's gave 49,152,
    # above max-model-len: no cap)
    assert cap.suggested == 12_288
    assert "Each of the 4 data-parallel ranks' pools (100,000 tokens)" in cap.description
    # one replica of DP 1 with the same pool and load is concurrency, not context: 32 running > 8
    one = ev(dep=ctx(max_model_len=32_768), kv_capacity_tokens=400_000, kv_cache_usage_ratio=0.95,
             requests_running=32, requests_waiting=5)  # fmt: skip
    assert RULE._reading(one)[0] is False


def test_an_engine_pool_that_is_one_rank_s_is_not_divided_again() -> None:
    # DP 4 configured, the engine reports one 100,000-token pool with no ranks (one scheduler, or one DP rank per
    # target): the capacity pass's replica pool is 4x it (error +300 %), so the figure is a rank's, not 4 ranks'
    import dataclasses

    from advisor.rules.admission import _rank_pool

    dep = ctx(max_model_len=32_768, data_parallel_size=4)
    reading = ev(dep=dep, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=8)

    def figure(err: float) -> object:
        return dataclasses.replace(reading, kv_capacity_source="engine", running_model_error_ratio=err)

    assert _rank_pool(figure(3.0)) == 100_000  # type: ignore[arg-type]
    assert _rank_pool(figure(0.05)) == 25_000  # type: ignore[arg-type]
    # a miss the pass's error bound (15 %) does not explain either way: the README's reading, the replica's pool
    assert _rank_pool(figure(1.0)) == 25_000  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "stats",
    [{"kv_cache_usage_ratio": 0.0, "requests_running": 4}, {"kv_cache_usage_ratio": 0.95, "requests_running": 0}],
    ids=["empty pool", "nothing running"],
)
def test_no_turn_when_no_request_holds_the_pool(stats: dict[str, Any]) -> None:
    # asked anyway (the lifecycle asks only when the rule holds), the rule proposes nothing instead of raising
    assert RULE.propose(_ev(requests_waiting=3, **stats)) == []


def test_the_admission_turn_never_names_priority_scheduling() -> None:
    for engine in ("vllm", "sglang", "dynamo"):
        props = RULE.propose(ev(dep=ctx(engine=engine, max_model_len=32_768), kv_capacity_tokens=100_000,
                                kv_cache_usage_ratio=0.95, requests_running=4, requests_waiting=3))  # fmt: skip
        admit = next(p for p in props if p.dial == "admission_policy")
        assert "priority" not in admit.flag, (engine, admit.flag)


def test_never_raises_max_num_seqs() -> None:
    for stats in ({}, {"preemptions_increase": 9}, {"requests_running": 1}, {"kv_cache_usage_ratio": 1.0}):
        assert all(p.dial != "max_num_seqs" for p in RULE.propose(_ev(**stats)))


@pytest.mark.parametrize(("held", "opens"), [(119.5, False), (120.0, True)], ids=["just short of 120 s", "at 120 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = AdmissionThrashRule(for_seconds=120)
    assert opens_after(rule, lambda now: ev(now=now, dep=CTX, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95,
                                            requests_running=4, requests_waiting=3), held) is opens  # fmt: skip


def test_the_pool_turns_follow_the_rules_own_and_never_claim_to_close_the_gap_alone() -> None:
    """triton-inference-server/tensorrtllm_backend#575 (field-state round 65): long prompts at a 0.5 KV fraction, the
    pool full with 8 running and 32 held back; the only turn offered was a 3 % context cap, where the operator
    measured a larger fraction faster. The pool turns kv_saturation offers come after the rule's own: a budget of
    0.5 → 0.9 among them, none of them sufficient alone (the long requests still hold the pool), so the rule's own
    turns lead the incident."""
    half = dataclasses.replace(CTX, inputs=dataclasses.replace(CTX.inputs, gpu_memory_utilization=0.5))
    props = RULE.propose(ev(dep=half, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=4,
                            requests_waiting=3, preemptions_increase=5))  # fmt: skip
    own = {"max_model_len", "admission_policy", "replicas", "max_num_seqs"}
    dials = [p.dial for p in props]
    first_pool = next(i for i, d in enumerate(dials) if d not in own)
    assert all(d not in own for d in dials[first_pool:]), dials
    budget = next(p for p in props if p.dial == "gpu_memory_utilization")
    assert (budget.action, budget.current, budget.suggested) == ("increase", 0.5, 0.9)
    assert budget.severity == "warning" and budget.rule == RULE.id
    assert not [p for p in props if p.dial not in own and p.sufficient], [(p.dial, p.sufficient) for p in props]


def test_the_admission_pool_turns_say_why_they_are_not_enough_alone() -> None:
    """They are never sufficient (the long requests still hold the pool), and say so — not "the engine reports no
    running requests", the text of an unknown demand, which a walkthrough would read as a data problem."""
    half = dataclasses.replace(CTX, inputs=dataclasses.replace(CTX.inputs, gpu_memory_utilization=0.5))
    props = RULE.propose(ev(dep=half, kv_capacity_tokens=100_000, kv_cache_usage_ratio=0.95, requests_running=4,
                            requests_waiting=3, preemptions_increase=5))  # fmt: skip
    budget = next(p for p in props if p.dial == "gpu_memory_utilization")
    assert "Alone it is not enough: a larger pool admits more of the long requests" in budget.description
    assert "reports no running requests" not in budget.description


def test_the_cap_s_gain_is_the_ceiling_it_moves() -> None:
    """Breaker 26: the cap's "predicted gain" was the target concurrency (×8) whatever the ceiling did. By hand
    (the case above): the anchored ceiling goes 3.0518 → 8.138, so the gain is 8.138 ÷ 3.0518 = 2.667."""
    cap = RULE.propose(_ev(preemptions_increase=5))[0]
    assert cap.dial == "max_model_len"
    assert cap.score == pytest.approx(8.138 / 3.0518, rel=1e-3)
    assert cap.sufficient


def test_llama_cpp_slots_that_own_their_cells_are_not_held_by_a_few_long_requests() -> None:
    """Breaker 26: llama.cpp, --ctx-size 32,768 over --parallel 4 (8,192 cells a slot, no --kv-unified), all four
    slots busy at 90 % of the cells and six deferred. Each slot owns its cells, so the deferred requests wait for a
    slot — seq_cap's turn — and a context cap frees no cell another request could take (the ceiling stays 4): no
    "a few long requests hold the pool" page. With --kv-unified the cells are shared and the rule reads them."""
    from advisor.capacity.inputs import EngineSettings

    def llamacpp(unified: bool) -> Any:
        dep = ctx(engine="llamacpp", max_model_len=8192)
        settings = EngineSettings(ctx_size=32_768, parallel=4, kv_unified=unified)
        dep = dataclasses.replace(dep, inputs=dataclasses.replace(dep.inputs, engine_settings=settings))
        return ev(
            dep=dep,
            kv_cache_usage_ratio=0.9,
            requests_running=4,
            requests_waiting=6,
            kv_capacity_tokens=32_768,
            generation_tokens_per_second=30.0,
        )

    split = llamacpp(unified=False)
    assert RULE.fires(split).holds is False
    assert "waits for a slot" in RULE.fires(split).reason or "wait for a slot" in RULE.fires(split).reason
    assert RULE.propose(split) == []
    assert RULE.fires(llamacpp(unified=True)).holds is not False
