"""GPU table lookups and CUDA-reported memory."""

from __future__ import annotations

import pytest

from advisor.capacity.hardware import GIB, get_gpu, gpu_names
from advisor.errors import UnknownGPUError


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("H100", "NVIDIA H100 SXM"),
        ("h100-sxm", "NVIDIA H100 SXM"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
        ("H100-PCIE", "NVIDIA H100 PCIe"),
        ("A100", "NVIDIA A100 SXM 80GB"),
        ("a100-80gb", "NVIDIA A100 SXM 80GB"),
        ("A100-40GB", "NVIDIA A100 SXM 40GB"),
        ("l40s", "NVIDIA L40S"),
        ("L4", "NVIDIA L4"),
        ("A10G", "NVIDIA A10G"),
        ("Tesla T4", "NVIDIA T4"),
        ("t4", "NVIDIA T4"),
        ("H200", "NVIDIA H200 SXM"),
        ("MI300X", "AMD Instinct MI300X"),
        ("RTX4090", "NVIDIA GeForce RTX 4090"),
        ("rtx-3090", "NVIDIA GeForce RTX 3090"),
    ],
)
def test_aliases_resolve_case_insensitively(alias: str, name: str) -> None:
    assert get_gpu(alias).name == name


@pytest.mark.parametrize(
    ("alias", "cuda_gib"),
    # Device totals as CUDA reports them (vLLM's "total_gpu_memory"), from published logs.
    [
        ("h100", 79.15),
        ("a100-40gb", 39.50),
        ("t4", 14.56),
        ("l40s", 44.42),
        ("h200", 139.81),
        ("rtx3090", 23.58),
    ],
)
def test_memory_is_the_cuda_reported_total(alias: str, cuda_gib: float) -> None:
    assert get_gpu(alias).memory_bytes / GIB == pytest.approx(cuda_gib, abs=0.005)


def test_h100_spec_carries_catalog_bandwidth_flops_and_a_source() -> None:
    h100 = get_gpu("h100")
    assert h100.memory_bandwidth_bytes_per_second == pytest.approx(3.35e12)
    assert h100.bf16_flops == pytest.approx(989.5e12)
    assert h100.fp8_flops == pytest.approx(1979e12)
    assert h100.interconnect_bytes_per_second == pytest.approx(900e9)
    assert "nvidia" in h100.source.lower()


def test_every_row_has_a_source_and_a_plausible_cuda_total() -> None:
    for name in gpu_names():
        spec = get_gpu(name)
        assert spec.source.strip(" |")
        assert 10 * GIB < spec.memory_bytes < 300 * GIB


def test_an_unknown_gpu_raises_and_lists_the_known_names() -> None:
    with pytest.raises(UnknownGPUError) as err:
        get_gpu("Voodoo 2")
    assert "h100-sxm" in str(err.value)
    assert "a100-40gb" in str(err.value)


def test_the_gpu_catalog_marks_the_parts_with_nvlink_sharp() -> None:
    """NVLink SHARP needs a third-generation NVSwitch (HGX H100/H200, B200 and later); the PCIe and NVL cards
    and Ampere have none."""
    from tests.inprocess import run_cli

    r = run_cli("catalog", "gpus")
    marked = {line.split()[0] for line in r.stdout.splitlines() if line.endswith("NVLink SHARP")}
    assert marked == {"h100-sxm", "h200", "b200", "gb200", "b300"}
