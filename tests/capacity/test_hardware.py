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
        assert 5 * GIB < spec.memory_bytes < 300 * GIB  # an RTX 2060 has 6 GB, a B300 288 GB


@pytest.mark.parametrize(
    ("alias", "capability"),
    # NVIDIA's table, https://developer.nvidia.com/cuda-gpus (H20 and L20, not listed: Hopper's and Ada's)
    [
        ("t4", (7, 5)),
        ("rtx2060", (7, 5)),
        ("Tesla V100-SXM2-32GB", (7, 0)),
        ("v100-pcie-16gb", (7, 0)),
        ("gtx1080", (6, 1)),
        ("GTX 1080 Ti", (6, 1)),
        ("a100", (8, 0)),
        ("a10", (8, 6)),
        ("a10g", (8, 6)),
        ("rtx3090", (8, 6)),
        ("RTX A6000", (8, 6)),
        ("l4", (8, 9)),
        ("l40s", (8, 9)),
        ("rtx4090", (8, 9)),
        ("rtx6000-ada", (8, 9)),
        ("l20", (8, 9)),
        ("h100", (9, 0)),
        ("h200", (9, 0)),
        ("h20", (9, 0)),
        ("gh200-96gb-hbm3", (9, 0)),
        ("b200", (10, 0)),
        ("gb200", (10, 0)),
        ("b300", (10, 3)),
        ("rtx-pro-6000-blackwell", (12, 0)),
        # not CUDA devices: no compute capability
        ("mi300x", None),
        ("tpu-v5e", None),
        ("inferentia2", None),
    ],
)
def test_each_part_carries_its_cuda_compute_capability(alias: str, capability: tuple[int, int] | None) -> None:
    assert get_gpu(alias).compute_capability == capability


def test_every_nvidia_row_has_a_compute_capability_and_no_other_row_has_one() -> None:
    for name in gpu_names():
        spec = get_gpu(name)
        assert (spec.compute_capability is not None) == spec.vendor.startswith("NVIDIA"), spec.key


@pytest.mark.parametrize(
    ("alias", "key", "marketed_gb"),
    [
        ("RTX 2060", "rtx2060", 6),
        ("rtx2060-12gb", "rtx2060-12gb", 12),
        ("GTX 1080", "gtx1080", 8),
        ("NVIDIA GeForce GTX 1080 Ti", "gtx1080ti", 11),
        ("V100", "v100-16gb", 16),
        ("Tesla V100-SXM2-16GB", "v100-16gb", 16),
        ("Tesla V100-PCIE-32GB", "v100-32gb", 32),
        ("NVIDIA RTX A6000", "rtx-a6000", 48),
        ("NVIDIA L20", "l20", 48),
    ],
)
def test_the_added_parts_resolve_by_their_nvidia_smi_names(alias: str, key: str, marketed_gb: int) -> None:
    """One key per memory size (SXM2 and PCIe V100s are aliases); the CUDA total is below the marketed size
    (decimal GB) and within 10 % of it: the catalog's rule when no log shows the total."""
    spec = get_gpu(alias)
    assert spec.key == key
    assert 0.9 * marketed_gb * 1e9 < spec.memory_bytes < marketed_gb * 1e9
    assert "http" in spec.source


@pytest.mark.parametrize("alias", ["H20", "NVIDIA H20", "h20"])
def test_the_h20_cuda_total_is_the_published_one(alias: str) -> None:
    """PyTorch's out-of-memory message on an "H20 96G" prints the CUDA total: "GPU has a total capacity of 95.00
    GiB" (github.com/modelscope/DiffSynth-Studio/issues/1238); nvidia-smi lists H20 boards at 97871MiB. The
    catalog's rule for parts without a log (decimal 96 GB − 0.5 GiB = 88.91 GiB) sized it 6 GiB short, and SGLang's
    DeepSeek-R1 TP 16 pool on 2 × 8 H20 (712,400 tokens) came out 10 % low."""
    spec = get_gpu(alias)
    assert spec.key == "h20"
    assert round(spec.memory_bytes / 2**30, 2) == 95.00


def test_the_l20_is_sized_as_the_l40s_it_shares_its_48_gb_with() -> None:
    assert get_gpu("l20").memory_bytes == get_gpu("l40s").memory_bytes


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
