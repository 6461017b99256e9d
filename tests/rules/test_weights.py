"""weights_crowd: weights ≥ ``min_weight_share`` of the budget and the ceiling at max-model-len below
``max_ceiling``, with requests running.

Shares (weights 16,094,076,928 B per GPU, bf16):
* H100-SXM at 0.9: 16,094,076,928 ÷ 76,487,998,833 = 0.2104; ceiling 28,120 ÷ 512 = 54.921875.
* L4 at 0.9: 16,094,076,928 ÷ (23,697,482,056 × 0.9 = 21,327,733,850) = 0.7546; pool ⌊(21,327,733,850 −
  16,094,076,928 − 1,420,094,341) ÷ 2,097,152⌋ = 1,818 blocks → ceiling 1,818 ÷ 512 = 3.55.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.capacity.model_label import compare_model_label
from advisor.rules.weights import WeightsCrowdRule
from tests.rules.helpers import ctx, ev, opens_after

L4 = ctx(gpu="L4")


@pytest.mark.parametrize(
    ("rule", "dep", "running", "fires"),
    [
        (WeightsCrowdRule(), L4, 4, True),  # 0.7546 ≥ 0.6 and 3.55 < 8
        (WeightsCrowdRule(min_weight_share=0.754), L4, 4, True),
        (WeightsCrowdRule(min_weight_share=0.755), L4, 4, False),  # 0.7546 < 0.755
        (WeightsCrowdRule(max_ceiling=3.56), L4, 4, True),  # 3.5508 < 3.56
        (WeightsCrowdRule(max_ceiling=3.55), L4, 4, False),  # 3.5508 ≥ 3.55
        (WeightsCrowdRule(min_weight_share=0.21, max_ceiling=55), None, 4, True),  # H100: 0.2104, 54.92
        (WeightsCrowdRule(min_weight_share=0.2105, max_ceiling=55), None, 4, False),
        (WeightsCrowdRule(min_weight_share=0.21, max_ceiling=54.921875), None, 4, False),  # ceiling = bound
        (WeightsCrowdRule(), L4, 0, False),  # nothing runs
        (WeightsCrowdRule(), None, 4, False),  # H100 defaults: weights are a fifth of the budget
    ],
    ids=[
        "weights crowd an L4 with the defaults",
        "share just over min_weight_share fires",
        "share just under min_weight_share does not fire",
        "ceiling just under max_ceiling fires",
        "ceiling just over max_ceiling does not fire",
        "an H100 at a low share threshold fires",
        "an H100 just under that share does not fire",
        "a ceiling equal to max_ceiling does not fire",
        "nothing running does not fire",
        "an H100 with the defaults does not fire",
    ],
)
def test_fire_table(rule: WeightsCrowdRule, dep: Any, running: float, fires: bool) -> None:
    e = ev(dep=dep, requests_running=running, kv_capacity_tokens=None)  # the capacity pass's pool
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (not fires)


def test_cannot_tell_without_running_requests() -> None:
    assert WeightsCrowdRule().fires(ev(dep=L4)).holds is None
    assert WeightsCrowdRule().clears(ev(dep=L4)).holds is None


def test_proposes_only_quantized_weights_or_more_tp() -> None:
    props = WeightsCrowdRule().propose(ev(dep=L4, requests_running=4))
    assert [(p.dial, p.suggested) for p in props] == [("weight_quantization", "fp8"), ("tensor_parallel_size", 2)]
    assert "measured on your own evals" in props[0].description
    assert props[0].evidence["weights_share_of_budget"] == 0.7546


def test_awq_where_the_gpu_has_no_fp8() -> None:
    props = WeightsCrowdRule().propose(ev(dep=ctx(gpu="A10"), requests_running=4))
    assert props[0].suggested == "awq" and props[0].flag == "--quantization awq"


def test_never_proposes_replicas_or_kv_dtype() -> None:
    dials = {p.dial for p in WeightsCrowdRule().propose(ev(dep=L4, requests_running=4))}
    assert dials <= {"weight_quantization", "tensor_parallel_size"}


@pytest.mark.parametrize(("held", "opens"), [(299.5, False), (300.0, True)], ids=["just short of 300 s", "at 300 s"])
def test_for_duration(held: float, opens: bool) -> None:
    rule = WeightsCrowdRule(for_seconds=300)
    make = lambda now: ev(now=now, dep=L4, requests_running=4, kv_capacity_tokens=None)  # noqa: E731
    assert opens_after(rule, make, held) is opens


def test_the_ceiling_is_read_on_the_engine_s_pool_when_it_reports_one() -> None:
    """Walkthrough: one ``once`` said "the pool holds 23.26 max-length requests" (pool_context, the engine's pool)
    and "19.69 max-length sequences" (weights_crowd, the model's) for one pool. An engine pool of half the model's
    halves the ceiling this rule states and judges."""
    model = ev(dep=L4, requests_running=4, kv_capacity_tokens=None)
    half = ev(dep=L4, requests_running=4, kv_capacity_tokens=model.ctx.capacity.kv_cache_tokens / 2)
    expected = model.ctx.capacity.max_concurrency / 2
    assert half.kv_capacity_source == "engine"
    assert WeightsCrowdRule().fires(half).evidence["max_concurrency"] == pytest.approx(expected)
    assert f"the pool holds {expected:.2f} max-length sequences" in WeightsCrowdRule().fires(half).reason


def test_a_definite_model_mismatch_makes_it_unknown_not_judged_on_the_configs_weights() -> None:
    """Breaker, 2026-12-03: the weights' share was the config's model's while the engine served another."""
    e = ev(dep=L4, requests_running=4, kv_capacity_tokens=None)
    assert WeightsCrowdRule().fires(e).holds is True
    mismatch = compare_model_label(e.ctx.inputs.model.name, "Qwen/Qwen2.5-7B-Instruct", None)
    assert mismatch is not None and mismatch.definite
    cond = WeightsCrowdRule().fires(dataclasses.replace(e, model_mismatch=mismatch))
    assert cond.holds is None and "'Qwen/Qwen2.5-7B-Instruct'" in cond.reason
