"""A tensor-parallel group larger than the part's NVLink domain runs its all-reduces across nodes (issue 17: the
roofline priced TP 16 on 8-GPU HGX H200 nodes at the NVLink rate, and every TP 8 → 16 turn with it). Expected
values are hand arithmetic: Llama-3.1-70B has 80 layers and a hidden size of 8,192 (bf16 activations, 2 bytes);
the catalog's H100 SXM has 900 GB/s of NVLink (450 a direction), 8 GPUs a domain and one 400 Gb/s NIC a GPU."""

from __future__ import annotations

import dataclasses
import json

import pytest

from advisor.capacity import perf
from advisor.capacity.hardware import get_gpu, tensor_parallel_nodes
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from tests.inprocess import run_cli

GIB = 2**30
A = perf.PerfAssumptions(allreduce_latency_seconds=10e-6, interconnect_efficiency=0.7)
ALLREDUCES = 2 * 80  # two per layer


def _llama70b(tp: int) -> CapacityInputs:
    return CapacityInputs(
        model=get_preset("meta-llama/Llama-3.1-70B-Instruct"), gpu_memory_bytes=80 * GIB, tensor_parallel_size=tp
    )


def test_the_catalog_gives_the_domain_and_the_nic_of_the_reference_platforms() -> None:
    h100 = get_gpu("h100-sxm")
    assert (h100.scale_up_domain_gpus, h100.scale_out_bytes_per_second) == (8, 50e9)  # 400 Gb/s ÷ 8
    assert get_gpu("a100-80gb").scale_out_bytes_per_second == 25e9  # 200 Gb/s HDR
    assert get_gpu("gb200").scale_up_domain_gpus == 72
    assert get_gpu("l40s").scale_up_domain_gpus is None  # PCIe: not stated, priced as one domain


@pytest.mark.parametrize(("gpu", "tp", "nodes"), [("h100-sxm", 8, 1), ("h100-sxm", 16, 2), ("h100-sxm", 24, 3)])
def test_nodes_are_the_group_over_the_domain_rounded_up(gpu: str, tp: int, nodes: int) -> None:
    assert tensor_parallel_nodes(get_gpu(gpu), tp) == nodes


def test_gb200_nvl72_keeps_tp16_in_one_domain_and_an_unstated_domain_is_unknown() -> None:
    assert tensor_parallel_nodes(get_gpu("gb200"), 16) == 1
    assert tensor_parallel_nodes(get_gpu("l40s"), 16) is None  # PCIe: the catalog states no domain
    assert tensor_parallel_nodes(get_gpu("l40s"), 1) == 1


def test_within_a_node_the_latency_is_the_fitted_one() -> None:
    # TP 8 on H100, no rows: 160 × 10 µs
    assert perf.allreduce_seconds(_llama70b(8), get_gpu("h100-sxm"), 0.0, A) == pytest.approx(ALLREDUCES * 10e-6)


def test_across_two_nodes_each_all_reduce_pays_the_network_latency() -> None:
    # TP 16 on H100 = 2 nodes: 160 × 47 µs = 7.52 ms, where the NVLink pricing said 1.6 ms
    got = perf.allreduce_seconds(_llama70b(16), get_gpu("h100-sxm"), 0.0, A)
    assert got == pytest.approx(ALLREDUCES * 47e-6) == pytest.approx(7.52e-3)


def test_four_nodes_add_one_doubling_of_the_tree() -> None:
    # TP 32 = 4 nodes: 47 + 28 µs
    got = perf.allreduce_seconds(_llama70b(32), get_gpu("h100-sxm"), 0.0, A)
    assert got == pytest.approx(ALLREDUCES * 75e-6)


def test_the_ring_across_nodes_is_bounded_by_the_nics() -> None:
    # 1,000 rows at TP 16: each GPU moves 2 × 15/16 × 1,000 × 8,192 × 2 B = 30,720,000 B; the link is
    # min(450 GB/s NVLink, 8 × 50 GB/s NICs) = 400 GB/s, at 70 %: 109.714 µs, + 47 µs latency, × 160.
    got = perf.allreduce_seconds(_llama70b(16), get_gpu("h100-sxm"), 1000.0, A)
    assert got == pytest.approx(ALLREDUCES * (47e-6 + 30_720_000 / (400e9 * 0.7)), rel=1e-9)


def test_a_fitted_latency_above_the_network_one_is_kept() -> None:
    slow = dataclasses.replace(A, allreduce_latency_seconds=60e-6)
    got = perf.allreduce_seconds(_llama70b(16), get_gpu("h100-sxm"), 0.0, slow)
    assert got == pytest.approx(ALLREDUCES * 60e-6)


def test_the_decode_step_across_nodes_is_slower_by_the_network_terms() -> None:
    # The same group priced as one domain (a part with a 16-GPU domain) against two nodes, batch 1 at 1,000 tokens:
    # the step differs by 160 × ((47 − 10) µs + 30,720 B × (1 ÷ (400 GB/s × 0.7) − 1 ÷ (450 GB/s × 0.7))).
    h100 = get_gpu("h100-sxm")
    one_domain = dataclasses.replace(h100, scale_up_domain_gpus=16)
    inputs = _llama70b(16)
    across = perf.decode_step_seconds(inputs, h100, 1, 1000, A)
    inside = perf.decode_step_seconds(inputs, one_domain, 1, 1000, A)
    expected = ALLREDUCES * (37e-6 + 30_720 * (1 / (400e9 * 0.7) - 1 / (450e9 * 0.7)))
    assert across - inside == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("cell", ["0", "eight", "8.5", "-8"])
def test_a_broken_domain_cell_names_its_row(cell: str) -> None:
    from advisor.capacity.hardware import _domain

    with pytest.raises(ValueError, match=r"gpus.csv row 'h100-sxm': scale_up_domain_gpus"):
        _domain(cell, "h100-sxm")
    assert _domain(" 8 ", "h100-sxm") == 8 and _domain("", "h100-sxm") is None


@pytest.mark.parametrize(
    ("gpu", "tp", "nodes"),
    [
        (("--gpu", "h100-sxm"), "16", 2),
        (("--gpu", "h100-sxm"), "8", 1),
        (("--gpu-memory-gib", "80"), "16", None),
        (("--gpu", "h100-pcie"), "16", None),  # a part whose domain the catalog does not state
    ],
)
def test_plan_says_how_many_nodes_the_group_spans(gpu: tuple[str, str], tp: str, nodes: int | None) -> None:
    """``plan --json`` ``tensor_parallel_nodes``: 2 for TP 16 on 8-GPU H100 nodes (with a note on stderr), 1 inside a
    node, null when no catalog part is named (80 GiB alone is several parts) or its domain is not stated."""
    r = run_cli(
        *("plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", *gpu, "--tp", tp, "--quantization", "fp8"),
        *("--max-model-len", "8192", "--json"),
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tensor_parallel_nodes"] == nodes
    assert ("spans 2 nodes of 8 h100-sxm GPUs" in r.stderr) == (nodes == 2), r.stderr
