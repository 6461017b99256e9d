"""kv_saturation: usage ≥ ``usage_threshold`` with a queue or preemptions; clears below ``resolve_below`` or
without pressure."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.base import SLOTargets
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.telemetry import GoodputEstimate
from tests.rules.helpers import ctx, ev, opens_after

RULE = KVSaturationRule(usage_threshold=0.9, resolve_below=0.8)


def _ev(**kw: Any) -> Any:
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.95,
        "requests_running": 50,
        "requests_waiting": 10,
        "preemptions_increase": 0,
    }
    stats.update(kw)
    return ev(**stats)


@pytest.mark.parametrize(
    ("rule", "stats", "fires"),
    [
        (RULE, {"kv_cache_usage_ratio": 0.9}, True),
        (RULE, {"kv_cache_usage_ratio": 0.8999}, False),
        (KVSaturationRule(usage_threshold=0.97), {"kv_cache_usage_ratio": 0.97}, True),
        (KVSaturationRule(usage_threshold=0.97), {"kv_cache_usage_ratio": 0.9699}, False),
        (RULE, {"requests_waiting": 0, "preemptions_increase": 0}, False),
        (RULE, {"requests_waiting": 0, "preemptions_increase": 1}, True),
        (RULE, {"requests_waiting": None, "preemptions_increase": 3}, True),  # one known signal suffices
    ],
    ids=[
        "usage at the threshold with a queue fires",
        "usage just under the threshold does not fire",
        "a custom threshold at it fires",
        "a custom threshold just under it does not fire",
        "a full pool without pressure is a well-used pool",
        "one preemption is pressure",
        "preemptions count when the queue gauge is missing",
    ],
)
def test_fire_table(rule: KVSaturationRule, stats: dict[str, Any], fires: bool) -> None:
    assert rule.fires(_ev(**stats)).holds is fires


@pytest.mark.parametrize(
    ("stats", "clears"),
    [
        ({"kv_cache_usage_ratio": 0.7999}, True),  # under resolve_below
        ({"kv_cache_usage_ratio": 0.8}, False),  # at resolve_below, still a queue: stays open
        ({"kv_cache_usage_ratio": 0.85}, False),  # inside the band 0.8–0.9: no longer firing, not clear
        ({"kv_cache_usage_ratio": 0.95, "requests_waiting": 0}, True),  # pressure gone
    ],
    ids=[
        "just under resolve_below clears",
        "at resolve_below does not clear",
        "inside the hysteresis band stays open",
        "pressure gone clears",
    ],
)
def test_clear_table(stats: dict[str, Any], clears: bool) -> None:
    e = _ev(**stats)
    assert RULE.clears(e).holds is clears
    if stats.get("kv_cache_usage_ratio") == 0.85:
        assert RULE.fires(e).holds is False  # the band: neither fires nor clears


@pytest.mark.parametrize(
    "stats",
    [{"kv_cache_usage_ratio": None}, {"requests_waiting": None, "preemptions_increase": None}],
    ids=["usage unknown", "queue and preemptions unknown"],
)
def test_cannot_tell(stats: dict[str, Any]) -> None:
    assert RULE.fires(_ev(**stats)).holds is None


def _knee_ev(**kw: Any) -> Any:
    # 1,800 prompt + 200 generated tokens/s at 1 completion/s: 2,000 tokens per request
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.98,
        "requests_running": 230,
        "requests_waiting": 20,
        "preemptions_increase": 12,
        "preemptions_per_second": 0.2,
        "requests_finished_per_second": 1.0,
        "prompt_tokens_per_second": 1_800.0,
        "generation_tokens_per_second": 200.0,
    }
    stats.update(kw)
    return _ev(**stats)


def test_caps_max_num_seqs_at_the_knee_when_preempting() -> None:
    knee = next(p for p in RULE.propose(_knee_ev()) if p.dial == "max_num_seqs")
    # the pool of 432,000 tokens holds ⌊432,000 ÷ 2,000⌋ = 216 requests; max-num-seqs is 256
    assert (knee.action, knee.current, knee.suggested, knee.flag) == ("decrease", 256, 216, "--max-num-seqs 216")
    assert knee.complementary and not knee.sufficient
    assert knee.predicted_effect["preemptions_per_second"] == {"before": 0.2, "after": 0.0}


@pytest.mark.parametrize(
    "stats",
    [{"preemptions_increase": 0}, {"kv_capacity_tokens": 600_000}],
    ids=["no preemptions, no knee", "a pool holding more than max-num-seqs has no knee"],
)
def test_no_knee_proposal(stats: dict[str, Any]) -> None:
    # 600,000 ÷ 2,000 = 300 ≥ 256: max-num-seqs already binds before the pool
    assert all(p.dial != "max_num_seqs" for p in RULE.propose(_knee_ev(**stats)))


def test_never_raises_max_num_seqs() -> None:
    for stats in ({}, {"preemptions_increase": 0}, {"requests_waiting": 500}, {"kv_capacity_tokens": 2_000_000}):
        assert not any(p.dial == "max_num_seqs" and p.action != "decrease" for p in RULE.propose(_knee_ev(**stats)))


def _erlang_c(c: int, a: float) -> float:
    """Erlang C by the textbook recursion (Kleinrock vol. 1 §3.5): B(0) = 1, B(k) = a·B(k−1) ÷ (k + a·B(k−1)),
    C = c·B ÷ (c − a·(1 − B)) — written here independently of advisor.capacity.queueing."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1 - b))


def test_replicas_sized_for_the_arrival_rate_not_for_holding_the_backlog_at_once() -> None:
    # issue 13: "holding all 407 running and waiting requests at once" → 13 replicas. Here 50 run, the queue grew
    # 10 → 400 over 60 s while 2 requests/s completed. Holding all 450 at once would take ⌈450 ÷ 50 × 0.95⌉ = 9.
    # The arrival rate: λ = 2 + (450 − 60) ÷ 60 = 8.5/s; the saturated replica (95 % full, requests waiting)
    # completes μ = 2/s. M/M/c at ≤ 80 %: ⌈8.5 ÷ 1.6⌉ = ⌈5.3125⌉ = 6, and its mean wait must be ≤ TTFT 2.5 s:
    lam, mu = 2 + (450 - 60) / 60, 2.0
    assert lam == pytest.approx(8.5)
    wait6 = _erlang_c(6, lam / mu) / (6 * mu - lam)  # a = 4.25: C ≈ 0.476, Wq ≈ 0.136 s
    assert wait6 < 2.5
    e = _ev(
        requests_waiting_first=10, requests_waiting=400, requests_running_first=50, requests_finished_per_second=2.0
    )
    rep = next(p for p in RULE.propose(e) if p.dial == "replicas")
    assert (rep.current, rep.suggested) == (1, 6)
    assert rep.evidence["arrival_rate_per_second"] == pytest.approx(8.5)
    assert rep.predicted_effect["utilization"] == {"before": 4.25, "after": pytest.approx(8.5 / 12, abs=1e-4)}
    assert rep.predicted_effect["queue_wait_seconds"]["after"] == pytest.approx(wait6, abs=1e-3)
    assert "holding all" not in rep.description


def test_no_replicas_without_an_arrival_rate() -> None:
    # no completion counter: the arrival rate is unknown, so no replica count (never sized from the backlog)
    assert not [p for p in RULE.propose(_ev(requests_waiting=150)) if p.dial == "replicas"]


def test_severity_is_critical_only_when_preempting_with_a_growing_queue_or_a_missed_slo() -> None:
    """Preempting with a queue that grows, or with the SLO missed, is critical; preempting beside a steady queue
    while the SLO holds is a warning. Before, a missed SLO did not count: a walkthrough's six ``once`` runs on one
    state (437 waiting, goodput 0 %) read warning five times and critical once, by the queue's direction between
    two readings."""
    grow = RULE.propose(_ev(requests_waiting_first=5, requests_waiting=10, preemptions_increase=2))
    flat = RULE.propose(_ev(requests_waiting_first=10, requests_waiting=10, preemptions_increase=2))
    met, missed = (GoodputEstimate(r, r, r, r, 1.0) for r in (0.97, 0.0))
    shrinking = {"requests_waiting_first": 442, "requests_waiting": 437, "preemptions_increase": 2}
    assert {p.severity for p in grow} == {"critical"}
    assert {p.severity for p in flat} == {"warning"}
    assert {p.severity for p in RULE.propose(_ev(goodput=missed, **shrinking))} == {"critical"}
    assert {p.severity for p in RULE.propose(_ev(goodput=met, **shrinking))} == {"warning"}
    assert {p.severity for p in RULE.propose(_ev(goodput=missed, requests_waiting=10))} == {"warning"}  # no preemption


def test_budget_turn_goes_to_the_engine_default_first() -> None:
    props = {p.dial: p for p in RULE.propose(_ev(dep=ctx(gpu_memory_utilization=0.8)))}
    # below 0.9 the first budget step is vLLM's default 0.9, not 0.95
    assert (props["gpu_memory_utilization"].current, props["gpu_memory_utilization"].suggested) == (0.8, 0.9)


@pytest.mark.parametrize(("held", "opens"), [(59.5, False), (60.0, True)], ids=["just short of 60 s", "at 60 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = KVSaturationRule(for_seconds=60)
    assert opens_after(rule, lambda now: _ev(now=now), held) is opens


def _slow_batch(tpot_target: float, tpot_ok: float) -> Any:
    """50 running on Llama-3.1-8B / H100 at 95 % of a 432,000-token pool: 8,208 tokens each. One decode step reads
    16 GB of weights and 50 × 8,208 × 128 KiB = 53.8 GB of KV: 69.8 GB ÷ 3.35 TB/s = 20.8 ms at the bare roofline,
    so a 20 ms TPOT target is past the knee at any efficiency, a 100 ms one is not."""
    goodput = GoodputEstimate(tpot_ok, tpot_ok, tpot_ok, 1.0, tpot_ok)
    return _ev(dep=ctx(slo=SLOTargets(2.5, tpot_target, 0.9)), goodput=goodput, tpot_ok=tpot_ok)


def test_pool_turns_that_only_admit_more_are_withheld_past_the_tpot_knee() -> None:
    """Field state sgl-project/sglang#938 (1,010 running at 0.72 s a token, pool 93 %): growing the pool only adds
    sequences to a batch that already decodes too slowly. The budget and fp8-KV turns are withheld, saying why; TP
    (more compute per step) stands."""
    props = {p.dial: p for p in RULE.propose(_slow_batch(0.02, 0.3))}
    for dial in ("gpu_memory_utilization", "kv_cache_dtype"):
        w = props[dial].withheld
        assert w is not None and "past the knee of TPOT against batch" in w and "30% of requests" in w, (dial, w)
    assert props["tensor_parallel_size"].withheld is None


@pytest.mark.parametrize(
    ("tpot_target", "tpot_ok"),
    [(0.02, 0.95), (0.1, 0.3)],
    ids=["TPOT met: nothing to protect", "TPOT missed under a batch the model decodes in time (preemption stalls)"],
)
def test_pool_turns_stand_unless_both_the_misses_and_the_knee_say_so(tpot_target: float, tpot_ok: float) -> None:
    props = {p.dial: p for p in RULE.propose(_slow_batch(tpot_target, tpot_ok))}
    assert props["gpu_memory_utilization"].withheld is None and props["kv_cache_dtype"].withheld is None


def test_a_pool_turn_never_closes_the_gap_when_the_queue_exceeds_the_sequence_cap() -> None:
    """Breaker 22: 243-256 running of max_num_seqs 256 with a queue, the pool full: fp8 KV was proposed as closing
    the gap ("predicted gain ×2.00"), but the engine runs at most 256 however large the pool (the simulator: goodput
    0.52 with fp8, 1.0 with a second replica). With running + waiting above the cap the pool turns are not enough
    alone; below it (the cap not binding) they may close the gap as before."""
    over = RULE.propose(_ev(dep=ctx(max_num_seqs=256), requests_running=250, requests_waiting=40))
    pool = [p for p in over if p.dial in ("kv_cache_dtype", "gpu_memory_utilization")]
    assert pool and not any(p.sufficient for p in pool), [(p.dial, p.sufficient) for p in pool]
    assert "Alone it is not enough: 290 running and waiting exceed the 256 sequences max_num_seqs admits" in (
        pool[0].description
    ), pool[0].description
    under = RULE.propose(_ev(dep=ctx(max_num_seqs=256), requests_running=100, requests_waiting=40))
    assert any(p.sufficient for p in under if p.dial == "kv_cache_dtype"), [(p.dial, p.sufficient) for p in under]
