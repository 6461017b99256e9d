"""Accelerator specs from ``advisor/data/gpus.csv``.

The table carries every row of the shared hardware catalog (``catalog/gpus.csv``, compiled August 2026;
each row's ``source_urls`` names where every figure was checked, dense tensor rates, decimal TB/s
bandwidth) plus three columns of ours:

* ``key`` and ``aliases``: lookup names (``h100``, ``h100-sxm``, ``a100-40gb``, ``rtx3090`` …).
* ``cuda_memory_gib``: the device total **as CUDA reports it** (``torch.cuda.mem_get_info()[1]``, which
  vLLM prints as ``total_gpu_memory``). This is what ``--gpu-memory-utilization`` multiplies, and it is a
  little below the marketed size (H100 80GB → 79.15 GiB, A100 40GB → 39.50 GiB, T4 → 14.56 GiB).
  ``cuda_memory_notes`` says per row whether it was *observed* in a vLLM log or *derived* (and how).
* one added row, the RTX 3090, which the catalog lacks (GA102 whitepaper; flagged in its notes).
* rows for parts operators run that the shared catalog lacks (issue 16): H20, RTX 2060 (6 and 12 GB), GTX 1080
  and 1080 Ti, V100 16GB and 32GB (one key per memory size; SXM2/PCIe as aliases), RTX A6000, L20, each with
  its sources in ``source_urls`` and its CUDA total derived by the catalog's rule where no log shows it.
* ``compute_capability``: the CUDA compute capability of every NVIDIA row (``7.5`` T4, ``8.0`` A100, ``9.0``
  H100, ``10.3`` B300, ``12.0`` RTX PRO 6000 Blackwell …) from NVIDIA's table, https://developer.nvidia.com/cuda-gpus
  (the China-market H20 and L20 are not listed there: their architecture's, Hopper 9.0 and Ada 8.9); empty for
  AMD, TPU and AWS parts, which are not CUDA devices. vLLM 0.8–0.10.1 chooses its engine generation by it
  (:mod:`advisor.capacity.generation`).

Units in :class:`GPUSpec` are base units: bytes, bytes per second, FLOP/s.
"""

from __future__ import annotations

import csv
import difflib
import io
from dataclasses import dataclass
from functools import cache
from typing import Final

from advisor.capacity.data import read_data
from advisor.errors import UnknownGPUError

__all__ = [
    "GIB",
    "GPUSpec",
    "get_gpu",
    "gpu_for_memory",
    "gpu_generation",
    "gpu_names",
    "identify_gpu",
    "is_alias",
]

GIB: Final = 1 << 30
"""Bytes in one GiB (2³⁰); vLLM's logs print GiB."""


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator.

    Attributes:
        name: the catalog name (``NVIDIA H100 SXM``).
        memory_bytes: device total as CUDA reports it, bytes (``cuda_memory_gib`` × 2³⁰).
        memory_bandwidth_bytes_per_second: peak memory bandwidth, bytes/s (catalog TB/s × 10¹²).
        bf16_flops: dense BF16/FP16 tensor peak, FLOP/s (no 2:4 sparsity), or ``None`` when unpublished.
        fp8_flops: dense FP8 tensor peak, FLOP/s, or ``None`` (no FP8 on the part, or unpublished).
        fp4_flops: dense FP4 tensor peak, FLOP/s (the catalog's ``fp4_dense_tflops``: Blackwell B200/GB200,
            RTX PRO 6000 Blackwell, MI355X), or ``None`` (no FP4 tensor cores, or unpublished).
        interconnect_bytes_per_second: vendor's bidirectional per-GPU GPU-to-GPU figure (NVLink, Infinity
            Fabric), bytes/s, or ``None`` (PCIe-only parts without a stated figure).
        source: the row's source URLs and, after `` | ``, how ``memory_bytes`` was obtained.
        key: the short lookup name (``h100-sxm``).
        nvlink_sharp: the part sits behind an NVSwitch with NVLink SHARP (H100/H200 SXM, B200, GB200, B300),
            so NCCL's NVLS algorithm, and its buffers, are used on more than two GPUs.
        compute_capability: CUDA compute capability ``(major, minor)`` (``(7, 5)`` for a T4), or ``None`` for a
            part that is not a CUDA device (AMD, TPU, Inferentia/Trainium).
        vendor: the catalog's vendor (``NVIDIA``, ``AMD``, ``Google``, ``AWS``).
        scale_up_domain_gpus: GPUs one NVLink/NVSwitch or Infinity Fabric domain joins in the part's reference
            platform (8 on HGX/DGX and MI300X platforms, 72 on GB200 NVL72), or ``None`` when the catalog does not
            say (PCIe parts; a tensor-parallel group is then priced as one domain). A larger TP group spans
            nodes (:func:`tensor_parallel_nodes`) and its all-reduces cross the network
            (:func:`advisor.capacity.perf.allreduce_seconds`).
        scale_out_bytes_per_second: the reference design's network bandwidth per GPU and direction, bytes/s
            (one 400 Gb/s ConnectX-7 per GPU on HGX H100/H200/B200: 50 × 10⁹), or ``None`` when unsourced.
    """

    name: str
    memory_bytes: int
    memory_bandwidth_bytes_per_second: float
    bf16_flops: float | None
    fp8_flops: float | None
    interconnect_bytes_per_second: float | None
    source: str
    key: str = ""
    nvlink_sharp: bool = False
    compute_capability: tuple[int, int] | None = None
    vendor: str = ""
    fp4_flops: float | None = None
    scale_up_domain_gpus: int | None = None
    scale_out_bytes_per_second: float | None = None

    @property
    def memory_gib(self) -> float:
        """``memory_bytes`` in GiB, as vLLM prints ``total_gpu_memory``."""
        return self.memory_bytes / GIB


def _norm(name: str) -> str:
    n = name.strip().lower()
    for prefix in ("nvidia ", "amd instinct ", "amd ", "geforce ", "tesla "):
        n = n.removeprefix(prefix)
    return "".join(ch for ch in n if ch.isalnum())


def _opt(cell: str, scale: float) -> float | None:
    cell = cell.strip()
    return float(cell) * scale if cell else None


def _capability(cell: str, key: str) -> tuple[int, int] | None:
    """A ``compute_capability`` cell: ``"8.9"`` → ``(8, 9)``, empty → ``None`` (not a CUDA device).

    Raises:
        ValueError: a cell that is not ``major.minor`` (a broken catalog row, named by its key).
    """
    cell = cell.strip()
    if not cell:
        return None
    major, dot, minor = cell.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise ValueError(f"gpus.csv row {key!r}: compute_capability {cell!r} is not major.minor")
    return int(major), int(minor)


def _domain(cell: str, key: str) -> int | None:
    """A ``scale_up_domain_gpus`` cell: ``"8"`` → 8, empty → ``None`` (not stated).

    Raises:
        ValueError: a cell that is not a whole number ≥ 1 (a broken catalog row, named by its key).
    """
    cell = cell.strip()
    if not cell:
        return None
    if not cell.isdigit() or int(cell) < 1:
        raise ValueError(f"gpus.csv row {key!r}: scale_up_domain_gpus {cell!r} is not a whole number of GPUs ≥ 1")
    return int(cell)


@cache
def _table() -> tuple[dict[str, GPUSpec], dict[str, str]]:
    text = read_data("gpus.csv")
    specs: dict[str, GPUSpec] = {}
    lookup: dict[str, str] = {}
    for row in csv.DictReader(io.StringIO(text)):
        bandwidth = _opt(row["memory_bw_tbps"], 1e12)
        spec = GPUSpec(
            name=row["name"],
            memory_bytes=round(float(row["cuda_memory_gib"]) * GIB),
            memory_bandwidth_bytes_per_second=bandwidth if bandwidth is not None else float("nan"),
            bf16_flops=_opt(row["bf16_fp16_dense_tflops"], 1e12),
            fp8_flops=_opt(row["fp8_dense_tflops"], 1e12),
            interconnect_bytes_per_second=_opt(row["interconnect_gbps_per_gpu"], 1e9),
            source=f"{row['source_urls']} | memory: {row['cuda_memory_notes']}",
            key=row["key"],
            nvlink_sharp=row["nvlink_sharp"].startswith("yes"),
            compute_capability=_capability(row["compute_capability"], row["key"]),
            vendor=row["vendor"],
            fp4_flops=_opt(row["fp4_dense_tflops"], 1e12),
            scale_up_domain_gpus=_domain(row["scale_up_domain_gpus"], row["key"]),
            scale_out_bytes_per_second=_opt(row["scale_out_gbps_per_gpu"], 1e9 / 8),  # Gb/s per direction
        )
        specs[spec.name] = spec
        for alias in [row["key"], row["name"], *row["aliases"].split(";")]:
            if alias.strip():
                lookup[_norm(alias)] = spec.name
    return specs, lookup


def gpu_names() -> list[str]:
    """Every catalog name (``NVIDIA H100 SXM`` …), sorted."""
    return sorted(_table()[0])


def gpu_keys() -> list[str]:
    """Every short lookup key (``h100-sxm``, ``a100-40gb`` …), sorted."""
    return sorted(spec.key for spec in _table()[0].values())


def get_gpu(name: str) -> GPUSpec:
    """Look a GPU up by catalog name, short key or alias, ignoring case, spaces, ``-`` and ``_``.

    ``"H100"``, ``"h100-sxm"``, ``"NVIDIA H100 80GB HBM3"`` (the nvidia-smi name) are the H100 SXM;
    ``"A100"`` means the A100 SXM 80GB; ``"A100-40GB"`` the SXM 40GB.

    Raises:
        UnknownGPUError: no match; the message lists the known keys.
    """
    specs, lookup = _table()
    found = lookup.get(_norm(name))
    if found is None:
        close = difflib.get_close_matches(_norm(name), [_norm(k) for k in gpu_keys()], n=3, cutoff=0.6)
        keys = {_norm(k): k for k in gpu_keys()}
        hint = f"did you mean {' or '.join(repr(keys[c]) for c in close)}? " if close else ""
        raise UnknownGPUError(f"unknown GPU {name!r}; {hint}known: {', '.join(gpu_keys())}")
    return specs[found]


def gpu_for_memory(memory_bytes: int) -> GPUSpec | None:
    """The one catalog GPU whose CUDA total is ``memory_bytes`` (as vLLM prints it, to 0.01 GiB: within
    ±0.005 GiB), or ``None`` when none or several
    are (79.15 GiB is an A100 80GB or an H100, SXM or PCIe; 139.81 GiB only the H200 SXM).

    Used when a deployment gives only the device memory, to learn what else the memory figure implies (the
    interconnect); never to override what the caller stated.
    """
    specs, _ = _table()
    found = [s for s in specs.values() if abs(s.memory_bytes - memory_bytes) <= 0.005 * GIB]  # as logs round
    return found[0] if len(found) == 1 else None


def identify_gpu(name: str | None, memory_bytes: int | None) -> GPUSpec | None:
    """The catalog part a deployment or a ``plan`` means, from its ``gpu`` name and its stated memory.

    A name is looked up (:func:`get_gpu`); when the memory is stated too, a name outside the catalog is only a
    label (``None``). Without a name, the memory names the part if only one has that CUDA total
    (:func:`gpu_for_memory`).

    Raises:
        UnknownGPUError: a name outside the catalog and no memory.
    """
    if name is None:
        return gpu_for_memory(memory_bytes) if memory_bytes is not None else None
    try:
        return get_gpu(name)
    except UnknownGPUError:
        if memory_bytes is None:
            raise
        return None


def is_alias(name: str, spec: GPUSpec) -> bool:
    """True when ``name`` reached ``spec`` through an alias (``H100`` for the H100 SXM) rather than its key or
    catalog name, so the caller should say which part it took."""
    return name.strip().lower() not in (spec.key, spec.name.lower())


def tensor_parallel_nodes(gpu: GPUSpec | None, tensor_parallel_size: int) -> int | None:
    """Nodes a tensor-parallel group of ``tensor_parallel_size`` GPUs of ``gpu`` spans: ``⌈TP ÷ domain⌉`` where the
    catalog gives the part's NVLink/Infinity Fabric domain (:attr:`GPUSpec.scale_up_domain_gpus`: 8 on HGX H100, so
    TP 16 is two nodes; 72 on GB200 NVL72, so TP 16 is one); 1 at TP 1; ``None`` (unknown) for an unknown part, or
    a larger group on a part whose domain the catalog does not state (the performance model then prices it as one
    domain)."""
    if tensor_parallel_size <= 1:
        return 1
    if gpu is None or not gpu.scale_up_domain_gpus:
        return None
    return -(-tensor_parallel_size // gpu.scale_up_domain_gpus)


def tensor_parallel_span(gpu: GPUSpec | None, tensor_parallel_size: int) -> str | None:
    """The sentence for a TP group that leaves one domain (``TP 16 spans 2 nodes of 8 h100-sxm GPUs (one NVLink
    domain)``; Infinity Fabric on AMD Instinct), or ``None`` when it spans one node or that is unknown
    (:func:`tensor_parallel_nodes`)."""
    nodes = tensor_parallel_nodes(gpu, tensor_parallel_size)
    if gpu is None or nodes is None or nodes <= 1:
        return None
    fabric = "Infinity Fabric" if gpu.vendor.upper().startswith("AMD") else "NVLink"
    return (
        f"TP {tensor_parallel_size} spans {nodes} nodes of {gpu.scale_up_domain_gpus} {gpu.key} GPUs (one {fabric} "
        "domain)"
    )


def gpu_generation(gpu: GPUSpec) -> str:
    """The architecture generation of ``gpu``: NVIDIA by CUDA compute capability (6.x ``pascal``, 7.0/7.2
    ``volta``, 7.5 ``turing``, 8.0/8.6/8.7 ``ampere``, 8.9 ``ada``, 9.0 ``hopper``, 10.x/12.x ``blackwell``;
    https://developer.nvidia.com/cuda-gpus); AMD Instinct by product (MI300X/MI325X ``cdna3``, MI355X ``cdna4``,
    MI210/MI250X ``cdna2``); else ``other``."""
    if gpu.vendor.upper().startswith("AMD"):
        key = gpu.key.lower()
        if key.startswith(("mi300", "mi325")):
            return "cdna3"
        if key.startswith("mi355"):
            return "cdna4"
        if key.startswith(("mi210", "mi250")):
            return "cdna2"
        return "other"
    cc = gpu.compute_capability
    if cc is None:
        return "other"
    major, minor = cc
    if major == 6:
        return "pascal"
    if major == 7:
        return "turing" if minor == 5 else "volta"
    if major == 8:
        return "ada" if minor == 9 else "ampere"
    if major == 9:
        return "hopper"
    if major in (10, 11, 12):
        return "blackwell"
    return "other"


def fp8_kv_emulated(gpu: GPUSpec | None) -> bool:
    """Whether an fp8 KV cache would run without FP8 hardware on an AMD part (no FP8 tensor rate in the catalog:
    MI100, MI210, MI250): vLLM's ROCm kernels then convert every cache read and write in software, which measured
    at half the throughput (vllm-project/vllm#3981: four MI100s, 4,916 → 2,405 tokens/s, "lack of FP8 hardware"),
    so the pool it doubles is bought with the speed it was to serve. NVIDIA parts without FP8 tensor cores (Ampere)
    store an fp8 cache at a small cost and are not this case; an unknown GPU is not either."""
    return gpu is not None and gpu.vendor.upper() == "AMD" and not gpu.fp8_flops
