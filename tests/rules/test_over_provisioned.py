"""over_provisioned: SLO met, no queue, peak KV usage under ``max_usage`` and load under ``max_load_ratio`` of the
ceiling; clears at twice the thresholds, a queue, or a missed SLO.

The ceiling is max-num-seqs (256) unless finished requests show a length at which the pool holds fewer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.rules.over_provisioned import OverProvisionedRule
from tests.rules.helpers import ctx, ev, good, opens_after

RULE = OverProvisionedRule(max_usage=0.3, max_load_ratio=0.25, target_load_ratio=0.5)


def _ev(**kw: Any) -> Any:
    stats: dict[str, Any] = {
        "goodput": good(0.95, 1.0),
        "requests_running": 2,
        "requests_waiting": 0,
        "requests_waiting_first": 0,
        "kv_cache_usage_ratio": 0.05,
        "kv_cache_usage_ratio_max": 0.1,
    }
    stats.update(kw)
    return ev(**stats)


# 1,800 prompt + 200 generated tokens/s at 1 request/s: 2,000 tokens per request → ⌊432,000 ÷ 2,000⌋ = 216
LENGTHS = {
    "requests_finished_per_second": 1.0,
    "prompt_tokens_per_second": 1_800.0,
    "generation_tokens_per_second": 200,
}


@pytest.mark.parametrize(
    ("rule", "stats", "fires"),
    [
        (RULE, {}, True),  # 2 of 256 running, 10 % peak usage, SLO met
        (RULE, {"requests_running": 63}, True),  # 63 ÷ 256 = 0.246
        (RULE, {"requests_running": 64}, False),  # 64 ÷ 256 = 0.25
        (RULE, {"requests_running": 53, **LENGTHS}, True),  # 53 ÷ 216 = 0.245
        (RULE, {"requests_running": 54, **LENGTHS}, False),  # 54 ÷ 216 = 0.25
        (OverProvisionedRule(max_load_ratio=0.5), {"requests_running": 127}, True),  # 0.496
        (OverProvisionedRule(max_load_ratio=0.5), {"requests_running": 128}, False),  # 0.5
        (RULE, {"kv_cache_usage_ratio_max": 0.2999}, True),
        (RULE, {"kv_cache_usage_ratio_max": 0.3}, False),
        (RULE, {"kv_cache_usage_ratio_max": None, "kv_cache_usage_ratio": 0.31}, False),  # falls back to now
        (OverProvisionedRule(max_usage=0.5), {"kv_cache_usage_ratio_max": 0.45}, True),
        (RULE, {"goodput": good(0.9, 1.0)}, True),  # goodput at the 0.9 target
        (RULE, {"goodput": good(0.8999, 1.0)}, False),
        (RULE, {"requests_waiting": 1}, False),
        (RULE, {"requests_waiting_first": 2}, False),  # a queue earlier in the window
    ],
    ids=[
        "a quiet deployment fires",
        "load just under max_load_ratio fires",
        "load at max_load_ratio does not fire",
        "load just under the pool-bound ceiling fires",
        "load at the pool-bound ceiling does not fire",
        "a higher max_load_ratio just under it fires",
        "a higher max_load_ratio at it does not fire",
        "peak usage just under max_usage fires",
        "peak usage at max_usage does not fire",
        "current usage counts when the peak is unknown",
        "a higher max_usage fires",
        "goodput at target fires",
        "goodput just under target does not fire",
        "a waiting request does not fire",
        "a queue at the window start does not fire",
    ],
)
def test_fire_table(rule: OverProvisionedRule, stats: dict[str, Any], fires: bool) -> None:
    assert rule.fires(_ev(**stats)).holds is fires


@pytest.mark.parametrize(
    ("stats", "clears"),
    [
        ({"requests_running": 100}, False),  # load 0.39: between 0.25 and 0.5 — the band
        ({"requests_running": 128}, True),  # load 0.5 = 2 × 0.25
        ({"kv_cache_usage_ratio_max": 0.59}, False),  # between 0.3 and 0.6
        ({"kv_cache_usage_ratio_max": 0.6}, True),  # 2 × 0.3
        ({"requests_waiting": 2}, False),  # a Poisson arrival caught waiting is no queue (≤ max(2, 10 % running))
        ({"requests_waiting": 3}, True),
        ({"goodput": good(0.89, 1.0)}, True),
    ],
    ids=[
        "load inside the hysteresis band stays open",
        "load at twice max_load_ratio clears",
        "usage inside the band stays open",
        "usage at twice max_usage clears",
        "two waiting is not yet a queue",
        "a queue clears",
        "a missed SLO clears",
    ],
)
def test_clear_table(stats: dict[str, Any], clears: bool) -> None:
    e = _ev(**stats)
    assert RULE.clears(e).holds is clears
    if not clears:
        assert RULE.fires(e).holds is False  # inside the band: neither side


@pytest.mark.parametrize(
    "stats",
    [
        {"goodput": good(None, None)},
        {"requests_running": None},
        {"requests_waiting": None},
        {"kv_cache_usage_ratio": None, "kv_cache_usage_ratio_max": None},
    ],
    ids=["goodput unknown", "running unknown", "waiting unknown", "usage unknown"],
)
def test_cannot_tell(stats: dict[str, Any]) -> None:
    e = _ev(**stats)
    assert RULE.fires(e).holds is None
    assert RULE.clears(e).holds is None
    assert RULE.propose(e) == []


def test_fewer_replicas_at_the_target_load() -> None:
    # 40 running over 4 replicas of ceiling 256: ⌈40 ÷ (0.5 × 256)⌉ = 1 replica
    (p,) = RULE.propose(_ev(dep=ctx(replicas=4), replicas_up=4, requests_running=40))
    assert (p.dial, p.action, p.current, p.suggested) == ("replicas", "decrease", 4, 1)
    assert p.predicted_effect["gpus"] == {"before": 4, "after": 1}
    # 40 ÷ (4 × 256) = 0.0391 → 40 ÷ 256 = 0.156
    assert p.predicted_effect["load_ratio"]["before"] == pytest.approx(0.0391, abs=1e-4)
    assert p.predicted_effect["load_ratio"]["after"] == pytest.approx(0.1562, abs=1e-4)
    # anchored on the engine's 432,000 per replica (issue 13); the capacity pass's 449,920 beside it
    assert p.predicted_effect["kv_cache_tokens_total"] == {
        "before": 4 * 432_000,
        "after": 432_000,
        "model_before": 4 * 449_920,
        "model_after": 449_920,
    }
    assert p.severity == "info"


def test_a_smaller_gpu_for_one_replica() -> None:
    # 2 running at 3 % of 432,000 tokens: 6,480 tokens each; at 50 % load one GPU must hold 4 × 6,480 = 25,920.
    # A10 (22.07 GiB, the smallest with a BF16 rate that fits the weights): ⌊(23,697,482,056 × 0.9 −
    # 16,094,076,928 − 1,420,094,341) ÷ 2,097,152⌋ = 1,818 blocks = 29,088 tokens ≥ 25,920. (T4 cannot hold the
    # 14.99 GiB of weights.)
    # The A10's decode roofline at that batch (29,088 ÷ 6,480 = 4.5 sequences of 6,480 tokens) is ≈ 4.5 ÷ (16.1 GB
    # weights ÷ (600 GB/s × 0.58) + 3.8 GB KV ÷ (600 GB/s × 0.60)) ≈ 79 tokens/s with the vllm/ampere calibration
    # of 2026-12-05: at half load it carries 20 generated tokens/s with room to spare (40 would be within 2 %).
    (p,) = RULE.propose(_ev(kv_cache_usage_ratio=0.03, generation_tokens_per_second=20.0))
    assert (p.dial, p.current, p.suggested) == ("instance_type", "NVIDIA H100 SXM", "NVIDIA A10")
    assert p.predicted_effect["kv_cache_tokens"] == {"before": 449_920, "after": 29_088}
    assert p.predicted_effect["gpu_memory_bytes"] == {"before": 84_986_665_370, "after": 23_697_482_056}


def test_a_smaller_instance_stays_on_the_same_vendor() -> None:
    # 2 running at 5 %: 10,800 tokens each → 43,200 needed; rtx 3090/4090 hold 40,224, A10/L4 29,088
    (p,) = RULE.propose(_ev(kv_cache_usage_ratio=0.05, generation_tokens_per_second=40.0))
    assert p.suggested.startswith("NVIDIA")


def test_no_smaller_gpu_when_it_could_not_carry_the_generation_rate() -> None:
    # a smaller GPU is a slower one: 100,000 tokens/s is beyond any single GPU's decode roofline for an 8B
    # model, and an unknown rate cannot be checked — neither proposes a smaller instance
    assert RULE.propose(_ev(kv_cache_usage_ratio=0.03, generation_tokens_per_second=100_000.0)) == []
    assert RULE.propose(_ev(kv_cache_usage_ratio=0.03)) == []


def test_never_proposes_a_scale_up() -> None:
    cases = [
        {},
        {"requests_running": 63},
        {"dep": ctx(replicas=2), "replicas_up": 2, "requests_running": 120},
        {"dep": ctx(replicas=8), "replicas_up": 8, "requests_running": 500},
        {"kv_cache_usage_ratio": 0.29},
    ]
    for kw in cases:
        for p in RULE.propose(_ev(**kw)):
            assert p.action in ("decrease", "set")
            if p.dial == "replicas":
                assert p.suggested < p.current


@pytest.mark.parametrize(
    ("held", "opens"), [(1799.5, False), (1800.0, True)], ids=["just short of 30 min", "at 30 min"]
)
def test_for_duration(held: float, opens: bool) -> None:
    rule = OverProvisionedRule(for_seconds=1800)
    assert opens_after(rule, lambda now: _ev(now=now, dep=ctx(replicas=4), replicas_up=4, requests_running=40),
                       held) is opens  # fmt: skip


def test_the_description_states_the_predicted_load_not_the_target() -> None:
    # issue 13 ("words follow numbers"): 40 running over 4 replicas of ceiling 256 → 1 replica at
    # 40 ÷ 256 = 16 % of its ceiling; the target load (50 %) is a bound, not what the one replica carries
    (p,) = RULE.propose(_ev(dep=ctx(replicas=4), replicas_up=4, requests_running=40))
    assert "1 replica(s) carry this load at 40 running per replica, 16% of the ceiling 256" in p.description
    assert "at 50% of the ceiling" not in p.description


def test_a_load_rising_through_the_window_is_not_scaled_down() -> None:
    """Breaker 10 (a diurnal ramp): "replicas 3 → 2" paged at 41 requests/s, rising for a minute, and held while the
    rate reached 93. Three replicas, 40 running over the window; its older half averaged 10 + 10 + 10 = 30, so the
    newer half 2 × 40 − 30 = 50: 50 ≥ 1.2 × 30 and 50 − 30 = 20 ≥ 2√30 ≈ 11 → rising, no scale-down, and an open
    incident clears. The same 40 with halves of 13 + 13 + 13 = 39 (newer 41) is steady: it fires."""
    base = {"dep": ctx(replicas=3), "replicas_up": 3, "requests_running": 40}
    whole = (("a", 40 / 3), ("b", 40 / 3), ("c", 40 / 3))

    def with_halves(older: float) -> Any:
        return dataclasses.replace(
            _ev(**base),
            requests_running_by_target=whole,
            requests_running_by_target_early=(("a", older), ("b", older), ("c", older)),
        )

    rising = with_halves(10.0)
    assert RULE.fires(rising).holds is False and "rising through the window" in RULE.fires(rising).reason
    assert RULE.clears(rising).holds is True
    steady = with_halves(13.0)
    assert RULE.fires(steady).holds is True
    (p,) = RULE.propose(steady)
    assert (p.dial, p.action) == ("replicas", "decrease")


def test_a_trickle_moving_by_a_few_requests_is_not_a_rise() -> None:
    """The demo's three replicas of a trickle: 1 running over the window's older half, 3 over the newer (whole 2):
    3 ≥ 1.2 × 1 but 3 − 1 = 2 < 2√4 = 4 — noise, not a rise; the scale-down stands."""
    e = dataclasses.replace(
        _ev(dep=ctx(replicas=3), replicas_up=3, requests_running=2),
        requests_running_by_target=(("a", 2 / 3), ("b", 2 / 3), ("c", 2 / 3)),
        requests_running_by_target_early=(("a", 1 / 3), ("b", 1 / 3), ("c", 1 / 3)),
    )
    assert RULE.fires(e).holds is True and RULE.clears(e).holds is False


def test_with_ttft_unmeasured_it_says_why_it_cannot_judge() -> None:
    """Breaker 14: TGI (no TTFT histogram) read 'running, waiting or goodput unknown'; the goodput side says which."""
    from advisor.telemetry import goodput_ratio

    e = _ev(dep=ctx(replicas=3), replicas_up=3, requests_running=6, goodput=goodput_ratio(None, 1.0))
    cond = RULE.fires(e)
    assert cond.holds is None and "TTFT not measured" in cond.reason, cond.reason
