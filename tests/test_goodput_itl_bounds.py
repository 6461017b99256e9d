"""An inter-token-latency histogram (vLLM before 0.11, SGLang before 0.5.23, Dynamo: ``tpot_is_itl``) counts tokens,
not requests: its share within the TPOT target estimates the requests' share but bounds nothing of it (breaker 32:
50 short requests at 0.3 s a token beside 50 long ones at 0.03 s read goodput 0.996 with bounds [0.996, 0.996]
where half the requests missed). The estimate stays; the exported bounds on the TPOT side are [0, 1]."""

from __future__ import annotations

import dataclasses

from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from advisor.rules.base import SLOTargets
from tests.factories import context

URL = "http://10.0.0.5:8000/metrics"
INF = float("inf")


def _snap(i: int, itl: bool) -> EngineSnapshot:
    # every request within 2.5 s of TTFT; tokens: 50 short requests × 2 tokens at 0.3 s and 50 long ones × 500 at
    # 0.03 s = 25,100 token gaps, 25,000 of them within 0.1 s (99.6 %)
    ttft = Histogram(((2.5, 100.0 * i), (INF, 100.0 * i)), 100.0 * i, 50.0 * i)
    tpot = Histogram(((0.1, 25_000.0 * i), (0.5, 25_100.0 * i), (INF, 25_100.0 * i)), 25_100.0 * i, 780.0 * i)
    return EngineSnapshot(
        engine="vllm",
        requests_running=4,
        requests_waiting=0,
        generation_tokens_total=25_100.0 * i,
        prompt_tokens_total=5_000.0 * i,
        requests_finished_total=100.0 * i,
        kv_cache_usage_ratio=0.1,
        kv_cache_capacity_tokens=432_000,
        process_start_time_seconds=1.0e9,
        ttft=ttft,
        tpot=tpot,
        tpot_is_itl=itl,
    )


def _goodput(itl: bool) -> tuple[float | None, float | None, float | None]:
    ctx = dataclasses.replace(context(), slo=SLOTargets(ttft_seconds=2.5, tpot_seconds=0.1, target_ratio=0.9))
    hist = (TimedSnapshot(URL, 995.0, _snap(1, itl)), TimedSnapshot(URL, 1_000.0, _snap(2, itl)))
    ev, _ = evaluate_deployment(ctx, [TargetView(URL, True, None, None, hist)], 1_000.0, 10.0, Quality(5.0))
    return ev.goodput.ratio, ev.goodput.lower, ev.goodput.upper


def test_an_itl_share_estimates_goodput_but_bounds_nothing() -> None:
    ratio, lower, upper = _goodput(itl=True)
    assert ratio is not None and abs(ratio - 25_000 / 25_100) < 1e-9
    assert (lower, upper) == (0.0, 1.0)


def test_a_per_request_tpot_histogram_keeps_its_exact_bounds() -> None:
    ratio, lower, upper = _goodput(itl=False)
    share = 25_000 / 25_100
    assert ratio is not None and abs(ratio - share) < 1e-9
    assert lower is not None and upper is not None and abs(lower - share) < 1e-9 and abs(upper - share) < 1e-9
