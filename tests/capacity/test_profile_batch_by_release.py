"""Issue 16 misses: the profile batch and sampler vLLM runs, by release, as its source sets them.

Every expected figure is hand arithmetic from the engine's code (file/function/version cited per test), never from
running our code.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from advisor.capacity.kv import CapacityInputs, default_sampler
from advisor.cli import main
from advisor.config import resolve_model

GIB = 1 << 30


def _inputs(version: str, profile: str, length: int, chunked: bool | None, memory_gib: float = 80.0) -> CapacityInputs:
    model = resolve_model("meta-llama/Llama-3.1-8B-Instruct", Path.cwd())
    return CapacityInputs(
        model=model,
        gpu_memory_bytes=int(memory_gib * GIB),
        max_model_len=length,
        overhead_profile=profile,
        engine_version=version,
        enable_chunked_prefill=chunked,
    )


def test_v0_chunked_prefill_off_profiles_the_whole_length() -> None:
    """V0 ``SchedulerConfig`` (``vllm/config.py`` 0.6.3.post1 ``__init__``, 0.6.6 ``__post_init__``): unset
    ``max_num_batched_tokens`` with chunked prefill off → ``max(max_model_len, 2048)``; an explicit False beats the
    long-context default-on rule of ``EngineArgs.create_engine_config`` (0.6.3: only ``if
    self.enable_chunked_prefill is None``)."""
    assert _inputs("0.6.3", "vllm-v0", 131072, False).profile_tokens == 131072
    assert _inputs("0.6.6", "vllm-v0", 1000, False).profile_tokens == 2048


def test_v0_default_chunked_step_is_512_before_0_6_5() -> None:
    """Chunked prefill on (default for > 32K): 0.6.3.post1/0.6.4.post1 ``SchedulerConfig.__init__`` take
    ``max_num_batched_tokens = 512``; 0.6.5 and later ``2048``."""
    assert _inputs("0.6.4", "vllm-v0", 131072, None).profile_tokens == 512
    assert _inputs("0.6.6", "vllm-v0", 131072, None).profile_tokens == 2048
    assert _inputs("0.6.6", "vllm-v0", 4096, True).profile_tokens == 2048


def test_v1_honours_chunked_prefill_off_from_0_11_1() -> None:
    """``EngineArgs._set_default_args`` 0.11.0 forces ``enable_chunked_prefill = True`` for generation models;
    0.11.1/0.11.2 keep False and then set ``max(max_model_len, 8192)`` (H100-class default 8192)."""
    assert _inputs("0.11.0", "vllm-v1", 32768, False).profile_tokens == 8192
    assert _inputs("0.11.2", "vllm-v1", 32768, False).profile_tokens == 32768
    assert _inputs("0.11.2", "vllm-v1", 32768, None).profile_tokens == 8192


def test_llama_405b_mi300x_v063_profile_forward_at_131072_tokens() -> None:
    """The published run (github.com/AUGMXNT/llm-tracker.info-vault, ``MI300X Testing.md`` at b56234c: the
    Namespace line shows ``enable_chunked_prefill=False``, the engine config ``chunked_prefill_enabled=False``,
    ``max_seq_len=131072``) profiles one 131,072-token batch. ``LlamaMLP.forward`` (``llama.py`` 0.6.3) rebinds
    ``x``: 3 hidden-wide tensors + gate_up (2 × 53,248 ÷ 8) + activation (53,248 ÷ 8) per token, bf16:
    131,072 × 2 × (3 × 16,384 + 3 × 6,656) = 18,119,393,280 bytes."""
    argv = ["plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "mi300x", "--tp", "8"]
    argv += ["--engine-version", "0.6.3", "--max-model-len", "131072", "--no-enable-chunked-prefill", "--json"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    assert json.loads(out.getvalue())["activation_peak_bytes_per_gpu"] == 131072 * 2 * (3 * 16384 + 3 * 6656)


def test_v1_0_11_1_samples_with_torch_unless_opted_in() -> None:
    """``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``: 0.11.0 takes FlashInfer when
    ``VLLM_USE_FLASHINFER_SAMPLER is not False`` (unset counts as on); the 0.11.1 and 0.11.2 wheels take it only
    ``if envs.VLLM_USE_FLASHINFER_SAMPLER`` ("Users must opt in explicitly"), else ``forward_native``."""
    assert default_sampler("vllm-v1", "0.11.0") == "flashinfer"
    assert default_sampler("vllm-v1", "0.11.1") == "torch"
    assert default_sampler("vllm-v1", "0.11.2") == "torch"
