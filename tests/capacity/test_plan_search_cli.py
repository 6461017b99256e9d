"""``capacity-advisor plan --search`` as an operator runs it (through the CLI's entry point,
:func:`tests.inprocess.run_cli`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

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
