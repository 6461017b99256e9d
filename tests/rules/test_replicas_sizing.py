"""size_replicas: one replica number per deployment (issue 13, problem 7), whichever rule asks.

Reference values are computed here by hand from the formulas' sources, not read from the code:

* flow balance (Kleinrock vol. 1 §2.1): λ = completions/s + (in flight at the end − at the start) ÷ span;
* Erlang B by the recursion B(0) = 1, B(k) = a·B(k−1) ÷ (k + a·B(k−1)); Erlang C = c·B ÷ (c − a·(1 − B));
  M/M/c mean wait Wq = C ÷ (c·μ − λ) (Kleinrock §3.5) — :func:`_erlang_c` below, written independently;
* drain: c·μ − λ ≥ backlog ÷ drain_seconds → c = ⌈(λ + backlog ÷ drain_seconds) ÷ μ⌉.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from advisor.capacity import perf
from advisor.capacity.calibration import FactorEstimate, LatencyFit, LatencyModel
from advisor.capacity.queueing import SLO, ReplicaService, Workload, replicas_for_slo
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.replicas import arrival_rate, saturated, size_replicas
from tests.rules.helpers import ctx, ev, good, hist, requests


def _erlang_c(c: int, a: float) -> float:
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b))


def _saturated_ev(**kw: Any) -> Any:
    """50 running in a 95 % full pool, the queue 10 → 70 over 60 s, 2 completions/s: λ = 2 + 60 ÷ 60 = 3/s."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.95,
        "requests_finished_per_second": 2.0,
        "requests_running": 50,
        "requests_running_first": 50,
        "requests_waiting_first": 10,
        "requests_waiting": 70,
    }
    stats.update(kw)
    return ev(**stats)


def test_arrival_rate_is_completions_plus_in_flight_growth_never_completions_alone() -> None:
    e = _saturated_ev()
    assert arrival_rate(e.stats) == pytest.approx((3.0, 2.0, 1.0))
    # the batch grew too: 50 → 56 running adds 6 ÷ 60 = 0.1/s
    assert arrival_rate(_saturated_ev(requests_running_first=44).stats)[0] == pytest.approx(3.1)
    # a draining queue: 400 → 300 waiting over a 20 s span while 10/s complete → λ = 10 − 5 = 5/s
    draining = _saturated_ev(
        requests_finished_per_second=10.0, requests_waiting_first=400, requests_waiting=300, span_seconds=20.0
    )
    assert arrival_rate(draining.stats)[0] == pytest.approx(5.0)
    assert arrival_rate(_saturated_ev(requests_finished_per_second=None).stats) is None


def test_saturated_replicas_measured_service_rate_and_mmc_wait() -> None:
    # no token counters → the measured path. μ = 2/s (saturated: requests wait, pool 95 % full).
    # ⌈3 ÷ (2 × 0.8)⌉ = ⌈1.875⌉ = 2; at 2: a = 1.5, C = 9/14, Wq = C ÷ (2·2 − 3) = 0.642857 s ≤ TTFT 2.5 s.
    sz = size_replicas(_saturated_ev())
    assert sz is not None
    assert (sz.method, sz.replicas, sz.slo_replicas, sz.drain_replicas) == ("measured", 2, 2, None)
    assert sz.arrival_rate == pytest.approx(3.0)
    assert sz.service_rate_per_replica == pytest.approx(2.0)
    assert sz.utilization == pytest.approx(1.5)
    assert sz.utilization_after == pytest.approx(0.75)
    assert sz.queue_wait_seconds is None  # 1 replica: λ 3 > μ 2, unstable
    assert _erlang_c(2, 1.5) == pytest.approx(9 / 14)
    assert sz.queue_wait_seconds_after == pytest.approx((9 / 14) / (4 - 3))


def test_the_wait_target_can_need_more_than_the_utilization_target() -> None:
    # λ = 3, μ = 2, TTFT target 0.2 s: 2 replicas wait 0.643 s > 0.2; 3 replicas: a = 1.5,
    # B(3) = 1.5 × 0.310345 ÷ (3 + 1.5 × 0.310345) = 0.134328; C = 3B ÷ (3 − 1.5 × 0.865672) = 0.236842;
    # Wq = 0.236842 ÷ (6 − 3) = 0.0789 s ≤ 0.2 → 3
    from advisor.rules.base import SLOTargets

    assert _erlang_c(3, 1.5) == pytest.approx(0.236842, abs=1e-6)
    sz = size_replicas(_saturated_ev(dep=ctx(slo=SLOTargets(0.2, 0.1, 0.9))))
    assert sz is not None and sz.replicas == 3


def test_drain_term_clears_the_backlog_within_the_stated_time() -> None:
    # backlog 70 within 10 s while 3/s keep arriving at μ = 2/s each: ⌈(3 + 70 ÷ 10) ÷ 2⌉ = 5
    sz = size_replicas(_saturated_ev(), drain_seconds=10.0)
    assert sz is not None
    assert (sz.slo_replicas, sz.drain_replicas, sz.replicas) == (2, 5, 5)
    assert "70 waiting within 10s" in sz.explanation
    # a generous drain time adds nothing: ⌈(3 + 70 ÷ 600) ÷ 2⌉ = ⌈1.558⌉ = 2
    long = size_replicas(_saturated_ev(), drain_seconds=600.0)
    assert long is not None and (long.drain_replicas, long.replicas) == (2, 2)
    with pytest.raises(ValueError, match="drain_seconds"):
        size_replicas(_saturated_ev(), drain_seconds=0.0)


def test_sized_for_the_rate_not_for_the_momentary_backlog() -> None:
    # issue 13: 407 running and waiting → "13 replicas to hold them all at once". Here 50 run and 400 wait, but
    # the queue is draining (450 → 400 over 60 s) while 10/s complete: λ = 10 − 50 ÷ 60 = 9.1667/s, μ = 10/s.
    # ⌈9.1667 ÷ 8⌉ = 2 (M/M/2 at a = 0.91667: C = 0.2614..., Wq = C ÷ (20 − 9.1667) = 0.024 s) — not 9.
    e = _saturated_ev(requests_finished_per_second=10.0, requests_waiting_first=450, requests_waiting=400)
    sz = size_replicas(e)
    assert sz is not None and sz.replicas == 2
    assert sz.arrival_rate == pytest.approx(10 - 50 / 60)


def test_unsaturated_service_rate_scales_to_the_ceiling_by_littles_law() -> None:
    # pool half full, nothing waits: 10 running of a ceiling min(256, 28,120 ÷ 512 = 54.921875) at 2/s →
    # μ = 2 × 54.921875 ÷ 10 = 10.984375/s; λ = 2 → 1 replica
    e = ev(
        kv_cache_usage_ratio=0.5,
        requests_finished_per_second=2.0,
        requests_running=10,
        requests_running_first=10,
        requests_waiting=0,
        requests_waiting_first=0,
    )
    sz = size_replicas(e)
    assert sz is not None
    assert sz.service_rate_per_replica == pytest.approx(2 * 54.921875 / 10)
    assert sz.replicas == 1


def test_a_transient_queue_beside_a_pool_with_room_is_not_saturation() -> None:
    # a burst: 0 → 30 waiting within a 5 s span while the pool is 40 % full and 20 of 256 slots run; 10/s
    # complete. λ = 10 + 30 ÷ 5 = 16/s; not saturated, so μ = 10 × 54.921875 ÷ 20 = 27.46/s, not 10/s:
    # ⌈16 ÷ (27.46 × 0.8)⌉ = 1 — the burst is absorbed, no scale-up
    e = ev(
        kv_cache_usage_ratio=0.4,
        requests_finished_per_second=10.0,
        requests_running=20,
        requests_running_first=20,
        requests_waiting=30,
        requests_waiting_first=0,
        span_seconds=5.0,
    )
    assert not saturated(e)
    sz = size_replicas(e)
    assert sz is not None
    assert sz.arrival_rate == pytest.approx(16.0)
    assert sz.service_rate_per_replica == pytest.approx(10 * 54.921875 / 20)
    assert sz.replicas == 1
    assert QueueGrowthRule(for_seconds=0).propose(e) == []


def test_model_path_matches_the_slo_search_of_the_queueing_model() -> None:
    # with token counters and a GPU the count comes from the M/G/c service model: without TPOT observations it runs
    # uncalibrated, and with no batch running at the newest scrape there is nothing to scale the measured rate
    # from, so it must equal replicas_for_slo's own (doubling + bisection) search for the same workload:
    # 2,000-token prompts, 250-token outputs, 30 requests/s arriving. Both with the deployment's prior: the published
    # calibration for vLLM on an H100 (perf.assumptions_for).
    e = ev(
        kv_cache_usage_ratio=0.6,
        requests_finished_per_second=30.0,
        prompt_tokens_per_second=60_000.0,
        generation_tokens_per_second=7_500.0,
        requests_running=0,
        requests_running_first=0,
        requests_waiting=0,
        requests_waiting_first=0,
    )
    sz = size_replicas(e)
    assert sz is not None and sz.method == "model" and sz.calibration == 1.0
    c = e.ctx
    assert c.gpu is not None
    prior = perf.assumptions_for(c.engine, c.gpu)
    service = ReplicaService(
        batch_cap=min(256, math.floor(432_000 / 2_250)),
        prefill_seconds=perf.prefill_batch_seconds(c.inputs, c.gpu, 2_000, 1.0, prior),  # the GPU's part
        decode_step=perf.decode_step_model(c.inputs, c.gpu, 2_000 + 125, prior),
        request_overhead_seconds=prior.prefill_overhead_seconds,  # TTFT's only
    )
    best = replicas_for_slo(Workload(30.0, 2_000, 250), service, SLO(2.5, 0.1, 0.9))
    assert best is not None and best.replicas > 1
    assert sz.replicas == best.replicas
    assert sz.capacity_at_slo_per_replica is not None
    assert sz.replicas == math.ceil(30.0 / sz.capacity_at_slo_per_replica)


def test_saturated_replicas_with_a_steady_queue_always_need_more_than_they_have() -> None:
    # the model path (token counters): the queue is flat (in flight 60 → 60) while 2/s complete, so λ = μ = 2/s per
    # replica: utilization 100 %, and no SLO is met at 100 % — the count is above the current one whatever the
    # model's SLO share of μ (< 1)
    kw: dict[str, Any] = {
        "prompt_tokens_per_second": 4_000.0,
        "generation_tokens_per_second": 500.0,
        "requests_waiting_first": 10,
        "requests_waiting": 10,
    }
    sz = size_replicas(_saturated_ev(**kw))
    assert sz is not None and sz.method == "model"
    assert sz.arrival_rate == pytest.approx(2.0) and sz.service_rate_per_replica == pytest.approx(2.0)
    assert sz.capacity_at_slo_per_replica is not None and sz.capacity_at_slo_per_replica < 2.0
    assert sz.replicas >= 2
    # the same replica with its queue draining 70 → 10 (λ = 2 − 1 = 1/s): one replica carries the rate; the SLO
    # misses of requests that waited for the backlog are not a replica count
    draining = size_replicas(_saturated_ev(**{**kw, "requests_waiting_first": 70}))
    assert draining is not None and draining.arrival_rate == pytest.approx(1.0)
    assert draining.replicas == 1


def _everything_fires(**kw: Any) -> Any:
    """One state in which queue_growth, kv_saturation and goodput (TTFT lost to queueing) all propose replicas."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.97,
        "requests_finished_per_second": 2.0,
        "requests_running": 50,
        "requests_running_first": 50,
        "requests_waiting_first": 10,
        "requests_waiting": 130,
        "preemptions_increase": 5,
        "queue_time": hist((2.0, 100), total_sum=150.0),
        **requests(100),
    }
    stats.update(kw)
    return ev(goodput=good(0.5, 1.0), **stats)


def test_every_rule_proposes_the_same_replica_count_utilization_and_arrival_rate() -> None:
    # λ = 2 + 120 ÷ 60 = 4/s, μ = 2/s: ⌈4 ÷ 1.6⌉ = 3; M/M/3 at a = 2: C = 0.4444, Wq = 0.4444 ÷ 2 = 0.222 s
    e = _everything_fires()
    rules = [QueueGrowthRule(), KVSaturationRule(), GoodputRule()]
    reps = [next(p for p in r.propose(e) if p.dial == "replicas") for r in rules]
    assert {p.suggested for p in reps} == {3}
    assert {p.predicted_effect["utilization"]["before"] for p in reps} == {2.0}
    assert {p.evidence["arrival_rate_per_second"] for p in reps} == {4.0}
    assert all("~4.00/s" in p.description for p in reps)
    assert _erlang_c(3, 2.0) == pytest.approx(4 / 9)
    assert [p.predicted_effect["queue_wait_seconds"]["after"] for p in reps] == [pytest.approx(4 / 9 / 2, abs=1e-4)] * 3
    # and the drain term reaches all three the same way: ⌈(4 + 130 ÷ 20) ÷ 2⌉ = ⌈5.25⌉ = 6
    drained = [QueueGrowthRule(drain_seconds=20), KVSaturationRule(drain_seconds=20), GoodputRule(drain_seconds=20)]
    assert {next(p for p in r.propose(e) if p.dial == "replicas").suggested for r in drained} == {6}


def _light(newest_running: float, mean_running: float | None, **kw: Any) -> Any:
    """The model-path deployment above at a light load: 2 requests/s complete, the pool 10 % full, nothing waits;
    the newest running gauge and the window's mean batch set apart."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.1,
        "requests_finished_per_second": 2.0,
        "prompt_tokens_per_second": 4_000.0,
        "generation_tokens_per_second": 500.0,
        "requests_running": newest_running,
        "requests_running_first": newest_running,
        "requests_waiting": 0,
        "requests_waiting_first": 0,
    }
    stats.update(kw)
    return dataclasses.replace(ev(**stats), requests_running_mean=mean_running)


def test_the_capacity_rests_on_the_windows_mean_batch_not_the_newest_gauge() -> None:
    """Little's law (L = λW) relates the window's completions to its *time-averaged* batch: a lull at the newest
    scrape (0 running) or a momentary pile-up (8) beside the same window mean (2) is the same replica. Before, the
    newest gauge decided: 0 took the model's own clock, 8 scaled the completions by it — two capacities for one
    window (the demo's light phase flipped its throughput headroom between +0.9 and −0.7 cycle by cycle)."""
    lull, pile = size_replicas(_light(0, 2.0)), size_replicas(_light(8, 2.0))
    assert lull is not None and pile is not None
    assert lull.capacity_at_slo_per_replica is not None
    assert lull.capacity_at_slo_per_replica == pytest.approx(pile.capacity_at_slo_per_replica)
    assert lull.service_rate_per_replica == pytest.approx(pile.service_rate_per_replica)


def test_a_burst_that_saturates_only_the_windows_end_is_not_sized_on_the_light_phases_completions() -> None:
    """At a burst's start the pool is full and requests queue (saturated), but the window's mean batch is a fifth of
    the newest: its 2 completions/s are the light phase's, not what the saturated replica completes. Little's law on
    the mean batch gives more than 2/s; taking 2/s as the service rate sized the burst ~2× over (the demo: 5
    replicas where 2 serve)."""
    e = _light(
        50,
        10.0,
        kv_cache_usage_ratio=0.95,
        requests_waiting=70,
        requests_waiting_first=10,
    )
    assert saturated(e)
    sz = size_replicas(e)
    assert sz is not None
    assert sz.service_rate_per_replica > 2.0
    steady = size_replicas(dataclasses.replace(e, requests_running_mean=50.0))  # saturated the whole window
    assert steady is not None and steady.service_rate_per_replica == pytest.approx(2.0)


def test_prompt_lengths_are_per_admitted_request_when_the_batch_grew() -> None:
    """A prompt's tokens are counted when it is prefilled — admitted to the running batch — not when it completes.
    Both windows below carry 2,000-token prompts: one steady (10 running throughout, 2/s admitted and completing:
    4,000 prompt tokens/s), one whose batch grew from 0 to 30 over the 60 s (2/s completing + 0.5/s of growth =
    2.5/s admitted: 5,000 prompt tokens/s). Same mean batch, same outputs (250 tokens/request, 500/s): the same
    replica. Per completion the growing window read 2,500-token prompts and a smaller capacity."""
    steady = size_replicas(_light(10, 10.0, prompt_tokens_per_second=4_000.0, generation_tokens_per_second=500.0))
    grown = size_replicas(
        _light(
            30,
            10.0,
            requests_running_first=0,
            prompt_tokens_per_second=5_000.0,
            generation_tokens_per_second=500.0,
        )
    )
    assert steady is not None and grown is not None
    assert steady.capacity_at_slo_per_replica is not None
    assert grown.capacity_at_slo_per_replica == pytest.approx(steady.capacity_at_slo_per_replica)


def test_an_online_calibrated_model_never_prices_a_replica_below_what_it_completed() -> None:
    """A replica cannot complete requests faster than its service rate, so the window's completions per replica are
    a measured floor on μ, whatever the model says. Breaker 9 (the daemon over time, a router fault fixed): the hot
    replica drained its backlog at a full batch, the fleet completing 67/s at 2 replicas, while the online-calibrated
    model — its decode factor held at its bound — priced a replica at 20.4/s, and goodput_below_target paged
    "replicas 2 → 3" for the ~49/s the two had just served. Here: 2 replicas, 60 completions/s over the window
    (30/s each), the in-flight population 1,000 → 200 (λ = 60 − 800 ÷ 60 ≈ 46.7/s), a model calibrated online to a
    quarter of the prior's decode speed. μ per replica must be at least 30/s."""
    slow = LatencyModel(
        "vllm", decode=FactorEstimate(math.log(0.25), 0.01, updates=10), prefill=FactorEstimate(0.0, 0.01, updates=10)
    )
    e = dataclasses.replace(
        ev(
            dep=ctx(replicas=2),
            replicas_up=2,
            kv_cache_usage_ratio=0.5,
            requests_finished_per_second=60.0,
            prompt_tokens_per_second=60.0 * 1_000,
            generation_tokens_per_second=60.0 * 300,
            requests_running_first=400,
            requests_running=200,
            requests_waiting_first=600,
            requests_waiting=0,
        ),
        requests_running_mean=300.0,
        latency=LatencyFit(slow, windows=10),
    )
    rates = arrival_rate(e.stats)
    assert rates is not None and rates[0] == pytest.approx(60.0 - 800 / 60)
    sz = size_replicas(e)
    assert sz is not None and sz.method == "model"
    assert sz.service_rate_per_replica >= 30.0 - 1e-9


def _long_generations(goodput: Any, generated_per_completion: float) -> Any:
    """One H100 replica, 60 running, 0.6 completions/s with nothing waiting (λ = 0.6/s), 1,000-token prompts."""
    steady = dict.fromkeys(("requests_running", "requests_running_first"), 60)
    steady.update(dict.fromkeys(("requests_waiting", "requests_waiting_first"), 0))
    rates = {"prompt_tokens_per_second": 600.0, "generation_tokens_per_second": 0.6 * generated_per_completion}
    return ev(
        dep=ctx(gpu="h100-sxm", max_model_len=8192),
        goodput=goodput,
        requests_finished_per_second=0.6,
        span_seconds=60.0,
        kv_cache_usage_ratio=0.35,
        **steady,
        **rates,
    )


def test_the_replicas_serving_within_the_slo_floor_the_capacity_at_it() -> None:
    """Breaker 23: one replica served 0.6 requests/s of 5,000-token generations with goodput 100 % and nothing
    waiting, and ``advisor_desired_replicas`` said 30 from a modelled capacity of 0.02 requests/s per replica. A window
    whose goodput meets its target measured the capacity at the SLO at ≥ completions ÷ replicas = 0.6/s, so
    ⌈0.6 ÷ 0.6⌉ = 1 replica; below the target that floor is gone (the model decides)."""
    met = size_replicas(_long_generations(good(1.0, 1.0), 5_000.0))
    assert met is not None and met.replicas == 1
    assert met.capacity_at_slo_per_replica is not None and met.capacity_at_slo_per_replica >= 0.6
    assert "measured: what each replica served within the SLO" in met.explanation
    missed = size_replicas(_long_generations(good(0.5, 1.0), 5_000.0))
    assert missed is not None and "measured: what each replica served" not in missed.explanation
    # a queue now: those requests have not finished, their TTFT is still to come — the window's goodput is the past's
    queued = _long_generations(good(1.0, 1.0), 5_000.0)
    queued = dataclasses.replace(queued, stats=dataclasses.replace(queued.stats, requests_waiting=40))
    sz = size_replicas(queued)
    assert sz is not None and "measured: what each replica served" not in sz.explanation


def test_a_request_is_never_read_longer_than_max_model_len() -> None:
    """Breaker 23: tokens generated ÷ completions read ~11,663 tokens a request at max-model-len 8,192 (running
    requests' tokens against the few that finished). A request holds at most 8,192 tokens, so with 1,000-token
    prompts any reading past 7,192 output tokens sizes as 7,192 does."""
    capped = size_replicas(_long_generations(good(0.5, 1.0), 7_192.0))
    read = size_replicas(_long_generations(good(0.5, 1.0), 11_663.0))
    assert capped is not None and read is not None
    assert (read.replicas, read.capacity_at_slo_per_replica) == (capped.replicas, capped.capacity_at_slo_per_replica)


def test_the_output_length_is_the_finished_requests_own_where_the_engine_histograms_it() -> None:
    """Breaker 25 (a 10 s burst at 5× on two replicas): the generation counter ÷ completions read 2,970 ÷ 5.52 =
    538 tokens a request while the batch grew, where the traffic's are 300 — the counter holds the running requests'
    tokens too — and the replica was priced on the longer decode. Where the engine's per-request generation histogram
    counted the window's finished requests, their mean is the output length: with the model calibrated online (its
    clock the engine's), a replica decoding 300-token answers serves more of them than one decoding 538."""
    from advisor.rules.base import LazyFloat

    calibrated = LatencyModel(
        "vllm", decode=FactorEstimate(0.0, 0.01, updates=10), prefill=FactorEstimate(0.0, 0.01, updates=10)
    )
    base = dataclasses.replace(
        ev(
            kv_cache_usage_ratio=0.5,
            requests_finished_per_second=2.0,
            requests_running=10,
            requests_running_first=10,
            requests_waiting=0,
            requests_waiting_first=0,
            prompt_tokens_per_second=2.0 * 2_000,
            generation_tokens_per_second=2.0 * 538,
        ),
        latency=LatencyFit(calibrated, windows=10),
    )
    counted = size_replicas(base)
    measured = size_replicas(dataclasses.replace(base, window_generation_tokens_per_request=LazyFloat(lambda: 300.0)))
    assert counted is not None and measured is not None and counted.method == measured.method == "model"
    assert counted.capacity_at_slo_per_replica is not None and measured.capacity_at_slo_per_replica is not None
    assert measured.service_rate_per_replica > 1.2 * counted.service_rate_per_replica
    assert measured.capacity_at_slo_per_replica > counted.capacity_at_slo_per_replica
    unknown = size_replicas(dataclasses.replace(base, window_generation_tokens_per_request=LazyFloat(lambda: None)))
    assert unknown is not None and unknown.service_rate_per_replica == counted.service_rate_per_replica


def test_every_reader_of_a_requests_output_length_takes_the_finished_requests_own_mean() -> None:
    """The same bias as above in the latency calibration's window (its context, prompt + half the output) and in
    over_provisioned's SLO check: one reader, :func:`advisor.rules.common.generated_tokens_per_request`."""
    from advisor.rules.base import LazyFloat
    from advisor.rules.common import generated_tokens_per_request
    from advisor.rules.observation import window_observation

    base = ev(
        requests_finished_per_second=2.0,
        requests_running=10,
        prompt_tokens_per_second=2.0 * 2_000,
        generation_tokens_per_second=2.0 * 538,
        tpot=hist((0.05, 0), (0.1, 100), total_sum=7.5),
    )
    measured = dataclasses.replace(base, window_generation_tokens_per_request=LazyFloat(lambda: 300.0))
    assert generated_tokens_per_request(base) == pytest.approx(538.0)
    assert generated_tokens_per_request(measured) == pytest.approx(300.0)
    assert generated_tokens_per_request(ev(requests_running=10)) is None  # nothing finished, nothing histogrammed
    counted, held = window_observation(base), window_observation(measured)
    assert counted is not None and held is not None
    assert counted.context_tokens == pytest.approx(2_000 + 538 / 2)
    assert held.context_tokens == pytest.approx(2_000 + 300 / 2)
