"""Per-rank dials against per-rank quantities (issue 12, class 3): ``max_num_seqs`` holds on each data-parallel
rank (vLLM ``--data-parallel-size`` runs one scheduler per rank with the same ``SchedulerConfig``), while the
capacity pass's ``max_concurrency``, the engine's pool and the running count are summed over a replica's ranks.
Each rule compares like with like: on the branch head every case below compared a per-rank dial with a
replica-wide number.

Reference numbers (``tests/rules/helpers.py``): Llama-3.1-8B on one H100-SXM per rank holds 432,000 tokens (the
evaluations' engine pool) and 54.921875 max-length sequences per rank; two ranks 109.84375.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.rules.base import SLOTargets
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ROOFLINE, ctx, ev, good, hist, requests

DP2_POOL = 2 * 432_000


def test_goodput_replica_ceiling_is_max_num_seqs_per_rank_times_ranks() -> None:
    # max_num_seqs 32 on each of 2 ranks: the replica runs up to 2 × min(32, 54.92) = 64 (head: min(32, 109.84)
    # = 32). 60 running, nothing waiting, 2 completions/s: μ = 2 × 64 ÷ 60 = 2.1333/s (head: 2.0/s, unscaled).
    # λ = 2/s → ⌈2 ÷ (2.1333 × 0.8)⌉ = 2 replicas (M/M/2 wait 0.13 s ≤ 2.5 s).
    rule = GoodputRule(for_seconds=120, min_requests=20, target_utilization=0.8)
    e = ev(
        dep=ctx(data_parallel_size=2, max_num_seqs=32),
        kv_capacity_tokens=DP2_POOL,
        goodput=good(0.5, 1.0),
        requests_finished_per_second=2.0,
        requests_running=60,
        requests_running_first=60,
        requests_waiting=0,
        requests_waiting_first=0,
        queue_time=hist((2.0, 100), total_sum=150.0),
        **requests(100),
    )
    (p,) = rule.propose(e)
    assert (p.dial, p.suggested) == ("replicas", 2)
    assert p.evidence["service_rate_per_replica"] == pytest.approx(2.1333, abs=1e-4)


def test_goodput_tpot_knee_is_judged_at_one_rank_s_batch() -> None:
    # 400 running over 2 ranks = 200 per rank, pool full: 864,000 ÷ 400 = 2,160 tokens each. One rank's roofline
    # at 200 gives 27.1 ms, the knee for 20 ms is 132 (as on one GPU). Head: the batch of 400 → 48.2 ms.
    # (the plain roofline's factors, as tests/rules/test_goodput.py's hand arithmetic: ROOFLINE)
    dep = ctx(slo=SLOTargets(2.5, 0.02, 0.9), data_parallel_size=2, perf=ROOFLINE)
    e = ev(
        dep=dep,
        kv_capacity_tokens=DP2_POOL,
        goodput=good(1.0, 0.3),
        requests_running=400,
        kv_cache_usage_ratio=1.0,
        **requests(100),
    )
    (p,) = GoodputRule(for_seconds=120, min_requests=20).propose(e)
    assert (p.dial, p.action, p.current, p.suggested) == ("max_num_seqs", "decrease", 256, 132)
    assert p.predicted_effect["tpot_seconds"] == {"before": 0.0271, "after": 0.0199}
    assert p.evidence["batch_per_rank"] == 200 and p.evidence["batch_per_replica"] == 400


def _knee_stats(**kw: Any) -> dict[str, Any]:
    # 1,800 prompt + 200 generated tokens/s at 1 completion/s: 2,000 tokens per request
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.98,
        "requests_running": 430,
        "requests_waiting": 20,
        "preemptions_increase": 12,
        "preemptions_per_second": 0.2,
        "requests_finished_per_second": 1.0,
        "prompt_tokens_per_second": 1_800.0,
        "generation_tokens_per_second": 200.0,
    }
    return stats | kw


@pytest.mark.parametrize(
    "how", ["config", "exposition"], ids=["data_parallel_size 2 in config", "two ranks in the exposition"]
)
def test_kv_saturation_knee_is_what_one_rank_s_pool_holds(how: str) -> None:
    # one rank's pool 432,000 ÷ 2,000 = 216 < max_num_seqs 256 → cap at 216; head: 864,000 ÷ 2,000 = 432 ≥ 256,
    # no knee, while each rank admitted 256 into a pool for 216
    if how == "config":
        e = ev(dep=ctx(data_parallel_size=2), kv_capacity_tokens=DP2_POOL, **_knee_stats())
    else:
        e = dataclasses.replace(
            ev(kv_capacity_tokens=DP2_POOL, **_knee_stats()), kv_rank_capacity_tokens=(432_000.0, 432_000.0)
        )
    knee = next(p for p in KVSaturationRule().propose(e) if p.dial == "max_num_seqs")
    assert (knee.action, knee.current, knee.suggested) == ("decrease", 256, 216)
    assert "per data-parallel rank" in knee.description


def test_over_provisioned_ceiling_is_max_num_seqs_on_every_rank() -> None:
    # 100 running on a replica of 2 ranks × 256: load 100 ÷ 512 = 0.195 < 0.25 (head: 100 ÷ 256 = 0.39)
    rule = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)
    e = ev(
        dep=ctx(data_parallel_size=2),
        kv_capacity_tokens=DP2_POOL,
        goodput=good(0.95, 1.0),
        requests_running=100,
        requests_waiting=0,
        requests_waiting_first=0,
        kv_cache_usage_ratio=0.05,
        kv_cache_usage_ratio_max=0.1,
    )
    cond = rule.fires(e)
    assert cond.evidence["concurrency_ceiling_per_replica"] == 512
    assert cond.holds is True
