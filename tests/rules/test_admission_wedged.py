"""Rule ``admission_wedged``: vLLM's admission gate shut by deferred requests (vllm-project/vllm#53130: "Scheduler
permanently stops admitting requests once running + skipped_waiting ("deferred") reaches max_num_seqs — engine
reports healthy, KV cache mostly free, only a restart recovers"; field state
``vllm-0271-admission-wedged-by-deferred-requests``).

Figures by hand: max_num_seqs 256; the report's 4 running + 473 deferred = 477 ≥ 256 with 19 waiting for capacity
and the pool 20 % used; the one request admitted in the window had waited ~5,000 s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.config import RulesConfig
from advisor.rules.admission_wedged import AdmissionWedgedRule
from advisor.rules.registry import builtin_rules
from advisor.rules.stalled import StalledRule
from tests.rules.helpers import ctx, ev, hist

CAP = 256


def _ev(
    running: float = 4,
    capacity: float = 19,
    deferred: float = 473,
    usage: float | None = 0.2,
    ttft_mean: float | None = 5_000.0,
    finished: float | None = 0.0,
    window: float = 60.0,
    engine: str = "vllm",
    by_reason: bool = True,
    **kw: Any,
) -> Any:
    ttft = hist((ttft_mean * 2, 1.0), total_sum=ttft_mean) if ttft_mean is not None else None
    e = ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=CAP, engine=engine, **kw),
        requests_running=running,
        requests_waiting=capacity + deferred,
        kv_cache_usage_ratio=usage,
        ttft=ttft,
        window_seconds=window,
    )
    queues = {"waiting_capacity": capacity, "waiting_deferred": deferred} if by_reason else {}
    deltas = {"requests_finished": finished} if finished is not None else {}
    return dataclasses.replace(e, queues=queues, counter_deltas=deltas)


def test_the_reported_wedge_fires_and_proposes_a_restart_only() -> None:
    e = _ev()
    assert AdmissionWedgedRule().fires(e).holds is True
    (p,) = AdmissionWedgedRule().propose(e)
    assert (p.dial, p.action) == (c.DIAL_ENGINE_PROCESS, c.ACTION_RESTART)
    assert p.evidence["admission_gate"] == CAP
    assert p.evidence["ttft_mean_seconds"] == 5_000.0
    assert "53130" in p.description


@pytest.mark.parametrize(
    ("kw", "holds"),
    [
        # a decode worker of a disaggregated deployment: many requests wait for remote KV, the gate reads shut for a
        # moment, but the requests waiting for capacity are admitted within steps (TTFT 0.4 s): healthy
        ({"running": 200, "deferred": 80, "ttft_mean": 0.4}, False),
        ({"deferred": 200}, False),  # 4 + 200 < 256: the gate is open, something else holds the queue
        ({"running": CAP}, False),  # every slot runs: the cap binds (seq_cap's), not a wedge
        ({"capacity": 0}, False),  # nobody waits for capacity
        ({"usage": 0.7}, False),  # the pool binds
        ({"usage": None}, None),  # cannot tell whether blocks are free
        ({"engine": "sglang"}, False),  # vLLM's scheduler
        ({"by_reason": False}, None),  # a vLLM before 0.20: the deferred requests are not exported
        # nobody admitted in the window: a long window with nothing finished is the wedge; one finish is not; a short
        # window cannot tell yet
        ({"ttft_mean": None, "finished": 0.0, "window": 120.0}, True),
        ({"ttft_mean": None, "finished": 3.0, "window": 120.0}, False),
        ({"ttft_mean": None, "finished": 0.0, "window": 5.0}, False),
        ({"ttft_mean": None, "finished": None}, None),
    ],
)
def test_it_holds_only_with_the_gate_shut_room_inside_and_requests_held(kw: dict[str, Any], holds: bool | None) -> None:
    assert AdmissionWedgedRule().fires(_ev(**kw)).holds is holds


def test_replicas_share_the_gate() -> None:
    # two replicas, 8 running and 300 deferred in all: 308 < 2 × 256, so the gates are not (both) shut
    e = dataclasses.replace(_ev(running=8, deferred=300), replicas_up=2)
    assert AdmissionWedgedRule().fires(e).holds is False


def test_a_hang_supersedes_it_and_it_supersedes_the_load_readings() -> None:
    assert c.RULE_ADMISSION_WEDGED in StalledRule.supersedes
    for rule in (c.RULE_QUEUE_GROWTH, c.RULE_GOODPUT_BELOW_TARGET, c.RULE_SEQ_CAP, c.RULE_OVER_PROVISIONED):
        assert rule in AdmissionWedgedRule.supersedes
    ids = [r.id for r in builtin_rules(RulesConfig())]
    assert ids.index(c.RULE_STALLED) < ids.index(c.RULE_ADMISSION_WEDGED) < ids.index(c.RULE_QUEUE_GROWTH)


def test_config_sets_its_thresholds() -> None:
    cfg = RulesConfig.model_validate({"admission_wedged": {"max_usage": 0.3, "min_wait": "2m", "for": "30s"}})
    (rule,) = [r for r in builtin_rules(cfg) if r.id == c.RULE_ADMISSION_WEDGED]
    assert isinstance(rule, AdmissionWedgedRule)
    assert (rule.max_usage, rule.min_wait_seconds, rule.for_seconds()) == (0.3, 120.0, 30.0)
    # 20 % used is free at 0.3; a mean wait of 100 s is below 2 minutes
    assert rule.fires(_ev(ttft_mean=100.0)).holds is False
    assert AdmissionWedgedRule().fires(_ev(ttft_mean=100.0)).holds is True
