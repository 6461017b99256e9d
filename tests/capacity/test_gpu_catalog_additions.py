"""GPUs added to ``advisor/data/gpus.csv`` so that the names operators' vLLM logs and nvidia-smi print resolve.

Each CUDA total below is the one the row cites (``cuda_memory_notes``): a PyTorch out-of-memory message, a CUDA
deviceQuery (``totalGlobalMem``, bytes ÷ 2³⁰) or a vLLM worker's message; "derived" rows are checked against the part
they copy.
"""

from __future__ import annotations

import pytest

from advisor.capacity.hardware import GIB, get_gpu
from advisor.errors import UnknownGPUError


@pytest.mark.parametrize(
    ("name", "key", "cuda_gib", "capability"),
    [
        # CUDA deviceQuery 47608692736 bytes, ECC on (thamada/nvidia-smi nvsim/A40x10_deviceQuery.py)
        ("NVIDIA A40", "a40", 44.34, (8, 6)),
        # PyTorch OOM "total capacty of 23.53 GiB" on an A30 (google/RB-Modulation#5)
        ("NVIDIA A30", "a30", 23.53, (8, 0)),
        # PyTorch OOM "total capacty of 79.33 GiB" on an A800-80G (hahnyuan/PB-LLM#3)
        ("NVIDIA A800-SXM4-80GB", "a800-80gb", 79.33, (8, 0)),
        ("NVIDIA A800 80GB PCIe", "a800-pcie-80gb", 79.33, (8, 0)),
        # PyTorch OOM "11.76 GiB total capacity" on an RTX 3060 12GB (TencentARC/PhotoMaker#47)
        ("NVIDIA GeForce RTX 3060", "rtx3060", 11.76, (8, 6)),
        # PyTorch OOM "9.78 GiB total capacity" on an RTX 3080 (zai-org/CogVideo#34)
        ("NVIDIA GeForce RTX 3080", "rtx3080", 9.78, (8, 6)),
        # PyTorch OOM "10.76 GiB total capacity" on an RTX 2080 Ti (JDAI-CV/image-captioning#11)
        ("NVIDIA GeForce RTX 2080 Ti", "rtx2080ti", 10.76, (7, 5)),
        ("GeForce RTX 2080 Ti", "rtx2080ti", 10.76, (7, 5)),  # older drivers print no "NVIDIA "
        # PyTorch OOM "23.68 GiB" with nvidia-smi listing NVIDIA RTX A5000 (zai-org/GLM-4#730)
        ("NVIDIA RTX A5000", "rtx-a5000", 23.68, (8, 6)),
        # PyTorch OOM "total capacity of 15.61 GiB" on an RTX A4000 (DengKaiCQ/VGGT-Long#6)
        ("NVIDIA RTX A4000", "rtx-a4000", 15.61, (8, 6)),
        # CUDA deviceQuery 21125267456 bytes (thamada/nvidia-smi nvsim/RTX4000Ada_deviceQuery.py)
        ("NVIDIA RTX 4000 Ada Generation", "rtx4000-ada", 19.67, (8, 9)),
        # PyTorch OOM "total capacity of 47.45 GiB" on 4x RTX8000 (SkyworkAI/SkyReels-V1#78)
        ("Quadro RTX 8000", "quadro-rtx8000", 47.45, (7, 5)),
        # vLLM worker OOM "total capacity of 15.48 GiB" on 8x RTX 5080 (vllm-project/vllm#14452)
        ("NVIDIA GeForce RTX 5080", "rtx5080", 15.48, (12, 0)),
        # CUDA deviceQuery 16857038848 bytes on a 16 GB 4060 Ti (thamada/nvidia-smi package/RTX4060Ti_deviceQuery.py)
        ("rtx4060ti-16gb", "rtx4060ti-16gb", 15.70, (8, 9)),
    ],
)
def test_the_added_parts_resolve_with_their_cited_cuda_total_and_capability(
    name: str, key: str, cuda_gib: float, capability: tuple[int, int]
) -> None:
    spec = get_gpu(name)
    assert spec.key == key
    assert spec.memory_bytes / GIB == pytest.approx(cuda_gib, abs=0.005)
    assert spec.compute_capability == capability
    assert "http" in spec.source


@pytest.mark.parametrize(
    ("name", "same_as"),
    # no log shows these totals: each copies the part whose memory it shares (cuda_memory_notes says "derived")
    [
        ("NVIDIA H800", "h100-sxm"),
        ("NVIDIA H800 PCIe", "h100-pcie"),
        ("NVIDIA GeForce RTX 3080 Ti", "rtx3060"),
        ("NVIDIA GeForce RTX 4080", "rtx4060ti-16gb"),
        ("NVIDIA GeForce RTX 4080 SUPER", "rtx4060ti-16gb"),
        ("NVIDIA GeForce RTX 4070 Ti SUPER", "rtx4060ti-16gb"),
    ],
)
def test_the_derived_totals_copy_the_part_they_name(name: str, same_as: str) -> None:
    assert get_gpu(name).memory_bytes == get_gpu(same_as).memory_bytes


def test_the_h800_carries_the_capped_nvlink_and_an_eight_gpu_domain() -> None:
    h800 = get_gpu("NVIDIA H800")
    assert h800.key == "h800"
    assert h800.compute_capability == (9, 0)
    assert h800.interconnect_bytes_per_second == pytest.approx(400e9)  # H100 SXM: 900 GB/s
    assert h800.bf16_flops == pytest.approx(989.5e12)
    assert h800.scale_up_domain_gpus == 8
    assert not h800.nvlink_sharp  # NVLS on HGX H800 not verified


def test_a800_alone_means_the_sxm_part() -> None:
    assert get_gpu("A800").key == "a800-80gb"


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA GH200 480GB", "gh200-96gb-hbm3"),  # 96 GB HBM3 on the GPU, 480 GB LPDDR5X on Grace
        ("NVIDIA GH200 144G HBM3e", "gh200-hbm3e"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-blackwell"),
    ],
)
def test_nvidia_smi_names_of_existing_parts_resolve(name: str, key: str) -> None:
    assert get_gpu(name).key == key


def test_the_bare_rtx_4060_ti_name_is_refused_because_8_and_16_gb_cards_share_it() -> None:
    """Both 4060 Ti cards print "NVIDIA GeForce RTX 4060 Ti"; resolving it to the 16 GB row would size an 8 GB card at
    15.7 GiB, so the lookup fails and suggests the 16 GB key."""
    with pytest.raises(UnknownGPUError, match="rtx4060ti-16gb"):
        get_gpu("NVIDIA GeForce RTX 4060 Ti")


@pytest.mark.parametrize(
    ("key", "bf16_tflops", "fp8_tflops", "bandwidth_tbps", "cuda_gib"),
    [
        # NVIDIA's H100 table (H100 NVL column): BF16 1,671 / FP8 3,341 teraFLOPS with sparsity, 3.9 TB/s, 94 GB
        ("h100-nvl", 835.5, 1670.5, 3.9, 92.60),
        # NVIDIA's H200 table (H200 NVL column): the same tensor rates, 4.8 TB/s (CUDA total: the derived floor)
        ("h200-nvl", 835.5, 1670.5, 4.8, 130.82),
        # the RTX A4000 datasheet's 153.4 TFLOPS tensor performance, with sparsity: 76.7 dense; Ampere has no FP8
        ("rtx-a4000", 76.7, None, 0.448, 15.61),
    ],
)
def test_parts_operators_run_carry_their_published_rates(
    key: str, bf16_tflops: float, fp8_tflops: float | None, bandwidth_tbps: float, cuda_gib: float
) -> None:
    """Walkthrough (2026-12-07): ``plan --search``, ``simulate`` and ``plan`` under load failed on the H100 NVL, the
    H200 NVL and the RTX A4000 ("no published dense BF16/FP16 tensor rate"), and the H200 NVL's bandwidth was
    unknown. Each row's figures are the vendor's dense rates (half the tables' with-sparsity figures)."""
    gpu = get_gpu(key)
    assert gpu.bf16_flops == pytest.approx(bf16_tflops * 1e12)
    assert gpu.fp8_flops == (None if fp8_tflops is None else pytest.approx(fp8_tflops * 1e12))
    assert gpu.memory_bandwidth_bytes_per_second == pytest.approx(bandwidth_tbps * 1e12)
    assert gpu.memory_bytes / GIB == pytest.approx(cuda_gib, abs=0.005)


@pytest.mark.parametrize(
    ("key", "bf16_tflops", "fp8_tflops"),
    [
        ("rtx5090", 209.5, 419.0),  # RTX Blackwell whitepaper Table 3: BF16 209.5/419, FP8 419/838 (FP32 accumulate)
        ("rtx4080", 97.5, 195.0),  # Ada whitepaper: 97.5 with FP32 accumulate (195 with FP16 accumulate)
        ("rtx-a6000", 154.8, None),  # GA102 whitepaper Table 3: BF16 with FP32 accumulate 154.8/309.6
        ("rtx-a5000", 111.1, None),  # datasheet "Tensor Performance 222.2 TFLOPS", with sparsity
        ("a30", 165.0, None),  # A30 datasheet, dense
        ("h800-pcie", 756.5, 1513.0),  # the H100 PCIe's GH100 compute: 1,513 / 3,026 with sparsity
        ("l20", 119.5, 239.0),
    ],
)
def test_tensor_rates_are_dense_and_at_the_accumulate_vllm_runs(
    key: str, bf16_tflops: float, fp8_tflops: float | None
) -> None:
    """Walkthrough (2026-12-07): 19 catalog parts had no tensor rate, so ``plan --search`` and ``simulate`` could not
    time them. Each added figure is the dense rate (no 2:4 sparsity) with FP32 accumulate — what vLLM's BF16 and FP8
    GEMMs run; a GeForce card runs it at half its FP16-accumulate headline (the 4090's 165.2, not 330.3)."""
    gpu = get_gpu(key)
    assert gpu.bf16_flops == pytest.approx(bf16_tflops * 1e12)
    assert gpu.fp8_flops == (None if fp8_tflops is None else pytest.approx(fp8_tflops * 1e12))
