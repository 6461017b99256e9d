"""Issue 16, kind C: ``--num-scheduler-steps`` (V0 multi-step scheduling) sends vLLM 0.8.0-0.10.0 back to V0.

Read from the released wheels, not from our code:

* ``vllm/engine/arg_utils.py`` ``EngineArgs._is_v1_supported_oracle`` (0.8.0, 0.8.5.post1, 0.10.0): ``if
  self.num_scheduler_steps != SchedulerConfig.num_scheduler_steps: _raise_or_fallback(feature_name=
  "--num-scheduler-steps", recommend_to_remove=True); return False``. 0.10.1.1's ``add_cli_args``: "multi-step
  scheduling has been removed; corresponding arguments are no longer supported".
* ``vllm/config.py`` ``SchedulerConfig.__post_init__`` (0.6.6.post1, 0.7.2, 0.8.5.post1, 0.10.0): with chunked
  prefill and ``num_scheduler_steps > 1``, ``max_num_batched_tokens = max(max_model_len, 2048)``.

Unsloth's ``fast_inference`` starts vLLM with ``num_scheduler_steps=16``; its published logs (OpenPipe ART runs in
github.com/johnson7788/RLDecisionAgent, tests/capacity/truth/vllm_v0.yaml) print "Initializing a V0 LLM engine
(v0.8.5.post1)" with ``quantization=bitsandbytes`` — which 0.8.5 runs on V1 — and ``num_scheduler_steps=16``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.capacity.generation import vllm_accounting
from advisor.capacity.kv import CapacityInputs
from advisor.config import resolve_model
from advisor.errors import CapacityError
from tests.inprocess import run_cli

GIB = 1 << 30
ADA = (8, 9)


@pytest.mark.parametrize("version", ["0.8.0", "0.8.5.post1", "0.10.0"])
def test_multi_step_scheduling_falls_back_to_v0_from_0_8_to_0_10_0(version: str) -> None:
    acc = vllm_accounting(version, compute_capability=ADA, quantization="bitsandbytes", num_scheduler_steps=16)
    assert acc.generation == "v0"
    assert "--num-scheduler-steps 16" in acc.reason
    assert vllm_accounting(version, compute_capability=ADA, num_scheduler_steps=1).generation == "v1"


def test_multi_step_under_vllm_use_v1_1_is_refused_as_vllm_refuses_it() -> None:
    with pytest.raises(CapacityError, match="--num-scheduler-steps"):
        vllm_accounting("0.8.5.post1", compute_capability=ADA, num_scheduler_steps=8, use_v1=True)


@pytest.mark.parametrize("version", ["0.10.1.1", "0.11.0"])
def test_releases_without_multi_step_refuse_the_argument(version: str) -> None:
    with pytest.raises(CapacityError, match=r"removed in 0\.10\.1"):
        vllm_accounting(version, compute_capability=ADA, num_scheduler_steps=16)


def test_v0_multi_step_with_chunked_prefill_profiles_the_whole_length() -> None:
    model = resolve_model("Qwen/Qwen2.5-0.5B", Path.cwd())
    common = {"model": model, "gpu_memory_bytes": 24 * GIB, "max_model_len": 32768, "overhead_profile": "vllm-v0"}
    chunked = CapacityInputs(**common, engine_version="0.8.5.post1", enable_chunked_prefill=True)  # type: ignore[arg-type]
    multi = CapacityInputs(
        **common,  # type: ignore[arg-type]
        engine_version="0.8.5.post1",
        enable_chunked_prefill=True,
        num_scheduler_steps=16,
    )
    assert chunked.profile_tokens == 2048
    assert multi.profile_tokens == 32768  # max(max_model_len 32,768, 2048)


def test_unsloth_art_log_on_a_4090d_is_sized_by_v0() -> None:
    """RLDecisionAgent docs/ART/Error.md (vLLM 0.8.5.post1, RTX 4090 D): 23.55 GiB × 0.7765 = 18.28 GiB; weights
    0.52, non-torch 0.07, activation 1.61, KV 16.09 GiB; 87,853 blocks of 16 tokens. The activation is V0's
    sampler warm-up over 288 rows of Qwen2.5's 151,936-token vocabulary: 288 × 151,936 × 39 B = 1.59 GiB (V1 would
    profile 2,048 tokens and sample with FlashInfer: a different, smaller figure)."""
    argv = ["--engine", "vllm", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "rtx4090"]
    argv += ["--gpu-memory-gib", "23.55", "--engine-version", "0.8.5.post1", "--gpu-memory-utilization", "0.7765"]
    argv += ["--max-model-len", "32768", "--max-num-seqs", "288", "--dtype", "bfloat16"]
    argv += ["--quantization", "bitsandbytes", "--no-enable-chunked-prefill", "--enable-lora"]
    argv += ["--num-scheduler-steps", "16", "--json"]
    r = run_cli("plan", *argv)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["accounting"]["generation"] == "v0"
    assert abs(plan["activation_peak_bytes_per_gpu"] / GIB - 288 * 151936 * 39 / GIB) < 0.01
    engine_tokens = 87853 * 16
    assert abs(plan["kv_cache_tokens"] / engine_tokens - 1) < 0.01


def _art_mcprl_argv(*extra: str) -> list[str]:
    """RLDecisionAgent backend/ART_mcp-rl/example_mcp_rl.md (vLLM 0.8.5.post1 V0, RTX 4090 D, Unsloth): 23.55 GiB ×
    0.1734, 32,768-token profile batch (chunked prefill off), 160 sequences, bitsandbytes 4-bit."""
    argv = ["--engine", "vllm", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "rtx4090", "--gpu-memory-gib", "23.55"]
    argv += ["--engine-version", "0.8.5.post1", "--gpu-memory-utilization", "0.1734", "--max-model-len", "32768"]
    argv += ["--max-num-seqs", "160", "--dtype", "bfloat16", "--no-enable-chunked-prefill"]
    return [*argv, "--num-scheduler-steps", "16", *extra, "--json"]


def test_v0_bitsandbytes_4bit_forward_holds_the_matmul_4bit_result_beside_its_output() -> None:
    """The log prints "PyTorch activation peak memory takes 1.18GiB". Qwen2MLP holds gate_up (2i) and the activation
    (i) through down_proj; with bitsandbytes 4-bit, down_proj's ``out`` (h) and ``matmul_4bit``'s result (h) sit
    beside the three hidden-wide tensors, and the dequantized down_proj weight (h × i) beside them:
    32,768 × 2 B × (5 × 896 + 3 × 4,864) + 2 B × 896 × 4,864 = 1.172 GiB. The sampler (160 × 151,936 × 39 B =
    0.88 GiB) is below it. Without bitsandbytes the same batch peaks at 32,768 × 2 × (4 × 896 + 3 × 4,864)."""
    r = run_cli("plan", *_art_mcprl_argv("--quantization", "bitsandbytes"))
    assert r.returncode == 0, r.stderr
    bnb = json.loads(r.stdout)["activation_peak_bytes_per_gpu"]
    assert bnb == 32768 * 2 * (5 * 896 + 3 * 4864) + 2 * 896 * 4864
    assert abs(bnb / GIB - 1.18) < 0.01
    plain = run_cli("plan", *_art_mcprl_argv())
    assert json.loads(plain.stdout)["activation_peak_bytes_per_gpu"] == 32768 * 2 * (4 * 896 + 3 * 4864)
