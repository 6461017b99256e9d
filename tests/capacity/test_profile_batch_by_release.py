"""Issue 16 misses: the profile batch and sampler vLLM runs, by release, as its source sets them.

Every expected figure is hand arithmetic from the engine's code (file/function/version cited per test), never from
running our code.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

from advisor.capacity.kv import CapacityInputs, default_sampler, pipeline_stage_layers, vllm_capacity_pass
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
    ``max_seq_len=131072``) profiles one 131,072-token batch. ``LlamaMLP.forward`` in the 0.6.2 and 0.6.3 wheels
    (``gate_up, _ = self.gate_up_proj(x); x = self.act_fn(gate_up); x, _ = self.down_proj(x)``) holds gate_up
    through ``down_proj``, so the build between them peaks there: 3 hidden-wide tensors + gate_up (2 × 53,248 ÷ 8)
    + activation (53,248 ÷ 8) + down_proj's output (16,384) per token, bf16:
    131,072 × 2 × (4 × 16,384 + 3 × 6,656) = 22,414,360,576 bytes."""
    argv = ["plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "mi300x", "--tp", "8"]
    argv += ["--engine-version", "0.6.3", "--max-model-len", "131072", "--no-enable-chunked-prefill", "--json"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    assert json.loads(out.getvalue())["activation_peak_bytes_per_gpu"] == 131072 * 2 * (4 * 16384 + 3 * 6656)


def test_llama_405b_v064_rebinds_gate_up_and_peaks_at_down_proj_under_tp_8() -> None:
    """From 0.6.4 ``LlamaMLP.forward`` rebinds ``x`` (``x, _ = self.gate_up_proj(x); x = self.act_fn(x)``, the
    0.6.4-0.6.6.post1 wheels): at ``act_fn`` 3 hidden-wide tensors + gate_up + activation = 3 × 16,384 + 3 × 6,656
    = 69,120 elements per token; at ``down_proj`` gate_up is gone but its output is not yet: 4 × 16,384 + 6,656 =
    72,192, the larger at TP 8 (16,384 > 2 × 53,248 ÷ 8)."""
    argv = ["plan", "--model", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "mi300x", "--tp", "8"]
    argv += ["--engine-version", "0.6.4", "--max-model-len", "131072", "--no-enable-chunked-prefill", "--json"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(argv) == 0
    assert json.loads(out.getvalue())["activation_peak_bytes_per_gpu"] == 131072 * 2 * (4 * 16384 + 6656)


def test_v1_0_11_1_samples_with_torch_unless_opted_in() -> None:
    """``vllm/v1/sample/ops/topk_topp_sampler.py`` ``TopKTopPSampler.__init__``: 0.11.0 takes FlashInfer when
    ``VLLM_USE_FLASHINFER_SAMPLER is not False`` (unset counts as on); the 0.11.1 and 0.11.2 wheels take it only
    ``if envs.VLLM_USE_FLASHINFER_SAMPLER`` ("Users must opt in explicitly"), else ``forward_native``."""
    assert default_sampler("vllm-v1", "0.11.0") == "flashinfer"
    assert default_sampler("vllm-v1", "0.11.1") == "torch"
    assert default_sampler("vllm-v1", "0.11.2") == "torch"


def test_pipeline_stage_layers_by_release() -> None:
    """``vllm/distributed/utils.py`` ``get_pp_indices``: 0.6.6 gives the last stage the remainder (``if pp_rank ==
    pp_size - 1: end_layer = num_hidden_layers``); 0.8.0 gives it to the stages before the last
    (``partitions[-i] += 1``). DeepSeek-V3's 61 layers at PP 2."""
    model = resolve_model("deepseek-ai/DeepSeek-V3", Path.cwd())
    for version, split in (("0.6.6", [range(0, 30), range(30, 61)]), ("0.8.0", [range(0, 31), range(31, 61)])):
        inputs = CapacityInputs(
            model=model,
            gpu_memory_bytes=80 * GIB,
            tensor_parallel_size=8,
            pipeline_parallel_size=2,
            engine_version=version,
            overhead_profile="vllm-v0" if version < "0.8" else "vllm-v1",
        )
        assert pipeline_stage_layers(inputs) == split


def test_the_fullest_pipeline_stage_with_the_lm_head_sizes_the_cache() -> None:
    """Llama-3.1-8B (bf16, untied) at PP 3 on vLLM 0.6.6 V0: stages of 10, 10 and 12 layers (``get_pp_indices``);
    every stage sizes its cache and ``distributed_gpu_executor.py`` keeps ``min(b[0] for b in num_blocks)``.

    A layer is 4096 × 6144 (qkv) + 4096² (o) + 2 × 4096 × 14,336 (gate_up) + 14,336 × 4096 (down) + 2 × 4096 (norms)
    = 218,112,000 parameters, the vocabulary table 128,256 × 4096 = 525,336,576, the final norm 4096; the rotary
    cache 131,072 × 128 × 2 B. Last stage: (12 layers + LM head + norm) × 2 B + rotary = 6,318,923,776 B; its
    profile runs the forward (8192 × 2 × (3 × 4096 + 3 × 14,336), ``LlamaMLP``) and the sampler warm-up
    (256 × 128,256 × 39 B), the larger of which, plus 0.10 GiB non-torch, is its overhead. First stage: 10 layers +
    embedding, forward only. Blocks = (0.9 × 80 GiB − weights − overhead) ÷ (16 tokens × 4096 B × layers)."""
    requested = 0.9 * 80 * GIB
    non_torch = int(0.10 * GIB)
    layer, table, norm, rotary = 218_112_000, 525_336_576, 4096, 131072 * 128 * 2
    forward, sampler = 8192 * 2 * (3 * 4096 + 3 * 14336), 256 * 128256 * 39
    last = (requested - ((12 * layer + table + norm) * 2 + rotary) - (max(forward, sampler) + non_torch)) // (
        16 * 4096 * 12
    )
    first = (requested - ((10 * layer + table + norm) * 2 + rotary) - (forward + non_torch)) // (16 * 4096 * 10)
    assert last < first
    model = resolve_model("meta-llama/Llama-3.1-8B-Instruct", Path.cwd())
    inputs = CapacityInputs(
        model=model,
        gpu_memory_bytes=80 * GIB,
        pipeline_parallel_size=3,
        max_model_len=8192,
        overhead_profile="vllm-v0",
        engine_version="0.6.6",
    )
    result = vllm_capacity_pass(inputs)
    assert result.kv_cache_blocks == int(last)
    assert abs(result.weights_bytes_per_gpu - ((12 * layer + table + norm) * 2 + rotary)) <= 1  # float ceil
