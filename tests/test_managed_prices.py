"""Managed platforms' own instance prices (issue 18, point 2): ``advisor/data/managed_instances.csv``.

Expected prices are copied by hand from the cited file, never from the advisor:

* SageMaker — https://github.com/aws-samples/foundation-model-benchmarking-tool/blob/
  d8814208fb3a9b6f0aa7e986e868ea3759d801ce/fmbench/configs/pricing.yml (committed 2025-01-26), the lines
  ``ml.g5.xlarge: 1.4084``, ``ml.p4d.24xlarge: 37.688``, ``ml.g6.12xlarge: 5.752``, ``ml.g6.24xlarge: 8.344``,
  ``ml.g5.2xlarge: 1.515``, ``ml.g5.4xlarge: 2.03``, ``ml.g5.8xlarge: 3.06``.
* The raw EC2 prices they differ from — ``advisor/data/instances.csv`` (karpenter-provider-aws
  ``zz_generated.pricing_aws.go`` @ 6fc13b5, us-east-1): g5.xlarge 1.006, p4d.24xlarge 21.957642, g6.12xlarge
  4.6016.

The table is read here with :mod:`csv` itself for the structural checks, so that a loader bug cannot hide a row.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from advisor.capacity.managed import cheapest_managed, managed_instances, parse_managed_instances
from advisor.errors import CapacityError
from advisor.platforms import platform_flag
from tests.inprocess import run_cli

DATA = Path(__file__).resolve().parent.parent / "advisor" / "data"
FMBENCH = "foundation-model-benchmarking-tool/blob/d8814208fb3a9b6f0aa7e986e868ea3759d801ce/fmbench/configs/pricing.yml"
HEADER = "platform,instance_type,raw_instance,price_usd_per_hour,region,price_as_of,price_source,notes\n"


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_every_row_is_sourced_dated_and_runs_on_a_catalogued_instance() -> None:
    rows = _rows("managed_instances.csv")
    raw = {r["instance_type"]: r for r in _rows("instances.csv")}
    assert rows, "the table is empty"
    for r in rows:
        assert r["platform"] in {"sagemaker", "vertex", "azure-ml"}, r
        assert r["price_source"].startswith("https://github.com/") or r["price_source"].startswith("https://"), r
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", r["price_as_of"]), r
        assert r["region"], r
        assert r["raw_instance"] in raw, f"{r['instance_type']}: raw instance {r['raw_instance']} not in instances.csv"
        assert float(r["price_usd_per_hour"]) > 0, r
        # one fact in one place: the GPUs come from instances.csv, the table has no GPU column
        assert "gpu_count" not in r and "gpu_key" not in r


@pytest.mark.parametrize(
    ("name", "managed", "raw_name", "vm"),
    [
        ("ml.g5.xlarge", 1.4084, "g5.xlarge", 1.006),  # pricing.yml @ d881420 vs karpenter @ 6fc13b5
        ("ml.p4d.24xlarge", 37.688, "p4d.24xlarge", 21.957642),
    ],
)
def test_a_managed_price_is_the_platforms_not_the_vms(name: str, managed: float, raw_name: str, vm: float) -> None:
    row = next(r for r in managed_instances("sagemaker") if r.name == name)
    assert row.price_usd_per_hour == managed and FMBENCH in row.price_source and row.price_as_of == "2025-01-26"
    assert row.raw.name == raw_name and row.raw.price_usd_per_hour == vm  # the VM underneath keeps its own price
    assert row.price_usd_per_hour != row.raw.price_usd_per_hour
    assert row.as_instance().price_usd_per_hour == managed and row.as_instance().name == name


def test_the_cheapest_sourced_instance_with_those_gpus() -> None:
    # 1 × A10G: ml.g5.xlarge 1.4084 < ml.g5.2xlarge 1.515 < 4xlarge 2.03 < 8xlarge 3.06 (pricing.yml)
    one = cheapest_managed("sagemaker", gpu_count=1, gpu_key="a10g")
    assert one is not None and one.name == "ml.g5.xlarge"
    # 4 × L4: ml.g6.12xlarge 5.752 < ml.g6.24xlarge 8.344
    four = cheapest_managed("sagemaker", gpu_count=4, gpu_key="l4")
    assert four is not None and (four.name, four.price_usd_per_hour) == ("ml.g6.12xlarge", 5.752)
    # no sourced ml.* with one H100; none at all for Vertex and Azure ML: unknown, not a VM price
    assert cheapest_managed("sagemaker", gpu_count=1, gpu_key="h100-sxm") is None
    assert cheapest_managed("vertex", gpu_count=1) is None and cheapest_managed("azure-ml") is None
    with pytest.raises(CapacityError, match="platform 'kubernetes'"):
        managed_instances("kubernetes")


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("bedrock,x,g5.xlarge,1,us-east-1,2025-01-26,https://a.example/p,", "platform"),
        ("sagemaker,ml.x,no-such-vm,1,us-east-1,2025-01-26,https://a.example/p,", "raw_instance"),
        ("sagemaker,ml.x,g5.xlarge,0,us-east-1,2025-01-26,https://a.example/p,", "price_usd_per_hour"),
        ("sagemaker,ml.x,g5.xlarge,cheap,us-east-1,2025-01-26,https://a.example/p,", "price_usd_per_hour"),
        ("sagemaker,ml.x,g5.xlarge,1,us-east-1,,https://a.example/p,", "price_as_of"),
        ("sagemaker,ml.x,g5.xlarge,1,us-east-1,2025-01-26,,", "price_source"),
        ("sagemaker,ml.x,g5.xlarge,1,,2025-01-26,https://a.example/p,", "region"),
        ("sagemaker,,g5.xlarge,1,us-east-1,2025-01-26,https://a.example/p,", "instance_type"),
    ],
)
def test_bad_rows_are_refused_naming_the_field(row: str, field: str) -> None:
    with pytest.raises(CapacityError, match=rf"line 2: {field} "):
        parse_managed_instances(HEADER + row + "\n")


def test_an_unpriced_row_stays_unknown() -> None:
    (row,) = parse_managed_instances(HEADER + "vertex,a2-highgpu-1g,a2-highgpu-1g,,,,,not sourced\n")
    assert row.price_usd_per_hour is None and row.whole_gpus == 1  # the GPUs still come from instances.csv


def test_the_instance_turn_names_the_ml_instance_at_its_own_price() -> None:
    flag, reason = platform_flag("sagemaker", "vllm", "instance_type", "A10G", "move to an instance with A10G GPUs")
    assert reason is None and flag is not None
    assert "InstanceType=ml.g5.xlarge" in flag and "1.4084 USD/h" in flag and FMBENCH in flag, flag
    assert "1.006" not in flag  # never the EC2 price
    # a replica of 4 GPUs (once: gpus_per_replica) needs an instance with 4: ml.g6.12xlarge 5.752, not ml.g6.2xlarge
    flag, _ = platform_flag("sagemaker", "vllm", "instance_type", "L4", "move to L4", gpu_count=4)
    assert flag is not None and "InstanceType=ml.g6.12xlarge" in flag and "5.752 USD/h" in flag, flag
    flag, _ = platform_flag("vertex", "vllm", "instance_type", "L4", "move to an instance with L4 GPUs")
    assert flag is not None and "price unknown" in flag and "machineType" in flag, flag


PLAN = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "4096", "--json"]


def _instance_row(*args: str) -> dict[str, object]:
    proc = run_cli(*PLAN, *args)
    assert proc.returncode == 0, proc.stderr
    rows = {r["dial"]: r for r in json.loads(proc.stdout)["platform"]["settings"]}
    row: dict[str, object] = rows["instance_type"]
    return row


def test_plan_on_sagemaker_names_the_ml_instance_with_its_price_and_source() -> None:
    row = _instance_row("--gpu", "L4", "--tp", "4", "--platform", "sagemaker")
    assert row["instance"] == "ml.g6.12xlarge" and row["price_usd_per_hour"] == 5.752, row
    assert row["price_region"] == "us-east-1" and row["price_as_of"] == "2025-01-26"
    assert FMBENCH in str(row["price_source"]) and "InstanceType=ml.g6.12xlarge" in str(row["flag"])
    text = run_cli(*PLAN[:-1], "--gpu", "A10G", "--platform", "sagemaker").stdout
    assert "InstanceType=ml.g5.xlarge" in text and "1.4084 USD/h" in text, text


@pytest.mark.parametrize(
    "args",
    [("--gpu", "H100-SXM", "--platform", "sagemaker"), ("--gpu", "L4", "--platform", "vertex")],
)
def test_plan_with_no_sourced_price_says_unknown(args: tuple[str, ...]) -> None:
    row = _instance_row(*args)
    assert row["instance"] is None and row["price_usd_per_hour"] is None, row  # unknown: null, never 0
    assert "price unknown" in str(row["flag"]), row


SEARCH = ["plan", "--search", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--arrival-rate", "2"]
SEARCH += ["--prompt-tokens", "1500", "--output-tokens", "300", "--ttft", "2", "--tpot", "0.05", "--limit", "5"]


def test_search_on_sagemaker_prices_only_ml_instances_at_their_own_price() -> None:
    proc = run_cli(*SEARCH, "--platform", "sagemaker", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    price = {r["instance_type"]: float(r["price_usd_per_hour"]) for r in _rows("managed_instances.csv")}
    assert out["platform"] == "sagemaker" and out["feasible"], out
    for cand in out["feasible"]:
        assert cand["instance_type"] in price, cand["instance_type"]
        assert cand["hourly_cost_usd"] == pytest.approx(cand["instances"] * price[cand["instance_type"]], abs=1e-4)
    proc = run_cli(*SEARCH, "--platform", "vertex")
    assert proc.returncode == 2 and "unknown" in proc.stderr and "vertex" in proc.stderr, proc.stderr
