"""Acceptance 4: every capacity-pass "after" a rule predicts is what ``capacity-advisor plan --json`` prints for the
same deployment with that dial turned.

For each rule that proposes a capacity-pass turn, an evaluation that makes it fire; for each proposal, ``plan``
is run as a subprocess with the deployment's inputs (every flag explicit, ``--max-num-seqs`` and
``--block-size`` included) and again with the one flag turned. Replica proposals carry the pool × replicas,
checked against ``plan``'s per-replica pool. Effects that are not capacity-pass quantities (queue wait, TPOT
from the roofline, speculative decoding) are checked by hand in the per-rule files.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from advisor.rules.admission import AdmissionThrashRule
from advisor.rules.base import Evaluation, Proposal, Rule
from advisor.rules.kv_budget import KVBudgetRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.over_provisioned import OverProvisionedRule
from advisor.rules.pool_context import PoolContextRule
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.weights import WeightsCrowdRule
from tests.rules.helpers import ctx, ev, good, plan, plan_args, with_flag

PLAN_FLAG = {
    "kv_cache_dtype": "--kv-cache-dtype",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "weight_quantization": "--quantization",
    "tensor_parallel_size": "--tp",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "instance_type": "--gpu",
}
"""Dial → the ``plan`` flag that turns it."""


def _saturated(**kw: Any) -> Evaluation:
    stats: dict[str, Any] = {
        "kv_cache_usage_ratio": 0.98,
        "requests_running": 50,
        "requests_waiting": 40,
        "requests_waiting_first": 10,
        "preemptions_increase": 6,
        "preemptions_per_second": 0.1,
    }
    stats.update(kw)
    return ev(**stats)


SCENARIOS: dict[str, tuple[Rule, Callable[[], Evaluation]]] = {
    "pool_context at a 131,072 context": (
        PoolContextRule(),
        lambda: ev(dep=ctx(max_model_len=131_072), kv_capacity_tokens=76_600, requests_waiting=1, requests_running=0),
    ),
    "admission_thrash at a 32,768 context": (
        AdmissionThrashRule(),
        lambda: ev(
            dep=ctx(max_model_len=32_768),
            kv_capacity_tokens=100_000,
            kv_cache_usage_ratio=0.95,
            requests_running=4,
            requests_waiting=3,
        ),
    ),
    "kv_saturation at budget 0.9": (KVSaturationRule(), _saturated),
    "kv_saturation at budget 0.8 with fp8 weights": (
        KVSaturationRule(),
        lambda: _saturated(dep=ctx(gpu_memory_utilization=0.8, quantization="fp8")),
    ),
    "kv_saturation at tp 2 with fp8 kv on an A100": (
        KVSaturationRule(),
        lambda: _saturated(dep=ctx(gpu="A100-80GB", tensor_parallel_size=2, kv_cache_dtype="fp8")),
    ),
    "kv_budget raising 0.8": (
        KVBudgetRule(),
        lambda: ev(dep=ctx(gpu_memory_utilization=0.8), preemptions_increase=3),
    ),
    "kv_budget lowering 0.9 after restarts": (
        KVBudgetRule(),
        lambda: ev(preemptions_increase=0, counter_resets=3),
    ),
    "kv_saturation preempting past the knee": (
        KVSaturationRule(),
        lambda: _saturated(
            requests_running=230,
            requests_finished_per_second=1.0,
            prompt_tokens_per_second=1_800.0,
            generation_tokens_per_second=200.0,
        ),
    ),
    # the pool the capacity pass gives (no engine figure: the helpers' default 432,000 is an H100's, not an L4's)
    "weights_crowd on an L4": (
        WeightsCrowdRule(),
        lambda: ev(dep=ctx(gpu="L4"), requests_running=4, kv_capacity_tokens=None),
    ),
    "weights_crowd on an A10 (awq)": (
        WeightsCrowdRule(),
        lambda: ev(dep=ctx(gpu="A10"), requests_running=4, kv_capacity_tokens=None),
    ),
    "over_provisioned on one H100": (
        OverProvisionedRule(),
        lambda: ev(
            goodput=good(0.95, 1.0),
            requests_running=2,
            requests_waiting=0,
            requests_waiting_first=0,
            kv_cache_usage_ratio=0.03,
            generation_tokens_per_second=40.0,
        ),
    ),
    "over_provisioned on four H100s": (
        OverProvisionedRule(),
        lambda: ev(
            dep=ctx(replicas=4),
            replicas_up=4,
            goodput=good(0.95, 1.0),
            requests_running=40,
            requests_waiting=0,
            kv_cache_usage_ratio=0.05,
        ),
    ),
    "queue_growth": (
        QueueGrowthRule(),
        lambda: ev(
            requests_finished_per_second=2.0,
            requests_running=50,
            requests_running_first=50,
            requests_waiting_first=10,
            requests_waiting=70,
        ),
    ),
}


def _cases() -> list[Any]:
    out = []
    for name, (rule, make) in SCENARIOS.items():
        e = make()
        assert rule.fires(e).holds is True, name
        for p in rule.propose(e):
            # replicas: those sized from the pool carry kv_cache_tokens_total (admission's long-context replica
            # predicts only the count)
            if p.dial in PLAN_FLAG or "kv_cache_tokens_total" in p.predicted_effect:
                out.append(pytest.param(name, rule, make, p.dial, id=f"{name}: {p.dial} {p.current} → {p.suggested}"))
    return out


CASES = _cases()


def _model(v: Any) -> dict[str, Any]:
    """An effect's capacity-pass figures: ``model_before`` / ``model_after`` when anchored on the engine."""
    if "model_before" in v:
        return {"before": v["model_before"], "after": v["model_after"]}
    return dict(v)


def _gpu(e: Evaluation) -> str:
    assert e.ctx.gpu is not None
    return e.ctx.gpu.name


def _proposal(rule: Rule, make: Callable[[], Evaluation], dial: str) -> tuple[Evaluation, Proposal]:
    e = make()
    return e, next(p for p in rule.propose(e) if p.dial == dial)


def test_every_capacity_dial_is_covered() -> None:
    covered = {c.values[3] for c in CASES}
    assert covered >= {
        "kv_cache_dtype",
        "gpu_memory_utilization",
        "weight_quantization",
        "tensor_parallel_size",
        "max_model_len",
        "instance_type",
        "max_num_seqs",
        "replicas",
    }


@pytest.mark.parametrize(("scenario", "rule", "make", "dial"), CASES)
def test_predicted_after_equals_plan_with_the_dial_turned(
    scenario: str, rule: Rule, make: Callable[[], Evaluation], dial: str
) -> None:
    e, p = _proposal(rule, make, dial)
    base = plan_args(e.ctx.inputs, _gpu(e))
    before = plan(base)
    # the deployment as it runs is what plan prints for its inputs
    assert before["kv_cache_tokens"] == e.ctx.capacity.kv_cache_tokens
    # pool effects are anchored on the engine's pool (issue 13): the capacity pass's own numbers stay beside them
    # as model_before / model_after, and those are what plan prints
    pe = {k: _model(v) for k, v in p.predicted_effect.items()}
    if dial == "replicas":
        assert pe["kv_cache_tokens_total"] == {
            "before": before["kv_cache_tokens"] * p.current,
            "after": before["kv_cache_tokens"] * p.suggested,
        }
        return
    after = plan(with_flag(base, PLAN_FLAG[dial], str(p.suggested)))
    if dial == "max_num_seqs":
        # the knee cap predicts the cap itself and the end of preemptions, no pool figure (see the report)
        assert pe["max_num_seqs"]["after"] == p.suggested
    if "kv_cache_tokens" in pe:
        assert pe["kv_cache_tokens"] == {"before": before["kv_cache_tokens"], "after": after["kv_cache_tokens"]}
    if "max_concurrency" in pe:
        assert pe["max_concurrency"] == {
            "before": round(before["max_concurrency"], 4),
            "after": round(after["max_concurrency"], 4),
        }
    if "gpus_per_replica" in pe:
        assert pe["gpus_per_replica"] == {
            "before": before["tensor_parallel_size"],
            "after": after["tensor_parallel_size"],
        }
    if "max_model_len" in pe:
        assert pe["max_model_len"]["after"] == after["max_model_len"]
    if "gpu_memory_bytes" in pe:
        assert pe["gpu_memory_bytes"] == {"before": before["gpu_memory_bytes"], "after": after["gpu_memory_bytes"]}
