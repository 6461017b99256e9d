"""The token-metered offer table (``advisor/data/managed_token_offers.csv``) and the host-or-buy arithmetic
(:mod:`advisor.capacity.token_offers`).

Expected figures are written here from the table's published prices and worked by hand, never from running the
module: e.g. Bedrock's Llama 3.1 70B at $0.99 in / $0.99 out per million tokens, for 1,500 prompt + 300 output
tokens per request, costs (1,500 × 0.99 + 300 × 0.99) ÷ 300 = 5.94 USD per million output tokens.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import date

import pytest

from advisor.capacity.data import read_data
from advisor.capacity.models import preset_ids
from advisor.capacity.token_offers import (
    OFFERS_FILE,
    Demand,
    TokenOffer,
    load_offers,
    offer_cost,
    offers,
    offers_for,
    providers_without_offer,
    self_hosted_usd_per_million,
)
from advisor.errors import CapacityError

L70 = "meta-llama/Llama-3.1-70B-Instruct"
LITELLM = "https://github.com/BerriAI/litellm/blob/00035b69f416be24e2e323c13198d9b7d2d1bdf9/model_prices_and_context_window.json"

# (provider, preset) → (USD per million input, output), as read on 2026-12-04 from the LiteLLM price map at commit
# 00035b69 (input_cost_per_token / output_cost_per_token × 10⁶ of the keys named in the table's notes)
PUBLISHED = {
    ("aws-bedrock", L70): (0.99, 0.99),
    ("aws-bedrock", "meta-llama/Llama-3.1-405B-Instruct"): (5.32, 16.00),
    ("aws-bedrock", "meta-llama/Llama-3.1-8B-Instruct"): (0.22, 0.22),
    ("aws-bedrock", "meta-llama/Llama-3.3-70B-Instruct"): (0.72, 0.72),
    ("azure-ai-foundry", L70): (2.68, 3.54),
    ("azure-ai-foundry", "meta-llama/Llama-3.1-405B-Instruct"): (5.33, 16.00),
    ("azure-ai-foundry", "meta-llama/Llama-3.1-8B-Instruct"): (0.30, 0.61),
    ("azure-ai-foundry", "meta-llama/Llama-3.3-70B-Instruct"): (0.71, 0.71),
    ("vertex-ai", "meta-llama/Llama-3.1-405B-Instruct"): (5.00, 16.00),
}


def _rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(read_data(OFFERS_FILE))))


def test_every_row_has_a_source_url_a_date_and_a_known_preset() -> None:
    presets = set(preset_ids())
    rows = _rows()
    assert rows
    for row in rows:
        assert row["price_source"].startswith("https://"), row
        date.fromisoformat(row["price_as_of"])
        assert row["model_preset"] in presets, row["model_preset"]
        assert row["offer"] in ("on_demand", "provisioned")
        assert row["notes"], "each row says which key or page it was read from"


def test_table_prices_are_the_published_figures() -> None:
    got = {(o.provider, o.model_preset): (o.input_usd_per_million, o.output_usd_per_million) for o in offers()}
    assert got == PUBLISHED


def test_no_price_is_zero_and_no_provisioned_row_without_its_sizing() -> None:
    for o in offers():
        for v in (o.input_usd_per_million, o.output_usd_per_million, o.unit_usd_per_hour):
            assert v is None or v > 0
        if o.offer == "provisioned":
            assert o.unit_usd_per_hour is not None and o.unit_tokens_per_minute is not None


def test_llama_3_1_70b_is_offered_by_bedrock_and_azure_and_vertex_is_said_to_have_none() -> None:
    assert sorted(o.provider for o in offers_for(L70)) == ["aws-bedrock", "azure-ai-foundry"]
    assert providers_without_offer(L70) == ["vertex-ai"]
    assert offers_for("Qwen/Qwen2.5-7B-Instruct") == []


def test_on_demand_cost_per_million_goodput_tokens_by_hand() -> None:
    # 2 req/s × 60 = 120 req/min; 120 × 1,500 = 180,000 input and 120 × 300 = 36,000 output tokens/min
    demand = Demand.from_rate(2.0, 1500, 300)
    assert (demand.input_tokens_per_minute, demand.output_tokens_per_minute) == (180_000, 36_000)
    by_provider = {o.provider: offer_cost(o, demand) for o in offers_for(L70)}
    bedrock, azure = by_provider["aws-bedrock"], by_provider["azure-ai-foundry"]
    # Bedrock: (180,000 + 36,000) × 0.99 ÷ 10⁶ = 0.21384 $/min = 12.8304 $/h; ÷ 2.16 M output tokens/h = 5.94
    assert bedrock.usd_per_hour == pytest.approx(12.8304)
    assert bedrock.usd_per_million_goodput_tokens == pytest.approx(5.94)
    # Azure: (180,000 × 2.68 + 36,000 × 3.54) ÷ 10⁶ = 0.60984 $/min = 36.5904 $/h; ÷ 2.16 = 16.94
    assert azure.usd_per_hour == pytest.approx(36.5904)
    assert azure.usd_per_million_goodput_tokens == pytest.approx(16.94)


def _offer(**kw: object) -> TokenOffer:
    base: dict[str, object] = dict(
        provider="p",
        offer="on_demand",
        provider_model_id="m",
        model_preset=L70,
        input_usd_per_million=None,
        output_usd_per_million=None,
        unit_usd_per_hour=None,
        unit_tokens_per_minute=None,
        region=None,
        price_as_of="2026-12-04",
        price_source="https://example.invalid/",
        notes="",
    )
    base.update(kw)
    return TokenOffer(**base)  # type: ignore[arg-type]


def test_unknown_price_stays_unknown_never_zero() -> None:
    cost = offer_cost(_offer(input_usd_per_million=1.0), Demand.from_rate(2.0, 1500, 300))
    assert cost.usd_per_hour is None and cost.usd_per_million_goodput_tokens is None
    assert cost.unknown_reason == "output price unknown"
    assert cost.as_dict()["usd_per_million_goodput_tokens"] is None


def test_provisioned_units_are_bought_for_the_peak_and_paid_through_the_mean() -> None:
    # mean 216,000 tokens/min × peak ÷ mean 2 = 432,000 at the peak; 100,000 per unit → 5 units × $20/h = $100/h;
    # the mean's 36,000 output tokens/min = 2.16 M/h → 100 ÷ 2.16 = 46.296… per million
    demand = Demand.from_rate(2.0, 1500, 300, peak_to_mean=2.0)
    cost = offer_cost(_offer(offer="provisioned", unit_usd_per_hour=20.0, unit_tokens_per_minute=100_000.0), demand)
    assert cost.units == 5
    assert cost.usd_per_hour == pytest.approx(100.0)
    assert cost.usd_per_million_goodput_tokens == pytest.approx(100.0 / 2.16)


def test_self_hosted_is_the_peak_price_over_the_mean_goodput() -> None:
    # $32.77/h sized for a peak serving 600 goodput tokens/s; peak ÷ mean 2 → 300 tokens/s = 1.08 M tokens/h
    assert self_hosted_usd_per_million(32.77, 600.0, 2.0) == pytest.approx(32.77 / 1.08)
    # a flat load: 21.96 $/h at 600 tokens/s = 2.16 M/h → 10.1666…
    assert self_hosted_usd_per_million(21.96, 600.0) == pytest.approx(21.96 / 2.16)
    assert self_hosted_usd_per_million(10.0, 0.0) is None  # no goodput: unbounded, not 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("price_as_of", "Dec 2026", "price_as_of"),
        ("price_source", "litellm", "price_source"),
        ("input_usd_per_million", "0", "input_usd_per_million"),
        ("output_usd_per_million", "cheap", "output_usd_per_million"),
        ("offer", "reserved", "offer"),
        ("unit_usd_per_hour", "5", "unit_usd_per_hour applies to a provisioned offer"),
        ("model_preset", "", "model_preset is empty"),
    ],
)
def test_a_bad_row_is_refused_naming_the_field(field: str, value: str, message: str) -> None:
    rows = _rows()[:1]
    rows[0][field] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    with pytest.raises(CapacityError, match=message) as info:
        load_offers(out.getvalue())
    assert "line 2" in str(info.value)


def test_bad_demand_is_refused_naming_the_field() -> None:
    with pytest.raises(CapacityError, match="peak_to_mean"):
        Demand(1.0, 1.0, 1.0, peak_to_mean=0.5)
    with pytest.raises(CapacityError, match="input_tokens_per_minute"):
        Demand(-1.0, 1.0, 1.0)
    with pytest.raises(CapacityError, match="output_tokens_per_minute"):
        Demand(1.0, 0.0, 1.0)
    assert not math.isnan(Demand(0.0, 1.0, 1.0).input_tokens_per_minute)
