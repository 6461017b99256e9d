"""over_provisioned judges the busiest data-parallel rank: one request lives on one rank, so a rank whose pool fills
(or that runs near its share of the ceiling) is not spare capacity however idle the others are.

Field state ``vllm-dp4-h20-requests-pile-on-engine-0`` (vllm-project/vllm#48808): four DP engines behind a skewed
balancer run 27 / 5 / 0 / 0; the ranks' capacity-weighted mean usage is 21 % while engine 0's own pool is 72 % used.
Figures by hand: max-num-seqs 256 on each of 4 ranks is a ceiling of 1,024 a replica (256 a rank); 32 running is
3 % of it, 27 on one rank is 10.5 % of its 256.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good

RULE = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)


def _ev(running: float = 32, **changes: Any) -> Any:
    e = ev(
        dep=ctx(gpu="h20", data_parallel_size=4, max_num_seqs=256),
        goodput=good(1.0, 1.0),
        requests_running=running,
        requests_waiting=0,
        requests_waiting_first=0,
        kv_cache_usage_ratio=0.21,
        kv_cache_usage_ratio_max=0.214,
        kv_capacity_tokens=4 * 469_200,
    )
    return dataclasses.replace(e, kv_rank_capacity_tokens=(469_200.0,) * 4, **changes)


def test_the_ranks_mean_alone_reads_as_over_provisioned() -> None:
    # without the per-rank readings (an engine that does not report ranks) the mean is all there is: it fires
    assert RULE.fires(_ev()).holds is True


def test_a_rank_whose_pool_is_72_percent_used_is_not_spare_capacity() -> None:
    c = RULE.fires(_ev(kv_rank_usage_ratio_max=0.721, rank_requests_running_max=27.0))
    assert c.holds is False
    assert c.evidence["kv_cache_usage_ratio_max"] == 0.721
    assert "fullest data-parallel rank" in c.reason


def test_a_rank_running_near_its_share_of_the_ceiling_is_not_spare_capacity() -> None:
    # 70 running on one rank of 256: 27 % of its share, above the 25 % the rule fires below; its pool 20 % used
    c = RULE.fires(_ev(kv_rank_usage_ratio_max=0.2, rank_requests_running_max=70.0, running=75))
    assert c.holds is False
    assert c.evidence["load_ratio"] == round(70 / 256, 4)
    # evenly spread, the same 75 running are 7 % of the ceiling: it fires
    assert RULE.fires(_ev(kv_rank_usage_ratio_max=0.2, rank_requests_running_max=19.0, running=75)).holds
