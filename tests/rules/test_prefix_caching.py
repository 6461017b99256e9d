"""prefix_caching_off: long prompts prefilled whole on a vLLM V1 engine whose prefix cache is off.

Field sources: syv-ai/qwen38-27b-rtx3090#6 (a coding agent's ~20K-token turn, 16.7 s cold, 1.0–1.2 s with its prefix
cached) and rwlove/home-ops#13384 (fp8 KV turned the cache off; 96K tokens re-prefilled a step). The evaluations
below are Llama-3.1-8B-Instruct bf16 (the factories' deployment) with hand-set histories.

Hand arithmetic for the roofline check (Llama-3.1-8B, one H100-SXM, 989 TFLOP/s dense bf16 × 0.6 effective): a
20,000-token prompt is 2 × 8.03e9 × 20,000 ≈ 3.2e14 FLOP of weights plus ~1e14 of attention (32 layers, 4,096 wide,
20,000² ÷ 2 pairs × 4 FLOP × 2): ~0.5–0.8 s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor import conventions as c
from advisor.domain import EngineSnapshot, Histogram
from advisor.rules.base import SLOTargets
from advisor.rules.prefix_caching import PrefixCachingRule
from advisor.telemetry import LifetimePrefill, lifetime_prefill
from tests.rules.helpers import ctx, ev, hist

RULE = PrefixCachingRule()
SLO = SLOTargets(ttft_seconds=5.0, tpot_seconds=0.1, target_ratio=0.9)
OFF = {"enable_prefix_caching": "False"}


def _life(ttft: float = 16.7, queue: float | None = 0.05, prompt: float | None = 20_000.0, n: float = 60) -> Any:
    return LifetimePrefill(ttft, queue, prompt, n)


def _ev(
    engine_config: dict[str, str] | None = None,
    life: LifetimePrefill | None = None,
    slo: SLOTargets = SLO,
    gpu: str | None = None,
    **inputs: Any,
) -> Any:
    dep = ctx(slo=slo, gpu=gpu, **inputs)
    if gpu is None:  # no GPU: the prefill is not priced
        dep = dataclasses.replace(dep, gpu=None)
    e = ev(dep=dep, engine_config=OFF if engine_config is None else engine_config)
    return dataclasses.replace(e, lifetime_prefill=_life() if life is None else life)


def test_an_agents_long_turns_with_the_cache_off_get_it_turned_on() -> None:
    # 60 turns since start: TTFT 16.7 s, 0.05 s of it queued, 20,000-token prompts; the window finished none
    e = _ev()
    cond = RULE.fires(e)
    assert cond.holds is True, cond.reason
    assert "16.65 s" in cond.reason and "since the engines started" in cond.reason
    (p,) = RULE.propose(e)
    assert (p.dial, p.action, p.current, p.suggested) == (c.DIAL_PREFIX_CACHING, "enable", False, True)
    assert p.flag == "--enable-prefix-caching"
    assert p.gpus_added == 0.0 and p.withheld is None  # no GPU in the context: the prefill is not priced
    assert p.sufficient is False  # the prompts' shared share is not measured while the cache is off
    assert p.predicted_effect["ttft_seconds"] == {"before": 16.7, "after": None}  # the hit rate cannot be known


def test_the_deployments_word_stands_where_the_engine_does_not_say() -> None:
    assert RULE.fires(_ev(engine_config={}, enable_prefix_caching=False)).holds is True
    # neither says: vLLM V1's default is on, but "unknown" is not "on"
    assert RULE.fires(_ev(engine_config={})).holds is None
    # the engine's label is what runs, over the config
    assert RULE.fires(_ev(engine_config={"enable_prefix_caching": "True"}, enable_prefix_caching=False)).holds is False


def test_no_turn_where_the_cache_is_on_the_prompts_short_or_the_queue_holds_the_ttft() -> None:
    assert RULE.fires(_ev(engine_config={"enable_prefix_caching": "True"})).holds is False
    # 600-token prompts prefill in tens of milliseconds: a TTFT miss with them is not their prefill
    assert RULE.fires(_ev(life=_life(prompt=600.0))).holds is False
    # TTFT 9 s of which 6 s queued: 3 s past the queue meets the 5 s target (queue_growth's, not a cache's)
    assert RULE.fires(_ev(life=_life(ttft=9.0, queue=6.0))).holds is False
    # the demo's saturated pool (CI 60): 31 s queued beside 3.5 s past the queue, over a 2.5 s target — the queue,
    # not the prefill, holds the TTFT; "turn prefix caching on" had become the incident's first turn
    assert RULE.fires(_ev(life=_life(ttft=34.5, queue=31.0, prompt=6_000.0))).holds is False
    # the queue time unknown: whether the prefill holds the TTFT cannot be told
    assert RULE.fires(_ev(life=_life(queue=None))).holds is None


def test_not_for_other_engines_v0_or_a_hybrid_before_026() -> None:
    sglang = dataclasses.replace(_ev(), ctx=dataclasses.replace(_ev().ctx, engine="sglang"))
    assert RULE.fires(sglang).holds is False
    assert RULE.fires(_ev(overhead_profile="vllm-v0")).holds is False
    e = _ev(engine_version="0.24.0")
    hybrid = dataclasses.replace(
        e,
        ctx=dataclasses.replace(
            e.ctx, inputs=dataclasses.replace(e.ctx.inputs, model=dataclasses.replace(e.ctx.inputs.model))
        ),
    )
    model = dataclasses.replace(hybrid.ctx.inputs.model, linear_layers=24)
    hybrid = dataclasses.replace(
        hybrid, ctx=dataclasses.replace(hybrid.ctx, inputs=dataclasses.replace(hybrid.ctx.inputs, model=model))
    )
    assert RULE.fires(hybrid).holds is False
    assert "0.26" in RULE.fires(hybrid).reason


def test_withheld_where_the_prefill_explains_a_small_share_of_the_ttft() -> None:
    # 20,000-token prompts on an H100 prefill in ~0.5-0.8 s (module docstring); 10 s past the queue is elsewhere
    (p,) = RULE.propose(_ev(gpu="H100-SXM", life=_life(ttft=10.05)))
    modelled = p.evidence["prefill_seconds_modelled"]
    assert 0.4 < modelled < 1.5, modelled
    assert p.withheld is not None and "outside the prefill" in p.withheld
    # the same prompts against a 0.5 s target, 0.85 s past the queue: the prefill is the TTFT, nothing withheld
    tight = SLOTargets(ttft_seconds=0.5, tpot_seconds=0.1, target_ratio=0.9)
    (q,) = RULE.propose(_ev(gpu="H100-SXM", slo=tight, life=_life(ttft=0.9)))
    assert q.withheld is None


def test_the_window_is_read_when_it_observed_twenty_requests() -> None:
    # the window: 30 requests at 1.2 s mean TTFT (0.1 s queued); since start: 16.7 s. The window's 1.1 s past the
    # queue meets 5 s: the since-start means, from a heavier past, are not read (the prompt length is since start's)
    e = _ev()
    stats = dataclasses.replace(
        e.stats,
        ttft=hist((1.0, 10.0), (2.0, 30.0), total_sum=36.0),
        queue_time=hist((1.0, 30.0), total_sum=3.0),
        prompt_tokens_per_second=1_500.0,
        requests_finished_per_second=0.5,
    )
    cond = RULE.fires(dataclasses.replace(e, stats=stats))
    assert cond.holds is False and "the window" in cond.reason, cond.reason


def test_the_window_never_takes_its_prompt_length_from_the_counters() -> None:
    # breaker 11: 30 requests reached their first token (+30 × 600 prompt tokens) while 1 finished: the counters'
    # quotient read 18,000-token prompts. The length is the per-request histogram's since start: 600
    e = _ev(life=_life(ttft=3.0, queue=0.05, prompt=600.0), slo=SLOTargets(2.0, 0.1, 0.9))
    stats = dataclasses.replace(
        e.stats,
        ttft=hist((5.0, 30.0), total_sum=90.0),
        queue_time=hist((1.0, 30.0), total_sum=1.5),
        prompt_tokens_per_second=18_000.0,
        requests_finished_per_second=1.0,
    )
    cond = RULE.fires(dataclasses.replace(e, stats=stats))
    assert cond.holds is False and "600 tokens" in cond.reason, cond.reason


def test_the_window_is_not_read_unless_every_engine_times_its_queue() -> None:
    # breaker 11: one replica without a queue histogram; the window's TTFT covers both, its queue one. The lifetime
    # queue mean is unknown then (a target lacks it), and so is the reading
    e = _ev(life=_life(queue=None))
    stats = dataclasses.replace(
        e.stats, ttft=hist((10.0, 60.0), total_sum=315.0), queue_time=hist((1.0, 30.0), total_sum=0.3)
    )
    assert RULE.fires(dataclasses.replace(e, stats=stats)).holds is None
    # a negative sum on the page is unknown, not negative seconds
    bad = dataclasses.replace(e.stats, ttft=hist((10.0, 60.0), total_sum=-5000.0))
    assert RULE.fires(dataclasses.replace(_ev(life=_life(queue=None)), stats=bad)).holds is None


def _snap(ttft: Histogram | None, queue: Histogram | None, prompt: tuple[float, float] | None) -> EngineSnapshot:
    return EngineSnapshot(
        engine="vllm",
        ttft=ttft,
        queue_time=queue,
        request_prompt_tokens_sum=None if prompt is None else prompt[0],
        request_prompt_tokens_count=None if prompt is None else prompt[1],
    )


def test_lifetime_prefill_sums_each_histogram_over_the_targets() -> None:
    # TTFT sums 501 s over 30 and 0 s over 0 requests; queue 1.5 s over 30 and 0 over 0; prompts 600,000 over 30
    a = _snap(hist((20.0, 30.0), total_sum=501.0), hist((1.0, 30.0), total_sum=1.5), (600_000.0, 30.0))
    b = _snap(hist((20.0, 0.0)), hist((1.0, 0.0)), (0.0, 0.0))
    got = lifetime_prefill([a, b], least=20)
    assert got == LifetimePrefill(16.7, 0.05, 20_000.0, 30.0)
    assert lifetime_prefill([a, b], least=31) is None  # fewer counted than asked
    assert lifetime_prefill([a, _snap(None, None, None)], least=20) is None  # a target without TTFT: unknown
    # a target without the queue histogram leaves the queue unknown, not 0
    partial = lifetime_prefill([a, _snap(hist((20.0, 0.0)), None, (0.0, 0.0))], least=20)
    assert partial is not None and partial.queue_seconds_mean is None


def _hybrid(e: Any) -> Any:
    model = dataclasses.replace(e.ctx.inputs.model, linear_layers=24)
    return dataclasses.replace(e, ctx=dataclasses.replace(e.ctx, inputs=dataclasses.replace(e.ctx.inputs, model=model)))


def test_never_beside_a_drafter_on_a_hybrid_model() -> None:
    # vllm#43559 / #53912 (open on 0.28): prefix caching + MTP corrupts a hybrid model's output; operators keep the
    # cache off for it (noonghunna/club-3090#720). The same model without speculation: the turn stands
    e = _hybrid(_ev(engine_version="0.28.0"))
    assert RULE.fires(e).holds is True
    drafting = dataclasses.replace(e, ctx=dataclasses.replace(e.ctx, speculative_decoding=True))
    cond = RULE.fires(drafting)
    assert cond.holds is False and "53912" in cond.reason, cond.reason


def test_prefills_in_flight_together_count_before_withholding() -> None:
    # 20,000-token prompts modelled at ~0.5-0.8 s on an H100 (module docstring); 4 s past the queue with 8
    # requests running on average: their chunks share the steps, ~8 × 0.7 s of prefill, not 0.7 s of 4 s
    tight = SLOTargets(ttft_seconds=1.0, tpot_seconds=0.1, target_ratio=0.9)
    alone = _ev(gpu="H100-SXM", slo=tight, life=_life(ttft=4.05))
    (p,) = RULE.propose(alone)
    assert p.withheld is not None  # one request at a time: ~0.7 s of 4 s is under a quarter
    crowd = dataclasses.replace(alone, requests_running_mean=8.0)
    (q,) = RULE.propose(crowd)
    assert q.withheld is None, q.withheld


def test_requests_in_flight_are_counted_per_engine_not_over_the_replicas() -> None:
    # breaker 13: one running per replica on five replicas is 5 summed; one engine's chunks share steps with its own
    # requests only, so five replicas at 1 each withhold exactly as one replica at 1 does (~0.7 s of 4 s)
    tight = SLOTargets(ttft_seconds=1.0, tpot_seconds=0.1, target_ratio=0.9)
    alone = _ev(gpu="H100-SXM", slo=tight, life=_life(ttft=4.05))
    one = dataclasses.replace(alone, requests_running_mean=1.0, replicas_up=1)
    five = dataclasses.replace(alone, requests_running_mean=5.0, replicas_up=5)
    (p,) = RULE.propose(one)
    (q,) = RULE.propose(five)
    assert p.withheld is not None and q.withheld is not None, (p.withheld, q.withheld)


def test_since_start_means_never_overrule_a_window_whose_requests_meet_the_target() -> None:
    # breaker 13: 1,000 requests at 3.5 s since start, the window's 5 at 0.4 s against 2.5 s: the window meets the
    # target, so the rule neither fires nor stays firing (clears) on the older history
    slo = SLOTargets(ttft_seconds=2.5, tpot_seconds=0.1, target_ratio=0.9)
    e = _ev(slo=slo, life=_life(ttft=3.5, queue=0.05, prompt=4_000.0, n=1_005))
    stats = dataclasses.replace(
        e.stats, ttft=hist((0.5, 5.0), total_sum=2.0), queue_time=hist((0.1, 5.0), total_sum=0.1)
    )
    now = dataclasses.replace(e, stats=stats)
    fired = RULE.fires(now)
    assert fired.holds is False and "0.40 s" in fired.reason, fired.reason
    assert RULE.clears(now).holds is True
    # the window's few requests missing the target leave the since-start reading in charge (a single user's turns)
    slow = dataclasses.replace(
        e.stats, ttft=hist((5.0, 3.0), total_sum=12.0), queue_time=hist((0.1, 3.0), total_sum=0.1)
    )
    assert RULE.fires(dataclasses.replace(e, stats=slow)).holds is True


def test_replicas_reporting_the_cache_both_ways_leave_it_unknown_in_either_order() -> None:
    # breaker 13: the first listed target's label decided; the merged config says the replicas differ
    from advisor.evaluate import merged_engine_config

    off, on = (
        {"enable_prefix_caching": "False", "block_size": "16"},
        {"enable_prefix_caching": "True", "block_size": "16"},
    )
    for configs in ([off, on], [on, off]):
        merged = merged_engine_config(configs)
        assert merged == {"enable_prefix_caching": c.ENGINE_CONFIG_MIXED, "block_size": "16"}
        cond = RULE.fires(_ev(engine_config=merged))
        assert cond.holds is None and "differ" in cond.reason, cond.reason
    assert merged_engine_config([off, off]) == off and merged_engine_config([]) == {}


def test_a_queue_mean_above_the_ttft_mean_is_unknown_never_negative_seconds() -> None:
    # breaker 13: TTFT 3 s, queue 5 s (histograms of different requests, or a corrupt page)
    cond = RULE.fires(_ev(life=_life(ttft=3.0, queue=5.0)))
    assert cond.holds is None and "exceeds" in cond.reason and "-" not in cond.reason.split("TTFT")[0], cond.reason
