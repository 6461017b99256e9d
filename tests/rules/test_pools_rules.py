"""Issue 12, classes 3–5, the rule side: one rank's pool against the context, KV rules that withhold when a
different pool is the saturated one, capacity-waiting only, confidence scaled by the ranks read; and the
evaluation quantities behind them (:mod:`advisor.evaluate`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.domain import EngineSnapshot, PoolReading, RankValues
from advisor.evaluate import max_length_ceiling, pool_usage, rank_pools
from advisor.rules.common import confidence, kv_withheld
from advisor.rules.kv_budget import KVBudgetRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.pool_context import PoolContextRule
from tests.rules.helpers import ctx, ev

SATURATED: dict[str, Any] = {
    "kv_cache_usage_ratio": 0.31,
    "requests_running": 8,
    "requests_waiting": 9,
    "requests_waiting_first": 5,
    "preemptions_increase": 2,
}


def with_(e: Any, **changes: Any) -> Any:
    return dataclasses.replace(e, **changes)


# --- class 5: another pool saturated -----------------------------------------------------------------


@pytest.mark.parametrize("pool", ["mamba", "swa", "slots"])
def test_kv_saturation_withholds_and_says_why_when_another_pool_is_saturated(pool: str) -> None:
    e = with_(ev(**{**SATURATED, "kv_cache_usage_ratio": 0.95}), pool_usage={pool: 0.98})
    e_low = with_(ev(**SATURATED), pool_usage={pool: 0.98})
    rule = KVSaturationRule()
    fired = rule.fires(e_low)
    assert fired.holds is False and "withheld" in fired.reason and pool in fired.reason
    assert rule.propose(e_low) == []
    assert rule.fires(e).holds is True  # the KV pool saturated too: its own pressure, the rule fires


def test_kv_withheld_with_unknown_kv_usage_names_the_hot_pool() -> None:
    e = with_(ev(**{**SATURATED, "kv_cache_usage_ratio": None}), pool_usage={"mamba": 0.97, "swa": 0.1})
    reason = kv_withheld(e)
    assert reason is not None and "mamba pool is saturated (97%)" in reason and "KV pool's usage is unknown" in reason
    assert "KV pool is not" not in reason  # unknown is said as unknown (breaker 13)
    assert kv_withheld(with_(e, pool_usage={"mamba": 0.5})) is None


def test_kv_budget_does_not_raise_for_another_pools_preemptions() -> None:
    e = ev(dep=ctx(gpu_memory_utilization=0.8), **SATURATED)
    assert KVBudgetRule().fires(e).holds is True
    withheld = KVBudgetRule().fires(with_(e, pool_usage={"mamba": 0.99}))
    assert withheld.holds is False and "mamba" in withheld.reason


def test_kv_saturation_counts_only_capacity_waiting_where_vllm_splits_the_queue() -> None:
    e = ev(**{**SATURATED, "kv_cache_usage_ratio": 0.95, "preemptions_increase": 0})
    assert KVSaturationRule().fires(e).holds is True
    deferred_only = with_(e, queues={"waiting_capacity": 0.0, "waiting_deferred": 9.0})
    assert KVSaturationRule().fires(deferred_only).holds is False  # LoRA budget / KV transfer, not the pool


# --- class 3: one rank's pool --------------------------------------------------------------------------


def test_pool_context_judges_the_largest_rank_not_the_summed_pool() -> None:
    dep = ctx(max_model_len=131_072)
    summed = ev(dep=dep, kv_capacity_tokens=8 * 65_536, requests_running=4)
    assert PoolContextRule().fires(summed).holds is False  # 524,288 ÷ 131,072 = 4 "fit" when summed
    ranked = with_(summed, kv_rank_capacity_tokens=(65_536.0,) * 8)
    cond = PoolContextRule().fires(ranked)
    assert cond.holds is True and "largest of 8 data-parallel ranks" in cond.reason
    assert cond.evidence["max_model_len_ceiling_requests"] == 0
    caps = [p for p in PoolContextRule().propose(ranked) if p.dial == "max_model_len"]
    # a rank's 65,536 tokens less its 16-token null block hold 65,520: the cap is 64,512 (a 1,024 multiple)
    assert caps and caps[0].suggested == 64_512


def test_pool_context_cannot_tell_a_hybrid_pool_without_a_group_aware_size() -> None:
    e = with_(ev(kv_capacity_tokens=4_096, requests_running=1), kv_cache_hybrid=True)
    cond = PoolContextRule().fires(e)
    assert cond.holds is None and "minimum over its KV groups" in cond.reason
    sized = with_(e, engine_config={"kv_cache_size_tokens": "4096"})
    assert PoolContextRule().fires(sized).holds is True


# --- class 4: confidence follows the ranks read ---------------------------------------------------------


def test_confidence_scales_with_the_ranks_read() -> None:
    e = ev(**SATURATED)
    assert confidence(with_(e, rank_coverage=0.75), 0.9) == pytest.approx(confidence(e, 0.9) * 0.75, abs=1e-3)


# --- evaluation quantities -------------------------------------------------------------------------------


def snap_with_ranks(*pools: float | None) -> EngineSnapshot:
    return EngineSnapshot(
        engine="sglang",
        kv_cache_capacity_tokens=sum(p for p in pools if p),
        ranks=tuple(RankValues(str(i), kv_cache_capacity_tokens=p) for i, p in enumerate(pools)),
    )


def test_ceiling_at_max_model_len_is_summed_over_ranks_of_whole_requests() -> None:
    # 4 ranks × ⌊262,144 ÷ 163,840⌋ = 4 (summed ÷ context would say 6.4)
    assert max_length_ceiling([snap_with_ranks(*[262_144.0] * 4)], 163_840) == 4
    assert max_length_ceiling([snap_with_ranks(262_144.0, None)], 163_840) is None  # a rank's pool unknown
    assert max_length_ceiling([EngineSnapshot(engine="x", kv_cache_capacity_tokens=300_000)], 100_000) == 3
    assert rank_pools(snap_with_ranks(1.0, 2.0)) == (1.0, 2.0)


def test_pool_usage_fills_llamacpp_slots_from_the_configured_parallel() -> None:
    busy = EngineSnapshot(engine="llamacpp", pools=(PoolReading("slots", None, used=3.0, unit="requests"),))
    assert pool_usage([busy], 4) == {"slots": 0.75}
    assert pool_usage([busy], None) == {"slots": None}  # never 0 for unknown
    full = EngineSnapshot(engine="llamacpp", pools=(PoolReading("slots", 1.0, used=4.0, unit="requests"),))
    assert pool_usage([busy, full], 8) == {"slots": 1.0}  # the hottest replica
    # breaker, 2026-12-05: 3 busy on 1 configured slot read as a full pool ("saturated") while nothing waited; more
    # busy than configured contradicts the config (a build whose default --parallel differs): unknown
    assert pool_usage([busy], 1) == {"slots": None}
    assert pool_usage([busy], 3) == {"slots": 1.0}  # exactly full is full


def test_over_provisioned_does_not_shrink_a_fleet_whose_state_pool_is_full() -> None:
    from advisor.rules.over_provisioned import OverProvisionedRule
    from tests.rules.helpers import good

    rule = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)
    quiet = ev(
        goodput=good(0.95, 1.0),
        requests_running=2,
        requests_waiting=0,
        requests_waiting_first=0,
        kv_cache_usage_ratio=0.05,
        kv_cache_usage_ratio_max=0.1,
    )
    assert rule.fires(quiet).holds is True
    full_mamba = with_(quiet, pool_usage={"mamba": 0.95})
    cond = rule.fires(full_mamba)
    assert cond.holds is False and "mamba pool usage 95.0%" in cond.reason
    assert rule.clears(full_mamba).holds is True


def test_admission_thrash_judges_requests_and_shares_per_data_parallel_rank() -> None:
    from advisor.rules.admission import AdmissionThrashRule

    rule = AdmissionThrashRule(usage_threshold=0.9, max_running_per_replica=8, min_pool_share=0.1, target_concurrency=8)
    # 8 ranks × 25,000 tokens, 4 requests on each: 0.95 × 200,000 ÷ 32 = 5,937 tokens each, 24 % of a rank (3 % summed)
    e = ev(
        dep=ctx(max_model_len=32_768),
        kv_capacity_tokens=200_000,
        kv_cache_usage_ratio=0.95,
        requests_running=32,
        requests_waiting=3,
        preemptions_increase=0,
    )
    assert rule.fires(e).holds is False  # summed: 32 running per replica (over the 8 allowed)
    ranked = with_(e, kv_rank_capacity_tokens=(25_000.0,) * 8)
    cond = rule.fires(ranked)
    assert cond.holds is True and "4 running request(s) per data-parallel rank" in cond.reason
