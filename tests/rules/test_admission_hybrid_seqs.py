"""admission_thrash on a hybrid model lowers ``max_num_seqs`` to what the pool holds at the running requests'
footprint (MiaAI-Lab/GLM-5.3-Flash-EXL3-2x-DGX-Sparks#122: ~91k-token footprints in a 356,667-token pool preempted 165
times at ``MAX_NUM_SEQS=4``, 59 at 3; field state ``vllm-hybrid-pool-quarter-per-request-4-seqs-preempt``).

Hand arithmetic: a 356,000-token pool 100 % used by 4 running requests holds 89,000 tokens each; 90 % of the pool
holds ⌊0.9 × 356,000 ÷ 89,000⌋ = ⌊3.6⌋ = 3 of them, so the cap goes 4 → 3.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor import conventions as c
from advisor.rules.admission import AdmissionThrashRule
from tests.rules.helpers import ctx, ev

RULE = AdmissionThrashRule(usage_threshold=0.9, max_running_per_replica=8, min_pool_share=0.1, target_concurrency=8)


def _ev(hybrid: bool = True, preempted: float = 12.0, cap: int = 4, **kw: Any) -> Any:
    e = ev(
        dep=ctx(max_model_len=131_072, max_num_seqs=cap),
        kv_cache_usage_ratio=1.0,
        requests_running=4,
        requests_waiting=2,
        preemptions_increase=preempted,
        generation_tokens_per_second=20.0,
        prompt_tokens_per_second=3_000.0,
        kv_capacity_tokens=356_000,
        **kw,
    )
    return dataclasses.replace(e, kv_cache_hybrid=hybrid)


def _fewer(e: Any) -> list[Any]:
    return [p for p in RULE.propose(e) if p.dial == c.DIAL_MAX_NUM_SEQS]


def test_a_hybrid_pool_preempting_at_its_cap_lowers_the_cap_to_what_fits() -> None:
    assert RULE.fires(_ev()).holds is True
    (p,) = _fewer(_ev())
    assert (p.action, p.current, p.suggested, p.flag) == ("decrease", 4, 3, "--max-num-seqs 3")
    assert p.evidence["kv_tokens_held_per_request"] == 89_000


def test_not_without_preemption_nor_on_a_plain_model_nor_when_the_cap_already_fits() -> None:
    assert _fewer(_ev(preempted=0.0)) == []
    assert _fewer(_ev(hybrid=False)) == []  # the context cap speaks for a plain model
    assert _fewer(_ev(cap=3)) == []  # 3 already fit
