"""``capacity-advisor plan --search`` as an operator runs it (through the CLI's entry point,
:func:`tests.inprocess.run_cli`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.inprocess import CliRun, run_cli

ACCEPTANCE = [
    "plan",
    "--search",
    "--model",
    "meta-llama/Llama-3.1-70B-Instruct",
    "--arrival-rate",
    "5",
    "--prompt-tokens",
    "2000",
    "--output-tokens",
    "500",
    "--ttft",
    "2.5",
    "--tpot",
    "0.05",
    "--target-ratio",
    "0.9",
    "--cloud",
    "aws",
]


def _cli(*args: str) -> CliRun:
    return run_cli(*args)


def test_acceptance_search_lists_a_feasible_configuration_with_its_hourly_cost() -> None:
    r = _cli(*ACCEPTANCE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("instance"))
    assert "$/h" in lines[header] and "$/Mtok" in lines[header]
    first = lines[header + 1].split()
    cost = float(first[lines[header].split().index("$/h")])
    assert cost > 0
    assert "best rejected:" in r.stdout


def test_acceptance_search_as_json() -> None:
    r = _cli(*ACCEPTANCE, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] and out["feasible"][0]["hourly_cost_usd"] > 0
    assert out["feasible"][0]["cloud"] == "aws"
    assert out["slo"] == {"ttft_seconds": 2.5, "tpot_seconds": 0.05, "target_ratio": 0.9}
    assert all("reason" in x for x in out["rejected"])


def test_search_without_traffic_or_targets_is_an_input_error() -> None:
    r = _cli("plan", "--search", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--arrival-rate", "1")
    assert r.returncode == 2
    assert "--prompt-tokens" in r.stderr and "--tpot" in r.stderr


def test_plan_without_search_still_needs_max_model_len() -> None:
    r = _cli("plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100")
    assert r.returncode == 2 and "--max-model-len" in r.stderr


def test_plot_is_optional(tmp_path: Path) -> None:
    target = tmp_path / "frontier.png"
    r = _cli(*ACCEPTANCE, "--plot", str(target))
    assert r.returncode == 0, r.stderr
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib" in r.stderr and not target.exists()
    else:
        assert target.stat().st_size > 0


def test_the_table_says_what_its_columns_mean_and_which_context_every_row_assumes() -> None:
    r = _cli(*ACCEPTANCE)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())  # the legend is wrapped
    assert "repl: replicas" in text and "$/Mtok: USD per million output tokens of requests that meet the SLO" in text
    assert "every row runs --max-model-len 2,500" in text  # 2,000 prompt + 500 output, the worst case


def test_without_a_cloud_each_row_names_its_cloud_and_each_price_its_source() -> None:
    args = [a for a in ACCEPTANCE if a not in ("--cloud", "aws")]
    r = _cli(*args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("cloud"))
    clouds = {
        line.split()[0] for line in lines[header + 1 :] if line.split() and line.split()[0] in ("aws", "azure", "gcp")
    }
    prices = next(line for line in lines if line.startswith("prices:"))
    assert clouds and all(cloud in prices for cloud in clouds)


HOST_OR_BUY = [
    "plan",
    "--search",
    "--model",
    "llama-3.1-70b-instruct",
    "--arrival-rate",
    "2",
    "--prompt-tokens",
    "1500",
    "--output-tokens",
    "300",
    "--ttft",
    "2.5",
    "--tpot",
    "0.05",
    "--compare-managed",
]
"""Issue 18 acceptance 3: Llama-3.1-70B-Instruct at 2 requests/s, 1,500 in / 300 out."""


def test_acceptance_compare_managed_prints_self_hosted_and_offers_with_prices_and_sources() -> None:
    r = _cli(*HOST_OR_BUY)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("cloud  instance") for line in lines)  # the cheapest self-hosted configurations
    header = next(i for i, line in enumerate(lines) if line.startswith("provider"))
    assert "$/M in" in lines[header] and "$/M out" in lines[header] and "source" in lines[header]
    offers = {line.split()[0]: line.split() for line in lines[header + 1 : header + 3]}
    # Bedrock $0.99/$0.99: 5 × 0.99 + 0.99 = 5.94; Azure $2.68/$3.54: 5 × 2.68 + 3.54 = 16.94 (per million output)
    assert offers["aws-bedrock"][3:6] == ["0.99", "0.99", "5.94"]
    assert offers["azure-ai-foundry"][3:6] == ["2.68", "3.54", "16.94"]
    assert all(
        row[6] == "2026-12-04" and row[7].startswith("https://github.com/BerriAI/litellm/blob/")
        for row in offers.values()
    )
    assert "no offer known from vertex-ai" in r.stdout
    assert "self-hosted (cheapest above) $" in r.stdout


def test_compare_managed_json_keys() -> None:
    r = _cli(*HOST_OR_BUY, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [o["provider"] for o in out["managed_offers"]] == ["aws-bedrock", "azure-ai-foundry"]
    assert out["managed_offers"][0]["usd_per_million_goodput_tokens"] == 5.94
    assert out["managed_offers_note"] is None
    best = out["feasible"][0]
    # a flat load (no --mean-arrival-rate): the search's own $/Mtok of its cheapest row
    assert out["self_hosted_usd_per_million_tokens"] == round(best["cost_per_million_goodput_tokens_usd"], 4)


def test_mean_below_the_peak_raises_the_self_hosted_cost_by_peak_over_mean() -> None:
    flat = json.loads(_cli(*HOST_OR_BUY, "--json").stdout)
    half = json.loads(_cli(*HOST_OR_BUY, "--json", "--mean-arrival-rate", "1").stdout)
    assert half["managed_demand"]["peak_to_mean"] == 2.0
    assert half["self_hosted_usd_per_million_tokens"] == pytest.approx(
        2 * flat["self_hosted_usd_per_million_tokens"], abs=1e-3
    )
    # token-metered prices per token do not change with the mean: still 5.94 for Bedrock
    assert half["managed_offers"][0]["usd_per_million_goodput_tokens"] == 5.94


def test_a_model_with_no_managed_offer_says_so() -> None:
    args = [a if a != "llama-3.1-70b-instruct" else "qwen2.5-7b" for a in HOST_OR_BUY]
    r = _cli(*args, "--limit", "2")
    assert r.returncode == 0, r.stderr
    assert "no token-metered offer is known for Qwen/Qwen2.5-7B-Instruct" in r.stdout
    out = json.loads(_cli(*args, "--limit", "2", "--json").stdout)
    assert out["managed_offers"] == []
    assert out["managed_offers_note"] == "no token-metered offer is known for Qwen/Qwen2.5-7B-Instruct"


def test_compare_managed_without_search_is_refused() -> None:
    r = _cli(
        "plan", "--model", "llama-3.1-70b-instruct", "--max-model-len", "4096", "--gpu", "h100", "--compare-managed"
    )
    assert r.returncode == 2
    assert "--compare-managed applies to --search only" in r.stderr
    r = _cli(*[a for a in HOST_OR_BUY if a != "--compare-managed"], "--mean-arrival-rate", "1")
    assert r.returncode == 2
    assert "--mean-arrival-rate applies to --compare-managed only" in r.stderr
    r = _cli(*HOST_OR_BUY, "--mean-arrival-rate", "3")
    assert r.returncode == 2
    assert "exceeds --arrival-rate" in r.stderr
