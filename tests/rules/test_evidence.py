"""Issue 13, problems 2 and 3, the rule side: every diagnosis checked against its evidence (a proposal the
measurement contradicts is returned with ``withheld``, the reason in numbers), predicted pool effects anchored on
the engine's pool, and ``gpus_added`` on every proposal.

Reference numbers (hand-computed; :mod:`tests.rules.helpers` has the pool): Llama-3.1-8B, bf16, one H100-SXM at
0.9, max-model-len 8,192 → 449,920 KV tokens per replica, 54.921875 sequences at max-model-len. fp8 KV: 65,536 B
per token, blocks of 1,048,576 B: ⌊58,973,827,564 ÷ 1,048,576⌋ = 56,241 blocks = 899,856 tokens, 109.845703
sequences.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from advisor.rules.admission import AdmissionThrashRule
from advisor.rules.base import Evaluation
from advisor.rules.common import MODEL_DISAGREEMENT_CONFIDENCE, replicas_proposal
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.pool_context import PoolContextRule
from advisor.rules.weights import WeightsCrowdRule
from tests.rules.helpers import ROOFLINE, ctx, ev, good, hist


def _by_dial(props: list[Any], dial: str) -> Any:
    found = [p for p in props if p.dial == dial]
    assert len(found) == 1, [(p.rule, p.dial) for p in props]
    return found[0]


# --- a context cap only when long contexts are the pool's consumer ----------------------------------------------


def _thrash(**kw: Any) -> Evaluation:
    """admission_thrash at max-model-len 32,768 on a 100,000-token pool; cap = ⌊100,000 ÷ 8 ÷ 1,024⌋ × 1,024 =
    12,288."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.95,
        "requests_running": 4,
        "requests_waiting": 3,
        "preemptions_increase": 2,
    }
    hybrid = kw.pop("hybrid", False)
    stats.update(kw)
    e = ev(dep=ctx(max_model_len=32_768), kv_capacity_tokens=100_000, **stats)
    return dataclasses.replace(e, kv_cache_hybrid=hybrid)


def test_admission_cap_stands_when_running_requests_are_longer_than_the_cap() -> None:
    # 0.95 × 100,000 ÷ 4 = 23,750 tokens per running request > the cap 12,288: long contexts hold the pool
    props = AdmissionThrashRule().propose(_thrash())
    cap = _by_dial(props, "max_model_len")
    assert cap.suggested == 12_288 and cap.withheld is None


def test_admission_cap_withheld_when_the_running_requests_fit_under_it() -> None:
    # 8 running at 0.92: 0.92 × 100,000 ÷ 8 = 11,500 tokens each (11.5 % of the pool ≥ 10 %: the rule fires),
    # below the cap of 12,288 (93.6 %): the cap would reject none of them
    e = _thrash(requests_running=8, kv_cache_usage_ratio=0.92)
    assert AdmissionThrashRule().fires(e).holds is True
    props = AdmissionThrashRule().propose(e)
    cap = _by_dial(props, "max_model_len")
    assert cap.withheld is not None
    assert "running requests hold 11,500 KV tokens each" in cap.withheld
    assert "93.6% of the proposed cap of 12,288 tokens" in cap.withheld
    # the long-context replica rests on the same diagnosis
    assert _by_dial(props, "replicas").withheld == cap.withheld
    # whole-request admission does not claim long contexts: it stands
    assert _by_dial(props, "admission_policy").withheld is None


def test_admission_cap_withheld_on_a_hybrid_model_with_short_finished_requests() -> None:
    # the case: 23,750 KV tokens per running request are whole pages, while finished requests average
    # (1,500 + 400) ÷ 1 = 1,900 tokens. On main the cap was silently dropped; now it is withheld, saying why.
    e = _thrash(
        hybrid=True,
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=1_500.0,
        generation_tokens_per_second=400.0,
    )
    cap = _by_dial(AdmissionThrashRule().propose(e), "max_model_len")
    assert cap.withheld is not None
    assert "hybrid model" in cap.withheld
    assert "23,750 KV tokens" in cap.withheld and "finished requests average 1,900 tokens" in cap.withheld
    # the long-context replica: finished requests of 1,900 tokens need none
    replica = _by_dial(AdmissionThrashRule().propose(e), "replicas")
    assert replica.withheld is not None and "finished requests average 1,900 tokens" in replica.withheld
    # without finished requests the pages alone withhold the cap, but say nothing of the lengths: the replica stands
    bare = _thrash(hybrid=True)
    props = AdmissionThrashRule().propose(bare)
    assert "hybrid model" in (_by_dial(props, "max_model_len").withheld or "")
    assert _by_dial(props, "replicas").withheld is None


def test_admission_cap_withheld_when_finished_requests_are_short_and_running_ones_too() -> None:
    # finished (9,000 + 1,000) ÷ 1 = 10,000 tokens; running 8 × 11,500: the longest measure, 11,500, is below 12,288
    e = _thrash(
        requests_running=8,
        kv_cache_usage_ratio=0.92,
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=9_000.0,
        generation_tokens_per_second=1_000.0,
    )
    cap = _by_dial(AdmissionThrashRule().propose(e), "max_model_len")
    assert cap.withheld is not None and "finished requests average 10,000 tokens" in cap.withheld
    # 4 running at 0.92 hold 0.92 × 100,000 ÷ 4 = 23,000 tokens each (above the cap) while finished requests average
    # 10,000 (below it): a few long requests hold the pool, the cap stands
    e_few = dataclasses.replace(e, stats=dataclasses.replace(e.stats, requests_running=4))
    assert _by_dial(AdmissionThrashRule().propose(e_few), "max_model_len").withheld is None
    # finished requests of (12,000 + 1,000) ÷ 1 = 13,000 tokens (above the cap): the cap would reject the typical
    # request, not a few long ones — withheld
    e_long = dataclasses.replace(e_few, stats=dataclasses.replace(e_few.stats, prompt_tokens_per_second=12_000.0))
    reason = _by_dial(AdmissionThrashRule().propose(e_long), "max_model_len").withheld
    assert reason is not None and "finished requests average 13,000 tokens" in reason and "12,288" in reason


def _pool_context(**kw: Any) -> Evaluation:
    """pool_context: a 76,600-token pool for max-model-len 131,072 → cap ⌊76,600 ÷ 1,024⌋ × 1,024 = 75,776."""
    stats: dict[str, Any] = {"requests_running": 6, "requests_waiting": 2, "kv_cache_usage_ratio": 0.5}
    stats.update(kw)
    return ev(dep=ctx(max_model_len=131_072), kv_capacity_tokens=76_600, **stats)


def test_pool_context_cap_withheld_when_observed_requests_are_far_shorter() -> None:
    # finished (1,500 + 400) ÷ 1 = 1,900; running 0.5 × 76,600 ÷ 6 = 6,383 tokens each; × 8 = 51,067 < 75,776
    e = _pool_context(
        requests_finished_per_second=1.0, prompt_tokens_per_second=1_500.0, generation_tokens_per_second=400.0
    )
    cap = _by_dial(PoolContextRule().propose(e), "max_model_len")
    assert cap.suggested == 75_776
    assert cap.withheld is not None
    assert "running requests hold 6,383 KV tokens each" in cap.withheld
    assert "finished requests average 1,900 tokens" in cap.withheld
    assert "8.4% of the proposed cap of 75,776 tokens" in cap.withheld and "51,067" in cap.withheld


def test_pool_context_cap_stands_when_the_tail_may_reach_it() -> None:
    # finished (9,000 + 600) ÷ 1 = 9,600 tokens; × 8 = 76,800 ≥ 75,776: the long tail may reach the cap
    e = _pool_context(
        requests_finished_per_second=1.0, prompt_tokens_per_second=9_000.0, generation_tokens_per_second=600.0
    )
    assert _by_dial(PoolContextRule().propose(e), "max_model_len").withheld is None


def test_pool_context_cap_never_withheld_when_the_queue_is_blocked() -> None:
    # nothing running, nothing generated, one waiting: the request the pool cannot hold is the cap's evidence,
    # whatever the earlier finished requests averaged
    e = _pool_context(
        requests_running=0,
        requests_waiting=1,
        kv_cache_usage_ratio=0.0,
        requests_finished_per_second=0.1,
        prompt_tokens_per_second=100.0,
        generation_tokens_per_second=0.0,
    )
    cap = _by_dial(PoolContextRule().propose(e), "max_model_len")
    assert cap.withheld is None and cap.severity == "critical"


# --- a KV-pool turn only when the KV pool is the saturated one ----------------------------------------------------


@pytest.mark.parametrize("pool", ["mamba", "swa", "slots"])
def test_pool_context_pool_turns_withheld_while_another_pool_is_saturated(pool: str) -> None:
    e = dataclasses.replace(_pool_context(kv_cache_usage_ratio=0.31), pool_usage={pool: 0.98})
    props = PoolContextRule().propose(e)
    turns = [p for p in props if p.dial in ("kv_cache_dtype", "gpu_memory_utilization", "tensor_parallel_size")]
    assert turns
    for p in turns:
        assert p.withheld is not None
        assert f"the {pool} pool is saturated (98%) while the KV pool is not (KV usage 31%)" in p.withheld
    # with the KV pool saturated too, its own pressure: nothing withheld
    hot = dataclasses.replace(e, stats=dataclasses.replace(e.stats, kv_cache_usage_ratio=0.95))
    assert all(p.withheld is None for p in PoolContextRule().propose(hot) if p.dial != "max_model_len")


def test_weights_crowd_turns_withheld_while_the_slots_are_full() -> None:
    e = dataclasses.replace(
        ev(dep=ctx(gpu="L4"), requests_running=4, kv_cache_usage_ratio=0.25), pool_usage={"slots": 1.0}
    )
    props = WeightsCrowdRule().propose(e)
    assert {p.dial for p in props} == {"weight_quantization", "tensor_parallel_size"}
    assert all(p.withheld and "the slots pool is saturated (100%)" in p.withheld for p in props)
    # slots with room and a busy KV pool (85 %): the KV pool is the constraint, proposed
    free = dataclasses.replace(
        e, pool_usage={"slots": 0.5}, stats=dataclasses.replace(e.stats, kv_cache_usage_ratio=0.85)
    )
    assert all(p.withheld is None for p in WeightsCrowdRule().propose(free))


# --- more TP for TTFT only when prefill is a material share of TTFT ---------------------------------------------


def _ttft_miss(ttft_mean: float, **kw: Any) -> Evaluation:
    """2,000-token prompts at 1 request/s, nothing waiting, queue time tiny; the roofline prefill at TP 1 is
    48.79 ms with the plain roofline's factors (tests/rules/test_goodput.py), which the deployment's prior is pinned to
    (``ROOFLINE``). ``ttft_mean``: the observed mean TTFT (100 requests)."""
    dep = dataclasses.replace(kw.pop("dep", None) or ctx(), perf_assumptions=ROOFLINE)
    return ev(
        dep=dep,
        goodput=good(0.5, 1.0),
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=2_000.0,
        requests_running=2,
        requests_waiting=0,
        queue_time=hist((0.01, 100), total_sum=0.1),
        ttft=hist((5.0, 100), total_sum=100 * ttft_mean),
        **kw,
    )


def test_tp_for_ttft_stands_when_prefill_is_a_material_share() -> None:
    # 48.79 ms of a 0.15 s mean TTFT = 32.5 % ≥ 25 %; TP 1 → 2 on 2 replicas adds 2 GPUs
    tp, chunked = GoodputRule().propose(_ttft_miss(0.15, dep=ctx(replicas=2), replicas_up=2))
    assert tp.dial == "tensor_parallel_size" and tp.withheld is None and tp.gpus_added == 2
    # vLLM V1 chunks long prompts already: "make sure chunked prefill is on" would set what is set
    assert chunked.withheld is not None and "already chunks" in chunked.withheld and chunked.gpus_added == 0


def test_tp_for_ttft_withheld_when_a_transfer_stage_holds_the_time() -> None:
    # a PD prefill worker: mean TTFT 2.0 s, the modeled prefill 48.79 ms = 2.4 %; 43 requests wait for the
    # transfer (SGLang prefill prealloc 40, inflight 3)
    e = dataclasses.replace(_ttft_miss(2.0), queues={"prefill_prealloc": 40.0, "prefill_inflight": 3.0})
    tp, chunked = GoodputRule().propose(e)
    assert tp.withheld is not None
    assert "is 2.4% of the observed mean TTFT 2.00s (under 25%)" in tp.withheld
    assert "43 requests wait for a transfer stage (prefill_inflight 3, prefill_prealloc 40)" in tp.withheld
    assert chunked.withheld == tp.withheld


def test_tp_for_ttft_withheld_names_deferred_requests() -> None:
    # vLLM NixlConnector: requests deferred for the KV transfer (num_requests_waiting_by_reason{reason="deferred"})
    e = dataclasses.replace(_ttft_miss(1.0), queues={"waiting_deferred": 12.0, "waiting_capacity": 0.0})
    tp, _ = GoodputRule().propose(e)
    assert tp.withheld is not None and "4.9% of the observed mean TTFT 1.00s" in tp.withheld
    assert "12 requests wait for a transfer stage (waiting_deferred 12)" in tp.withheld


# --- effects anchored on the engine ----------------------------------------------------------------------------


def _saturated(kv_capacity_tokens: float, **kw: Any) -> Evaluation:
    e = ev(
        kv_capacity_tokens=kv_capacity_tokens,
        kv_cache_usage_ratio=0.98,
        requests_running=50,
        requests_waiting=40,
        requests_waiting_first=10,
        preemptions_increase=6,
        preemptions_per_second=0.1,
    )
    return dataclasses.replace(e, capacity_model_error_ratio=449_920 / kv_capacity_tokens - 1, **kw)


def test_effects_start_from_the_engines_pool_ten_times_below_the_model() -> None:
    # engine 44,992 tokens, model 449,920 (+900 %): before = 44,992, after = 44,992 × 899,856 ÷ 449,920 = 89,985.6
    p = _by_dial(KVSaturationRule().propose(_saturated(44_992)), "kv_cache_dtype")
    assert p.predicted_effect["kv_cache_tokens"] == {
        "before": 44_992,
        "after": 89_985.6,
        "model_before": 449_920,
        "model_after": 899_856,
    }
    # sequences at max-model-len: 54.921875 × 0.1 = 5.4922 → 109.845703 × 0.1 = 10.9846
    assert p.predicted_effect["max_concurrency"] == {
        "before": 5.4922,
        "after": 10.9846,
        "model_before": 54.9219,
        "model_after": 109.8457,
    }
    # at the observed 0.98 × 44,992 ÷ 50 = 881.84 tokens per request: 50 ÷ 0.98 = 51.0204 → × 2.0000356 = 102.0426
    assert p.predicted_effect["concurrency_ceiling"]["before"] == pytest.approx(51.0204, abs=1e-4)
    assert p.predicted_effect["concurrency_ceiling"]["after"] == pytest.approx(102.0426, abs=1e-4)
    # disagreement beyond the 15 % bound: confidence 0.9 × 0.5, and the text says so in numbers
    assert MODEL_DISAGREEMENT_CONFIDENCE == 0.5
    assert p.confidence == 0.45
    assert "the capacity pass predicts 449,920 KV tokens per replica, the engine reports 44,992 (+900%" in (
        p.description.replace("The capacity", "the capacity")
    )
    assert "confidence lowered" in p.description
    assert "44,992 → 89,986 KV tokens per replica" in p.summary


def test_effects_anchored_within_the_bound_keep_their_confidence() -> None:
    # engine 432,000 (model +4.1 %): anchored, confidence unchanged, no disagreement note
    p = _by_dial(KVSaturationRule().propose(_saturated(432_000)), "kv_cache_dtype")
    assert p.predicted_effect["kv_cache_tokens"]["before"] == 432_000
    assert p.predicted_effect["kv_cache_tokens"]["after"] == pytest.approx(864_015.36, abs=0.01)
    assert p.confidence == 0.9 and "confidence lowered" not in p.description
    # a tighter configured bound (3 %) makes the same 4.1 % a disagreement
    tight = _by_dial(KVSaturationRule().propose(_saturated(432_000, capacity_model_error_bound=0.03)), "kv_cache_dtype")
    assert tight.confidence == 0.45 and "(+4%, beyond the ±3% bound)" in tight.description


def test_replica_total_pool_is_anchored_and_counts_gpus() -> None:
    # 2 replicas of TP 2 → 5: 3 replicas × 2 GPUs = 6 added; total pool from the engine's 44,992 per replica
    e = dataclasses.replace(
        _saturated(44_992), ctx=ctx(replicas=2, tensor_parallel_size=2), capacity_model_error_ratio=None
    )
    model = e.ctx.capacity.kv_cache_tokens
    p = replicas_proposal("r", e, 5, severity="warning", confidence=0.8, evidence={}, summary="s", description="d")
    assert p.gpus_added == 6
    assert p.predicted_effect["kv_cache_tokens_total"]["before"] == 2 * 44_992
    assert p.predicted_effect["kv_cache_tokens_total"]["after"] == 5 * 44_992
    assert p.predicted_effect["kv_cache_tokens_total"]["model_before"] == 2 * model
    # replicas leave each replica's pool as it is: the total is the engine's figure × the count, which the model's
    # miss does not touch, so the confidence stays
    assert p.confidence == 0.8 and "confidence lowered" not in p.description
    # a scale-down adds none
    down = replicas_proposal("r", e, 1, severity="info", confidence=0.8, evidence={}, summary="", description="")
    assert down.gpus_added == 0


def test_model_only_effects_are_left_as_the_capacity_pass_gives_them() -> None:
    e = dataclasses.replace(_saturated(44_992), kv_capacity_source="model", kv_capacity_tokens=449_920.0)
    p = _by_dial(KVSaturationRule().propose(e), "kv_cache_dtype")
    assert p.predicted_effect["kv_cache_tokens"] == {"before": 449_920, "after": 899_856}


# --- gpus_added on every proposal -------------------------------------------------------------------------------


def test_gpus_added_by_each_turn_of_a_saturated_pool() -> None:
    # 3 replicas of TP 1: TP 1 → 2 adds 3 × 1 = 3 GPUs; fp8 KV, budget, quantization add none; the knee cap none
    # (replica proposals: test_replica_total_pool_is_anchored_and_counts_gpus)
    e = dataclasses.replace(_saturated(432_000), ctx=ctx(replicas=3, gpu_memory_utilization=0.85), replicas_up=3)
    got = {p.dial: p.gpus_added for p in KVSaturationRule().propose(e) if p.dial != "replicas"}
    assert got["tensor_parallel_size"] == 3
    assert got["kv_cache_dtype"] == 0 and got["gpu_memory_utilization"] == 0 and got["weight_quantization"] == 0


def test_evaluation_carries_the_configured_bound() -> None:
    snap = EngineSnapshot(engine="vllm", kv_cache_capacity_tokens=44_992, kv_cache_usage_ratio=0.5)
    view = TargetView("http://127.0.0.1:1/metrics", True, None, None, (TimedSnapshot("t", 999.0, snap),))
    e, _ = evaluate_deployment(ctx(), [view], 1000.0, 60.0, Quality(1.0, capacity_model_error_bound=0.4))
    assert e.capacity_model_error_bound == 0.4
    assert e.capacity_model_error_ratio == pytest.approx(9.0)
    e_default, _ = evaluate_deployment(ctx(), [view], 1000.0, 60.0, Quality(1.0))
    assert e_default.capacity_model_error_bound == 0.15


def test_weights_crowd_turns_withheld_while_the_kv_pool_is_idle() -> None:
    # an L4 crowded by bf16 weights, but the KV pool peaked at 18 % over the window with nothing preempted
    e = ev(dep=ctx(gpu="L4"), requests_running=4, kv_cache_usage_ratio=0.18, kv_cache_usage_ratio_max=0.18)
    props = WeightsCrowdRule().propose(e)
    assert props and all(
        p.withheld and "KV usage at most 18% over the last 60s (below 80%)" in p.withheld for p in props
    )
    # at 85 %, or with preemptions, the pool is the constraint: proposed
    busy = ev(dep=ctx(gpu="L4"), requests_running=4, kv_cache_usage_ratio=0.85)
    assert all(p.withheld is None for p in WeightsCrowdRule().propose(busy))
    preempting = ev(dep=ctx(gpu="L4"), requests_running=4, kv_cache_usage_ratio=0.18, preemptions_increase=2)
    assert all(p.withheld is None for p in WeightsCrowdRule().propose(preempting))


def test_anchored_is_one_idempotent_place_for_any_rules_effects() -> None:
    # a plugin's proposal with the capacity pass's plain figures, on an engine reporting 44,992 tokens (model +900 %)
    from advisor.rules.base import Proposal
    from advisor.rules.common import anchored
    from advisor.rules.turns import effect

    e = _saturated(44_992)
    p = Proposal(
        rule="plugin",
        dial="kv_cache_dtype",
        action="set",
        current="auto",
        suggested="fp8",
        flag="--kv-cache-dtype fp8",
        severity="warning",
        confidence=0.8,
        summary="s",
        description="d.",
        predicted_effect={"kv_cache_tokens": effect(449_920, 899_856), "queue_wait_seconds": effect(3.0, 1.0)},
        evidence={},
        score=1.0,
    )
    once = anchored(e, p)
    assert once.predicted_effect["kv_cache_tokens"] == {
        "before": 44_992,
        "after": 89_985.6,
        "model_before": 449_920,
        "model_after": 899_856,
    }
    # not pool-derived: left alone
    assert once.predicted_effect["queue_wait_seconds"] == {"before": 3.0, "after": 1.0}
    assert once.confidence == 0.4 and once.description.count("effects scaled from the engine's figure") == 1
    assert anchored(e, once) == once


def test_only_turns_that_change_the_pool_lose_confidence_to_the_models_miss() -> None:
    # engine 76,600 tokens vs the capacity pass's pool at max-model-len 131,072: far apart. The cap keeps each
    # replica's pool (its effect is the engine's figure × arithmetic): confidence 0.95 stays; fp8 KV's doubling is
    # the model's prediction: 0.95 × 0.5
    e = _pool_context(requests_running=0, requests_waiting=1, kv_cache_usage_ratio=0.0)
    model = e.ctx.capacity.kv_cache_tokens
    assert abs(model / 76_600 - 1) > 0.15
    props = PoolContextRule().propose(e)
    cap, fp8 = _by_dial(props, "max_model_len"), _by_dial(props, "kv_cache_dtype")
    assert cap.confidence == 0.95 and "confidence lowered" not in cap.description
    assert cap.predicted_effect["kv_cache_tokens"]["before"] == 76_600
    assert fp8.confidence == 0.475 and "confidence lowered (×0.5)" in fp8.description
    assert f"The capacity pass predicts {model:,} KV tokens per replica, the engine reports 76,600" in fp8.description
