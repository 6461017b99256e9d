"""Acceptance 1: `plan --json` against operators' published vLLM start-up logs.

Every expected figure is copied from the engine's own log (cited per case), never from running our code.
Pool-from-budget cases must land within 5 % of the engine's KV tokens; with ``--kv-cache-memory-gib`` set to
the KV memory the engine printed (rounded to 0.01 GiB), the blocks must match to within what that rounding
allows (± 0.005 GiB ÷ bytes per block).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from advisor.capacity.hardware import get_gpu, gpu_for_memory
from advisor.capacity.kv import CapacityInputs, activation_peak_bytes, non_torch_bytes_per_gpu
from advisor.cli import main
from advisor.config import resolve_model

GIB = 1 << 30


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    args: list[str]
    engine_tokens: int
    engine_kv_gib: float
    bytes_per_block: int  # per GPU, from config.json arithmetic (see each case)
    engine_blocks: int
    engine_concurrency: float
    known_gap: str = ""
    extra: dict[str, float] = field(default_factory=dict)


def _args(*parts: list[str]) -> list[str]:
    return [a for part in parts for a in part]


CASES = [
    Case(
        name="Meta-Llama-3-8B on an A100 40GB, vLLM 0.6.6 (V0)",
        source="github.com/vllm-project/vllm/issues/12330: total_gpu_memory (39.50GiB) x 0.90; weights 14.96GiB; "
        "non_torch 0.10GiB; activation peak 9.37GiB; KV 11.12GiB; # GPU blocks: 5691; 11.12x for 8192 tokens",
        args=_args(
            ["--model", "meta-llama/Meta-Llama-3-8B", "--gpu-memory-gib", "39.50", "--tp", "1"],
            ["--gpu-memory-utilization", "0.90", "--max-model-len", "8192", "--engine-version", "0.6.6"],
        ),
        engine_tokens=5691 * 16,
        engine_kv_gib=11.12,
        bytes_per_block=16 * 2 * 32 * 8 * 128 * 2,  # 16 tokens × 2 (K,V) × 32 layers × 8 heads × 128 × bf16
        engine_blocks=5691,
        engine_concurrency=11.12,
        known_gap=(
            "an unstated engine argument: the log's activation is 9.37 GiB, but this release's default accounting "
            "(pinned by the Qwen2.5-0.5B 0.6.6.post1 log, same worker.py:241 lines: 1.44 GiB at 256 sequences) "
            "gives 1.19 GiB here (PR #10511 logs 1.26 GiB for this model); 9.37 GiB is the sampler at ~2,048 "
            "sequences, and --max-num-seqs 2048 reproduces the blocks to -1.5 % (test below)"
        ),
    ),
    Case(
        name="Qwen3-235B-A22B-Instruct-2507-FP8 on 8 L40S with expert parallelism, vLLM 0.10.2",
        source="operator start-up log quoted in issue 3: weights 27.72 GiB per rank, KV ~10.64 GiB per rank, "
        "14,834 blocks, 237,344 tokens, 7.24x for 32768 tokens",
        args=_args(
            ["--model", "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "--gpu-memory-gib", "44.42", "--tp", "8"],
            ["--gpu-memory-utilization", "0.90", "--max-model-len", "32768", "--engine-version", "0.10.2"],
            ["--enable-expert-parallel", "--max-num-batched-tokens", "2048"],
            # the install ran the torch sampler, not the official image's FlashInfer one: the same log's
            # "1.4 GiB for peak activation" (gpu_worker.py:391) is 256 × 151,936 × 39 B = 1.41 GiB, the torch
            # sampler's warm-up; FlashInfer's would be 256 × 151,936 × 14 B = 0.51 GiB
            ["--sampler", "torch"],
        ),
        engine_tokens=237_344,
        engine_kv_gib=10.64,
        bytes_per_block=16 * 2 * 94 * 1 * 128 * 2,  # 4 KV heads over TP 8 → 1 replicated head per rank
        engine_blocks=14_834,
        engine_concurrency=7.24,
    ),
    Case(
        name="DeepSeek-R1 (FP8) on 8 H200, vLLM 0.7.3 (V0, MLA)",
        source="operator start-up log quoted in issue 3 (full log: an operator's 'nvidia cuda' notes, vLLM 0.7.3, "
        "INFO 03-15 20:36:48 worker.py:267): weights 83.88 GiB per rank, non_torch_memory 7.16 GiB, activation "
        "peak 6.37 GiB, KV 21.43 GiB, 18,418 blocks, 2.30x for 128000 tokens",
        args=_args(
            ["--model", "deepseek-ai/DeepSeek-R1", "--gpu-memory-gib", "139.81", "--tp", "8"],
            ["--gpu-memory-utilization", "0.85", "--max-model-len", "128000", "--engine-version", "0.7.3"],
            ["--max-num-seqs", "1024", "--max-num-batched-tokens", "32000"],
        ),
        engine_tokens=18_418 * 16,
        engine_kv_gib=21.43,
        bytes_per_block=16 * 61 * 1280,  # 576-element bf16 latent (1152 B) aligned to 256 B = 1280 B, 61 layers
        engine_blocks=18_418,
        engine_concurrency=2.30,
    ),
    Case(
        name="Qwen2.5-0.5B fp16 on a T4, vLLM 0.6.6.post1 (V0)",
        source="operator start-up log quoted in issue 3: weights 0.93 GiB, KV 10.63 GiB, 58,059 blocks, 28.35x",
        args=_args(
            ["--model", "Qwen/Qwen2.5-0.5B", "--gpu-memory-gib", "14.56", "--tp", "1", "--dtype", "float16"],
            ["--gpu-memory-utilization", "0.90", "--max-model-len", "32768", "--engine-version", "0.6.6.post1"],
        ),
        engine_tokens=58_059 * 16,
        engine_kv_gib=10.63,
        bytes_per_block=16 * 2 * 24 * 2 * 64 * 2,  # 24 layers × 2 KV heads × head_dim 64 (896/14) × fp16
        engine_blocks=58_059,
        engine_concurrency=28.35,
    ),
    Case(
        name="llava-v1.6-mistral-7b-hf fp16 on an 80 GB GPU, vLLM 0.10.2",
        source="operator start-up log quoted in issue 3: weights 14.08 GiB, KV 55.15 GiB, 451,744 tokens, "
        "110.29x for 4096 tokens",
        args=_args(
            ["--model", "llava-hf/llava-v1.6-mistral-7b-hf", "--gpu-memory-gib", "79.19", "--tp", "1"],
            ["--gpu-memory-utilization", "0.90", "--max-model-len", "4096", "--engine-version", "0.10.2"],
            ["--max-num-batched-tokens", "16384"],
        ),
        engine_tokens=451_744,
        engine_kv_gib=55.15,
        bytes_per_block=16 * 2 * 32 * 8 * 128 * 2,
        engine_blocks=451_744 // 16,
        engine_concurrency=110.29,
    ),
]


def _plan(capsys: pytest.CaptureFixture[str], args: list[str]) -> dict[str, float]:
    assert main(["plan", *args, "--json"]) == 0
    out: dict[str, float] = json.loads(capsys.readouterr().out)
    return out


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=c.known_gap)) if c.known_gap else c for c in CASES],
    ids=lambda c: c.name,
)
def test_kv_tokens_from_the_memory_budget_are_within_five_percent_of_the_engine(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(capsys, case.args)
    assert out["kv_cache_tokens"] == pytest.approx(case.engine_tokens, rel=0.05), case.source


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_with_the_engines_kv_memory_the_blocks_match_to_the_rounding_of_the_printed_gib(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(capsys, [*case.args, "--kv-cache-memory-gib", f"{case.engine_kv_gib}"])
    slack = math.ceil(0.005 * GIB / case.bytes_per_block) + 1
    assert abs(out["kv_cache_blocks"] - case.engine_blocks) <= slack, case.source
    assert out["kv_cache_tokens"] == out["kv_cache_blocks"] * 16
    assert out["max_concurrency"] == pytest.approx(case.engine_concurrency, rel=0.01)


@pytest.mark.parametrize(
    ("case", "engine_weights_gib"),
    [(CASES[0], 14.96), (CASES[1], 27.72), (CASES[2], 83.88), (CASES[3], 0.93), (CASES[4], 14.08)],
    ids=lambda v: v.name if isinstance(v, Case) else str(v),
)
def test_weights_per_gpu_are_within_one_percent_of_the_engines_log(
    case: Case, engine_weights_gib: float, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(capsys, case.args)
    assert out["weights_bytes_per_gpu"] / GIB == pytest.approx(engine_weights_gib, rel=0.01), case.source


# --- the overhead terms against the engine's own breakdown ---------------------------------------------------


def _inputs(model: str, gib: float, **kw: object) -> CapacityInputs:
    return CapacityInputs(model=resolve_model(model, Path.cwd()), gpu_memory_bytes=int(gib * GIB), **kw)  # type: ignore[arg-type]


def test_v0_forward_peak_matches_the_deepseek_r1_log() -> None:
    """vLLM 0.7.3 logged "PyTorch activation peak memory takes 6.37GiB" for DeepSeek-R1 FP8 at TP 8 with
    max-num-batched-tokens 32000 and max-num-seqs 1024: the fused-MoE forward, not the sampler (4.8 GiB)."""
    inp = _inputs(
        "deepseek-ai/DeepSeek-R1",
        139.81,
        tensor_parallel_size=8,
        gpu_memory_utilization=0.85,
        max_model_len=128000,
        max_num_seqs=1024,
        max_num_batched_tokens=32000,
        overhead_profile="vllm-v0",
    )
    forward, sampler = activation_peak_bytes(inp)
    assert forward > sampler
    assert forward / GIB == pytest.approx(6.37, rel=0.02)


def _deepseek_r1(**kw: object) -> CapacityInputs:
    return _inputs(
        "deepseek-ai/DeepSeek-R1",
        139.81,
        tensor_parallel_size=8,
        gpu_memory_utilization=0.85,
        max_model_len=128000,
        max_num_seqs=1024,
        max_num_batched_tokens=32000,
        overhead_profile="vllm-v0",
        **kw,
    )


def test_v0_non_torch_memory_on_an_nvswitch_hopper_node_matches_the_deepseek_r1_log() -> None:
    """vLLM 0.7.3 logged "non_torch_memory takes 7.16GiB" for DeepSeek-R1 at TP 8 on 8 × H200: NCCL's ring and
    P2P buffers (calibrated on an 8 × A100 V0 log, 2.10 GiB) plus NVLink SHARP buffers (calibrated on
    vllm-project/vllm#9699, 4.9-5.0 GiB at TP 8 on H200). Neither calibration used this log."""
    assert non_torch_bytes_per_gpu(_deepseek_r1(nvlink_sharp=True)) / GIB == pytest.approx(7.16, rel=0.05)


def test_v0_non_torch_memory_without_nvls_matches_the_8_a100_log() -> None:
    """The calibration point itself (DeepSeek-Coder-V2-Lite, 8 × A100-SXM4-40GB, vLLM 0.7.x V0:
    "non_torch_memory takes 2.10GiB"): Ampere has no NVLink SHARP, so no NVLS term."""
    assert non_torch_bytes_per_gpu(_deepseek_r1(nvlink_sharp=False)) / GIB == pytest.approx(2.10, abs=0.01)


def test_nvls_needs_more_than_two_gpus_and_is_absent_from_the_v1_profile() -> None:
    tp2 = _inputs("meta-llama/Llama-3.1-70B-Instruct", 139.81, tensor_parallel_size=2, overhead_profile="vllm-v0")
    tp2_nvls = _inputs(
        "meta-llama/Llama-3.1-70B-Instruct",
        139.81,
        tensor_parallel_size=2,
        overhead_profile="vllm-v0",
        nvlink_sharp=True,
    )
    assert non_torch_bytes_per_gpu(tp2_nvls) == non_torch_bytes_per_gpu(tp2)  # NCCL: gpuCount <= 2 → no NVLS
    v1 = _inputs("meta-llama/Llama-3.1-70B-Instruct", 139.81, tensor_parallel_size=8)
    v1_nvls = _inputs("meta-llama/Llama-3.1-70B-Instruct", 139.81, tensor_parallel_size=8, nvlink_sharp=True)
    assert non_torch_bytes_per_gpu(v1_nvls) == non_torch_bytes_per_gpu(v1)  # NCCL >= 2.26: lazy, chunk-sized


def test_a_memory_figure_stands_for_a_gpu_only_when_it_is_unique(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_for_memory(int(139.81 * GIB)) == get_gpu("h200")
    assert gpu_for_memory(int(79.15 * GIB)) is None  # A100 80GB and H100, SXM and PCIe
    assert gpu_for_memory(int(39.50 * GIB)) is None
    # named, the A100's NVSwitch has no NVLink SHARP: the same memory and TP give more KV than on an H200
    args = CASES[2].args
    a100_like = _plan(capsys, [*args, "--gpu", "a100-80gb"])
    h200 = _plan(capsys, args)
    assert h200["nvlink_sharp"] is True and a100_like["nvlink_sharp"] is False
    assert a100_like["kv_cache_blocks"] > h200["kv_cache_blocks"]


def test_v0_default_activation_peak_of_meta_llama_3_8b_matches_pr_10511() -> None:
    """`vllm serve meta-llama/Meta-Llama-3-8B` with default settings (256 sequences, 8,192 batched tokens) on
    an H100 (79.22 GiB) logged "PyTorch activation peak memory 1.26GiB" (github.com/vllm-project/vllm/pull/10511,
    the change that introduced V0's profiling log): the sampler term, 256 × 128,256 × 39 B = 1.19 GiB."""
    inp = _inputs("meta-llama/Meta-Llama-3-8B", 79.22, max_model_len=8192, overhead_profile="vllm-v0")
    assert max(activation_peak_bytes(inp)) / GIB == pytest.approx(1.26, rel=0.10)


def test_llama_3_8b_log_is_reproduced_with_2048_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    """The Meta-Llama-3-8B miss is one unstated engine argument, not the accounting: the same release's default
    accounting is pinned by the Qwen2.5-0.5B 0.6.6.post1 case (activation 1.44 GiB, 256 sequences), and the
    log's 9.37 GiB activation is the sampler at ~2,048 sequences. With ``--max-num-seqs 2048`` the blocks land
    within 5 % of the logged 5,691 (github.com/vllm-project/vllm/issues/12330)."""
    out = _plan(capsys, [*CASES[0].args, "--max-num-seqs", "2048"])
    assert out["kv_cache_blocks"] == pytest.approx(5691, rel=0.05)
