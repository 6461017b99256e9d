"""No replica count from a history too short to measure an arrival rate (issue 13, problem 7).

`once` scrapes twice, 2 s apart. At a burst's start the in-flight population jumps (a client submits a batch), so
completions + growth ÷ span over those 2 s is a momentary backlog divided by 2 s, not an arrival rate: `once`
proposed `queue_growth replicas 10` where the daemon and `simulate` both say 2. Below 30 s of history (or four
scrapes per target) every rule that proposes replicas returns that proposal withheld, with the span in numbers.

Hand-computed: the burst below has 5 → 10 running and 0 → 42 waiting over a 2 s span with 2.47 completions/s:
λ = 2.47 + (52 − 5) ÷ 2 = 25.97/s read from 2 s — the number the withheld proposal must not carry into advice.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.rules.admission import AdmissionThrashRule
from advisor.rules.base import Proposal
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.lifecycle import Lifecycle
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.replicas import arrival_rate
from tests.rules.helpers import ctx, ev, good, hist, requests


def _burst(**kw: Any) -> Any:
    """A burst's start: every saturation rule holds and proposes replicas (KV 97 %, preemptions, TTFT lost to
    queueing, a few long-running requests filling the pool)."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.97,
        "requests_finished_per_second": 2.47,
        "requests_running": 10,
        "requests_running_first": 5,
        "requests_waiting_first": 0,
        "requests_waiting": 42,
        "preemptions_increase": 5,
        "generation_tokens_per_second": 30.0,
        "prompt_tokens_per_second": 4_000.0,
        "queue_time": hist((2.0, 100), total_sum=150.0),
        "window_seconds": 2.0,
        "span_seconds": 2.0,
        "samples": 2,
        **requests(100),
    }
    stats.update(kw)
    return ev(goodput=good(0.5, 1.0), dep=ctx(max_model_len=32_768), kv_capacity_tokens=100_000, **stats)


RULES = [QueueGrowthRule(), KVSaturationRule(), GoodputRule()]
ADMISSION = AdmissionThrashRule(
    usage_threshold=0.9, max_running_per_replica=8, min_pool_share=0.1, target_concurrency=8
)


def _long_contexts(**kw: Any) -> Any:
    """admission_thrash's own state (4 running hold 95 % of a 100,000-token pool, 3 wait; request lengths not
    observed, so only the history can withhold its long-context replica)."""
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.95,
        "requests_running": 4,
        "requests_waiting": 3,
        "preemptions_increase": 5,
        "generation_tokens_per_second": 30.0,
        "prompt_tokens_per_second": 4_000.0,
    }
    stats.update(kw)
    return ev(dep=ctx(max_model_len=32_768), kv_capacity_tokens=100_000, **stats)


def _replicas(props: list[Proposal]) -> list[Proposal]:
    return [p for p in props if p.dial == "replicas"]


def test_the_burst_reads_as_a_large_rate_over_two_seconds() -> None:
    rates = arrival_rate(_burst().stats)
    assert rates is not None and rates[0] == pytest.approx(2.47 + 47 / 2)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_replica_proposal_is_withheld_over_two_seconds(rule: Any) -> None:
    props = _replicas(rule.propose(_burst()))
    assert props, f"{rule.id} proposes no replicas in the burst (the fixture no longer exercises it)"
    for p in props:
        assert p.withheld is not None, f"{rule.id} proposes replicas {p.suggested} from a 2 s history"
        assert "≥ 30 s" in p.withheld and "2 s" in p.withheld, p.withheld


def test_the_long_context_replica_is_withheld_over_two_seconds_and_proposed_over_a_minute() -> None:
    (short,) = _replicas(ADMISSION.propose(_long_contexts(window_seconds=2.0, span_seconds=2.0, samples=2)))
    assert short.withheld is not None and "≥ 30 s" in short.withheld and "2 s over 2 scrape(s)" in short.withheld
    (long,) = _replicas(ADMISSION.propose(_long_contexts(window_seconds=60.0, span_seconds=60.0, samples=13)))
    assert long.withheld is None and long.suggested == 2


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_a_minute_of_history_over_enough_scrapes_sizes_replicas(rule: Any) -> None:
    # 60 s over 13 scrapes (5 s interval): the queue 0 → 42 over a minute is 0.78/s of growth, a rate
    e = _burst(window_seconds=60.0, span_seconds=60.0, samples=13)
    props = _replicas(rule.propose(e))
    assert props and all(p.withheld is None for p in props)


def test_thirty_seconds_over_two_scrapes_is_still_one_difference() -> None:
    # one 30 s scrape interval: two scrapes, one difference — Prometheus' rate wants four samples' worth
    e = _burst(window_seconds=30.0, span_seconds=30.0, samples=2)
    (p,) = _replicas(QueueGrowthRule().propose(e))
    assert p.withheld is not None and "2 scrape(s)" in p.withheld


def test_the_incident_lists_the_replica_turn_as_withheld_and_never_suggests_it() -> None:
    lc = Lifecycle(RULES)
    lc.evaluate(_burst(), ignore_for=True)
    recs = lc.open_recommendations()
    assert len(recs) == 1
    rec = recs[0]
    turns = [rec.dial, *(a["dial"] for a in rec.alternatives)]
    assert "replicas" not in turns, turns
    held = [w for w in rec.withheld if w["dial"] == "replicas"]
    assert held and all("≥ 30 s" in w["reason"] for w in held)
    # queue_growth's only turn is withheld: its status says why instead of "firing"
    st = lc.statuses[("chat-8b", "queue_growth")]
    assert st.state == "withheld" and "≥ 30 s" in st.reason


def test_the_minimum_history_is_configurable_and_reaches_every_rule_that_proposes_replicas() -> None:
    # rules.replicas.min_history: the demo's 10× clock sets 5 s (= 50 simulated s); a 10 s window over 11 scrapes
    # then sizes replicas, while the default 30 s withholds them
    from advisor.config import parse_config
    from advisor.rules.registry import builtin_rules

    dep = {
        "name": "chat-8b",
        "engine": "vllm",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    ten_seconds = _burst(window_seconds=10.0, span_seconds=10.0, samples=11)
    for history, withheld in (("5s", False), (None, True)):
        rules_cfg = {} if history is None else {"replicas": {"min_history": history}}
        rules = {r.id: r for r in builtin_rules(parse_config({"deployments": [dep], "rules": rules_cfg}).rules)}
        for rid in ("queue_growth", "kv_saturation", "goodput_below_target", "admission_thrash"):
            assert vars(rules[rid])["min_history_seconds"] == (5.0 if history else 30.0), rid
        for rid in ("queue_growth", "kv_saturation", "goodput_below_target"):
            props = _replicas(rules[rid].propose(ten_seconds))
            assert props and all((p.withheld is not None) == withheld for p in props), (rid, history)


def test_a_span_short_of_min_history_by_scrape_jitter_counts_and_a_missing_scrape_does_not() -> None:
    """The walkthrough: the demo's 5 scrapes 1 s apart spanned 3.999 s against a 4 s min_history, so its replica
    count came and went between cycles, the reason reading "needs ≥ 4 s … sees 4 s over 5 scrape(s)". A quarter of
    the window's mean scrape interval is scrape jitter; a span a whole scrape short is not."""
    from advisor.rules.replicas import arrival_history_withheld
    from tests.factories import evaluation

    def withheld(span: float, samples: int) -> str | None:
        return arrival_history_withheld(evaluation(span_seconds=span, samples=samples), min_span_seconds=4.0)

    assert withheld(3.999, 5) is None and withheld(3.8, 5) is None  # within a quarter of 0.95-1 s
    short = withheld(2.999, 4)  # a scrape short: 3 s
    assert short is not None and "sees 3 s over 4 scrape(s)" in short
    nearly = withheld(3.7, 5)  # beyond the jitter, and it never reads as the 4 s it needs
    assert nearly is not None and "needs ≥ 4 s" in nearly and "sees 3.7 s over 5 scrape(s)" in nearly


def test_the_jitter_allowance_comes_from_the_scrapes_that_arrived_not_the_points_kept() -> None:
    """Breaker 18: 112 scrapes 1 s apart thinned to 4 kept points made the allowance a quarter of 37 s, and a 111 s
    window passed for the 120 s min_history. The interval is the arrived scrapes' (~1 s): 0.25 s of allowance."""
    import dataclasses

    from advisor.rules.replicas import arrival_history_withheld
    from tests.factories import evaluation

    def at(span: float, arrived: int) -> str | None:
        e = dataclasses.replace(evaluation(span_seconds=span, samples=4), samples=arrived)
        return arrival_history_withheld(e, min_span_seconds=120.0)

    assert at(111.0, 112) is not None
    assert at(119.8, 121) is None  # 0.2 s short of 120 at 1 s scrapes: jitter


def test_a_window_as_long_as_min_history_holds_it_at_its_scrapes_resolution() -> None:
    """Walkthrough, 2026-12-07: a 30 s evaluation_window of 2 s scrapes spans 28 s on most cycles (15 scrapes) and
    30 s only when one lands on its first instant, so against min_history 30 s the replica count and
    ``advisor_recommended_value{dial="replicas"}`` came and went between cycles ("needs ≥ 30 s … sees 28 s"). Such
    a window holds 30 s at its resolution; a scrape missing from it, or 28 s of a longer window, does not."""
    import dataclasses

    from advisor.rules.replicas import arrival_history_withheld
    from tests.factories import evaluation

    def withheld(span: float, samples: int, window: float) -> str | None:
        e = evaluation(span_seconds=span, samples=samples, window_seconds=window)
        return arrival_history_withheld(dataclasses.replace(e, samples=samples), min_span_seconds=30.0)

    assert withheld(28.0, 15, 30.0) is None and withheld(30.0, 16, 30.0) is None
    assert withheld(31.0 - 3.0, 15, 31.0) is None  # 31 s of 2 s scrapes: 15 spanning 28 s or 16 spanning 30 s
    missing = withheld(26.0, 14, 30.0)
    assert missing is not None and "sees 26 s over 14 scrape(s)" in missing
    assert withheld(28.0, 15, 300.0) is not None  # the first 28 s of a 5-minute window
    assert withheld(28.0, 15, 29.0) is not None  # a window shorter than min_history never holds it
