"""Issue 19, "``plan`` says no when the engine would say no", for ``plan --search``: a search that finds no
feasible configuration exits 3 (as plain ``plan``'s refusal does) in every mode — priced clouds, ``--own``,
``--compare-managed`` and ``--json`` — and its JSON says why (``feasible: []`` with ``reason``). Seen: ``plan
--search --own L40S:4 …`` printed "no feasible configuration" and exited 0, a script could not tell; its rejected
rows said "owned (L40S) TP2 … (owned)".

Why nothing is feasible here, by hand: at TPOT ≤ 5 ms a decode step must read every weight of the replica within
5 ms. Llama-3.1-70B at 4 bits (AWQ, the smallest weights searched) is ≈ 70.55e9 × 0.5 B ≈ 35 GB. An L4 reads 300
GB/s (https://www.nvidia.com/en-us/data-center/l4/), so even 8 of them (AWS's largest L4 instance, g6.48xlarge)
need 35 / 8 / 300 ≈ 14.7 ms a step; 4 L40S at 864 GB/s (https://www.nvidia.com/en-us/data-center/l40s/) need
35 / 4 / 864 ≈ 10.1 ms. Both ≫ 5 ms.
"""

from __future__ import annotations

import json

import pytest

from tests.inprocess import run_cli

NONE_FITS = [
    "plan",
    "--search",
    "--model",
    "meta-llama/Llama-3.1-70B-Instruct",
    "--arrival-rate",
    "5",
    "--prompt-tokens",
    "1000",
    "--output-tokens",
    "200",
    "--ttft",
    "1",
    "--tpot",
    "0.005",
]

MODES = [
    pytest.param(["--cloud", "aws", "--gpu", "L4"], id="cloud"),
    pytest.param(["--gpu", "L4"], id="all-clouds"),
    pytest.param(["--own", "L40S:4"], id="own"),
    pytest.param(["--cloud", "aws", "--gpu", "L4", "--compare-managed"], id="compare-managed"),
]


@pytest.mark.parametrize("mode", MODES)
def test_a_search_with_nothing_feasible_exits_3_and_says_why(mode: list[str]) -> None:
    r = run_cli(*NONE_FITS, *mode)
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "no feasible configuration: of " in r.stdout


@pytest.mark.parametrize("mode", MODES)
def test_its_json_says_feasible_none_with_the_reason(mode: list[str]) -> None:
    r = run_cli(*NONE_FITS, *mode, "--json")
    assert r.returncode == 3, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    assert out["feasible"] == []
    assert out["reason"].startswith("no feasible configuration: of ")
    assert f"of {out['configurations']} searched" in out["reason"]
    assert "rejected" in out and "evaluated" in out  # the keys that were there stay


def test_a_search_that_finds_one_exits_0_with_no_reason() -> None:
    r = run_cli(*NONE_FITS[:-1], "0.05", "--own", "H100-SXM:8", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] and out["reason"] is None


def test_an_owned_rejection_says_owned_once() -> None:
    r = run_cli(*NONE_FITS, "--own", "L40S:4")
    rows = [line for line in r.stdout.splitlines() if line.startswith("  ") and " TP" in line]
    assert rows, r.stdout
    for row in rows:
        assert row.count("owned") == 1, row
        assert row.startswith("  owned L40S TP"), row


def test_a_rejected_rows_reason_is_the_problem_without_a_fixed_remedy() -> None:
    """Seen beside an AWQ row: "… may be used; raise tensor_parallel_size, quantize, or use a larger GPU" — the
    search explores TP, weights and GPUs itself, and the row is already quantized. AWQ 70B on one L4 is ≈ 35 GB of
    4-bit weights > 0.9 × 24 GB: that row cannot run."""
    out = json.loads(run_cli(*NONE_FITS, "--cloud", "aws", "--gpu", "L4", "--json").stdout)
    weights = [r for r in out["rejected"] if r["stage"] == "weights"]
    assert weights, out["rejected"]
    for row in weights:
        assert row["reason"].endswith("may be used"), row["reason"]


def test_a_gpu_the_catalog_cannot_time_is_named_as_the_reason() -> None:
    """Walkthrough (2026-12-07): ``plan --search`` for an 8B model on two owned H100 NVL (94 GB each) said "32 cannot
    run (weights, KV pool, context or GPU features)" — the model fits many times over; the catalog had no published
    tensor rate for the part, so no configuration could be timed. The line names the part and the count (AWS's
    A10G, 24 GB, still has no sourced tensor rate); the H100 NVL now has NVIDIA's (835.5 dense BF16 TFLOPS, half
    the table's 1,671 with sparsity) and is timed; a part the catalog can time names none."""
    common = "plan --search --model meta-llama/Llama-3.1-8B-Instruct --arrival-rate 2 --prompt-tokens 1000 "
    common += "--output-tokens 200 --ttft 2.5 --tpot 0.05"
    r = run_cli(*common.split(), "--own", "a10g:2")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert "no published compute or bandwidth figure to time them on: NVIDIA A10G 32" in r.stdout
    out = json.loads(run_cli(*common.split(), "--own", "a10g:2", "--json").stdout)
    assert "NVIDIA A10G 32" in out["reason"]
    for part in ("h100-nvl:2", "h200-nvl:2", "rtx-a6000:2", "L4:2"):
        r = run_cli(*common.split(), "--own", part)
        assert r.returncode == 0, (part, r.stdout, r.stderr)
        assert "no published compute" not in r.stdout
