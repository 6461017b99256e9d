"""GPUs per replica in predicted effects count every data-parallel rank: a replica of ``data_parallel_size: 2``
at TP 1 occupies 2 GPUs, and doubling TP makes it 4 (each DP rank is a whole TP × PP engine; vLLM
``vllm/config/parallel.py``: world size across DP = pipeline × tensor × data). On c80483b the TP proposals said
``gpus_per_replica 1 → 2`` and over_provisioned counted ``replicas × TP`` GPUs.

Scenarios as in tests/rules/test_data_parallel_dials.py (Llama-3.1-8B, H100-SXM, 432,000 tokens per rank).
"""

from __future__ import annotations

import dataclasses

import pytest

from advisor.rules.base import SLOTargets
from advisor.rules.goodput import GoodputRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good, requests
from tests.rules.test_data_parallel_dials import DP2_POOL, _knee_stats


@pytest.mark.parametrize(("dp", "gpus"), [(1, (1, 2)), (2, (2, 4)), (4, (4, 8))])
def test_kv_saturation_tp_turn_counts_every_dp_rank(dp: int, gpus: tuple[int, int]) -> None:
    e = ev(dep=ctx(data_parallel_size=dp), kv_capacity_tokens=432_000 * dp, **_knee_stats())
    tp = next(p for p in KVSaturationRule().propose(e) if p.dial == "tensor_parallel_size")
    assert (tp.current, tp.suggested) == (1, 2)
    assert tp.predicted_effect["gpus_per_replica"] == {"before": gpus[0], "after": gpus[1]}


def test_kv_saturation_tp_turn_counts_ranks_the_engine_reports() -> None:
    # two ranks in the exposition, none configured: still 2 GPUs per replica at TP 1
    e = dataclasses.replace(
        ev(kv_capacity_tokens=DP2_POOL, **_knee_stats()), kv_rank_capacity_tokens=(432_000.0, 432_000.0)
    )
    tp = next(p for p in KVSaturationRule().propose(e) if p.dial == "tensor_parallel_size")
    assert tp.predicted_effect["gpus_per_replica"] == {"before": 2, "after": 4}


def test_goodput_tp_at_a_small_batch_counts_every_dp_rank() -> None:
    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), data_parallel_size=2)
    e = ev(
        dep=dep,
        kv_capacity_tokens=DP2_POOL,
        goodput=good(1.0, 0.2),
        requests_running=4,
        kv_cache_usage_ratio=0.01,
        **requests(100),
    )
    tp = next(p for p in GoodputRule(for_seconds=120, min_requests=20).propose(e) if p.dial == "tensor_parallel_size")
    assert tp.predicted_effect["gpus_per_replica"] == {"before": 2, "after": 4}


def test_over_provisioned_gpus_released_count_every_dp_rank() -> None:
    # 4 replicas of 2 DP ranks × TP 1 = 8 GPUs; 100 running over 4 × 2 × 256 → 1 replica = 2 GPUs
    rule = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)
    e = ev(
        dep=ctx(data_parallel_size=2, replicas=4),
        replicas_up=4,
        kv_capacity_tokens=DP2_POOL,
        goodput=good(0.95, 1.0),
        requests_running=100,
        requests_waiting=0,
        requests_waiting_first=0,
        kv_cache_usage_ratio=0.05,
        kv_cache_usage_ratio_max=0.1,
    )
    (p,) = rule.propose(e)
    assert (p.dial, p.current, p.suggested) == ("replicas", 4, 1)
    assert p.predicted_effect["gpus"] == {"before": 8, "after": 2}
