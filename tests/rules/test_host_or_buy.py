"""host_or_buy: the over-provisioned measure held for days (72 h by default), token-metered offers known for the
model and the instance priced → an informational comparison, ``flag`` ``None`` (a purchase, not a dial).

Hand-worked reference (Llama-3.1-8B-Instruct, two replicas of one H100 on ``p5.4xlarge``, $6.88/h each in
``advisor/data/instances.csv``): the window serves 1,800 prompt + 200 generated tokens/s at 1 request/s with
goodput 95 % → 190 goodput tokens/s. Self-hosted: 2 × 6.88 = $13.76/h ÷ (3,600 × 190 = 684,000 tokens/h) × 10⁶
= $20.1169 per million. Demand: 108,000 input + 12,000 output tokens/min. Bedrock's 8B at $0.22/$0.22:
(108,000 + 12,000) × 0.22 ÷ 12,000 = $2.20 per million; Azure's at $0.30/$0.61: (32,400 + 7,320) ÷ 12,000 =
$3.31 per million (prices: the offer table, LiteLLM's price map at commit 00035b69, read 2026-12-04).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.capacity.model_label import compare_model_label
from advisor.capacity.models import get_preset
from advisor.config import parse_config
from advisor.errors import ConfigError
from advisor.platforms import FLAG_REASON_KEY
from advisor.rules.host_or_buy import PURCHASE_NOT_A_DIAL, HostOrBuyRule
from advisor.rules.registry import builtin_rules
from tests.rules.helpers import ctx, ev, good, opens_after

RULE = HostOrBuyRule()
HOURS = 3600.0

RATES = {
    "requests_finished_per_second": 1.0,
    "prompt_tokens_per_second": 1_800.0,
    "generation_tokens_per_second": 200.0,
}


def _ev(
    instance: str | None = "p5.4xlarge",
    model: str | None = None,
    now: float = 1000.0,
    platform: str = "kubernetes",
    **kw: Any,
) -> Any:
    dep = ctx(replicas=2) if model is None else ctx(replicas=2, model=get_preset(model))
    dep = dataclasses.replace(dep, instance_type=instance, platform=platform)
    stats: dict[str, Any] = {
        "goodput": good(0.95, 1.0),
        "requests_running": 2,
        "requests_waiting": 0,
        "requests_waiting_first": 0,
        "kv_cache_usage_ratio": 0.05,
        "kv_cache_usage_ratio_max": 0.1,
        "window_seconds": 3600.0,
        **RATES,
    }
    stats.update(kw)
    e = ev(now=now, dep=dep, replicas_up=2, **stats)
    return dataclasses.replace(e, goodput_tokens_per_second=190.0)


def test_fires_with_the_self_hosted_and_offer_costs_by_hand() -> None:
    cond = RULE.fires(_ev())
    assert cond.holds is True, cond.reason
    e = cond.evidence
    assert e["hourly_usd"] == pytest.approx(13.76)
    assert e["self_hosted_usd_per_million_tokens"] == pytest.approx(13.76 / 0.684, abs=1e-4)
    assert (e["input_tokens_per_minute"], e["output_tokens_per_minute"]) == (108_000, 12_000)
    assert [o["provider"] for o in e["managed_offers"]] == ["aws-bedrock", "azure-ai-foundry"]
    assert e["cheapest_offer_usd_per_million_tokens"] == pytest.approx(2.20)
    assert e["managed_offers"][1]["usd_per_million_goodput_tokens"] == pytest.approx(3.31)
    assert e["cheapest_offer_source"].startswith("https://github.com/BerriAI/litellm/blob/")


def test_on_sagemaker_the_ml_instance_is_priced_at_sagemakers_price_not_the_vms() -> None:
    # ml.p5.48xlarge: 113.068 USD/h in aws-samples/foundation-model-benchmarking-tool fmbench/configs/pricing.yml
    # @ d881420 (EC2 p5.48xlarge: 55.04); 8 H100s hold both one-GPU replicas: one instance
    cond = RULE.fires(_ev("ml.p5.48xlarge", platform="sagemaker"))
    assert cond.evidence["hourly_usd"] == pytest.approx(113.068)


def test_one_eight_gpu_instance_hosts_both_replicas() -> None:
    # p5.48xlarge: 8 H100s at $55.04/h hold 8 one-GPU replicas: ceil(2 ÷ 8) = 1 instance
    assert RULE.fires(_ev("p5.48xlarge")).evidence["hourly_usd"] == pytest.approx(55.04)


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"instance": None}, "no instance_type configured"),
        ({"instance": "p5e.48xlarge"}, "no on-demand price"),  # in the catalog, not sold on demand
        ({"model": "Qwen/Qwen2.5-7B-Instruct"}, "no token-metered offer is known for Qwen/Qwen2.5-7B-Instruct"),
        ({"generation_tokens_per_second": 0.0}, "no tokens served"),
        ({"platform": "sagemaker"}, "is not a sagemaker instance"),  # a VM's name: an ml.* price is never a VM's
        ({"platform": "bedrock"}, "bedrock rents no instances"),
    ],
    ids=[
        "price unknown: no instance",
        "price unknown: unpriced instance",
        "no offer for the model",
        "idle",
        "managed platform: VM price not reused",
        "bedrock: already bought",
    ],
)
def test_never_fires_without_an_offer_or_a_price(kw: dict[str, Any], reason: str) -> None:
    cond = RULE.fires(_ev(**kw))
    assert cond.holds is False
    assert reason in cond.reason
    assert not opens_after(RULE, lambda now: _ev(now=now, **kw), 100 * HOURS)


@pytest.mark.parametrize(
    ("stats", "fires"),
    [
        ({"requests_running": 2 * 53}, True),  # 53 per replica ÷ 216 (432,000 ÷ 2,000 tokens) = 0.245
        ({"requests_running": 2 * 54}, False),  # 54 ÷ 216 = 0.25: not far below capacity
        ({"kv_cache_usage_ratio_max": 0.3}, False),
        ({"requests_waiting": 1}, False),
        ({"goodput": good(0.8, 1.0)}, False),  # the SLO missed: no purchase advice on an unhealthy deployment
    ],
)
def test_the_over_provisioned_measure_decides_the_load(stats: dict[str, Any], fires: bool) -> None:
    assert RULE.fires(_ev(**stats)).holds is fires


def test_opens_only_after_72_hours() -> None:
    assert RULE.for_seconds() == 72 * HOURS
    assert not opens_after(RULE, lambda now: _ev(now=now), 71 * HOURS)
    assert opens_after(RULE, lambda now: _ev(now=now), 72 * HOURS)


def test_proposal_is_informational_with_flag_null_and_the_reason() -> None:
    (p,) = RULE.propose(_ev())
    assert p.rule == c.RULE_HOST_OR_BUY and p.dial == c.DIAL_MANAGED_OFFER
    assert p.severity == "info"
    assert p.flag is None
    assert p.evidence[FLAG_REASON_KEY] == PURCHASE_NOT_A_DIAL
    assert p.suggested == "aws-bedrock on_demand meta.llama3-1-8b-instruct-v1:0"
    assert "$2.20 per million" in p.summary and "$20.12 self-hosted" in p.summary
    assert p.predicted_effect["usd_per_million_tokens"]["after"] == pytest.approx(2.20)


def test_clears_when_the_load_returns() -> None:
    assert RULE.clears(_ev(requests_running=2 * 110)).holds is True  # 110 ÷ 216 ≥ 2 × 0.25
    assert RULE.clears(_ev()).holds is False


GOOD = {
    "name": "chat-8b",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "targets": ["http://127.0.0.1:8000/metrics"],
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def test_config_defaults_to_72h_is_configurable_and_refuses_an_unknown_instance() -> None:
    cfg = parse_config({"deployments": [dict(GOOD, instance_type="p5.4xlarge")]})
    assert cfg.deployments[0].instance_type == "p5.4xlarge"
    assert cfg.rules.host_or_buy.for_ == 72 * HOURS
    assert any(isinstance(r, HostOrBuyRule) for r in builtin_rules(cfg.rules))
    cfg = parse_config({"deployments": [GOOD], "rules": {"host_or_buy": {"for": "48h", "max_load_ratio": 0.1}}})
    rule = next(r for r in builtin_rules(cfg.rules) if isinstance(r, HostOrBuyRule))
    assert rule.for_seconds() == 48 * HOURS
    cfg = parse_config({"deployments": [GOOD], "rules": {"host_or_buy": {"enabled": False}}})
    assert not any(isinstance(r, HostOrBuyRule) for r in builtin_rules(cfg.rules))
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dict(GOOD, instance_type="p5.4xlargee")]})
    (path, message), *_ = err.value.problems
    assert path == "deployments[0].instance_type"
    assert "unknown instance type 'p5.4xlargee'" in message and "p5.4xlarge" in message


def test_a_definite_model_mismatch_makes_it_unknown_naming_both_models() -> None:
    """Breaker, 2026-12-03: with the engine serving another model, the status line priced the config's model's
    offers. Now the comparison is unknown, naming both (model_drift says what to set)."""
    e = _ev()
    mismatch = compare_model_label(e.ctx.inputs.model.name, "Qwen/Qwen2.5-7B-Instruct", None)
    assert mismatch is not None and mismatch.definite
    cond = RULE.fires(dataclasses.replace(e, model_mismatch=mismatch))
    assert cond.holds is None
    assert "'Qwen/Qwen2.5-7B-Instruct'" in cond.reason and repr(e.ctx.inputs.model.name) in cond.reason
