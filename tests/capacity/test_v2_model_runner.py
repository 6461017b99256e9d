"""Issue 16, kind I: vLLM 0.22+ profiles with Model Runner V2 for the models it defaults to, whose sampler warm-up holds
the logits alone (``vllm/v1/worker/gpu/model_runner.py`` ``_dummy_sampler_run``), not V1's top-k/top-p sort.

Every expected figure is copied from a published vLLM log (URL and line cited) or is hand arithmetic from the
engine's source, written out in the test; none comes from running our code.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from advisor.capacity.kv import CapacityInputs, activation_peak_bytes, vllm_capacity_pass
from advisor.capacity.models import ModelArch
from advisor.capacity.profiles import uses_v2_model_runner
from advisor.capacity.speculative import SpeculativeDraft
from advisor.config import resolve_model

GIB = 1 << 30

L4_V0271 = (
    "https://github.com/zahran001/LLMRouter/blob/49830fb44e6e14d93a5ec6f210ed9fdf87715aa6/"
    "benchmarks/evidence/week2/session_2/vllm.log"
)
"""Llama-3.2-3B-Instruct on one L4, vLLM 0.27.1, ``max_model_len`` 20000, ``enforce_eager``, util 0.92 (default),
``VLLM_USE_FLASHINFER_SAMPLER=0``: "GPU KV cache size: 129,888 tokens"; "Actual usage is 6.27 GiB for consumed memory
(weights + non-torch), 0.13 GiB for peak activation, and 0.0 GiB for CUDAGraph memory"."""


def _llama32_3b_l4(**kw: object) -> CapacityInputs:
    return CapacityInputs(  # type: ignore[arg-type]
        model=resolve_model("meta-llama/Llama-3.2-3B-Instruct", Path.cwd()),
        gpu_memory_bytes=int(22.03 * GIB),
        gpu_memory_utilization=0.92,
        max_model_len=20000,
        enforce_eager=True,
        engine_version="0.27.1",
        sampler="torch",
        **kw,
    )


def test_llama32_3b_l4_0271_sampler_warmup_is_the_logits_alone() -> None:
    """V2 at 0.27.1 (a dense, non-hybrid generation model): 2048 batched tokens (the API server's default on a
    < 70 GiB GPU), 256 sequences; the sampler holds 256 × 128,256 bf16 logits = 65,667,072 B (62.6 MiB), below the
    forward 2048 × 2 × (6 × 3072 + 3 × 8192) = 176,160,768 B, so the activation is not V1's torch warm-up
    (256 × 128,256 × 39 = 1.19 GiB) but ≈ the log's 0.13 GiB."""
    inp = _llama32_3b_l4()
    assert inp.uses_v2_model_runner
    forward, sampler = activation_peak_bytes(inp)
    assert sampler == 256 * 128_256 * 2
    assert forward == 2048 * 2 * (6 * 3072 + 3 * 8192)
    assert max(forward, sampler) / GIB < 0.13 + 0.05, L4_V0271


def test_llama32_3b_l4_0271_kv_tokens_match_the_log() -> None:
    """The pool follows: 129,888 tokens logged (the torch-sampler figure was 6.8 % short)."""
    result = vllm_capacity_pass(_llama32_3b_l4())
    assert result.kv_cache_tokens == pytest.approx(129_888, rel=0.01), L4_V0271


def test_vllm_use_v2_model_runner_0_restores_the_v1_sampler_warmup() -> None:
    """``VLLM_USE_V2_MODEL_RUNNER=0`` runs V1's ``gpu_model_runner.py``, whose torch sampler warms up the whole
    top-k/top-p path: at 0.27 its Triton kernel masks in place (no sort since 0.17, vllm-project/vllm#33538):
    256 × 128,256 × 14 B + the kernel's ~80 MiB, not V2's bf16 logits alone."""
    inp = _llama32_3b_l4(v2_model_runner=False)
    assert not inp.uses_v2_model_runner
    held = (2048 + 2 * 256) * 3072 * 2  # the profile run's hidden states (2,048 tokens, 256 gathered, its stand-in)
    assert activation_peak_bytes(inp)[1] == 256 * 128_256 * 14 + (80 << 20) + held


def test_v2_warmup_rows_are_the_fewer_of_the_batched_tokens_and_the_sequences() -> None:
    """``_dummy_run``: ``num_reqs = min(num_tokens, self.max_num_reqs)``; 2,048 tokens, 1,024 sequences → 1,024 rows.
    (Fewer tokens than sequences is a configuration vLLM refuses to start, ``SchedulerConfig._verify_args``.)"""
    inp = _llama32_3b_l4(max_num_batched_tokens=2048, max_num_seqs=1024)
    assert activation_peak_bytes(inp)[1] == 1024 * 128_256 * 2
    equal = _llama32_3b_l4(max_num_batched_tokens=512, max_num_seqs=512)
    assert activation_peak_bytes(equal)[1] == 512 * 128_256 * 2


def test_ngram_speculation_keeps_the_v1_runner() -> None:
    """``_get_v2_model_runner_unsupported_features`` lists ngram (0.22-0.29): the engine falls back to V1."""
    ngram = SpeculativeDraft(method="ngram", num_speculative_tokens=3)
    assert not _llama32_3b_l4(speculative=ngram).uses_v2_model_runner
    eagle = SpeculativeDraft(method="eagle3", num_speculative_tokens=3)
    assert _llama32_3b_l4(speculative=eagle).uses_v2_model_runner


def _arch(model_type: str, **kw: object) -> ModelArch:
    base = ModelArch("m", 28, 3072, 24, 8, 128, 128_256, 8192, 131_072, "bfloat16", 1, model_type=model_type)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


MOE = {"num_experts": 64, "experts_per_token": 8, "moe_intermediate_size": 768, "moe_layers": 28}


@pytest.mark.parametrize(
    ("version", "model", "expected"),
    [
        # VLLM_USE_V2_MODEL_RUNNER defaults to "0" up to 0.21.0 (vllm/envs.py)
        ("0.19.1", _arch("qwen3"), False),
        ("0.21.0", _arch("llama"), False),
        # 0.22: {"Qwen3ForCausalLM"}, not MoE, not quantized
        ("0.22.0", _arch("qwen3"), True),
        ("0.22.1", _arch("llama"), False),
        ("0.22.1", _arch("qwen3", checkpoint_quantization="awq"), False),
        # 0.23: Llama, Mistral, Qwen3 (same MoE/quantized test)
        ("0.23.0", _arch("llama"), True),
        ("0.23.0", _arch("mistral", checkpoint_quantization="fp8"), False),
        ("0.23.0", _arch("qwen2"), False),
        # 0.24: six classes, quantized and MoE allowed
        ("0.24.0", _arch("qwen3", checkpoint_quantization="awq"), True),
        ("0.24.0", _arch("deepseek_v2", **MOE), True),
        ("0.24.0", _arch("qwen2"), False),
        # 0.25-0.28: every dense non-hybrid model, plus the listed MoE classes
        ("0.25.0", _arch("qwen2"), True),
        ("0.28.0", _arch("qwen3", checkpoint_quantization="awq"), True),
        ("0.27.1", _arch("qwen3_moe", **MOE), False),
        ("0.27.1", _arch("qwen2_moe", **MOE), True),
        ("0.28.0", _arch("qwen3_next", linear_layers=21), False),
        # 0.29+: no model test on CUDA
        ("0.29.0", _arch("qwen3_moe", **MOE), True),
        (None, _arch("llama"), False),
    ],
)
def test_default_model_runner_by_release(version: str | None, model: ModelArch, expected: bool) -> None:
    """``VllmConfig.use_v2_model_runner`` / ``_is_default_v2_model_runner_model`` (``vllm/config/vllm.py``) as read in
    the 0.19.1, 0.21.0, 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0, 0.27.1, 0.28.0 and 0.29.0 wheels."""
    assert uses_v2_model_runner(model, version, "vllm-v1") is expected


def test_v0_never_uses_v2() -> None:
    assert not uses_v2_model_runner(_arch("qwen3"), "0.28.0", "vllm-v0")
