"""Rule ``rank_wedged``: one data-parallel rank holds its queue with nothing running while the others serve
(sgl-project/sglang#39271; field state ``sglang-dp-rank-wedged-after-near-capacity-request``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.config import RulesConfig
from advisor.rules.rank_wedged import RankWedgedRule
from advisor.rules.registry import builtin_rules
from advisor.rules.stalled import StalledRule
from tests.rules.helpers import ctx, ev

RANK = "http://10.0.0.5:30000/metrics rank 5"


def _ev(stuck: tuple[str, ...] = (RANK,), generated: float | None = 2_600.0, **queues: float) -> Any:
    e = ev(dep=ctx(gpu="h200", engine="sglang"), requests_running=42, requests_waiting=11)
    deltas = {"generation_tokens": generated, "prompt_tokens": 0.0} if generated is not None else {}
    return dataclasses.replace(e, stuck_ranks=stuck, counter_deltas=deltas, queues=dict(queues))


def test_a_stuck_rank_beside_serving_ones_proposes_a_restart_naming_it() -> None:
    e = _ev()
    assert RankWedgedRule().fires(e).holds is True
    (p,) = RankWedgedRule().propose(e)
    assert (p.dial, p.action) == (c.DIAL_ENGINE_PROCESS, c.ACTION_RESTART)
    assert RANK in p.flag and p.evidence["stuck_ranks"] == [RANK]
    assert "39271" in p.description


@pytest.mark.parametrize(
    ("kw", "holds"),
    [
        ({"stuck": ()}, False),  # no rank stuck
        ({"generated": 0.0}, False),  # nothing moves anywhere: stalled's
        ({"generated": None}, None),  # the counters are unknown
        ({"waiting_deferred": 3.0}, None),  # vLLM: a rank's queue may wait for a LoRA slot or remote KV
    ],
)
def test_it_holds_only_for_a_stuck_rank_while_tokens_flow(kw: dict[str, Any], holds: bool | None) -> None:
    assert RankWedgedRule().fires(_ev(**kw)).holds is holds


def test_a_hang_supersedes_it_and_it_supersedes_the_load_readings() -> None:
    assert c.RULE_RANK_WEDGED in StalledRule.supersedes
    assert c.RULE_QUEUE_GROWTH in RankWedgedRule.supersedes and c.RULE_POOL_CONTEXT not in RankWedgedRule.supersedes
    ids = [r.id for r in builtin_rules(RulesConfig())]
    assert ids.index(c.RULE_STALLED) < ids.index(c.RULE_RANK_WEDGED) < ids.index(c.RULE_QUEUE_GROWTH)
    cfg = RulesConfig.model_validate({"rank_wedged": {"enabled": False}})
    assert c.RULE_RANK_WEDGED not in [r.id for r in builtin_rules(cfg)]
